"""Swappable model backends, one folder per capability, each with its Protocol beside its implementations.

``asr`` (speech recognition and voice activity), ``diarizer`` (who speaks when), ``speaker`` (voice
embeddings), ``face`` (detection and identity), ``ocr`` and ``tagger`` (what is on screen), ``embed``
(text embeddings), ``llm`` (the OpenAI-compatible client) and ``onnx`` (shared export plumbing).
:mod:`~.registry` names every backend by kind; :mod:`~.models` and :mod:`~.model_prep` find and prepare
the weights.
"""
