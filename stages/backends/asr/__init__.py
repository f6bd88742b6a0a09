"""Speech capabilities behind small Protocols: speech recognition (:class:`AsrModel`) and voice activity
detection (:class:`Vad`), with factories that build them by name, and the speech types (words,
segments, speaker turns, spans) every speech backend shares, diarizers included
(:mod:`~m3cli.stages.backends.diarizer`).

Backends are imported lazily inside the factories, so picking one never imports the others (whisperx and
pyannote are an optional extra; faster-whisper and silero-vad are the offline defaults).

All times are seconds relative to the start of the audio handed in; audio is mono float32 at 16 kHz.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from m3cli.stages.backends.registry import backend_names, create

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
    # Whisper's own measures of the window's text, where the backend gives them: mean token
    # log-probability, probability that the window holds no speech, gzip compression ratio (loops)
    avg_logprob: float | None = None
    no_speech_prob: float | None = None
    compression_ratio: float | None = None


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
    default_diarizer: str  # the diarizer used with it unless another is named

    @classmethod
    def identity(cls, model: str | None) -> str:
        """What a cached transcript by ``model`` depends on, told without loading it."""
        ...

    @classmethod
    def display_name(cls, model: str | None) -> str:
        """``model`` (None: the backend's default) as records name it."""
        ...

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


# -- registries ------------------------------------------------------------------------------------
ASR_BACKENDS = backend_names("asr")
VADS = backend_names("vad")


def make_asr(
    name: str,
    model: str | None = None,
    device: str = "cpu",
    compute_type: str | None = None,
    threads: int = 0,
    align_model: str | None = None,
) -> AsrModel:
    """An :class:`AsrModel` by backend name; ``model`` is a directory or a model name the backend knows
    (``threads``: faster-whisper; ``align_model``: whisperx)."""
    return create(
        "asr", name, model, device=device, compute_type=compute_type, threads=threads, align_model=align_model
    )


def make_vad(name: str) -> Vad | None:
    """A :class:`Vad` by name; ``none`` means "treat the whole clip as speech" (returns None)."""
    return create("vad", name)


# -- helpers shared by backends ----------------------------------------------------------------------
def local_names(labels: Iterable[object]) -> dict[object, str]:
    """Local speaker names ``S0``, ``S1``, ... for ``labels`` in order of first appearance (None, no
    speaker, gets no name): stable whatever number a clusterer or model gave each speaker."""
    names: dict[object, str] = {}
    for label in labels:
        if label is not None:
            names.setdefault(label, f"S{len(names)}")
    return names


def relabel_turns(turns: Iterable[SpeakerTurn]) -> list[SpeakerTurn]:
    """``turns`` sorted by time, named by :func:`local_names` in that order, times rounded to the ms."""
    return relabeled(turns)[0]


def relabeled(turns: Iterable[SpeakerTurn]) -> tuple[list[SpeakerTurn], dict[object, str]]:
    """:func:`relabel_turns`, and the name each of the model's labels was given (what else the model
    said of a label, a voice, follows it to its new name)."""
    ordered = sorted(turns, key=lambda t: (t.start, t.end))
    names = local_names(t.speaker for t in ordered)
    named = [SpeakerTurn(round(float(t.start), 3), round(float(t.end), 3), names[t.speaker]) for t in ordered]
    return named, names


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


def subtract_spans(spans: Sequence[Span], holes: Sequence[Span]) -> list[Span]:
    """The parts of ``spans`` outside every hole."""
    out: list[Span] = []
    for s, e in merge_spans(spans):
        cur = s
        for hs, he in merge_spans(holes):
            if he <= cur or hs >= e:
                continue
            if hs > cur:
                out.append((cur, hs))
            cur = max(cur, he)
        if cur < e:
            out.append((cur, e))
    return out


def speaker_stretches(turns: Iterable[SpeakerTurn]) -> dict[str, list[Span]]:
    """Per speaker, its stretches: the sorted union of its turns (overlapping or touching turns of one
    speaker make one stretch)."""
    spans: dict[str, list[Span]] = {}
    for t in turns:
        spans.setdefault(t.speaker, []).append((t.start, t.end))
    return {speaker: merge_spans(v) for speaker, v in spans.items()}
