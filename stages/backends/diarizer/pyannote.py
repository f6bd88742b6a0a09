"""Who spoke when by a pyannote speaker-diarization pipeline (optional extra ``m3[whisperx]``; the GPU
path, default with ``--backend whisperx``).

``pyannote.audio.Pipeline.from_pretrained(local_dir)`` is called on ``{"waveform": (1, n) tensor,
"sample_rate": 16000}``; pyannote 3 returns an ``Annotation``, pyannote 4 an object whose
``speaker_diarization`` (or ``exclusive_speaker_diarization``) is one. The pipeline finds speech on its
own, so the VAD's regions are not used. Nothing is downloaded (see
:mod:`m3cli.stages.backends.asr.whisperx_extra`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from m3cli.stages.backends.asr import RATE, Span, SpeakerTurn
from m3cli.stages.backends.asr.whisperx_extra import extra_version, import_extra
from m3cli.stages.core.errors import M3Error


class PyannoteDiarizer:
    """A pyannote speaker-diarization pipeline loaded from a local directory (with its config.yaml)."""

    name = "pyannote"

    def __init__(self, model_dir: str | None, device: str = "cpu") -> None:
        if not model_dir:
            raise M3Error(
                "--diarizer pyannote needs --diarizer-model DIR: a local copy of a pyannote speaker "
                "diarization pipeline (e.g. pyannote/speaker-diarization-3.1: config.yaml + its models)"
            )
        path = Path(model_dir).expanduser()
        if not path.is_dir() or not (path / "config.yaml").is_file():
            raise M3Error(f"{path}: not a pyannote pipeline directory (needs config.yaml)")
        audio_mod = import_extra("pyannote.audio")
        torch = import_extra("torch")
        self._torch = torch
        try:
            pipeline = audio_mod.Pipeline.from_pretrained(str(path))
        except Exception as exc:
            raise M3Error(f"{path}: pyannote cannot load this pipeline offline: {exc}") from None
        if pipeline is None:  # pyannote 3 returns None instead of raising for some failures
            raise M3Error(f"{path}: pyannote could not build a pipeline from this directory")
        self._pipeline = pipeline.to(torch.device(device))
        self.version = f"pyannote.audio {extra_version('pyannote.audio')}; {path.name}"

    def turns(
        self,
        audio: np.ndarray,
        max_speakers: int | None,
        num_speakers: int | None,
        speech: Sequence[Span] | None = None,
    ) -> list[SpeakerTurn]:
        """The pipeline's turns over all of ``audio`` (``speech`` is not used: pyannote finds its own)."""
        waveform = self._torch.from_numpy(np.ascontiguousarray(audio, dtype=np.float32))[None, :]
        kwargs = {k: v for k, v in (("max_speakers", max_speakers), ("num_speakers", num_speakers)) if v}
        out = self._pipeline({"waveform": waveform, "sample_rate": RATE}, **kwargs)
        annotation = (
            getattr(out, "exclusive_speaker_diarization", None)
            or getattr(out, "speaker_diarization", None)
            or out
        )
        turns = [
            SpeakerTurn(float(seg.start), float(seg.end), str(label))
            for seg, _track, label in annotation.itertracks(yield_label=True)
        ]
        return sorted(turns, key=lambda t: (t.start, t.end, t.speaker))
