"""Diarizers: who speaks when in a clip. The Protocol is :class:`~m3cli.stages.backends.asr.Diarizer`;
implementations: :mod:`~.overlap` (the default, on :mod:`~.segmentation`), :mod:`~.cluster` and
:mod:`~.pyannote`.
"""
