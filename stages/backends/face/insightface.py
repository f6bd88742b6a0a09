"""insightface backend (M3-Agent's choice): SCRFD detection + ArcFace 512-d embeddings via onnxruntime.

Install with the ``insightface`` extra. The model pack (``buffalo_l`` or any folder of .onnx files
that ``insightface.app.FaceAnalysis`` can classify) is never downloaded here: it must already sit in
``~/.insightface/models/<pack>`` or in the folder given with ``--model-dir``; otherwise one clear
error says where to put it. With ``--device cuda`` the CUDA execution provider is used when
onnxruntime has it (onnxruntime-gpu), else the CPU one with a warning.

Same person if the cosine similarity of the normalised embeddings is above 0.3 (M3-Agent's value).

Mouth: when the pack has the 106-point landmark model (``2d106det.onnx`` in buffalo_l), it runs too
and each detection's ``mouth`` is the inner-lip opening over the eye distance. The opening is read
from the 20 mouth points (52-71) without relying on their order (see :func:`inner_lip_gap`).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import logging
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from m3cli.stages.backends.face import Detection, Metric, files_fingerprint, sort_detections
from m3cli.stages.core.errors import M3Error

log = logging.getLogger(__name__)

DEFAULT_PACK = "buffalo_l"
DEFAULT_ROOT = "~/.insightface"
MOUTH_POINTS = slice(52, 72)  # the 20 mouth points of the 106-point layout


class InsightFaceModel:
    """insightface ``FaceAnalysis`` restricted to detection + recognition; loads on the first ``detect``."""

    name = "insightface"
    metric: Metric = "cosine"
    threshold = 0.3
    min_score = 0.5

    def __init__(
        self,
        model_dir: str | Path | None = None,
        pack: str = DEFAULT_PACK,
        det_size: int = 640,
        device: str = "cpu",
        root: str | Path = DEFAULT_ROOT,
    ) -> None:
        if importlib.util.find_spec("insightface") is None:
            raise M3Error(
                "the insightface backend needs the insightface package: "
                "pip install 'm3[insightface]' (or 'm3[insightface-gpu]' for CUDA)"
            )
        folder = Path(model_dir).expanduser() if model_dir else Path(root).expanduser() / "models" / pack
        onnx_files = sorted(folder.glob("*.onnx")) if folder.is_dir() else []
        if not onnx_files:
            state = "has no .onnx files" if folder.is_dir() else "does not exist"
            raise M3Error(
                f"insightface model pack not found: {folder} {state}. Unzip the {pack} pack (det_10g.onnx, "
                f"w600k_r50.onnx, ...) into {Path(root).expanduser() / 'models' / pack}, or pass --model-dir "
                "with a folder holding a detection and a recognition .onnx model; m3 never downloads it"
            )
        if det_size < 32 or det_size % 32:
            raise M3Error(f"insightface detection size must be a multiple of 32 (>= 32), got {det_size}")
        self.model_dir = folder.resolve()
        self.model = folder.name
        self.det_size = int(det_size)
        self.device = device
        self.root = str(Path(root).expanduser())
        self._files = onnx_files
        self._app: Any = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"InsightFaceModel(model_dir={str(self.model_dir)!r}, det_size={self.det_size})"

    @property
    def version(self) -> str:
        return f"insightface-{importlib.metadata.version('insightface')}/{files_fingerprint(self._files)}"

    def config(self) -> dict[str, Any]:
        return {"det_size": self.det_size}

    def score_quality(self, score: float) -> float:
        return float(np.clip(score, 0.0, 1.0))

    def providers(self) -> list[str]:
        import onnxruntime

        if self.device.startswith("cuda"):
            if "CUDAExecutionProvider" in onnxruntime.get_available_providers():
                return ["CUDAExecutionProvider", "CPUExecutionProvider"]
            log.warning(
                "--device %s: onnxruntime has no CUDAExecutionProvider (install onnxruntime-gpu); "
                "running insightface on the CPU",
                self.device,
            )
        return ["CPUExecutionProvider"]

    def _load(self) -> Any:
        with self._lock:
            if self._app is None:
                from insightface.app import FaceAnalysis

                started = time.monotonic()
                providers = self.providers()
                try:
                    app = FaceAnalysis(
                        name=str(self.model_dir),
                        root=self.root,
                        providers=providers,
                        allowed_modules=["detection", "recognition", "landmark_2d_106"],
                    )
                except AssertionError:
                    raise M3Error(
                        f"{self.model_dir}: no face detection model among its .onnx files; "
                        "a pack needs a detection and a recognition model"
                    ) from None
                if "recognition" not in app.models:
                    raise M3Error(
                        f"{self.model_dir}: no face recognition (embedding) model among its "
                        ".onnx files; a pack needs a detection and a recognition model"
                    )
                ctx_id = 0 if providers[0] == "CUDAExecutionProvider" else -1
                app.prepare(ctx_id=ctx_id, det_size=(self.det_size, self.det_size))
                self._app = app
                log.info(
                    "loaded insightface %s on %s in %.2fs",
                    self.model,
                    providers[0],
                    time.monotonic() - started,
                )
            return self._app

    def detect(self, image: np.ndarray) -> list[Detection]:
        app = self._load()
        arr = np.asarray(image)
        if arr.ndim == 2:
            arr = np.repeat(arr[:, :, None], 3, axis=2)
        bgr = np.ascontiguousarray(arr[:, :, 2::-1], dtype=np.uint8)  # insightface follows OpenCV: BGR
        with warnings.catch_warnings():
            # insightface 2.1 calls a scikit-image API that warns on every face it aligns.
            warnings.simplefilter("ignore", FutureWarning)
            faces = app.get(bgr)
        dets = []
        for face in faces:
            emb = getattr(face, "normed_embedding", None)
            if emb is None:
                continue
            landmarks = None
            if getattr(face, "kps", None) is not None:
                kps = np.asarray(face.kps, dtype=np.float32)
                eyes = sorted([kps[0], kps[1]], key=lambda p: float(p[0]))
                landmarks = np.stack([eyes[0], eyes[1], kps[2]]).astype(np.float32)
            mouth = None
            dense = getattr(face, "landmark_2d_106", None)
            if dense is not None and landmarks is not None:
                mouth = inner_lip_gap(np.asarray(dense, np.float64)[MOUTH_POINTS], landmarks[0], landmarks[1])
            h, w = arr.shape[:2]
            x0, y0, x1, y1 = (float(v) for v in face.bbox[:4])
            box = (max(0.0, x0), max(0.0, y0), min(float(w), x1), min(float(h), y1))
            if box[2] - box[0] < 2 or box[3] - box[1] < 2:
                continue
            dets.append(
                Detection(
                    box=box,
                    score=float(face.det_score),
                    embedding=np.asarray(emb, dtype=np.float32),
                    landmarks=landmarks,
                    mouth=mouth,
                )
            )
        return sort_detections(dets)

    def detect_frames(self, images: list[np.ndarray]) -> list[list[Detection]]:
        return [self.detect(image) for image in images]


def inner_lip_gap(mouth: np.ndarray, eye_left: np.ndarray, eye_right: np.ndarray) -> float | None:
    """Opening between the inner lips over the eye distance, from unordered mouth points.

    The corners are the leftmost and rightmost points. Over the middle 40% of the corner line the
    lips give as many points above as below it (outer and inner contour of each lip), so sorted by
    their offset across that line the two central ones are the inner upper and inner lower lip: the
    difference of their offsets is the opening, ~0 for a closed mouth.
    """
    left, right = mouth[np.argmin(mouth[:, 0])], mouth[np.argmax(mouth[:, 0])]
    axis = right - left
    width = float(np.linalg.norm(axis))
    eyes = float(np.linalg.norm(np.asarray(eye_right, np.float64) - np.asarray(eye_left, np.float64)))
    if width < 1e-6 or eyes < 1e-6:
        return None
    unit = axis / width
    along = (mouth - left) @ unit
    middle = (along > 0.3 * width) & (along < 0.7 * width)
    across = np.sort(((mouth - left) @ np.array([-unit[1], unit[0]]))[middle])
    if len(across) < 2:
        return None
    half = len(across) // 2
    return float(max(0.0, across[half] - across[half - 1]) / eyes)
