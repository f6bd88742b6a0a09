"""Speaker embeddings behind one Protocol, with a registry.

Both the diarizer (short sliding windows) and ``m3 voices`` (whole utterances) embed spans of one clip's
audio, so the interface takes the clip's audio once plus the spans: a backend can then compute its
features for the whole clip a single time and batch every span through the network together.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from m3cli.stages.backends.registry import backend_names, create

Span = tuple[float, float]

SPEAKER_BACKENDS = backend_names("speaker")


@runtime_checkable
class SpeakerModel(Protocol):
    name: str  # backend name
    model: str  # model as recorded in output
    version: str  # for cache keys
    dim: int
    #: cosine similarity above which two utterance embeddings are taken as one voice (backend-specific)
    same_speaker_cosine: float

    @classmethod
    def identity(cls, model: str | None, device: str = "cpu") -> str:
        """What cached embeddings of ``model`` depend on, told without loading it."""
        ...

    @classmethod
    def display_name(cls, model: str | None) -> str:
        """``model`` (None: the bundled one) as records name it."""
        ...

    def embed(self, audio: np.ndarray, spans: Sequence[Span]) -> np.ndarray:
        """One L2-normalised embedding per span (seconds from the start of ``audio``, mono 16 kHz float32);
        shape (len(spans), dim), float32."""
        ...


def make_speaker_model(name: str, model: str | None = None, device: str = "cpu") -> SpeakerModel:
    """A :class:`SpeakerModel` by backend name; ``model`` is its weights file or directory (None: the
    backend's bundled one)."""
    return create("speaker", name, model, device=device)


def l2_normalize(x: np.ndarray, axis: int = -1) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    norm = np.linalg.norm(x, axis=axis, keepdims=True)
    return x / np.maximum(norm, 1e-12)


def fold_small_clusters(
    emb: np.ndarray, labels: np.ndarray, seconds: np.ndarray, min_seconds: float
) -> np.ndarray:
    """Give the windows of clusters with under ``min_seconds`` of speech to the nearest big cluster
    (cosine to its centroid): a few stray windows are noise, not a new person."""
    sizes = {k: float(seconds[labels == k].sum()) for k in np.unique(labels)}
    big = [k for k, v in sizes.items() if v >= min_seconds]
    if not big or len(big) == len(sizes):
        return labels
    cents = np.stack([emb[labels == k].mean(0) for k in big])
    cents /= np.linalg.norm(cents, axis=1, keepdims=True)
    out = labels.copy()
    for i in np.flatnonzero(~np.isin(labels, big)):
        out[i] = big[int(np.argmax(cents @ emb[i]))]
    return out


def windows_over(speech: Sequence[Span], window: float, hop: float) -> list[Span]:
    """Sliding windows inside each speech region; a region shorter than a window is one window."""
    out: list[Span] = []
    for s, e in speech:
        if e - s <= window:
            out.append((s, e))
            continue
        n = int(np.ceil((e - s - window) / hop - 1e-9))
        for i in range(n + 1):
            a = min(s + i * hop, e - window)
            out.append((a, a + window))
    return out
