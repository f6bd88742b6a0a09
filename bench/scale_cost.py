"""Cost per video second of the whole pipeline beside plain single-thread faster-whisper, in one run.

`python -m bench.scale_cost` (also a part of `just bench scale`). On ``M3_BENCH_COST_SECONDS`` (default
180) of bench/footage.py's real footage (the clips of ../shared/media/video, looped), in one session:

* the peer: plain faster-whisper tiny.en on the video's audio with ``cpu_threads=1`` (as m3 runs
  CTranslate2; bench_footage.py's WHISPER_1T), a cold process;
* `m3 run VIDEO -o MEMORY` as users run it (faces and sight in their own thread beside diarize and
  voices), a cold process from an empty cache, for this checkout and, when
  ``M3_BENCH_COST_BASELINE`` names a revision, for that revision too (checked out in a temporary
  worktree), so before and after share the machine's state.

CPU seconds are user + system of the whole process (start-up, model loading and every thread
included), from the parent's ``RUSAGE_CHILDREN``. The per-stage split comes from the same `m3 run`
process: the pipeline's stage functions are wrapped and timed. faces, sight and voices run their
models in the calling thread (dlib, onnxruntime with one intra-op thread), so their thread's CPU time
is theirs; diarize is what the perception block (both branches together) cost less those three, which
includes CTranslate2's own worker thread; memorize, link, abstract and index run alone after it and
are timed as process CPU. What no stage function holds (start-up, imports, loading models before a
stage asks for them, the video's content id) is the "start-up and glue" row.

`python bench/scale_cost.py --profile` splits one `m3 run --sequential` further, by the model calls
inside the stages (``PROFILED``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # bench.*, behind the installed m3cli

from bench.bench_footage import WHISPER_1T, Cost, measure  # noqa: E402
from bench.common import OUT, machine, table  # noqa: E402

SECONDS = float(os.environ.get("M3_BENCH_COST_SECONDS", "180"))
BASELINE = os.environ.get("M3_BENCH_COST_BASELINE", "")
ORDER = ("segment", "diarize", "voices", "faces", "sight", "memorize", "link", "abstract", "index")

#: `m3 run` with its stage functions timed; argv: the JSON file for the split, then m3 run's arguments
RUN = r"""
import functools, json, resource, sys, time

def cpu():
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime

out = sys.argv[1]
import m3cli.stages.pipeline as p
import m3cli.stages.segment as seg
import m3cli.stages.index.stage as idx

spent = {}

def add(name, value):
    spent[name] = spent.get(name, 0.0) + value

def timed(name, fn, clock):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        start = clock()
        try:
            return fn(*args, **kwargs)
        finally:
            add(name, clock() - start)
    return wrapper

for name in list(p._STEPS):
    own_thread = name in ("faces", "sight", "voices")
    p._STEPS[name] = timed(name, p._STEPS[name], time.thread_time if own_thread else cpu)
p.perceive_side_by_side = timed("perception", p.perceive_side_by_side, cpu)
seg.segment_video = timed("segment", seg.segment_video, cpu)
idx.index_records = timed("index", idx.index_records, cpu)
from m3cli.app import main
sys.argv = ["m3", "run", *sys.argv[2:]]
code = 0
try:
    main()
except SystemExit as exc:
    code = exc.code or 0
if "perception" in spent:  # diarize ran inside the block, beside faces and sight
    branch = sum(spent.get(s, 0.0) for s in ("faces", "sight", "voices"))
    spent["diarize"] = spent.pop("perception") - branch
spent["total"] = cpu()
json.dump(spent, open(out, "w"))
sys.exit(code)
"""


#: Where the CPU goes inside the stages (``python bench/scale_cost.py --profile``): `m3 run --sequential`
#: (the same records; each stage alone, so process CPU between a function's entry and exit is its own,
#: CTranslate2's worker thread included) with these functions wrapped, outermost call only per name.
#: A function called inside another that is also listed is counted in both.
PROFILED = (
    ("m3cli.stages.backends.asr.faster_whisper", "FasterWhisperAsr.transcribe"),
    ("m3cli.stages.backends.asr.faster_whisper", "FasterWhisperAsr.language_of"),
    ("m3cli.stages.diarize.language_id", "speaker_languages"),
    ("m3cli.stages.diarize.second", "second_reading"),
    ("m3cli.stages.backends.diarizer.segmentation", "SegmentationModel.activity"),
    ("m3cli.stages.backends.speaker.campplus", "CamppModel.embed"),
    ("m3cli.stages.backends.speaker.campplus", "CamppModel.embed_pooled"),
    ("m3cli.stages.backends.diarizer.overlap", "cluster"),
    ("m3cli.stages.backends.face.dlib", "DlibFaceModel.detect_frames"),
    ("m3cli.stages.backends.face.dlib", "DlibFaceModel._measure"),
    ("m3cli.stages.backends.face.dlib", "DlibFaceModel._detect_rects"),
    ("m3cli.stages.backends.face.dlib", "DlibFaceModel._embed_window"),
    ("m3cli.stages.backends.face.dlib", "DlibFaceModel._follow"),
    ("m3cli.stages.sight", "sample_keyframes"),
    ("m3cli.stages.backends.ocr.rapid", "RapidOcr.read"),
    ("m3cli.stages.backends.tagger.effnet", "ImageNetTagger.probabilities"),
    ("m3cli.stages.backends.embed", "OnnxEmbedder.embed"),
)

PROFILE = r"""
import functools, importlib, json, resource, sys, threading

def cpu():
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime

out, targets = sys.argv[1], json.loads(sys.argv[2])
spent, calls, depth = {}, {}, threading.local()

def timed(name, fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        level = getattr(depth, name, 0)
        setattr(depth, name, level + 1)
        start = cpu() if level == 0 else None
        try:
            return fn(*args, **kwargs)
        finally:
            setattr(depth, name, level)
            if start is not None:
                spent[name] = spent.get(name, 0.0) + cpu() - start
                calls[name] = calls.get(name, 0) + 1
    return wrapper

import m3cli.stages.pipeline as p
for stage in list(p._STEPS):
    p._STEPS[stage] = timed("stage " + stage, p._STEPS[stage])
for module, attr in targets:
    owner = importlib.import_module(module)
    *path, last = attr.split(".")
    for part in path:
        owner = getattr(owner, part)
    setattr(owner, last, timed(attr, getattr(owner, last)))
import m3cli.stages.index.stage as idx
idx.index_records = timed("stage index", idx.index_records)
from m3cli.app import main
sys.argv = ["m3", "run", "--sequential", *sys.argv[3:]]
code = 0
try:
    main()
except SystemExit as exc:
    code = exc.code or 0
spent["whole process"] = cpu()
json.dump({k: [v, calls.get(k)] for k, v in spent.items()}, open(out, "w"))
sys.exit(code)
"""


def profile() -> str:
    """The function-level split of one `m3 run --sequential` from an empty cache (Markdown)."""
    from bench.footage import make_footage

    video = make_footage(OUT / f"footage-{int(SECONDS)}s.mp4", SECONDS)
    tmp = Path(tempfile.mkdtemp(prefix="m3-bench-profile-"))
    try:
        split = tmp / "profile.json"
        args = [
            sys.executable,
            "-c",
            PROFILE,
            str(split),
            json.dumps(PROFILED),
            str(video),
            "-o",
            str(tmp / "m.lance"),
        ]
        cost = measure(args, {"M3_CACHE": str(tmp / "cache")})
        spent = json.loads(split.read_text())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    whole = spent["whole process"][0]
    rows = [
        [name, f"{v:.2f}", "" if n is None else str(n), f"{100 * v / whole:.0f}%"]
        for name, (v, n) in sorted(spent.items(), key=lambda kv: -kv[1][0])
    ]
    return table(
        f"Where `m3 run --sequential` spends its CPU, {SECONDS:.0f} s of real footage, empty cache "
        f"(wall {cost.wall:.0f} s) — {machine()}, load {os.getloadavg()[0]:.1f} at the end",
        ["stage or function", "CPU-s", "calls", "of the whole"],
        rows,
    )


def _tree(revision: str, tmp: Path) -> Path:
    """A checkout of ``revision`` laid out as importable packages (m3cli, m3cli.stages, m3cli.schemas);
    the folder to put on PYTHONPATH."""
    import tomllib

    work = tmp / "baseline"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(work), revision], check=True)
    mapping = tomllib.loads((work / "pyproject.toml").read_text("utf-8"))["tool"]["setuptools"]["package-dir"]
    tree = tmp / "baseline-tree"
    spec = importlib.util.spec_from_file_location("typecheck", ROOT / "scripts" / "typecheck.py")
    assert spec is not None and spec.loader is not None
    typecheck = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(typecheck)
    typecheck.lay_out(tree, mapping, root=work)  # the same layout the type check uses, of the baseline
    return tree


def _current_tree() -> str:
    """Where this checkout's m3cli is imported from (PYTHONPATH as the caller set it)."""
    return os.environ.get("PYTHONPATH", "")


def run_pipeline(video: Path, tmp: Path, tag: str, pythonpath: str) -> tuple[Cost, dict[str, float]]:
    """One cold `m3 run` from an empty cache: its whole cost and the per-stage split."""
    split = tmp / f"{tag}.json"
    env = {"M3_CACHE": str(tmp / f"cache-{tag}"), "PYTHONPATH": pythonpath}
    args = [sys.executable, "-c", RUN, str(split), str(video), "-o", str(tmp / f"{tag}.lance")]
    cost = measure(args, env)
    return cost, json.loads(split.read_text())


def main() -> str:
    from bench.footage import make_footage, sources

    if not sources():
        return "### cost per video second\n\n../shared/media/video is missing: skipped.\n"
    video = make_footage(OUT / f"footage-{int(SECONDS)}s.mp4", SECONDS)
    tmp = Path(tempfile.mkdtemp(prefix="m3-bench-cost-"))
    runs: dict[str, tuple[Cost, dict[str, float]]] = {}
    try:
        print(f"== cost {SECONDS:.0f} s: plain faster-whisper tiny.en, 1 thread", file=sys.stderr, flush=True)
        peer = measure([sys.executable, "-c", WHISPER_1T, str(video)], {})
        if BASELINE:
            print(f"   m3 run at {BASELINE}", file=sys.stderr, flush=True)
            runs[f"before ({BASELINE})"] = run_pipeline(video, tmp, "before", str(_tree(BASELINE, tmp)))
        print("   m3 run, this checkout", file=sys.stderr, flush=True)
        runs["this checkout"] = run_pipeline(video, tmp, "now", _current_tree())
    finally:
        if BASELINE and (tmp / "baseline").exists():
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tmp / "baseline")])
        shutil.rmtree(tmp, ignore_errors=True)

    names = list(runs)
    rows = [
        [
            "plain faster-whisper tiny.en, `cpu_threads=1` (peer)",
            f"{peer.cpu:.1f}",
            f"{peer.cpu / SECONDS:.3f}",
            "1.00x",
            f"{peer.wall:.0f}",
            f"{peer.rss_mb:.0f}",
        ]
    ]
    for name in names:
        cost, _ = runs[name]
        rows.append(
            [
                f"`m3 run`, empty cache, {name}",
                f"{cost.cpu:.1f}",
                f"{cost.cpu / SECONDS:.3f}",
                f"**{cost.cpu / peer.cpu:.2f}x**",
                f"{cost.wall:.0f}",
                f"{cost.rss_mb:.0f}",
            ]
        )
    stage_rows = []
    for stage in ORDER:
        stage_rows.append([stage, *(f"{runs[n][1].get(stage, 0.0):.1f}" for n in names)])
    glue = [runs[n][1]["total"] - sum(runs[n][1].get(s, 0.0) for s in ORDER) for n in names]
    stage_rows.append(["start-up and glue (no stage function)", *(f"{g:.1f}" for g in glue)])
    stage_rows.append(["**whole process**", *(f"**{runs[n][1]['total']:.1f}**" for n in names)])
    stage_rows.append(["peer (plain faster-whisper, 1 thread)", *(f"{peer.cpu:.1f}" for _ in names)])
    return (
        table(
            f"Cost per video second, {SECONDS:.0f} s of real footage (bench/footage.py), cold processes, "
            f"one run — {machine()}, load {os.getloadavg()[0]:.1f} at the end",
            ["", "CPU-s", "CPU-s per video s", "x peer", "wall s", "peak MB"],
            rows,
        )
        + "\n"
        + table("The same `m3 run` processes per stage (CPU-s)", ["stage", *names], stage_rows)
    )


if __name__ == "__main__":
    print(profile() if "--profile" in sys.argv[1:] else main())
