"""The per-clip step of `m3 faces`, the one that is expensive and cached: sample a clip's frames, detect
and embed every face, measure each detection's sharpness and mouth opening, keep a small crop of it, and
measure how much each sampled frame differs from the one before (for shot changes).

Separate from the stage because it is the only part that decodes video and runs the face model; what
it stores (:class:`ClipFaces`) is what every later step replays from the cache, so changing a quality
or matching threshold never runs it again.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass, field

import numpy as np

from m3cli.schemas.records import ClipRecord
from m3cli.stages.backends.face import Detection, FaceModel, sharpness
from m3cli.stages.configs.faces import FacesConfig
from m3cli.stages.core import media, media_frames
from m3cli.stages.core.cache import Cache, CacheKey, memo

STAGE = "faces"
DETECT_VERSION = "faces-detect/4"  # bump when what the per-clip step stores changes
CROP_SIDE = 160
CROP_MARGIN = 0.25
CROP_QUALITY = 90
THUMB_SIDE = (48, 27)  # grey thumbnail compared between sampled frames for shot changes
HIST_BINS = 32


# ------------------------------------------------------------------------------------------ per clip
@dataclass
class ClipFaces:
    """What the per-clip step stores: every detection of the clip, before any filtering."""

    times: np.ndarray  # (frames,) sample times (s, absolute)
    frame: np.ndarray  # (n,) int32 index into times
    boxes: np.ndarray  # (n, 4) float32, source-frame pixels
    scores: np.ndarray  # (n,) float32 detector scores
    embeddings: np.ndarray  # (n, dim) float32
    landmarks: np.ndarray  # (n, 3, 2) float32 (NaN when the backend gives none)
    sharpness: np.ndarray  # (n,) float32 Laplacian variance of the grey 64x64 crop
    crop_offsets: np.ndarray  # (n + 1,) int64 into crop_data
    crop_data: np.ndarray  # uint8 JPEG bytes of every crop, concatenated
    mouth: np.ndarray  # (n,) float32 inner-lip opening / eye distance (NaN when the backend gives none)
    change: np.ndarray  # (frames,) float32 0..1 difference from the previous sampled frame (0 for the first)
    key: CacheKey | None = None  # where it lives in the cache (None without a cache)

    def __len__(self) -> int:
        return len(self.frame)

    def arrays(self) -> dict[str, np.ndarray]:
        return {k: v for k, v in self.__dict__.items() if isinstance(v, np.ndarray)}

    def crop(self, i: int) -> bytes:
        return self.crop_data[self.crop_offsets[i] : self.crop_offsets[i + 1]].tobytes()


def detect_key(record: ClipRecord, model: FaceModel, config: FacesConfig) -> CacheKey:
    clip = record.clip
    cfg = {
        "start": clip.start,
        "end": clip.end,
        "fps": config.fps,
        "frame_side": config.frame_side,
        "backend": model.name,
        "model": model.model,
        **model.config(),
        "crop": [CROP_SIDE, CROP_MARGIN],
        "v": DETECT_VERSION,
    }
    return CacheKey.of(record.video.id, clip.index, f"{STAGE}-detect", cfg, model.version)


def _crop(image: np.ndarray, box: tuple[float, float, float, float]) -> np.ndarray:
    h, w = image.shape[:2]
    x0, y0, x1, y1 = box
    mx, my = (x1 - x0) * CROP_MARGIN, (y1 - y0) * CROP_MARGIN
    a, b = max(0, int(x0 - mx)), max(0, int(y0 - my))
    c, d = min(w, int(math.ceil(x1 + mx))), min(h, int(math.ceil(y1 + my)))
    return image[b : max(d, b + 1), a : max(c, a + 1)]


def _small_jpeg(crop: np.ndarray) -> bytes:
    from PIL import Image

    img = Image.fromarray(crop)
    if max(img.size) > CROP_SIDE:
        scale = CROP_SIDE / max(img.size)
        img = img.resize(
            (max(1, round(img.size[0] * scale)), max(1, round(img.size[1] * scale))),
            Image.Resampling.BILINEAR,
        )
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=CROP_QUALITY)
    return buf.getvalue()


def frame_changes(images: list[np.ndarray], greys: list[np.ndarray] | None = None) -> np.ndarray:
    """How much each frame differs from the previous one, 0..1 (0 for the first frame).

    The smaller of two cheap measures on a grey thumbnail: the mean absolute pixel difference (high
    when the picture changes, also when someone moves a lot) and the grey-histogram distance (high
    when the picture's content changes, barely moved by motion within a shot). A cut moves both.

    ``greys``: the frames already converted to grey the same way (PIL's "L", ITU-R 601 luma), as the
    dlib detector converts them for HOG; the full-frame conversion is then not done twice (the
    result is the same to the bit: the same conversion of the same pixels).
    """
    from PIL import Image

    out = np.zeros(len(images), dtype=np.float32)
    previous: tuple[np.ndarray, np.ndarray] | None = None
    reuse = greys is not None and len(greys) == len(images)
    for i, image in enumerate(images):
        if reuse:
            assert greys is not None
            grey = Image.fromarray(greys[i])
        else:
            grey = Image.fromarray(np.asarray(image)).convert("L")
        grey = grey.resize(THUMB_SIDE, Image.Resampling.BILINEAR, reducing_gap=2.0)  # box-reduced first
        thumb = np.asarray(grey, dtype=np.float32) / 255.0
        hist = np.histogram(thumb, bins=HIST_BINS, range=(0.0, 1.0))[0].astype(np.float32) / thumb.size
        if previous is not None:
            pixel = float(np.abs(thumb - previous[0]).mean())
            histo = float(np.abs(hist - previous[1]).sum() / 2)
            out[i] = min(pixel * 4.0, histo)  # x4: a full cut changes the mean pixel by ~0.25
        previous = (thumb, hist)
    return np.clip(out, 0.0, 1.0)


def shot_changes(times: np.ndarray, change: np.ndarray, threshold: float) -> list[float]:
    """Cut times: midway between two sampled frames that differ by more than ``threshold``."""
    return [
        round(float(times[i - 1] + times[i]) / 2, 3)
        for i in range(1, min(len(times), len(change)))
        if change[i] > threshold
    ]


def pack_detections(
    times: np.ndarray,
    images: list[np.ndarray],
    per_frame: list[list[Detection]],
    to_source: float = 1.0,
    greys: list[np.ndarray] | None = None,
) -> ClipFaces:
    """Turn a backend's per-frame detections into the cached arrays (boxes scaled to source pixels)."""
    frame, boxes, scores, embs, marks, sharp, blobs, mouths = [], [], [], [], [], [], [], []
    dim = 0
    for fi, (image, dets) in enumerate(zip(images, per_frame, strict=True)):
        for d in dets:
            crop = _crop(image, d.box)
            frame.append(fi)
            boxes.append(np.asarray(d.box, dtype=np.float64) * to_source)
            scores.append(d.score)
            embs.append(np.asarray(d.embedding, dtype=np.float32))
            dim = len(embs[-1])
            marks.append(
                np.full((3, 2), np.nan, np.float32)
                if d.landmarks is None
                else np.asarray(d.landmarks, np.float32)[:3]
            )
            sharp.append(sharpness(crop))
            blobs.append(_small_jpeg(crop))
            mouths.append(np.nan if d.mouth is None else float(d.mouth))
    return ClipFaces(
        times=np.asarray(times, dtype=np.float64),
        frame=np.asarray(frame, dtype=np.int32),
        boxes=np.asarray(boxes, dtype=np.float32).reshape(-1, 4),
        scores=np.asarray(scores, dtype=np.float32),
        embeddings=np.asarray(embs, dtype=np.float32).reshape(len(embs), dim),
        landmarks=np.asarray(marks, dtype=np.float32).reshape(-1, 3, 2),
        sharpness=np.asarray(sharp, dtype=np.float32),
        crop_offsets=np.cumsum([0] + [len(b) for b in blobs]).astype(np.int64),
        crop_data=np.frombuffer(b"".join(blobs), dtype=np.uint8).copy(),
        mouth=np.asarray(mouths, dtype=np.float32),
        change=frame_changes(images, greys),
    )


def source_scale(record: ClipRecord, frame_shape: tuple[int, ...]) -> float:
    """Factor from sampled-frame pixels to source-frame pixels (frames may be sampled downscaled)."""
    width = record.clip.width or record.video.width
    if not width or len(frame_shape) < 2 or not frame_shape[1]:
        return 1.0
    return float(width) / float(frame_shape[1])


@dataclass
class Counters:
    """Where the per-clip work came from (tests and timing reports read these)."""

    cache_hits: int = 0
    computed: int = 0
    frames: int = 0
    greys_reused: int = 0  # frames whose grey conversion the shot-change measure took from the detector
    seconds: dict[str, float] = field(default_factory=lambda: {"decode": 0.0, "detect": 0.0, "pack": 0.0})


def detect_clip(
    record: ClipRecord,
    model: FaceModel,
    config: FacesConfig,
    cache: Cache | None,
    counters: Counters | None = None,
) -> ClipFaces:
    """Every face detection of one clip, from the cache or computed (and then cached)."""
    import time

    counters = counters if counters is not None else Counters()
    key = detect_key(record, model, config)

    def detect() -> ClipFaces:
        path = media.source_path(record.video, cache)
        started = time.perf_counter()
        # the detections are cached, not the frames: a rerun never decodes again
        frames = media_frames.decode_frames(
            path, record.clip.start, record.clip.end, config.fps, config.frame_side
        )
        t1 = time.perf_counter()
        per_frame = model.detect_frames(frames.images) if len(frames) else []
        t2 = time.perf_counter()
        scale = source_scale(record, frames.images[0].shape) if len(frames) else 1.0
        # the grey frames the detector made for HOG (dlib backend), so shot changes need not convert again
        greys = getattr(model, "take_greys", lambda: None)()
        if greys is not None and len(greys) == len(frames):
            counters.greys_reused += len(greys)
        faces = pack_detections(frames.times, frames.images, per_frame, scale, greys)
        t3 = time.perf_counter()
        counters.computed += 1
        counters.frames += len(frames)
        for name, dt in (("decode", t1 - started), ("detect", t2 - t1), ("pack", t3 - t2)):
            counters.seconds[name] += dt
        return faces

    def stored(arrays: dict[str, np.ndarray]) -> ClipFaces:
        counters.cache_hits += 1
        return ClipFaces(**arrays, key=key)

    faces = memo(
        cache,
        key,
        "detections.npz",
        detect,
        usable=lambda arrays: set(arrays) >= set(ClipFaces.__dataclass_fields__) - {"key"},
        load=stored,
        dump=ClipFaces.arrays,
    )
    if cache is not None:
        faces.key = key
    return faces
