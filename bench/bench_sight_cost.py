"""Sight's cost beside plain faster-whisper tiny.en on the same video, in one process.

Both are timed after their models are loaded, each including its own decoding (frames for sight,
audio for Whisper), uncached, best of ``--repeat`` runs, in CPU seconds of this process (what the
2-core hosts here share unevenly) and wall seconds.

    python bench/bench_sight_cost.py VIDEO [--repeat 2]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def timed(fn, repeat: int) -> tuple[float, float, object]:
    best = (float("inf"), float("inf"), None)
    for _ in range(repeat):
        c0, w0 = time.process_time(), time.perf_counter()
        out = fn()
        best = min(best, (time.process_time() - c0, time.perf_counter() - w0, out), key=lambda b: b[0])
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("video", type=Path)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()

    from m3cli.stages.backends.asr import make_asr
    from m3cli.stages.core import media
    from m3cli.stages.segment import SegmentConfig, segment_video
    from m3cli.stages.sight import SightConfig, SightModels, analyse_clip

    [record] = segment_video(args.video, SegmentConfig(clip_seconds=3600))
    seconds = record.clip.end - record.clip.start
    config = SightConfig()
    sight = SightModels(config)
    asr = make_asr("faster-whisper")  # the bundled tiny.en

    def run_asr():
        audio = media.clip_audio(args.video, record.video.id, 0, record.clip.start, record.clip.end)
        return asr.transcribe(audio, "en")

    a_cpu, a_wall, _ = timed(run_asr, args.repeat)
    s_cpu, s_wall, section = timed(lambda: analyse_clip(record, sight, config, None), args.repeat)
    keyframes = len(section["keyframes"])
    print(
        json.dumps(
            {
                "video": args.video.name,
                "video_seconds": round(seconds, 2),
                "keyframes": keyframes,
                "whisper_tiny_en": {"cpu_s": round(a_cpu, 2), "wall_s": round(a_wall, 2)},
                "sight": {
                    "cpu_s": round(s_cpu, 2),
                    "wall_s": round(s_wall, 2),
                    "cpu_s_per_keyframe": round(s_cpu / max(1, keyframes), 3),
                    "cpu_s_per_video_second": round(s_cpu / seconds, 3),
                },
                "ratio_cpu": round(s_cpu / a_cpu, 2),
                "ratio_wall": round(s_wall / a_wall, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
