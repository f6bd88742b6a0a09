"""Faces throughput: CPU seconds per second of video of `m3 faces` (dlib) per clip, by setting.

For the Hamilton clip, the LatentSync clips and a minute of the benchmark's real footage
(bench/footage.py), the faces stage runs in a fresh process with its model loaded and no cache
(decoding, detection, tracking, landmarks, mouth, embeddings, clustering), with the face ids and
descriptors each setting gives, so a speed-up that costs identity shows in the same table:

* every frame: ``--detect-every 1 --embed-every 1``, a whole-frame search and a descriptor per frame;
* default: tracking between searches, one descriptor per window of a track.

``M3_BENCH_FACES_BASELINE=<git revision>`` adds that revision's default as a first column, run from
``git archive`` of its m3cli, stages and schemas in the same session (a before/after in one run).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent))  # bench.*, behind the installed m3cli

from bench.common import OUT, table  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MEDIA = ROOT.parent / "shared" / "media" / "video"
CLIPS = [
    ROOT / "tests" / "data" / "short_hamilton_clip.mp4",
    MEDIA / "latentsync_demo1_woman_outdoor.mp4",
    MEDIA / "latentsync_demo2_man_kitchen.mp4",
    MEDIA / "latentsync_demo3_youngman_sofa.mp4",
    MEDIA / "latentsync_2people_turns.mp4",
]
SETTINGS = {"every frame": {"detect_every": 1, "embed_every": 1}, "default": {}}

WORKER = r"""
import json, sys, time
from pathlib import Path
if sys.argv[1]:  # a baseline tree: its m3cli, stages and schemas shadow the installed ones
    import importlib.machinery, importlib.util
    ROOTS = {"m3cli": "m3cli", "m3cli.stages": "stages", "m3cli.schemas": "schemas"}
    ROOTS = {name: Path(sys.argv[1], folder) for name, folder in ROOTS.items()}

    class Baseline:
        @staticmethod
        def find_spec(name, path=None, target=None):
            if name in ROOTS:
                return importlib.util.spec_from_file_location(
                    name, ROOTS[name] / "__init__.py", submodule_search_locations=[str(ROOTS[name])])
            parent = name.rpartition(".")[0]
            if parent not in ROOTS:
                return None
            return importlib.machinery.PathFinder.find_spec(name, [str(ROOTS[parent])])

    sys.meta_path.insert(0, Baseline)
import sklearn.cluster  # noqa: F401  (loaded by the first clustering: a per-process cost)
from m3cli.stages.core.common import RunContext
from m3cli.stages.faces.detect import Counters
from m3cli.stages.faces.stage import FacesConfig, faces_video, load_model
from m3cli.stages.segment import SegmentConfig, segment_video

records = segment_video(Path(sys.argv[2]), SegmentConfig(), None)
config = FacesConfig(**json.loads(sys.argv[3]))
model = load_model(config)
model._load()  # weights load once per process: not part of the per-second cost
started = time.process_time()
out = faces_video(records, model, config, RunContext(cache=None), Counters())
cpu = time.process_time() - started
ids = {t.face_id for r in out for t in r.faces.tracks}
print(json.dumps({"cpu": cpu / records[-1].clip.end, "ids": len(ids), "embedded": model.embedded}))
"""


def measure(video: Path, settings: dict, tree: str = "") -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", WORKER, tree, str(video), json.dumps(settings)],
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    if proc.returncode:
        raise SystemExit(f"faces on {video.name} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def baseline_tree(revision: str, into: Path) -> str:
    archive = subprocess.run(
        ["git", "archive", revision, "m3cli", "stages", "schemas"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return str(into)


def main() -> str:
    clips = [v for v in CLIPS if v.exists()]
    footage = OUT / "footage-60s.mp4"
    if MEDIA.exists():
        from bench.footage import make_footage

        clips.append(make_footage(footage, 60.0))
    revision = os.environ.get("M3_BENCH_FACES_BASELINE", "")
    columns = ([(f"default at {revision}", {}, True)] if revision else []) + [
        (name, settings, False) for name, settings in SETTINGS.items()
    ]
    rows = []
    with tempfile.TemporaryDirectory(prefix="m3-bench-faces-") as tmp:
        tree = baseline_tree(revision, Path(tmp)) if revision else ""
        for video in clips:
            print(f"== faces {video.name}", file=sys.stderr, flush=True)
            results = [measure(video, settings, tree if old else "") for _, settings, old in columns]
            rows.append(
                [
                    video.stem,
                    *(f"{r['cpu']:.3f}" for r in results),
                    " / ".join(f"{r['ids']} ({r['embedded']})" for r in results),
                ]
            )
    header = [
        "clip",
        *(f"CPU-s/s {name}" for name, _, _ in columns),
        "face ids (descriptors computed), " + " / ".join(name for name, _, _ in columns),
    ]
    return table("faces (dlib, 5 fps): CPU seconds per second of video, by setting", header, rows)


if __name__ == "__main__":
    print(main())
