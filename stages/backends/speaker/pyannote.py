"""pyannote/WeSpeaker-class speaker embeddings from a local directory (optional extra ``m3[whisperx]``).

Written against ``pyannote.audio.Model.from_pretrained(local)`` and ``pyannote.audio.Inference(model,
window="whole")``, which embeds a ``{"waveform", "sample_rate"}`` dict into one vector. Nothing is
downloaded (``HF_HUB_OFFLINE=1``); pyannote's telemetry is off (``PYANNOTE_METRICS_ENABLED=false``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from m3cli.stages.backends.asr.whisperx_extra import extra_version, import_extra
from m3cli.stages.backends.speaker import Span, l2_normalize
from m3cli.stages.core.errors import M3Error

RATE = 16000
MIN_SAMPLES = RATE // 2  # WeSpeaker ResNets need some context; shorter spans are centre-padded


class PyannoteEmbedding:
    name = "pyannote"
    # WeSpeaker ResNet34 embeddings: same speaker typically > 0.5 cosine, different < 0.3
    same_speaker_cosine = 0.5

    @classmethod
    def identity(cls, model: str | None, device: str = "cpu") -> str:
        """What cached embeddings depend on, without loading the model."""
        from m3cli.stages.backends.registry import dist_version

        return f"{cls.name}; {model}; pyannote.audio {dist_version('pyannote.audio')}"

    @classmethod
    def display_name(cls, model: str | None) -> str:
        """The model as records name it."""
        return Path(model).name if model else "-"

    def __init__(self, model_dir: str | None, device: str = "cpu") -> None:
        if not model_dir:
            raise M3Error(
                "the pyannote speaker backend needs --speaker-model DIR: a local copy of an embedding model "
                "such as pyannote/wespeaker-voxceleb-resnet34-LM (config.yaml + pytorch_model.bin)"
            )
        path = Path(model_dir).expanduser()
        if not path.exists():
            raise M3Error(f"{path}: speaker-embedding model not found")
        audio_mod = import_extra("pyannote.audio")
        torch = import_extra("torch")
        self._torch = torch
        candidates = [path] + ([path / "pytorch_model.bin"] if path.is_dir() else [])
        model = None
        errors = []
        for cand in candidates:  # pyannote 4 takes the directory, pyannote 3 the checkpoint file
            if not cand.exists():
                continue
            try:
                model = audio_mod.Model.from_pretrained(str(cand))
            except Exception as exc:
                errors.append(f"{cand.name}: {exc}")
                continue
            if model is not None:
                break
        if model is None:
            raise M3Error(f"{path}: pyannote cannot load an embedding model from here ({'; '.join(errors)})")
        self._inference = audio_mod.Inference(model, window="whole", device=torch.device(device))
        self.model = path.name
        self.dim = int(getattr(model, "dimension", 0) or 0)
        self.version = f"pyannote.audio {extra_version('pyannote.audio')}; {path.name}"

    def embed(self, audio: np.ndarray, spans: Sequence[Span]) -> np.ndarray:
        out = []
        audio = np.asarray(audio, dtype=np.float32)
        for s, e in spans:
            wav = audio[int(s * RATE) : int(e * RATE)]
            if len(wav) < MIN_SAMPLES:
                pad = MIN_SAMPLES - len(wav)
                wav = np.pad(wav, (pad // 2, pad - pad // 2))
            tensor = self._torch.from_numpy(np.ascontiguousarray(wav))[None, :]
            vec = np.asarray(self._inference({"waveform": tensor, "sample_rate": RATE}), dtype=np.float32)
            out.append(vec.reshape(-1))
        if not out:
            return np.zeros((0, self.dim), np.float32)
        emb = l2_normalize(np.stack(out))
        self.dim = emb.shape[1]
        return emb
