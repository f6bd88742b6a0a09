"""Resemblyzer's GE2E voice encoder (256-d), with the weights bundled in the ``resemblyzer`` wheel.

Why not ``import resemblyzer``: its package ``__init__`` imports ``webrtcvad``, whose module imports
``pkg_resources`` (gone with setuptools >= 81), and ``scipy.ndimage.morphology`` (deprecated). Neither is
needed to embed speech we have already cut with a VAD, so this module rebuilds the same network (3-layer
LSTM 40->256, linear 256->256, ReLU, L2 norm), loads ``resemblyzer/pretrained.pt`` found with
``importlib.util.find_spec`` (no download, no package import), and reproduces resemblyzer's
preprocessing: 40-band mel power spectrogram (25 ms window, 10 ms hop), volume normalised up to -30 dBFS,
1.6 s partial utterances at 1.3 per second whose embeddings are averaged and re-normalised.

Speed: the mel spectrogram is computed once per clip and every span's partials go through the LSTM in
one batch, so embedding all windows of a 30 s clip costs a fraction of a second on one core.
"""

from __future__ import annotations

import importlib.util
import logging
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from m3cli.stages.backends.speaker import Span, l2_normalize
from m3cli.stages.core.errors import M3Error

log = logging.getLogger(__name__)

RATE = 16000
HOP = 160  # 10 ms
N_FFT = 400  # 25 ms
N_MELS = 40
PARTIAL = 160  # frames per partial utterance (1.6 s)
PARTIAL_RATE = 1.3  # partials per second
MIN_COVERAGE = 0.75
TARGET_DBFS = -30.0
BATCH = 256


def bundled_weights() -> Path:
    """resemblyzer's weights (its wheel, or $M3_MODEL_DIR), checked against m3's pinned SHA-256."""
    from m3cli.stages.backends import models

    return models.resolved("resemblyzer", "pretrained.pt", _packaged_weights)


def _packaged_weights() -> Path:
    spec = importlib.util.find_spec("resemblyzer")
    if spec is None or not spec.submodule_search_locations:
        raise M3Error(
            "the `resemblyzer` package is not installed: `pip install resemblyzer` (its wheel carries the "
            "voice-encoder weights), or choose another --speaker-backend"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "pretrained.pt"
    if not path.is_file():
        raise M3Error(f"{path}: resemblyzer's bundled weights are missing; reinstall resemblyzer")
    return path


class ResemblyzerModel:
    name = "resemblyzer"
    model = "ge2e-256"
    dim = 256
    # Same-voice cosine: ~0.85-0.95 for one speaker's utterances, ~0.55-0.75 across speakers (measured on
    # the fixture's LibriSpeech speakers and the AMI excerpts; see stages/voices.py).
    same_speaker_cosine = 0.75

    @classmethod
    def identity(cls, model: str | None, device: str = "cpu") -> str:
        """What cached embeddings depend on, without loading the weights."""
        from m3cli.stages.backends.registry import dist_version

        path = bundled_weights() if model is None else Path(model).expanduser()
        size = path.stat().st_size if path.is_file() else "missing"
        return f"resemblyzer {dist_version('resemblyzer')}; weights {size}; partial {PARTIAL}@{PARTIAL_RATE}"

    @classmethod
    def display_name(cls, model: str | None) -> str:
        """The model as records name it."""
        return cls.model if model is None else Path(model).name

    def __init__(self, weights: str | Path | None = None, device: str = "cpu") -> None:
        from m3cli.stages.core.imports import heavy_import
        from m3cli.stages.core.threads import apply_torch

        torch = heavy_import("torch")  # under the import lock: see m3cli.stages.core.imports

        apply_torch(torch)
        path = Path(weights).expanduser() if weights else bundled_weights()
        if not path.is_file():
            raise M3Error(f"{path}: resemblyzer weights file not found (expected a .pt checkpoint)")
        self._torch = torch
        self.device = torch.device(device)
        self._net = _build_net(torch)
        try:
            checkpoint = torch.load(path, map_location="cpu", weights_only=True)
            self._net.load_state_dict(checkpoint["model_state"], strict=False)
        except Exception as exc:  # a damaged or foreign file: say which and why
            raise M3Error(f"{path}: cannot load resemblyzer weights: {exc}") from None
        self._net.to(self.device).eval()
        self.version = (
            f"resemblyzer-ge2e; {path.name}:{path.stat().st_size}; partial {PARTIAL}@{PARTIAL_RATE}"
        )
        self._mel_basis: np.ndarray | None = None

    # -- features ----------------------------------------------------------------------------------
    def _mel(self, audio: np.ndarray) -> np.ndarray:
        """(frames, 40) mel power spectrogram, frame i centred on sample i*160 (librosa's conventions)."""
        import librosa

        if self._mel_basis is None:
            self._mel_basis = librosa.filters.mel(sr=RATE, n_fft=N_FFT, n_mels=N_MELS).astype(np.float32)
        spec = np.abs(librosa.stft(audio.astype(np.float32), n_fft=N_FFT, hop_length=HOP, center=True)) ** 2
        return (self._mel_basis @ spec).T.astype(np.float32)

    @staticmethod
    def _partial_starts(n_frames: int) -> list[int]:
        """Resemblyzer's ``compute_partial_slices`` for a span of ``n_frames`` frames."""
        step = int(round(RATE / PARTIAL_RATE / HOP))
        steps = max(1, n_frames - PARTIAL + step + 1)
        starts = list(range(0, steps, step))
        coverage = (n_frames - starts[-1]) / PARTIAL
        if coverage < MIN_COVERAGE and len(starts) > 1:
            starts.pop()
        return starts

    def embed(self, audio: np.ndarray, spans: Sequence[Span]) -> np.ndarray:
        if not len(spans):
            return np.zeros((0, self.dim), np.float32)
        audio = np.asarray(audio, dtype=np.float32)
        mel = self._mel(audio) if len(audio) else np.zeros((0, N_MELS), np.float32)
        partials: list[np.ndarray] = []
        owner: list[int] = []
        for i, (s, e) in enumerate(spans):
            f0 = max(0, int(round(s * RATE / HOP)))
            f1 = min(len(mel), max(f0 + 1, int(round(e * RATE / HOP))))
            chunk = mel[f0:f1] * _gain(audio[int(s * RATE) : int(e * RATE)]) ** 2
            for st in self._partial_starts(len(chunk)):
                part = chunk[st : st + PARTIAL]
                if len(part) < PARTIAL:  # resemblyzer zero-pads the waveform
                    part = np.concatenate([part, np.zeros((PARTIAL - len(part), N_MELS), np.float32)])
                partials.append(part)
                owner.append(i)
        out = self._forward(np.stack(partials))
        sums = np.zeros((len(spans), self.dim), np.float64)
        np.add.at(sums, np.asarray(owner), out)
        return l2_normalize(sums)

    def _forward(self, mels: np.ndarray) -> np.ndarray:
        torch = self._torch
        outs = []
        with torch.inference_mode():
            for i in range(0, len(mels), BATCH):
                batch = torch.from_numpy(np.ascontiguousarray(mels[i : i + BATCH])).to(self.device)
                outs.append(self._net(batch).cpu().numpy())
        return np.concatenate(outs).astype(np.float32)


def _gain(wav: np.ndarray) -> float:
    """Resemblyzer's ``normalize_volume(wav, -30, increase_only=True)`` as an amplitude factor."""
    if not len(wav):
        return 1.0
    rms = float(np.sqrt(np.mean(np.square(wav, dtype=np.float64))))
    if rms <= 1e-9:
        return 1.0
    change = TARGET_DBFS - 20.0 * math.log10(rms)
    return 10.0 ** (change / 20.0) if change > 0 else 1.0


def _build_net(torch):  # noqa: ANN001,ANN202 - torch is imported lazily by the caller
    nn = torch.nn

    class VoiceEncoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lstm = nn.LSTM(N_MELS, 256, 3, batch_first=True)
            self.linear = nn.Linear(256, 256)
            self.relu = nn.ReLU()

        def forward(self, mels):  # noqa: ANN001,ANN202
            _, (hidden, _) = self.lstm(mels)
            raw = self.relu(self.linear(hidden[-1]))
            return raw / torch.clamp(torch.norm(raw, dim=1, keepdim=True), min=1e-12)

    return VoiceEncoder()
