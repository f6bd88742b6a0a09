"""The optional ``m3[whisperx]`` extra (whisperx, pyannote.audio), imported offline.

Three backends live on it (whisperx ASR, the pyannote diarizer, pyannote speaker embeddings); each
imports its packages through :func:`import_extra`, so every one of them sets the same offline switches
before the library loads (``HF_HUB_OFFLINE=1``: models come from a local directory or an
already-populated Hugging Face cache, never a download; ``PYANNOTE_METRICS_ENABLED=false``: no
telemetry) and fails with the same one-line install hint when the extra is missing.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from m3cli.stages.core.errors import M3Error

INSTALL_HINT = "install the production extra: `pip install 'm3[whisperx]'` (whisperx, pyannote.audio)"


def offline() -> None:
    """Set the switches that keep Hugging Face and pyannote off the network (unless the user set them)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("PYANNOTE_METRICS_ENABLED", "false")


def import_extra(name: str) -> Any:
    """Module ``name`` of the extra, imported offline; an :class:`M3Error` with the install hint if absent."""
    offline()
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise M3Error(
            f"the `{name.split('.')[0]}` package is not available ({exc}); {INSTALL_HINT}"
        ) from None


def extra_version(dist: str) -> str:
    """The installed version of distribution ``dist`` ("?" when it is not installed), for cache keys."""
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "?"
