"""Faces throughput: whole-frame detection on every sampled frame vs every 5th with tracking between.

For the Hamilton clip and the LatentSync clips (real footage), CPU seconds per second of video of the
faces stage in process (no cache: detection, landmarks, mouth, embeddings, clustering), with the
face ids each setting finds, so a speed-up that costs identity shows in the same table.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import table  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MEDIA = ROOT.parent / "shared" / "media" / "video"
CLIPS = [
    ROOT / "tests" / "data" / "short_hamilton_clip.mp4",
    MEDIA / "latentsync_demo1_woman_outdoor.mp4",
    MEDIA / "latentsync_demo2_man_kitchen.mp4",
    MEDIA / "latentsync_demo3_youngman_sofa.mp4",
    MEDIA / "latentsync_2people_turns.mp4",
]


def measure(video: Path, every: int) -> tuple[float, int, str]:
    from m3cli.stages.core.common import RunContext
    from m3cli.stages.faces import Counters, FacesConfig, faces_video, load_model
    from m3cli.stages.segment import SegmentConfig, segment_video

    records = segment_video(video, SegmentConfig(), None)
    config = FacesConfig(detect_every=every)
    model = load_model(config)
    model._load()  # weights load once per process: not part of the per-second cost
    started = time.process_time()
    out = faces_video(records, model, config, RunContext(cache=None), Counters())
    cpu = time.process_time() - started
    ids = sorted({t.face_id for r in out for t in r.faces.tracks})
    detections = sum(t.detections for r in out for t in r.faces.tracks)
    return cpu / records[-1].clip.end, detections, f"{len(ids)} ({model.embedded} embedded)"


def main() -> str:
    rows = []
    for video in (v for v in CLIPS if v.exists()):
        every1, det1, ids1 = measure(video, 1)
        every5, det5, ids5 = measure(video, 5)
        rows.append([video.stem, f"{every1:.3f}", f"{every5:.3f}", f"{every1 / every5:.2f}x",
                     f"{ids1} / {ids5}", f"{det1} / {det5}"])
    header = ["clip", "CPU-s/s every frame", "CPU-s/s every 5th + tracking", "speed-up",
              "face ids (embeddings)", "kept detections"]
    return table("faces: detect every frame vs every 5th frame with tracking (dlib, 5 fps)", header, rows)


if __name__ == "__main__":
    print(main())
