"""Production ASR backend (optional extra ``m3[whisperx]``): whisperx ASR + forced alignment.

Nothing here is imported unless ``--backend whisperx`` is chosen; the default install has no whisperx.
Models are never downloaded: they come from a local directory or an already-populated Hugging Face
cache (see :mod:`m3cli.stages.backends.asr.whisperx_extra`). With whisperx the turns come from pyannote
(:mod:`m3cli.stages.backends.diarizer.pyannote`).

* ASR: ``whisperx.load_model(dir_or_name, device, compute_type=..., local_files_only=True)`` then
  ``model.transcribe(audio, batch_size, language)`` (batched, its own VAD);
* alignment: ``whisperx.load_align_model(language_code, device, model_name=...)`` and
  ``whisperx.align(segments, model, metadata, audio, device)`` give word times.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import numpy as np

from m3cli.stages.backends.asr import AsrSegment, Transcript, Word
from m3cli.stages.backends.asr.whisperx_extra import extra_version, import_extra
from m3cli.stages.core.errors import M3Error

log = logging.getLogger(__name__)

DEFAULT_MODEL = "large-v3"
BATCH_SIZE = 8


class WhisperxAsr:
    """whisperx: batched faster-whisper inference, then wav2vec2 forced alignment for word times."""

    name = "whisperx"
    #: the diarizer used with it unless another is named (whisperx's own pairing)
    default_diarizer = "pyannote"

    @classmethod
    def identity(cls, model: str | None) -> str:
        """What a cached transcript depends on, without loading the model."""
        return f"{cls.name} {model}"

    @classmethod
    def display_name(cls, model: str | None) -> str:
        """The model as records name it (whisperx's default is large-v3)."""
        return Path(model).name if model else "large-v3"

    def __init__(
        self,
        model: str | None = None,
        device: str = "cpu",
        compute_type: str | None = None,
        align_model: str | None = None,
    ) -> None:
        whisperx = import_extra("whisperx")
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
            f"whisperx {extra_version('whisperx')}; {self.model}; {self.compute_type}; "
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
