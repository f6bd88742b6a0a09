"""Segment throughput and peak memory on a generated 10-minute video; cached rerun vs first run.

Targets: segment >= 50x real time on a 2-core machine; a cached rerun >= 10x faster than the first run.
Also reports the media API's decode rates (frames at 5 fps, 16 kHz audio), which later stages build on.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent))  # bench.*, behind the installed m3cli

from bench.common import OUT, m3, machine, make_test_video, run_cmd, table  # noqa: E402

MINUTES = 10


def main() -> str:
    video = make_test_video(OUT / f"synthetic_{MINUTES}min.mp4", MINUTES * 60)
    duration = MINUTES * 60
    cache = Path(tempfile.mkdtemp(prefix="m3-bench-cache-"))
    env = {"M3_CACHE": str(cache)}
    try:
        first = run_cmd(m3("segment", str(video)), env=env)
        rerun = run_cmd(m3("segment", str(video)), env=env)
        assert first.stdout == rerun.stdout, "a cached rerun must give identical records"
        startup = run_cmd(m3("--version"), env=env)
        clips = len(first.stdout.splitlines())

        from m3cli.stages.core import media, media_audio, media_frames
        from m3cli.stages.core.cache import Cache
        from m3cli.stages.segment import SegmentConfig, segment_video

        inproc = Path(tempfile.mkdtemp(prefix="m3-bench-cache-"))
        t0 = time.perf_counter()
        segment_video(video, SegmentConfig(), Cache(inproc))
        t_first = time.perf_counter() - t0
        t0 = time.perf_counter()
        segment_video(video, SegmentConfig(), Cache(inproc))
        t_rerun = time.perf_counter() - t0
        shutil.rmtree(inproc, ignore_errors=True)
        vid = media.content_id(video)
        t0 = time.perf_counter()
        frames = media_frames.sample_frames(video, vid, 0, 0.0, 30.0, fps=5.0, cache=Cache(cache))
        t_frames = time.perf_counter() - t0
        t0 = time.perf_counter()
        media_audio.clip_audio(video, vid, 0, 0.0, 30.0, cache=Cache(cache))
        t_audio = time.perf_counter() - t0
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    rows = [
        ["segment_video(), first run (in-process)", f"{t_first:.3f} s", f"{duration / t_first:.0f}x", ""],
        ["segment_video(), cached rerun (in-process)", f"{t_rerun:.4f} s", f"{duration / t_rerun:.0f}x", ""],
        [
            "segment, first run (hash + demux)",
            f"{first.seconds:.2f} s",
            f"{duration / first.seconds:.0f}x",
            f"{first.peak_rss_mb:.0f} MB",
        ],
        [
            "segment, cached rerun",
            f"{rerun.seconds:.2f} s",
            f"{duration / rerun.seconds:.0f}x",
            f"{rerun.peak_rss_mb:.0f} MB",
        ],
        [
            "`m3 --version` (process start-up)",
            f"{startup.seconds:.2f} s",
            "",
            f"{startup.peak_rss_mb:.0f} MB",
        ],
        [
            "sample 30 s of frames at 5 fps (decode + cache)",
            f"{t_frames:.2f} s",
            f"{30 / t_frames:.0f}x",
            f"{len(frames)} frames",
        ],
        ["30 s of 16 kHz mono audio (decode + cache)", f"{t_audio:.3f} s", f"{30 / t_audio:.0f}x", ""],
    ]
    size_mb = video.stat().st_size / 1e6
    title = (
        f"segment: {MINUTES}-min 640x360 30 fps H.264+AAC ({size_mb:.0f} MB), {clips} clips ({machine()}); "
        f"cached rerun {t_first / t_rerun:.0f}x faster in-process, {first.seconds / rerun.seconds:.1f}x "
        "as whole processes (start-up included)"
    )
    return table(title, ["what", "wall time", "x real time", "peak RSS / note"], rows)


if __name__ == "__main__":
    print(main())
