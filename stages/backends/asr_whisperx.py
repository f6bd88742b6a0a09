"""Production backend (optional extra ``m3[whisperx]``): whisperx ASR + forced alignment, pyannote turns.

Nothing here is imported unless ``--backend whisperx`` or ``--diarizer pyannote`` is chosen; the default
install has neither package. Models are never downloaded: they come from a local directory or an
already-populated Hugging Face cache (``HF_HUB_OFFLINE=1`` is set before the libraries load), and
pyannote's telemetry is switched off (``PYANNOTE_METRICS_ENABLED=false``).

* ASR: ``whisperx.load_model(dir_or_name, device, compute_type=..., local_files_only=True)`` then
  ``model.transcribe(audio, batch_size, language)`` (batched, its own VAD);
* alignment: ``whisperx.load_align_model(language_code, device, model_name=...)`` and
  ``whisperx.align(segments, model, metadata, audio, device)`` give word times;
* diarization: ``pyannote.audio.Pipeline.from_pretrained(local_dir)`` called on
  ``{"waveform": (1, n) tensor, "sample_rate": 16000}``; pyannote 3 returns an ``Annotation``, pyannote 4
  an object whose ``speaker_diarization`` (or ``exclusive_speaker_diarization``) is one.
"""

from __future__ import annotations

import importlib
import logging
import os
from pathlib import Path
from typing import Any

import numpy as np

from m3cli.stages.backends.asr import RATE, AsrSegment, SpeakerTurn, Transcript, Word
from m3cli.stages.core.errors import M3Error

log = logging.getLogger(__name__)

DEFAULT_MODEL = "large-v3"
BATCH_SIZE = 8
INSTALL_HINT = "install the production extra: `pip install 'm3[whisperx]'` (whisperx, pyannote.audio)"


def _offline() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("PYANNOTE_METRICS_ENABLED", "false")


def _import(name: str) -> Any:
    _offline()
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise M3Error(
            f"the `{name.split('.')[0]}` package is not available ({exc}); {INSTALL_HINT}"
        ) from None


def _version(dist: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "?"


class WhisperxAsr:
    """whisperx: batched faster-whisper inference, then wav2vec2 forced alignment for word times."""

    name = "whisperx"

    def __init__(
        self,
        model: str | None = None,
        device: str = "cpu",
        compute_type: str | None = None,
        align_model: str | None = None,
    ) -> None:
        whisperx = _import("whisperx")
        self._wx = whisperx
        self.device = device
        model = model or DEFAULT_MODEL
        path = Path(model).expanduser()
        if (os.sep in model or model.startswith(".")) and not path.is_dir():
            raise M3Error(
                f"{model}: --model directory not found (a CTranslate2 Whisper model with tokenizer.json)"
            )
        if path.is_dir() and not (path / "tokenizer.json").is_file():
            raise M3Error(f"{path}: whisperx needs tokenizer.json in the model directory")
        load_from = str(path.resolve()) if path.is_dir() else model
        self.model = path.name if path.is_dir() else model
        self.compute_type = compute_type or ("float16" if device.startswith("cuda") else "int8")
        self.align_model = align_model
        try:
            self._model = whisperx.load_model(
                load_from, device, compute_type=self.compute_type, local_files_only=True
            )
        except Exception as exc:  # whisperx raises many kinds; all mean "cannot use this model here"
            raise M3Error(
                f"whisperx cannot load model {model!r} on {device}: {exc}; pass --model DIR with a local "
                "CTranslate2 Whisper model, or fill the Hugging Face cache first (m3 never downloads)"
            ) from None
        self._align: dict[str, tuple[Any, dict]] = {}
        self.version = (
            f"whisperx {_version('whisperx')}; {self.model}; {self.compute_type}; "
            f"align {align_model or 'default'}"
        )

    def _aligner(self, language: str) -> tuple[Any, dict]:
        if language not in self._align:
            try:
                self._align[language] = self._wx.load_align_model(
                    language_code=language, device=self.device, model_name=self.align_model
                )
            except Exception as exc:
                raise M3Error(
                    f"whisperx has no alignment model for {language!r} available offline: {exc}; pass "
                    "--align-model with a local wav2vec2 CTC model directory"
                ) from None
        return self._align[language]

    def transcribe(self, audio: np.ndarray, language: str | None) -> Transcript:
        audio = np.asarray(audio, dtype=np.float32)
        result = self._model.transcribe(audio, batch_size=BATCH_SIZE, language=language)
        lang = result.get("language") or language or "en"
        model_a, meta = self._aligner(lang)
        aligned = self._wx.align(
            result["segments"], model_a, meta, audio, self.device, return_char_alignments=False
        )
        segments = []
        for seg in aligned.get("segments", []):
            words = []
            for w in seg.get("words", []):
                if "start" not in w or "end" not in w:  # numerals and symbols whisperx could not align
                    continue
                words.append(
                    Word(
                        float(w["start"]),
                        float(w["end"]),
                        " " + str(w["word"]).strip(),
                        float(w["score"]) if w.get("score") is not None else None,
                    )
                )
            segments.append(
                AsrSegment(
                    float(seg["start"]), float(seg["end"]), str(seg.get("text", "")).strip(), tuple(words)
                )
            )
        return Transcript(tuple(segments), lang)


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
        audio_mod = _import("pyannote.audio")
        torch = _import("torch")
        self._torch = torch
        try:
            pipeline = audio_mod.Pipeline.from_pretrained(str(path))
        except Exception as exc:
            raise M3Error(f"{path}: pyannote cannot load this pipeline offline: {exc}") from None
        if pipeline is None:  # pyannote 3 returns None instead of raising for some failures
            raise M3Error(f"{path}: pyannote could not build a pipeline from this directory")
        self._pipeline = pipeline.to(torch.device(device))
        self.version = f"pyannote.audio {_version('pyannote.audio')}; {path.name}"

    def turns(
        self, audio: np.ndarray, max_speakers: int | None, num_speakers: int | None
    ) -> list[SpeakerTurn]:
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
