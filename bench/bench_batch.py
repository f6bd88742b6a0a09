"""`m3 run` against the shell pipe, and `m3 batch`: parallel speed-up, kill -9 resume, Ray overhead.

Targets: `m3 run` on the quickstart video >= 2x faster wall than the shell pipe with peak RSS <= 1.5 GB;
`m3 batch --jobs 2` on 4 short videos >= 1.6x faster wall than `--jobs 1`; a batch killed with -9 at
random points and rerun builds the memory of an uninterrupted run, each video indexed once; Ray's
per-video overhead <= 2 s. Every run starts from an empty cache unless said otherwise, so the figures
include model loading and all per-clip work. ``M3_BENCH_BATCH_PARTS=run`` measures only `m3 run` against
the pipe; ``M3_BENCH_RUN_ROUNDS`` (default 3) sets how many times each of the three is run.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # bench.*, behind the installed m3cli
sys.path.insert(0, str(ROOT / "tests"))

from bench.common import DIARIZE_DEFAULT, PIPELINE_DEFAULT, m3, run_cmd, table  # noqa: E402

DATA = ROOT / "tests" / "data"
SHARED_VIDEO = ROOT.parent / "shared" / "media" / "video"
QUICKSTART = DATA / "short_hamilton_clip.mp4"
OFFLINE = {"HF_HUB_OFFLINE": "1", "M3_LLM_BASE_URL": "", "M3_LLM_MODEL": "", "RAY_USAGE_STATS_ENABLED": "0"}


def short_videos(tmp: Path) -> list[Path]:
    """Four short real videos: the shared media's talking-head clips when present, else pieces."""
    shared = [
        SHARED_VIDEO / "latentsync_2people_turns.mp4",
        SHARED_VIDEO / "grid_4people_turns.mp4",
        SHARED_VIDEO / "latentsync_demo1_woman_outdoor.mp4",
    ]
    shared = [p for p in shared if p.exists()]
    if len(shared) == 3:
        return [QUICKSTART, *shared]
    from support.clips import cut_pieces

    return cut_pieces(QUICKSTART, 4, 2.5, tmp / "pieces")


def _env(cache: Path) -> dict:
    return {**OFFLINE, "M3_CACHE": str(cache)}


ROUNDS = int(os.environ.get("M3_BENCH_RUN_ROUNDS", "3"))


def run_vs_pipe(tmp: Path) -> str:
    """The pipe, `m3 run` and `m3 run --sequential`, each from an empty cache, taken in turn ``ROUNDS``
    times: single runs of a 4-8 s command moved by +-20 % on this shared machine, so the medians (and the
    ratio of medians) are reported with each command's range."""
    m3s = " ".join(m3())
    diarize = " ".join(DIARIZE_DEFAULT)  # as the default install

    def pipe(memory: Path) -> list[str]:
        line = (
            f"{m3s} segment {QUICKSTART} | {m3s} diarize {diarize} | {m3s} voices | {m3s} faces | "
            f"{m3s} memorize | {m3s} link | {m3s} abstract > {memory}.jsonl && "
            f"{m3s} index -o {memory} {memory}.jsonl"
        )
        return ["bash", "-o", "pipefail", "-c", line]

    commands = {
        "pipe": lambda m: pipe(m),
        "run": lambda m: [*m3("run", str(QUICKSTART), "-o", str(m), *PIPELINE_DEFAULT)],
        "sequential": lambda m: [
            *m3("run", "--sequential", str(QUICKSTART), "-o", str(m), *PIPELINE_DEFAULT)
        ],
    }
    runs: dict[str, list] = {name: [] for name in commands}
    for r in range(ROUNDS):
        for name, command in commands.items():
            where = tmp / f"{name}-{r}"
            where.mkdir(parents=True)
            runs[name].append(run_cmd(command(where / "mem.lance"), env=_env(where / "cache")))

    def wall(name: str) -> float:
        return statistics.median(x.seconds for x in runs[name])

    def cell(name: str) -> str:
        spread = sorted(x.seconds for x in runs[name])
        return f"{wall(name):.1f} s ({spread[0]:.1f}-{spread[-1]:.1f})"

    def rss(name: str) -> float:
        return max(x.peak_rss_mb for x in runs[name])

    rows = [
        [
            "shell pipe (8 processes), quickstart video",
            cell("pipe"),
            f"{rss('pipe'):.0f} MB (largest process)",
            "",
        ],
        [
            "`m3 run` (faces beside diarize + voices)",
            cell("run"),
            f"{rss('run'):.0f} MB",
            f"{wall('pipe') / wall('run'):.2f}x faster (target >= 2x, RSS <= 1.5 GB)",
        ],
        [
            "`m3 run --sequential`",
            cell("sequential"),
            f"{rss('sequential'):.0f} MB",
            f"{wall('pipe') / wall('sequential'):.2f}x faster",
        ],
    ]
    return table(
        f"m3 run vs the shell pipe (cold caches; median wall of {ROUNDS} rounds taken in turn, range)",
        ["what", "wall", "peak RSS", "ratio of medians"],
        rows,
    )


def _batch(videos: list[Path], memory: Path, cache: Path, *extra: str) -> float:
    start = time.perf_counter()
    args = m3("-q", "batch", *map(str, videos), "-o", str(memory), *PIPELINE_DEFAULT, *extra)
    run_cmd(args, env=_env(cache))
    return time.perf_counter() - start


def jobs_speedup(tmp: Path, videos: list[Path]) -> tuple[list[list[object]], float]:
    """Rows for --jobs 1 and 2, and the --jobs 2 wall time (the kill test draws its moments from it)."""
    one = _batch(videos, tmp / "j1.lance", tmp / "cache-j1", "--jobs", "1")
    two = _batch(videos, tmp / "j2.lance", tmp / "cache-j2", "--jobs", "2")
    rows = [
        [f"`m3 batch --jobs 1`, {len(videos)} short videos", f"{one:.1f} s", ""],
        [
            f"`m3 batch --jobs 2`, {len(videos)} short videos",
            f"{two:.1f} s",
            f"{one / two:.2f}x faster (target >= 1.6x)",
        ],
    ]
    return rows, two


def kill_resume(tmp: Path, videos: list[Path], whole: float, rounds: int = 3) -> list[list[object]]:
    """Kill -9 a batch at random moments, rerun until it completes; compare with an uninterrupted run.

    The moments are drawn between 15% and 90% of an uninterrupted run's wall time ``whole``, so every
    attempt is killed while it works (up to three kills a round), however fast the machine is."""
    from support.memory_rows import memory_rows

    reference = memory_rows(tmp / "j1.lance")  # built uninterrupted by jobs_speedup
    rng = random.Random(0)
    out = []
    for k in range(rounds):
        memory, cache = tmp / f"killed{k}.lance", tmp / f"cache-kill{k}"
        kills = 0
        while True:
            env = {**os.environ, **_env(cache)}
            proc = subprocess.Popen(
                [*m3("-q", "batch", *map(str, videos), "-o", str(memory), "--jobs", "2", *PIPELINE_DEFAULT)],
                env=env,
                start_new_session=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            try:
                proc.wait(timeout=rng.uniform(0.15, 0.9) * whole if kills < 3 else None)
                break
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                kills += 1
        journal = (memory / "_m3_batch_journal.jsonl").read_bytes()
        indexed = journal.count(b'"status":"indexed"')
        same = memory_rows(memory) == reference
        out.append(
            [
                f"kill -9 resume, round {k + 1}",
                f"{kills} kills",
                f"equal rows: {same}; {indexed} 'indexed' journal events for {len(videos)} videos",
            ]
        )
    return out


def ray_overhead(tmp: Path, videos: list[Path]) -> list[list[object]]:
    """Warm cache (the per-video work is replayed), so what differs is what Ray adds."""
    try:
        import ray  # noqa: F401
    except ImportError:
        return [["Ray engine", "not installed (pip install '.[ray]')", ""]]
    cache = tmp / "cache-j1"
    local = _batch(videos, tmp / "warm-local.lance", cache, "--jobs", "1")
    on_ray = _batch(videos, tmp / "warm-ray.lance", cache, "--jobs", "1", "--engine", "ray")
    start = time.perf_counter()
    run_cmd(
        [
            sys.executable,
            "-c",
            "import ray; ray.init(num_cpus=1, include_dashboard=False, "
            "_node_ip_address='127.0.0.1'); ray.shutdown()",
        ],
        env=OFFLINE,
    )
    ray_start = time.perf_counter() - start
    from support.memory_rows import memory_rows

    same = memory_rows(tmp / "warm-ray.lance") == memory_rows(tmp / "warm-local.lance")
    per_video = (on_ray - local - ray_start) / len(videos)
    return [
        ["local engine, warm cache", f"{local:.1f} s", ""],
        [
            "Ray engine (local instance), warm cache",
            f"{on_ray:.1f} s",
            f"Ray start-up {ray_start:.1f} s; per-video overhead {per_video:.2f} s (target <= 2 s); "
            f"same memory as local: {same}",
        ],
    ]


def main() -> str:
    tmp = Path(tempfile.mkdtemp(prefix="m3-bench-batch-"))
    try:
        parts = [run_vs_pipe(tmp)]
        if os.environ.get("M3_BENCH_BATCH_PARTS") == "run":  # just the m3 run comparison
            return "\n".join(parts)
        videos = short_videos(tmp)
        rows, whole = jobs_speedup(tmp, videos)
        rows += kill_resume(tmp, videos, whole) + ray_overhead(tmp, videos)
        names = ", ".join(v.name for v in videos)
        parts.append(table(f"m3 batch ({names})", ["what", "measured", "note"], rows))
        return "\n".join(parts)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    print(main())
