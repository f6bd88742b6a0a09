"""`m3 sight`: what is seen, offline: keyframes, on-screen text and object/scene tags per clip.

Why: without an LLM the memory knew who is visible and who says what, and nothing of a sign, a slide,
a caption or a cup on the table. This stage adds a ``sight`` section that the offline memorizer turns
into "on screen" and "seen" lines with their times, and whose keyframes an LLM memorizer can be sent.

Per clip:

1. **Keyframes.** Frames are sampled at ``fps`` and compared as small grey thumbnails. A new segment
   starts at a cut or sudden change (``change`` between neighbouring samples), after a slow drift
   (``drift`` from the segment's first sample: a pan, a fade that no two neighbours show), or after
   ``every`` seconds. Each segment's middle sample is its keyframe (past the mid-way frames of a
   transition) and stands for the whole segment; keyframes are stored in the cache as JPEG and
   their paths go into the record. One decoding pass: samples are seen only as thumbnails scaled
   from the decoder's planes, and only keyframes are converted to RGB.
   A keyframe showing the same picture as the one before (:func:`same_picture`: a static shot, a
   still image with sound) is not read or tagged again: it reuses that reading and says so
   (``same_as``); on talking-head footage that is the interval keyframes of a still shot.
2. **Text.** Text detection runs on every keyframe, recognition only on the boxes detection found.
   A line is kept when its recognition confidence clears ``min_text_score`` and it has at least
   ``min_chars`` visible characters, two of them letters or digits (single glyphs and "Au"-like
   fragments are what the reader hallucinates on textured backgrounds; "70%" and "£5" are read). The
   same text in consecutive keyframes becomes one line with the time span of all of them.
3. **Tags.** An ImageNet classifier scores each keyframe; the dog breeds and the domestic cats are
   pooled into "dog" and "cat" (ImageNet splits their mass over 118 and 5 classes). A tag is kept when
   its probability clears ``tag_threshold``, a value chosen on one half of a labelled set of real
   photos and frames (highest lower confidence bound on precision) and checked on the other half
   (``m3 eval sight``). Consecutive
   keyframes with the same tag are merged like text.

The per-clip result is cached (keyed by the video, clip bounds, this config and the backends'
versions), so reruns decode nothing.
"""

from __future__ import annotations

import difflib
import logging
import re
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from m3cli.schemas.records import ClipRecord, Problem, SightSection
from m3cli.stages.configs.sight import SightConfig
from m3cli.stages.core import media, media_frames, media_probe
from m3cli.stages.core.cache import Cache, CacheKey, memo
from m3cli.stages.core.common import RunContext, by_video

log = logging.getLogger(__name__)

STAGE = "sight"
STAGE_VERSION = "sight/3"
THUMB = (64, 36)
#: largest mean change (0..1) of any sixteenth of a keyframe's thumbnail for "the same picture" as the
#: keyframe before: a static shot's noise and a speaker's lips stay below it, a caption does not
SAME = 0.02
DOG_RANGE = (151, 268)  # ImageNet-1k indices of the dog breeds
CAT_RANGE = (281, 285)  # tabby, tiger cat, Persian, Siamese, Egyptian cat


class SightModels:
    """The text reader and the tagger, loaded once (the tagger only when tags are wanted)."""

    def __init__(self, config: SightConfig) -> None:
        from m3cli.stages.backends.ocr.rapid import RapidOcr

        self.ocr = RapidOcr(det_side=config.det_side, gate_side=config.gate_side) if config.text else None
        self.tagger = None
        if config.tags:
            from m3cli.stages.backends.tagger.effnet import ImageNetTagger

            self.tagger = ImageNetTagger()

    @property
    def version(self) -> str:
        parts = [STAGE_VERSION]
        if self.ocr is not None:
            parts.append(self.ocr.version)
        if self.tagger is not None:
            parts.append(self.tagger.version)
        return "+".join(parts)


# ------------------------------------------------------------------------------------- keyframes
def difference(a: np.ndarray, b: np.ndarray) -> float:
    """How different two thumbnails are, 0..1: the larger of mean pixel change (x4) and grey-histogram
    distance, so both a new picture and new bright text on the same background count."""
    pixel = float(np.abs(a - b).mean()) * 4.0
    ha = np.histogram(a, bins=32, range=(0.0, 1.0))[0] / a.size
    hb = np.histogram(b, bins=32, range=(0.0, 1.0))[0] / b.size
    return float(min(1.0, max(pixel, float(np.abs(ha - hb).sum()) / 2)))


def same_picture(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two keyframes' thumbnails show the same picture: no sixteenth of the frame (a 4 x 4
    grid) changed by more than ``SAME`` on average. A per-block bound, not the whole-frame mean, so a
    new caption or sign in one part of an unchanged shot is a new picture."""
    h, w = (a.shape[0] // 4) * 4, (a.shape[1] // 4) * 4
    blocks = np.abs(a[:h, :w] - b[:h, :w]).reshape(4, h // 4, 4, w // 4).mean(axis=(1, 3))
    return float(blocks.max()) < SAME


@dataclass
class Picked:
    """One segment's keyframe: its segment's first sample time, its own time, why the segment
    started, the frame (RGB, ``frame_side``) and its thumbnail."""

    start: float
    t: float
    why: str
    image: np.ndarray
    thumb: np.ndarray


def sample_keyframes(path: Any, start: float, end: float, config: SightConfig) -> tuple[list[Picked], int]:
    """The keyframes of [start, end) in one decoding pass, and how many samples were compared.

    Samples are taken at ``fps`` and seen only as small grey thumbnails scaled from the decoder's own
    planes. A segment starts at the first sample, where a sample differs from the previous one by more
    than ``change`` (a cut, a title appearing), where it has drifted from the segment's first sample by
    more than ``drift`` (a pan, a slow fade), or after ``every`` seconds. Its keyframe is its middle
    sample, past a transition's mid-way frames (a bird flying over a title, a fade half done), and is
    the only sample converted to RGB; the segment's samples are held as decoded frames until then."""
    picked: list[Picked] = []
    segment: list[tuple[float, Any, np.ndarray]] = []
    why = ""
    first: np.ndarray | None = None
    previous: np.ndarray | None = None
    first_t = -np.inf
    count = 0

    def close() -> None:
        t, frame, thumb = segment[(len(segment) - 1) // 2]
        picked.append(Picked(segment[0][0], t, why, media_frames.to_rgb(frame, config.frame_side), thumb))

    # one decoding thread: every frame is decoded to sample a few, and that is counted in CPU seconds
    for t, frame in media_frames.iter_sampled(path, start, end, config.fps, threaded=False):
        count += 1
        thumb = media_frames.to_grey(frame, *THUMB)
        if first is None or previous is None:
            new = "first"
        elif difference(thumb, previous) > config.change:
            new = "change"
        elif difference(thumb, first) > config.drift:
            new = "drift"
        elif t - first_t >= config.every - 1e-6:
            new = "interval"
        else:
            previous = thumb
            segment.append((t, frame, thumb))
            continue
        if segment:
            close()
        segment, why = [(t, frame, thumb)], new
        first, first_t, previous = thumb, t, thumb
    if segment:
        close()
    return picked, count


# ------------------------------------------------------------------------------------------ text
def norm_text(text: str) -> str:
    """Lower-cased letters and digits, single spaces: what makes two readings the same text."""
    return " ".join(re.findall(r"\w+", text.lower()))


def same_text(a: str, b: str) -> bool:
    """Two readings of one line (OCR varies by a letter between frames)."""
    na, nb = norm_text(a), norm_text(b)
    if not na or not nb:
        return False
    return na == nb or difflib.SequenceMatcher(None, na.replace(" ", ""), nb.replace(" ", "")).ratio() >= 0.8


def keep_line(text: str, score: float, config: SightConfig) -> bool:
    visible = sum(not ch.isspace() for ch in text)
    alnum = sum(ch.isalnum() for ch in text)
    return score >= config.min_text_score and visible >= config.min_chars and alnum >= 2


# ------------------------------------------------------------------------------------------ tags
def pooled_tags(probs: np.ndarray) -> list[tuple[str, float]]:
    """(tag, probability) for every class, dog breeds and cats pooled, highest first."""
    from m3cli.stages.backends.tagger.effnet import class_names

    names = class_names()
    p = np.asarray(probs, dtype=np.float64)
    out: dict[str, float] = {}
    for i, name in enumerate(names):
        if DOG_RANGE[0] <= i <= DOG_RANGE[1]:
            name = "dog"
        elif CAT_RANGE[0] <= i <= CAT_RANGE[1]:
            name = "cat"
        out[name] = out.get(name, 0.0) + float(p[i])
    return sorted(out.items(), key=lambda kv: (-kv[1], kv[0]))


def kept_tags(probs: np.ndarray, threshold: float, max_tags: int) -> list[tuple[str, float]]:
    return [(tag, p) for tag, p in pooled_tags(probs)[:max_tags] if p >= threshold]


# ------------------------------------------------------------------------------------ per clip
def _merge(events: list[tuple[int, str, float, dict]], same: Any) -> list[dict]:
    """Events (keyframe number, label, score, extra) -> runs over consecutive keyframes with the same
    label: {label, first, last, score (max), extra of the best}."""
    runs: list[dict] = []
    open_runs: list[dict] = []
    for k, label, score, extra in sorted(events, key=lambda e: (e[0], -e[2])):
        match = next((r for r in open_runs if r["last"] in (k - 1, k) and same(r["label"], label)), None)
        if match is not None and match["last"] == k:
            match["score"] = max(match["score"], score)  # the same text twice in one frame: one line
            continue
        if match is not None:
            match["last"] = k
            if score > match["score"]:
                match.update(label=label, score=score, extra=extra)
            continue
        run = {"label": label, "first": k, "last": k, "score": score, "extra": extra}
        runs.append(run)
        open_runs.append(run)
        open_runs = [r for r in open_runs if r["last"] >= k - 1]
    return runs


def sight_key(record: ClipRecord, config: SightConfig, version: str) -> CacheKey:
    payload = {"start": record.clip.start, "end": record.clip.end, **asdict(config)}
    return CacheKey.of(record.video.id, record.clip.index, STAGE, payload, version)


def analyse_clip(record: ClipRecord, models: SightModels, config: SightConfig, cache: Cache | None) -> dict:
    """The sight section of one clip as plain data (from the cache, or computed and cached)."""
    key = sight_key(record, config, models.version)
    return memo(cache, key, "sight.json", lambda: _section(record, models, config, cache, key))


def _section(
    record: ClipRecord, models: SightModels, config: SightConfig, cache: Cache | None, key: CacheKey
) -> dict:
    """The sight section of one clip, computed (its keyframes written to the cache under ``key``)."""
    started = time.perf_counter()
    path = media.source_path(record.video, cache)
    picked, n_samples = sample_keyframes(path, record.clip.start, record.clip.end, config)
    t_decode = time.perf_counter() - started
    # each keyframe stands for its segment: from its first sample (the clip's start for the first)
    times = [float(record.clip.start) if k == 0 else p.start for k, p in enumerate(picked)]
    ends = times[1:] + [float(record.clip.end)]
    scale = 1.0
    if picked and record.video.width:
        scale = max(record.video.width, record.video.height or 0) / max(picked[0].image.shape[:2])
    # a keyframe showing the same picture as the one before reuses its reading (``same_as``)
    same_as: list[int | None] = [None] * len(picked)
    for k in range(1, len(picked)):
        if same_picture(picked[k].thumb, picked[k - 1].thumb):
            same_as[k] = same_as[k - 1] if same_as[k - 1] is not None else k - 1
    keyframes: list[dict[str, Any]] = []
    texts: list[tuple[int, str, float, dict]] = []
    tag_events: list[tuple[int, str, float, dict]] = []
    t_ocr = t_tags = 0.0
    fresh = [k for k in range(len(picked)) if same_as[k] is None]
    probs: dict[int, np.ndarray] = {}
    if config.tags and models.tagger is not None and fresh:
        t0 = time.perf_counter()
        probs = dict(zip(fresh, models.tagger.probabilities([picked[k].image for k in fresh]), strict=True))
        t_tags = time.perf_counter() - t0
    readings: dict[int, list[Any]] = {}

    def keep(text: str, score: float) -> bool:
        return keep_line(text, score, config)

    for k, p in enumerate(picked):
        frame_path = None
        if cache is not None:
            frame_path = str(
                cache.put_bytes(key, f"keyframe_{k:03d}.jpg", media_frames.encode_jpeg(p.image, quality=85))
            )
        source = same_as[k]
        if source is None:
            source = k
        lines = []
        if config.text and models.ocr is not None:
            if source not in readings:
                t0 = time.perf_counter()
                readings[source] = [b for b in models.ocr.read(p.image, keep=keep) if keep(b.text, b.score)]
                t_ocr += time.perf_counter() - t0
            lines = readings[source]
            for box in lines:
                texts.append((k, box.text, box.score, {"box": [round(v * scale, 1) for v in box.box]}))
        tags = kept_tags(probs[source], config.tag_threshold, config.max_tags) if source in probs else []
        for tag, prob in tags:
            tag_events.append((k, tag, prob, {}))
        keyframe: dict[str, Any] = {
            "t": round(p.t, 3),
            "start": round(times[k], 3),
            "end": round(ends[k], 3),
            "why": p.why,
            "path": frame_path,
            "text": [b.text for b in lines],
            "tags": [t for t, _ in tags],
        }
        if same_as[k] is not None:
            keyframe["same_as"] = same_as[k]
        keyframes.append(keyframe)
    text_runs = _merge(texts, same_text)
    tag_runs = _merge(tag_events, lambda a, b: a == b)
    section = {
        "backend": models.version,
        "keyframes": keyframes,
        "text": [
            {
                "text": r["label"],
                "start": round(times[r["first"]], 3),
                "end": round(ends[r["last"]], 3),
                "score": round(r["score"], 4),
                "box": r["extra"]["box"],
                "keyframes": r["last"] - r["first"] + 1,
            }
            for r in sorted(text_runs, key=lambda r: (r["first"], r["extra"]["box"][1], r["extra"]["box"][0]))
        ],
        "tags": [
            {
                "tag": r["label"],
                "start": round(times[r["first"]], 3),
                "end": round(ends[r["last"]], 3),
                "score": round(r["score"], 4),
                "keyframes": r["last"] - r["first"] + 1,
            }
            for r in sorted(tag_runs, key=lambda r: (r["first"], -r["score"]))
        ],
        "tag_threshold": config.tag_threshold,
        "frames": n_samples,
    }
    # timings go to the log, not the record: outputs stay byte-identical between runs
    log.debug(
        "sight clip %d: %d keyframes; decode %.2f s, text %.2f s, tags %.2f s, total %.2f s",
        record.clip.index,
        len(keyframes),
        t_decode,
        t_ocr,
        t_tags,
        time.perf_counter() - started,
    )
    return section


def sight_video(
    clips: list[ClipRecord], models: SightModels, config: SightConfig, ctx: RunContext
) -> list[ClipRecord]:
    out = []
    for record in ctx.progress(clips, desc="sight", total=len(clips)):
        new = record.model_copy(deep=True)
        if media_probe.pictureless(record):  # an audio-only recording: no keyframes to read, said as such
            new.sight = SightSection(
                backend=models.version, keyframes=[], text=[], tags=[], frames=0, pictures=False
            )
            out.append(new)
            continue
        section = analyse_clip(record, models, config, ctx.cache)
        new.sight = SightSection.model_validate(section)
        if not section["keyframes"] and (record.clip.frames or 0) > 0:
            message = (
                f"no frame of clip {record.clip.index} could be decoded; nothing is known of what is seen"
            )
            log.warning(message)
            new.errors = [
                *(new.errors or []),
                Problem(stage=STAGE, error="undecodable_frames", message=message),
            ]
        out.append(new)
    return out


def run_sight(
    records: list[ClipRecord], models: SightModels, config: SightConfig, ctx: RunContext
) -> list[ClipRecord]:
    """The stage over a stream: records returned in input order, each with a ``sight`` section."""
    done: dict[tuple[str, int], ClipRecord] = {}
    for clips in by_video(records):
        for record in sight_video(clips, models, config, ctx):
            done[record.key] = record
    return [done[r.key] for r in records]


# ------------------------------------------------------------------------------------- memory
def clock(t: float) -> str:
    """Seconds as m:ss (h:mm:ss past an hour)."""
    s = int(max(0.0, t))
    h, m, sec = s // 3600, (s % 3600) // 60, s % 60
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


def memory_lines(record: ClipRecord) -> list[dict[str, Any]]:
    """The offline memorizer's "on screen" and "seen" episodic lines of a clip, deduplicated.

    One "on screen" line per text run ("0:20–0:23 on screen: 'THE PEACH OPEN MOVIE PROJECT'"), with
    the lines shown at the same time joined; one "seen" line per keyframe span whose tags differ from
    the previous one ("0:05 seen: laptop, desk")."""
    sight = record.sight
    if sight is None:
        return []
    out: list[dict[str, Any]] = []
    seen_text: set[str] = set()
    groups: dict[tuple[float, float], list[str]] = {}
    for line in sight.text:
        n = norm_text(line.text)
        if not n or n in seen_text:
            continue
        seen_text.add(n)
        groups.setdefault((line.start, line.end), []).append(line.text)
    for (start, end), lines in sorted(groups.items()):
        quoted = " / ".join(lines).replace("'", "’")
        span = clock(start) if clock(start) == clock(end) else f"{clock(start)}–{clock(end)}"
        out.append({"text": f"{span} on screen: '{quoted}'", "kind": "on_screen", "start": start, "end": end})
    said: set[tuple[str, ...]] = set()
    by_start: dict[float, list[Any]] = {}
    for tag in sight.tags:
        by_start.setdefault(tag.start, []).append(tag)
    for start, tags in sorted(by_start.items()):
        names = tuple(sorted({t.tag for t in tags}))
        if names in said:
            continue
        said.add(names)
        end = max(t.end for t in tags)
        out.append(
            {"text": f"{clock(start)} seen: {', '.join(names)}", "kind": "seen", "start": start, "end": end}
        )
    return out


def prompt_block(record: ClipRecord) -> str | None:
    """The clip's "on screen" and "seen" lines for an LLM memorizer, as one delimited data block (the
    text on screen is whatever a video shows: it can neither add lines nor close the block), or None
    when sight did not run."""
    if record.sight is None:
        return None
    from m3cli.stages.core import prompt_data

    tag = prompt_data.nonce(record.video.id, str(record.clip.index), "sight")
    rows = [
        f"[{m['start']:.1f}-{m['end']:.1f} s] {prompt_data.speech(m['text'])}" for m in memory_lines(record)
    ]
    return (
        "Seen in the keyframes (read and tagged offline; on-screen text and ImageNet tags, absolute times):\n"
        + prompt_data.frame("sight", tag, "", rows)
    )


def keyframe_times(record: ClipRecord) -> list[tuple[float, str]]:
    """(time, cached JPEG path) of each stored keyframe, for callers that send frames to a model."""
    if record.sight is None:
        return []
    return [(k.t, k.path) for k in record.sight.keyframes if k.path]


def keyframe_parts(
    record: ClipRecord, limit: int, max_side: int, quality: int, cache: Cache | None
) -> list[dict[str, Any]]:
    """The clip's keyframes as chat message parts for an LLM memorizer (at most ``limit``, spread over
    the clip, each scaled to ``max_side``), or [] when the record has none: a cut, a title or a new
    scene is then what the model sees, rather than frames at uniform times that may all show one shot.
    Each path is checked to be a JPEG inside the cache before it is read."""
    from PIL import Image

    from m3cli.stages.backends.llm.media import image_part
    from m3cli.stages.core.record_paths import JPEG, cache_file

    if record.sight is None or cache is None or limit <= 0:
        return []
    frames = [(i, k) for i, k in enumerate(record.sight.keyframes) if k.path]
    if not frames:
        return []
    picks = np.unique(np.linspace(0, len(frames) - 1, min(limit, len(frames))).round().astype(int))
    parts: list[dict[str, Any]] = [{"type": "text", "text": "Keyframes, in time order:"}]
    for p in picks:
        i, frame = frames[int(p)]
        path = cache_file(record, f"sight.keyframes[{i}].path", frame.path, cache, JPEG)
        if path is None:
            continue
        image = media_frames.decode_jpeg(path.read_bytes())
        scale = max_side / max(image.shape[:2])
        if scale < 1:
            size = (max(1, round(image.shape[1] * scale)), max(1, round(image.shape[0] * scale)))
            image = np.asarray(Image.fromarray(image).resize(size, Image.Resampling.BILINEAR))
        parts.append({"type": "text", "text": f"t={frame.t:.1f} s"})
        parts.append(image_part(media_frames.encode_jpeg(image, quality=quality)))
    return parts if len(parts) > 1 else []


def summary(records: Iterable[ClipRecord]) -> str:
    n = text = tags = 0
    for r in records:
        if r.sight is not None:
            n += len(r.sight.keyframes)
            text += len(r.sight.text)
            tags += len(r.sight.tags)
    return f"{n} keyframes, {text} text lines, {tags} tags"
