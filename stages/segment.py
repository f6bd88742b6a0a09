"""`m3 segment`: cut videos into fixed-length clips, one ``m3.clip/1`` record per clip.

Segmentation only demuxes packet timestamps (no decoding), so it runs far faster than real time and
its result is cached per video content: a rerun only hashes nothing, stats the file and reads JSON.
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from m3cli.schemas import CLIP_SCHEMA
from m3cli.schemas.records import ClipInfo, ClipRecord, VideoInfo
from m3cli.stages.core import media
from m3cli.stages.core.cache import Cache, CacheKey
from m3cli.stages.core.errors import InputError

log = logging.getLogger(__name__)

STAGE = "segment"
#: Changes when how clips are planned changes (2: clip 0 from the earliest sample of any stream;
#: 3: still images renamed as videos are refused, not planned as one-frame clips).
PLAN_VERSION = 3


#: Bounds of ``--clip-seconds``: shorter clips than this are mostly a frame or two (and millions of
#: records for a long video); longer ones than a day are no clips at all.
MIN_CLIP_S, MAX_CLIP_S = 0.5, 86400.0


@dataclass(frozen=True)
class SegmentConfig:
    clip_seconds: float = 30.0
    #: Which audio track is heard (0: the first); a file with several says which it uses.
    audio_track: int = 0

    def __post_init__(self) -> None:
        if not (self.clip_seconds > 0 and math.isfinite(self.clip_seconds)):
            raise InputError(f"--clip-seconds must be a positive number, got {self.clip_seconds}")
        if not 0 <= self.audio_track <= 63:
            raise InputError(f"--audio-track must be within 0..63, got {self.audio_track}")
        if not MIN_CLIP_S <= self.clip_seconds <= MAX_CLIP_S:  # a clip per frame, or one of a year
            raise InputError(
                f"--clip-seconds must be within {MIN_CLIP_S:g}..{MAX_CLIP_S:g}, got {self.clip_seconds:g}"
            )


def plan_clips(probe: media.Probe, clip_seconds: float) -> list[dict]:
    """Group frames into clips of ``clip_seconds`` by presentation time; boundaries fall on frames.

    Clip k holds the frames with time in [k*L, (k+1)*L); its ``start`` is its first frame's time and
    its ``end`` the next clip's start. The first clip starts at the earliest sample of any stream (audio
    often starts before the first frame) and the last ends with the last sample of any stream, so no
    audio or video falls outside every clip.
    """
    times = probe.frame_times
    bins = np.floor(np.maximum(times, 0.0) / clip_seconds + 1e-9).astype(np.int64)
    firsts = np.flatnonzero(np.r_[True, bins[1:] != bins[:-1]])
    lasts = np.r_[firsts[1:], len(times)]
    clips = []
    for index, (lo, hi) in enumerate(zip(firsts, lasts, strict=True)):
        start = probe.start if index == 0 else max(0.0, float(times[lo]))
        end = float(times[hi]) if hi < len(times) else probe.duration
        clips.append(
            {
                "index": index,
                "start": round(start, 6),
                "end": round(end, 6),
                "frames": int(hi - lo),
                "fps": probe.fps,
                "has_audio": probe.has_audio,
                "width": probe.width,
                "height": probe.height,
            }
        )
    return clips


def _video_plan(path: Path, vid: str, config: SegmentConfig, cache: Cache | None) -> dict:
    key = CacheKey.of(vid, None, STAGE, {**asdict(config), "plan": PLAN_VERSION}, media.DECODER_VERSION)
    if cache is not None:
        plan = cache.get_json(key, "plan.json")
        if isinstance(plan, dict):
            return plan
    probe = media.probe(path, config.audio_track)
    plan = {
        "audio_tracks": probe.audio_tracks,
        "duration": round(probe.duration, 6),
        "fps": probe.fps,
        "width": probe.width,
        "height": probe.height,
        "has_audio": probe.has_audio,
        "clips": plan_clips(probe, config.clip_seconds),
    }
    if cache is not None:
        cache.put_json(key, "plan.json", plan)
    return plan


def segment_video(path: Path, config: SegmentConfig, cache: Cache | None = None) -> list[ClipRecord]:
    """All clip records of one video, in order."""
    path = Path(path)
    content, pinned = media.pin(path, cache)  # probe reads the very bytes the id was made from
    plan = _video_plan(pinned, content, config, cache)
    tracks = plan.get("audio_tracks", 0)
    if tracks > 1:
        log.warning(
            "%s: %d audio tracks; using track %d (choose another with --audio-track N, 0..%d)",
            media.display_name(path),
            tracks,
            config.audio_track,
            tracks - 1,
        )
    vid = media.track_video_id(content, config.audio_track)  # each track is its own video to m3
    absolute = Path(os.path.abspath(path))
    video = VideoInfo(
        id=vid,
        path=media.display_name(absolute),
        duration=plan["duration"],
        fps=plan["fps"],
        width=plan["width"],
        height=plan["height"],
        has_audio=plan["has_audio"],
        size_bytes=os.stat(pinned).st_size,
    )
    if tracks > 1 or config.audio_track:
        video.audio_track = config.audio_track  # type: ignore[attr-defined]
    if media.needs_uri(absolute):
        video.uri = media.path_to_uri(absolute)
    return [ClipRecord(schema=CLIP_SCHEMA, video=video, clip=ClipInfo(**clip)) for clip in plan["clips"]]
