"""dlib face backend: HOG (or CNN/MMOD) detector, 5-point alignment and the ResNet 128-d embedding.

The weights come from the ``face-recognition-models`` wheel. That package imports ``pkg_resources``
at import time (broken with setuptools >= 81), so its files are located with
``importlib.util.find_spec`` and never imported; dlib is used directly (not the ``face_recognition``
package, which would import it).

Same person if the Euclidean distance of two descriptors is below 0.6 (dlib's documented
threshold; cosine is not discriminative for these embeddings).

Speed: the detector runs on a grey copy of the frame rescaled so its longer side is ``detect_side``
pixels (HOG cost grows with the pixel count, and x4 per ``upsample``). HOG finds faces of about 80
pixels and up in what it sees, so on 640x360 video the default 960 (x1.5) finds faces from ~55 px at
about a third of the cost of ``upsample=1``. Landmarks and the embedding always use the full frame.

Throughput (``detect_every``): the whole frame is searched only every ``detect_every``-th sampled frame
and after a picture change (a cut); in between, each face found in the previous frame is looked for
again by the same detector in a small crop around its last box (~10x fewer pixels than the frame),
so every sampled frame still gets its detections, boxes, landmarks and mouth reading; a face lost
by tracking makes that frame a whole-frame search, and a face that walks in is found at the next
search (at most ``detect_every`` - 1 sampled frames late). A tracked face carries its track's descriptor
until its aligned chip has changed by ``TRACK_REEMBED`` grey levels (new pose, new expression):
then it is embedded again, so a track is embedded a few times, never only once at a blurred first
frame. ``detect_every=1`` searches and embeds every frame.

Mouth: dlib's 68-point predictor (shipped in the same wheel, ~2 ms per face) gives the inner lips
(points 60-67); the opening between 61-67, 62-66 and 63-65 over the outer eye-corner distance (36-45)
is each detection's ``mouth``. The embedding still uses the 5-point alignment it was trained with.
A model folder without the 68-point file gives detections without ``mouth``.
"""

from __future__ import annotations

import importlib.util
import logging
import math
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from m3cli.stages.backends.face import (
    Detection,
    Metric,
    files_fingerprint,
    mouth_aperture,
    sort_detections,
)
from m3cli.stages.core.errors import M3Error

log = logging.getLogger(__name__)

MODELS_PACKAGE = "face_recognition_models"
SHAPE_5 = "shape_predictor_5_face_landmarks.dat"
SHAPE_68 = "shape_predictor_68_face_landmarks.dat"
INNER_UPPER = (61, 62, 63)  # 68-point inner upper lip, left to right ...
INNER_LOWER = (67, 66, 65)  # ... and the inner lower lip points facing them
EYE_OUTER = (36, 45)
RESNET = "dlib_face_recognition_resnet_model_v1.dat"
MMOD = "mmod_human_face_detector.dat"
DETECTORS = ("hog", "cnn")
Box = tuple[float, float, float, float]
CHIP_SIZE = 150  # what the ResNet was trained on
CHIP_PADDING = 0.25
REUSE_IOU = 0.7
REUSE_MAX_DIFF = 2.0  # mean absolute difference (grey levels) under which two chips are the same input
TRACK_FACE_SIDE = 110  # a tracked face is looked for in a crop scaled so its last box is this wide
TRACK_MARGIN = 0.6  # that crop reaches this many box widths beyond the last box on each side
TRACK_MIN_IOU = 0.3  # a face found in the crop continues the track if it overlaps the last box this much
CUT_CHANGE = 0.06  # mean grey change (0..1) of a 32x18 thumbnail that forces a whole-frame detection
STABLE_IOU = 0.8  # a face found this close to its box in the previous frame keeps that box
TRACK_REEMBED = 20.0  # a tracked face is embedded again once its chip differs this much (grey levels)


def default_model_dir() -> Path | None:
    """The ``models`` folder of the face-recognition-models wheel, found without importing it."""
    spec = importlib.util.find_spec(MODELS_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "models"


class DlibFaceModel:
    """dlib HOG/CNN detection + ResNet embeddings; weights load on the first ``detect``."""

    name = "dlib"
    metric: Metric = "l2"
    threshold = 0.6
    min_score = 0.0  # HOG SVM margin / MMOD confidence; dlib's own default cut-off

    def __init__(self, detector: str = "hog", upsample: int = 0, detect_side: int | None = 960,
                 model_dir: str | Path | None = None, device: str = "cpu", jitters: int = 0,
                 detect_every: int = 1) -> None:
        if detector not in DETECTORS:
            raise M3Error(f"unknown dlib detector {detector!r}; valid: {', '.join(DETECTORS)}")
        if upsample < 0 or upsample > 3:
            raise M3Error(f"--upsample must be 0..3, got {upsample}")
        if detect_every < 1:
            raise M3Error(f"--detect-every must be >= 1, got {detect_every}")
        if detect_side is not None and detect_side < 32:
            raise M3Error(f"detection size must be at least 32 pixels, got {detect_side}")
        folder = Path(model_dir).expanduser() if model_dir else default_model_dir()
        needed = [SHAPE_5, RESNET] + ([MMOD] if detector == "cnn" else [])
        missing = [n for n in needed if folder is None or not (folder / n).is_file()]
        if missing:
            where = f" in {folder}" if folder else ""
            raise M3Error(
                f"dlib face model files missing{where}: {', '.join(missing)}. Install them with "
                "`pip install face-recognition-models`, or pass --model-dir with a folder holding "
                f"{', '.join(needed)}"
            )
        assert folder is not None
        self.model_dir = folder
        self.detector = detector
        self.upsample = int(upsample)
        self.detect_side = detect_side
        self.jitters = int(jitters)
        self.detect_every = int(detect_every)
        self.model = f"dlib-resnet-v1+{detector}"
        if device != "cpu":
            log.warning(
                "--device %s: the dlib face backend runs on the CPU (dlib-bin has no CUDA); "
                "--backend insightface uses the GPU",
                device,
            )
        self.has_mouth = (folder / SHAPE_68).is_file()
        self._files = [folder / n for n in needed] + ([folder / SHAPE_68] if self.has_mouth else [])
        self._nets: tuple[Any, Any, Any] | None = None
        self._mouth_net: Any = None
        self.embedded = 0  # descriptors computed / reused (for timing reports and tests)
        self.reused = 0
        self.tracked = 0  # detections found by tracking (not a whole-frame search)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"DlibFaceModel({self.detector!r}, upsample={self.upsample}, detect_side={self.detect_side})"

    @property
    def version(self) -> str:
        import dlib

        return f"dlib-{dlib.__version__}/{files_fingerprint(self._files)}"

    def config(self) -> dict[str, Any]:
        return {"detector": self.detector, "upsample": self.upsample, "detect_side": self.detect_side,
                "jitters": self.jitters, "mouth": self.has_mouth, "detect_every": self.detect_every}

    def score_quality(self, score: float) -> float:
        # HOG margins of clear frontal faces sit around 1..3, MMOD confidences around 1..1.2.
        scale = 2.0 if self.detector == "hog" else 1.0
        return float(np.clip(score / scale, 0.0, 1.0))

    def _load(self) -> tuple[Any, Any, Any]:
        with self._lock:
            if self._nets is None:
                import dlib

                started = time.monotonic()
                if self.detector == "cnn":
                    det = dlib.cnn_face_detection_model_v1(str(self.model_dir / MMOD))
                else:
                    det = dlib.get_frontal_face_detector()
                shape = dlib.shape_predictor(str(self.model_dir / SHAPE_5))
                rec = dlib.face_recognition_model_v1(str(self.model_dir / RESNET))
                self._nets = (det, shape, rec)
                if self.has_mouth:
                    self._mouth_net = dlib.shape_predictor(str(self.model_dir / SHAPE_68))
                log.info("loaded dlib %s detector + ResNet in %.2fs", self.detector,
                         time.monotonic() - started)
            return self._nets

    def _detect_rects(self, det: Any, image: np.ndarray) -> list[tuple[Box, float]]:
        """Boxes (in ``image`` pixels) and scores from the detector run on a rescaled grey copy."""
        from PIL import Image

        h, w = image.shape[:2]
        scale = self.detect_side / max(h, w) if self.detect_side else 1.0
        pil = Image.fromarray(image)
        if self.detector == "hog":
            pil = pil.convert("L")  # HOG on grey: same faces, ~25% faster than on RGB
        if abs(scale - 1.0) > 1e-6:
            size = (max(1, round(w * scale)), max(1, round(h * scale)))
            pil = pil.resize(size, Image.Resampling.BILINEAR)
        small = np.asarray(pil)
        found: list[tuple[Box, float]] = []
        if self.detector == "cnn":
            for m in det(small, self.upsample):
                r = m.rect
                found.append(((r.left(), r.top(), r.right() + 1, r.bottom() + 1), float(m.confidence)))
        else:
            rects, scores, _ = det.run(small, self.upsample, 0.0)
            for r, s in zip(rects, scores, strict=True):
                found.append(((r.left(), r.top(), r.right() + 1, r.bottom() + 1), float(s)))
        out = []
        for (x0, y0, x1, y1), s in found:
            box = (max(0.0, x0 / scale), max(0.0, y0 / scale),
                   min(float(w), x1 / scale), min(float(h), y1 / scale))
            if box[2] - box[0] >= 2 and box[3] - box[1] >= 2:
                out.append((box, s))
        return out

    def detect(self, image: np.ndarray) -> list[Detection]:
        return self.detect_frames([image])[0]

    def detect_frames(self, images: list[np.ndarray]) -> list[list[Detection]]:
        """Detections per frame of a sequence (frames in time order).

        The ResNet costs ~70 ms per face on one CPU core, several times the detector, so a face whose
        aligned 150x150 chip is pixel-for-pixel almost the same as the chip of an overlapping face in
        the previous searched frame (a still shot, a static speaker) reuses that face's descriptor
        instead of recomputing it; the comparison is always against the chip that was actually
        embedded, so reuse cannot drift. Between whole-frame searches faces are tracked (module doc).
        """
        import dlib

        det, shape_net, rec = self._load()
        previous: list[tuple[Box, np.ndarray, np.ndarray]] = []
        tracks: list[tuple[Box, float, np.ndarray, np.ndarray]] = []  # box, score, embedding, its chip
        results: list[list[Detection]] = []
        last_thumb: np.ndarray | None = None
        since_search = self.detect_every
        for raw in images:
            image = _as_rgb(raw)
            thumb = _thumb(image)
            cut = last_thumb is not None and float(np.abs(thumb - last_thumb).mean()) > CUT_CHANGE
            last_thumb = thumb
            search = since_search + 1 >= self.detect_every or cut
            since_search = 0 if search else since_search + 1
            found = [] if search else self._follow(det, image, tracks)
            if not search and len(found) < len(tracks):  # a face was lost: look at the whole frame
                search, since_search = True, 0
            if search:
                found = [(box, score, None) for box, score in self._detect_rects(det, image)]
            found = [(_steady(box, tracks), score, carried) for box, score, carried in found]
            current, dets, tracks = [], [], []
            for box, score, carried in found:
                x0, y0, x1, y1 = box
                rect = dlib.rectangle(int(round(x0)), int(round(y0)), int(round(x1)) - 1, int(round(y1)) - 1)
                shape = shape_net(image, rect)
                chip = np.asarray(dlib.get_face_chip(image, shape, CHIP_SIZE, CHIP_PADDING))
                if carried is not None and _chip_diff(carried[1], chip) <= TRACK_REEMBED:
                    emb, chip = carried
                    self.tracked += 1
                else:
                    ref = _reusable(previous, box, chip) if carried is None else None
                    if ref is None:
                        if self.jitters:
                            vec = rec.compute_face_descriptor(image, shape, self.jitters, CHIP_PADDING)
                        else:
                            vec = rec.compute_face_descriptor(chip, 0)
                        emb = np.asarray(vec, dtype=np.float32)
                        self.embedded += 1
                        current.append((box, chip, emb))
                    else:
                        emb, chip = ref[2], ref[1]
                        self.reused += 1
                        current.append((box, chip, emb))
                tracks.append((box, score, emb, chip))
                pts = np.array([(p.x, p.y) for p in shape.parts()], dtype=np.float32)
                eyes = sorted([pts[0:2].mean(axis=0), pts[2:4].mean(axis=0)], key=lambda p: float(p[0]))
                landmarks = np.stack([eyes[0], eyes[1], pts[4]]).astype(np.float32)
                dets.append(Detection(box=tuple(float(v) for v in box), score=score, embedding=emb.copy(),
                                      landmarks=landmarks, mouth=self._mouth(image, rect)))
            if search:
                previous = current
            results.append(sort_detections(dets))
        return results

    def _follow(self, det: Any, image: np.ndarray, tracks: list[tuple[Box, float, np.ndarray, np.ndarray]]
                ) -> list[tuple[Box, float, tuple[np.ndarray, np.ndarray]]]:
        """Each tracked face looked for again in a small crop around its last box (lost if not found)."""
        from PIL import Image

        h, w = image.shape[:2]
        out: list[tuple[Box, float, tuple[np.ndarray, np.ndarray]]] = []
        for box, _, emb, chip in tracks:
            side = max(box[2] - box[0], box[3] - box[1], 1.0)
            m = side * TRACK_MARGIN
            a, b = max(0, int(box[0] - m)), max(0, int(box[1] - m))
            c, d = min(w, int(math.ceil(box[2] + m))), min(h, int(math.ceil(box[3] + m)))
            if c - a < 8 or d - b < 8:
                continue
            scale = TRACK_FACE_SIDE / side
            crop = Image.fromarray(image[b:d, a:c])
            if self.detector == "hog":
                crop = crop.convert("L")
            size = (max(1, round((c - a) * scale)), max(1, round((d - b) * scale)))
            small = np.asarray(crop.resize(size, Image.Resampling.BILINEAR))
            if self.detector == "cnn":
                hits = [((m_.rect.left(), m_.rect.top(), m_.rect.right() + 1, m_.rect.bottom() + 1),
                         float(m_.confidence)) for m_ in det(small, 0)]
            else:
                rects, scores, _ = det.run(small, 0, 0.0)
                hits = [((r.left(), r.top(), r.right() + 1, r.bottom() + 1), float(s))
                        for r, s in zip(rects, scores, strict=True)]
            best: tuple[float, Box, float] | None = None
            for (x0, y0, x1, y1), score in hits:
                found = (max(0.0, a + x0 / scale), max(0.0, b + y0 / scale),
                         min(float(w), a + x1 / scale), min(float(h), b + y1 / scale))
                overlap = _iou(found, box)
                if overlap >= TRACK_MIN_IOU and (best is None or overlap > best[0]):
                    best = (overlap, found, score)
            if best is not None and all(_iou(best[1], o[0]) < 0.5 for o in out):
                out.append((best[1], best[2], (emb, chip)))
        return out

    def _mouth(self, image: np.ndarray, rect: Any) -> float | None:
        """Inner-lip opening over eye distance from the 68-point shape, or None without that model."""
        if self._mouth_net is None:
            return None
        parts = self._mouth_net(image, rect).parts()
        pts = np.array([(p.x, p.y) for p in parts], dtype=np.float64)
        value = mouth_aperture(pts[list(INNER_UPPER)], pts[list(INNER_LOWER)], pts[EYE_OUTER[0]],
                               pts[EYE_OUTER[1]])
        return value if np.isfinite(value) else None


def _iou(a: Box, b: Box) -> float:
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def _steady(box: Box, tracks: list) -> Box:
    """The previous frame's box of the same face when the new one barely differs from it.

    Landmarks (and so the mouth reading) are fitted inside the box: a box that jitters by a few
    pixels between frames (whole-frame search and crop search see the face at different scales)
    would make a still mouth look like it moves. Real movement beyond the jitter moves the box.
    """
    best = max(tracks, key=lambda t: _iou(t[0], box), default=None)
    return best[0] if best is not None and _iou(best[0], box) >= STABLE_IOU else box


def _chip_diff(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a.astype(np.int16) - b.astype(np.int16)).mean())


def _reusable(previous: list, box: Box, chip: np.ndarray):
    """The previous frame's face at the same place with a near-identical chip, if there is one."""
    for prev in previous:
        if _iou(prev[0], box) >= REUSE_IOU and _chip_diff(prev[1], chip) <= REUSE_MAX_DIFF:
            return prev
    return None


def _thumb(image: np.ndarray) -> np.ndarray:
    """A 32x18 grey thumbnail in 0..1 (cut detection between sampled frames)."""
    from PIL import Image

    grey = Image.fromarray(image).convert("L").resize((32, 18), Image.Resampling.BILINEAR)
    return np.asarray(grey, dtype=np.float32) / 255.0


def _as_rgb(image: np.ndarray) -> np.ndarray:
    """dlib wants contiguous uint8 RGB; accept grayscale and RGBA too."""
    arr = np.asarray(image)
    if arr.ndim == 2:
        arr = np.repeat(arr[:, :, None], 3, axis=2)
    elif arr.ndim == 3 and arr.shape[2] == 4:
        arr = arr[:, :, :3]
    if arr.ndim != 3 or arr.shape[2] != 3:
        raise M3Error(f"expected an RGB image, got an array of shape {arr.shape}")
    return np.ascontiguousarray(arr, dtype=np.uint8)
