"""Every swappable backend by kind and name, in one table; a backend's module is imported only when
that backend is asked for.

Why one table: ASR models, voice detectors, diarizers, speaker embeddings, face models and text
embedders were looked up three ways (if-chains, "module:Class" strings, a dict of classes), so the list
of valid names, the error for a wrong one and the import-on-demand rule were each written per kind.
Each backend class states what the stages record about it: ``name``, and where the stage needs them
without loading weights, ``identity(model, device)`` (what a cached result depends on) and
``display_name(model)`` (the model as written in records).
"""

from __future__ import annotations

import importlib
import inspect
from importlib import metadata
from typing import Any

from m3cli.stages.core.errors import M3Error

_P = "m3cli.stages.backends."

#: kind -> name -> "module:Class" (None: the stage does the work itself, no backend object).
BACKENDS: dict[str, dict[str, str | None]] = {
    "asr": {
        "faster-whisper": _P + "asr.faster_whisper:FasterWhisperAsr",
        "whisperx": _P + "asr.whisperx:WhisperxAsr",
    },
    "vad": {
        "silero": _P + "asr.faster_whisper:SileroVad",
        "faster-whisper": _P + "asr.faster_whisper:FasterWhisperVad",
        "none": None,
    },
    "diarizer": {
        "overlap": _P + "diarizer.overlap:OverlapDiarizer",
        "cluster": _P + "diarizer.cluster:ClusterDiarizer",
        "pyannote": _P + "diarizer.pyannote:PyannoteDiarizer",
    },
    "speaker": {
        "campplus": _P + "speaker.campplus:CamppModel",
        "resemblyzer": _P + "speaker.resemblyzer:ResemblyzerModel",
        "pyannote": _P + "speaker.pyannote:PyannoteEmbedding",
    },
    "face": {
        "dlib": _P + "face.dlib:DlibFaceModel",
        "insightface": _P + "face.insightface:InsightFaceModel",
    },
    "embed": {
        "local": _P + "embed:OnnxEmbedder",
        "torch": _P + "embed:TorchEmbedder",
        "openai": _P + "embed:OpenAIEmbedder",
    },
}

#: how an error message names each kind
KIND_LABELS = {
    "asr": "ASR backend",
    "vad": "VAD",
    "diarizer": "diarizer",
    "speaker": "speaker-embedding backend",
    "face": "face backend",
    "embed": "embedding backend",
}


def backend_names(kind: str) -> tuple[str, ...]:
    """The valid names of one kind, in the order help texts list them."""
    return tuple(BACKENDS[kind])


def backend_class(kind: str, name: str) -> Any:
    """The class of backend ``name`` of ``kind`` (its module imported now), or None for a name the
    stage serves itself; an unknown name is one error that lists the valid ones."""
    table = BACKENDS[kind]
    if name not in table:
        raise M3Error(f"unknown {KIND_LABELS[kind]} {name!r}; valid: {', '.join(sorted(table))}")
    target = table[name]
    if target is None:
        return None
    module_name, cls_name = target.split(":")
    return getattr(importlib.import_module(module_name), cls_name)


def create(kind: str, name: str, *args: Any, **options: Any) -> Any:
    """Backend ``name`` of ``kind`` built from ``args`` and those of ``options`` its constructor takes
    (a diarizer without a model file takes no ``model_dir``); None for a name the stage serves itself."""
    cls = backend_class(kind, name)
    if cls is None:
        return None
    params = inspect.signature(cls).parameters
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        options = {k: v for k, v in options.items() if k in params}
    return cls(*args, **options)


def dist_version(dist: str) -> str:
    """The installed version of a distribution ("-" when absent), for backend identities."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "-"
