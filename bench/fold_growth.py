"""What grows while `m3 run` goes through a long video: measured pass by pass.

`python bench/fold_growth.py [MINUTES]` (default 30) runs one cold :func:`process_video` over
bench/footage.py's real footage of that length, as `m3 run --no-llm` does before ``index`` (default
settings, an empty cache). After each pass of :data:`~m3cli.stages.pipeline.CLIPS_PER_PASS` clips it
writes a row: CPU seconds so far, the resident size and the pass's peak, the Python heap tracemalloc
sees, and the size of every stage's fold as its checkpoint would save it (the JSON document and the
arrays). A second table gives the peak while each stage ran, pass by pass (the process's ``VmHWM``,
started again at each stage), so a stage whose working memory grows from pass to pass shows there.
The ten source lines whose Python allocations grew most from the first pass to the last close the
output.

``M3_BENCH_TRACEMALLOC=0`` leaves tracemalloc off: it slows the Python parts and its own
bookkeeping (a trace per live block) is in the resident size, about 100 MB here.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parent.parent))  # bench.*, behind the installed m3cli
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from bench.common import OUT, machine, table  # noqa: E402

TRACE = os.environ.get("M3_BENCH_TRACEMALLOC", "1") != "0"


def _status_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _reset_peak() -> None:
    """Start the process's peak resident size (VmHWM) again from the current one (Linux)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def _fold_sizes(folds: Any, video: str) -> dict[str, float]:
    """Each stage's fold of ``video`` as its checkpoint saves it: JSON + arrays, in MB."""
    import orjson

    from m3cli.stages.core.checkpoint import Arrays

    sizes = {}
    for stage, state in folds.states(video).items():
        arrays = Arrays()
        doc = state.dump(arrays)
        sizes[stage] = (len(orjson.dumps(doc)) + sum(a.nbytes for a in arrays.items)) / 1e6
    return sizes


def main(minutes: float) -> str:
    from bench.footage import make_footage
    from m3cli.pipeline_options import pipeline_from_flags
    from m3cli.stages import pipeline
    from m3cli.stages.core.cache import Cache
    from m3cli.stages.core.common import RunContext
    from m3cli.stages.core.config import load_settings

    video = make_footage(OUT / f"footage-{int(minutes * 60)}s.mp4", minutes * 60)
    settings = load_settings()
    config = pipeline_from_flags(settings, [], "index", True, {})
    models = pipeline.Models(config, settings)
    tmp = Path(tempfile.mkdtemp(prefix="m3-bench-folds-"))
    rows: list[list[str]] = []
    lines: list[dict[tuple[str, int], tuple[int, int]]] = []  # the first pass's, the last's
    through = pipeline._through_stages
    started = time.monotonic()

    by_stage: dict[str, list[str]] = {}  # stage -> its peak in each pass
    pass_peak = [0.0]

    def stage_done(told: Any) -> Any:
        def done(stage: str, clips: int) -> None:
            peak = _status_mb("VmHWM")
            by_stage.setdefault(stage, []).append(f"{peak:.0f}")
            pass_peak[0] = max(pass_peak[0], peak)
            _reset_peak()
            if told:
                told(stage, clips)

        return done

    def measured(records, models, ctx, on_stage, folds, side=None):  # one pass, then its row
        _reset_peak()
        pass_peak[0] = 0.0
        out = through(records, models, ctx, stage_done(on_stage), folds, side)
        clips = out[-1].clip.index + 1 if out else 0
        sizes = _fold_sizes(folds, out[0].video.id) if out and folds is not None else {}
        heap = tracemalloc.get_traced_memory()[0] / 1e6 if TRACE else float("nan")
        if TRACE:  # per source line only: a whole snapshot holds every block and would be the growth
            by_line = {
                (s.traceback[0].filename, s.traceback[0].lineno): (s.size, s.count)
                for s in tracemalloc.take_snapshot().statistics("lineno")
            }
            lines[min(len(lines), 1) :] = [by_line]
        rows.append(
            [
                str(clips),
                f"{time.monotonic() - started:.0f}",
                f"{time.process_time():.0f}",
                f"{_status_mb('VmRSS'):.0f}",
                f"{max(pass_peak[0], _status_mb('VmHWM')):.0f}",
                f"{heap:.1f}",
                *(f"{sizes.get(s, 0.0):.2f}" for s in ("diarize", "voices", "faces", "link", "abstract")),
            ]
        )
        print("   " + " | ".join(rows[-1]), file=sys.stderr, flush=True)
        return out

    pipeline._through_stages = measured
    if TRACE:
        tracemalloc.start(1)
    try:
        held = pipeline.process_video(video, models, RunContext(cache=Cache(tmp / "cache")))
    finally:
        pipeline._through_stages = through
        shutil.rmtree(tmp, ignore_errors=True)
    head = ["clips done", "wall s", "CPU s", "RSS MB", "peak MB in the pass", "Python heap MB"]
    out = table(
        f"{minutes:g} min of footage through the stages ({len(held)} clips, held as JSON "
        f"{held.nbytes / 1e6:.1f} MB at the end) — {machine()}",
        [*head, *(f"{s} fold MB" for s in ("diarize", "voices", "faces", "link", "abstract"))],
        rows,
    )
    out += "\n" + table(
        "Peak MB while each stage ran, pass by pass (faces and sight run beside diarize and voices)",
        ["stage", *(f"pass {k + 1}" for k in range(len(rows)))],
        [[stage, *peaks] for stage, peaks in by_stage.items()],
    )
    if len(lines) == 2:
        first, last = lines
        grown = sorted(last, key=lambda k: last[k][0] - first.get(k, (0, 0))[0], reverse=True)[:10]
        out += "\n" + table(
            "Python allocations that grew most from the first pass to the last",
            ["where", "grew MB", "now MB", "blocks now"],
            [
                [
                    f"{file.split('site-packages/')[-1]}:{line}",
                    f"{(last[file, line][0] - first.get((file, line), (0, 0))[0]) / 1e6:.2f}",
                    f"{last[file, line][0] / 1e6:.2f}",
                    str(last[file, line][1]),
                ]
                for file, line in grown
            ],
        )
    return out


if __name__ == "__main__":
    print(main(float(sys.argv[1]) if len(sys.argv) > 1 else 30.0))
