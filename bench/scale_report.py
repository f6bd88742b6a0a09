"""`m3 report` for big memories (issue 37, item 5): write time, page size and first paint in Chromium.

The source is real: the photo dev set's first two videos (tests/data/people/photos, Obama and Biden's
photos with LibriSpeech readers), each added by `m3 run --no-llm -o` into one memory (kept in
bench/out between runs). The big memories are SYNTHETIC, made from its rows by bench/synth_memory.py
(rows replicated under new video ids, tiled in time; text, faces and keyframes repeat):

- one 1-hour and one 10-hour video (the first real video tiled);
- 100 and 1,000 videos of ~30 s (both real videos in turn).

For each: the wall and CPU seconds of ``write_report`` (one process, this machine as it is), the
page's size, and in Debian's `chromium` (headless, over the DevTools pipe, tests/support/browser.py)
the first contentful paint and the load event from navigation, best of three loads, and the elements
in the DOM at load. Target: every page opens (load event) in under 2 s. Voice samples are left out of
the synthetic pages: their videos' ids are not the files' (the report checks a file's content id
before cutting a sample from it).
"""

from __future__ import annotations

import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # bench.*, behind the installed m3cli
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from bench.common import OUT, machine, table  # noqa: E402

PHOTOS = ROOT / "tests" / "data" / "people" / "photos"
#: (label, hours, videos) of the synthetic memories.
SIZES = (
    ("1 video, 1 hour", 1.0, 1),
    ("1 video, 10 hours", 10.0, 1),
    ("100 videos of 30 s", 100 * 30 / 3600, 100),
    ("1,000 videos of 30 s", 1000 * 30 / 3600, 1000),
)

PAINT = """(() => {
  const n = performance.getEntriesByType('navigation')[0];
  const p = performance.getEntriesByType('paint').find(e => e.name === 'first-contentful-paint');
  return {fcp: p ? p.startTime : null, load: n.loadEventEnd,
          elements: document.getElementsByTagName('*').length};
})()"""


def source_memory() -> Path:
    """The real two-video memory (built once with `m3 run`, kept in bench/out)."""
    import subprocess

    memory = OUT / "report_scale_source.lance"
    done = memory / ".complete"
    if done.exists():
        return memory
    shutil.rmtree(memory, ignore_errors=True)
    env = {**os.environ, "M3_CACHE": str(OUT / "cache"), "M3_LLM_BASE_URL": "", "M3_LLM_MODEL": ""}
    for name in ("p1_obama_biden.mp4", "p2_obama_367.mp4"):
        subprocess.run(
            [sys.executable, "-m", "m3cli", "run", str(PHOTOS / name), "--no-llm", "-o", str(memory)],
            check=True,
            env=env,
        )
    done.touch()
    return memory


def synthetic(source: Path, dest: Path, hours: float, videos: int) -> dict:
    sys.path.insert(0, str(ROOT / "bench"))
    import synth_memory

    try:
        return synth_memory.replicate(source, dest, hours, videos)
    except ImportError:  # an indexer without build_indexes: the report needs no index
        shutil.rmtree(dest, ignore_errors=True)
        return synth_memory.replicate(source, dest, hours, videos, indexes=False)


def write(memory: Path, out: Path) -> tuple[float, float, object]:
    """(wall s, CPU s, stats) of one write_report."""
    from m3cli.stages.report import write_report

    cpu = resource.getrusage(resource.RUSAGE_SELF)
    t = time.perf_counter()
    stats = write_report(memory, out)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_SELF)
    return wall, (after.ru_utime - cpu.ru_utime) + (after.ru_stime - cpu.ru_stime), stats


def paint(page: Path) -> tuple[float, float, int, int]:
    """(first contentful paint ms, load ms, DOM elements, console errors), best load of three."""
    from support.browser import Browser

    best: tuple[float, float, int, int] | None = None
    for _ in range(3):
        with Browser(1280, 900, timeout=180) as b:
            b.open(page)
            b.eval("new Promise(r => setTimeout(r, 200))")  # the paint entry is recorded after the frame
            got = b.eval(PAINT)
            row = (float(got["fcp"] or 0.0), float(got["load"]), int(got["elements"]), len(b.errors()))
            if best is None or row[1] < best[1]:
                best = row
    assert best is not None
    return best


def main() -> str:
    import lancedb

    from support.browser import find_chromium

    tmp = Path(tempfile.mkdtemp(prefix="m3-bench-scale-report-"))
    rows = []
    try:
        source = source_memory()
        memories = [("real: 2 videos (photo dev set)", source, None)]
        for label, hours, videos in SIZES:
            dest = tmp / f"{videos}x{hours:.2f}h.lance"
            summary = synthetic(source, dest, hours, videos)
            memories.append((f"synthetic: {label}", dest, summary))
        chromium = find_chromium()
        for label, memory, _summary in memories:
            db = lancedb.connect(str(memory))
            clips, nodes = db.open_table("clips").count_rows(), db.open_table("nodes").count_rows()
            wall, cpu, stats = write(memory, tmp / "page.html")
            row: list[object] = [
                label,
                f"{clips:,}",
                f"{nodes:,}",
                f"{wall:.1f} s ({cpu:.1f} CPU-s)",
                f"{stats.bytes / 1e6:.1f} MB",
                f"{stats.clips:,}",
            ]
            if chromium:
                fcp, load, elements, errors = paint(stats.path)
                row += [f"{fcp:.0f} ms", f"{load:.0f} ms", f"{elements:,}", str(errors)]
            else:
                row += ["no chromium"] * 4
            rows.append(row)
            print(f"  {row}", file=sys.stderr)
        return table(
            f"m3 report on big memories (synthetic from real rows) — {machine()}",
            [
                "memory",
                "clips",
                "memory lines",
                "write",
                "page",
                "clips in the page",
                "first paint",
                "load",
                "DOM at load",
                "console errors",
            ],
            rows,
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    print(main())
