"""`m3 segment`: cut videos into fixed-length clips, one ``m3.clip/1`` record per clip.

Segmentation only demuxes packet timestamps (no decoding), so it runs far faster than real time and
its result is cached per video content: a rerun only hashes nothing, stats the file and reads JSON.
"""

from __future__ import annotations

import logging
import os
from dataclasses import asdict
from pathlib import Path

import numpy as np

from m3cli.schemas import CLIP_SCHEMA
from m3cli.schemas.records import ClipInfo, ClipRecord, VideoInfo
from m3cli.stages.configs.segment import SegmentConfig
from m3cli.stages.core import media, media_probe, media_streams, recorded
from m3cli.stages.core.cache import Cache, CacheKey, memo

log = logging.getLogger(__name__)

STAGE = "segment"
#: Changes when how clips are planned changes (2: clip 0 from the earliest sample of any stream;
#: 3: still images renamed as videos are refused, not planned as one-frame clips; 4: the container's
#: recording-time tags are kept with the plan; 5: recordings without pictures planned by time).
PLAN_VERSION = 5


def plan_clips(probe: media_probe.Probe, clip_seconds: float) -> list[dict]:
    """Group frames into clips of ``clip_seconds`` by presentation time; boundaries fall on frames.

    Clip k holds the frames with time in [k*L, (k+1)*L); its ``start`` is its first frame's time and
    its ``end`` the next clip's start. The first clip starts at the earliest sample of any stream (audio
    often starts before the first frame) and the last ends with the last sample of any stream, so no
    audio or video falls outside every clip.
    """
    if not probe.has_video:
        return plan_audio_clips(probe, clip_seconds)
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


#: The shortest end of a recording without pictures that is a clip of its own (s).
TAIL_S = 0.05


def plan_audio_clips(probe: media_probe.Probe, clip_seconds: float) -> list[dict]:
    """Clips of a recording without pictures: clip k holds [k*L, (k+1)*L) of its sound, the first
    from its earliest sample and the last to its end, as a video's clips would be cut; no frames.

    Why by time: a video's clips fall on frame boundaries, and sound has none that matter (the
    audio reader cuts at any sample); the same clip length gives an audio file and the same sound
    in a video the same clips, so their memories line up."""
    if probe.duration <= probe.start:
        return []
    first = int(np.floor(probe.start / clip_seconds + 1e-9))
    # a remainder under TAIL_S (a last packet's rounding: 30.000063 s of a 30-s file) joins the clip before
    last = max(first, int(np.ceil((probe.duration - TAIL_S) / clip_seconds - 1e-9)) - 1)
    clips = []
    for index, k in enumerate(range(first, last + 1)):
        start = probe.start if index == 0 else k * clip_seconds
        end = probe.duration if k == last else (k + 1) * clip_seconds
        clips.append(
            {
                "index": index,
                "start": round(start, 6),
                "end": round(end, 6),
                "frames": 0,
                "fps": None,
                "has_audio": True,
                "has_video": False,
                "width": None,
                "height": None,
            }
        )
    return clips


#: Options that say when a video was recorded, not how it is cut: they stay out of the plan's cache key.
TIME_OPTIONS = ("recorded_at", "recorded_from_file_time")


def _video_plan(path: Path, vid: str, config: SegmentConfig, cache: Cache | None) -> dict:
    how = {k: v for k, v in asdict(config).items() if k not in TIME_OPTIONS}
    key = CacheKey.of(vid, None, STAGE, {**how, "plan": PLAN_VERSION}, media_streams.DECODER_VERSION)

    def plan() -> dict:
        probe = media_probe.probe(path, config.audio_track)
        return {
            "audio_tracks": probe.audio_tracks,
            "duration": round(probe.duration, 6),
            "fps": probe.fps,
            "width": probe.width,
            "height": probe.height,
            "has_audio": probe.has_audio,
            **({} if probe.has_video else {"has_video": False}),
            "clips": plan_clips(probe, config.clip_seconds),
            "recorded_tags": media_probe.recorded_tags(path),
        }

    return memo(cache, key, "plan.json", plan, usable=lambda hit: isinstance(hit, dict))


def recorded_start(path: Path, plan: dict, config: SegmentConfig) -> tuple[str, recorded.Source] | None:
    """(recorded, source) of a video (see :mod:`m3cli.stages.core.recorded`): the container's tags are
    read with the plan (and cached with it), the file's time only when asked for."""
    found = recorded.from_container([(str(t), str(v)) for t, v in plan.get("recorded_tags") or []])
    guess = None
    if not found and not config.recorded_at and config.recorded_from_file_time:
        guess = recorded.file_time_guess(path, float(plan["duration"]))
    return recorded.resolve(found, config.recorded_at, guess)


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
    if plan.get("has_video") is False:
        video.has_video = False
    if tracks > 1 or config.audio_track:
        video.audio_track = config.audio_track
    start = recorded_start(path, plan, config)
    if start is not None:
        video.recorded, video.recorded_source = start
    if media.needs_uri(absolute):
        video.uri = media.path_to_uri(absolute)
    return [ClipRecord(schema=CLIP_SCHEMA, video=video, clip=ClipInfo(**clip)) for clip in plan["clips"]]
