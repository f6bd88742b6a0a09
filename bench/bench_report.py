"""`m3 report`: page size, write time and load time in headless Chromium for a 1-hour video's memory, and
what a 1M-node memory's page shows (capped and paged) and costs.

- 1 hour: bench_memory's synthetic 120-clip video (three people taking turns, ~10 utterances per clip),
  with a real 1-hour H.264 + AAC file behind it (so voice samples are cut and encoded for real) and real
  face crops (tests/data/fixture_src) in the cache, through the real memorize, link, abstract and index.
- 1M nodes: bench_ask's memory (200 videos x 100 clips x 50 lines, kept in bench/out), the default page
  and one video's page.

Load time is from navigation to the load event in Debian's `chromium` (headless, over the DevTools pipe,
tests/support/browser.py), best of three; "script" is the page's own script (search index, first clip).
Targets: a 1-hour page <= 5 MB and loads in <= 2 s; any memory's default page <= 20 MB.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # bench.*, behind the installed m3cli
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from bench.common import OUT, machine, make_test_video, table  # noqa: E402

FACES = ("obama.jpg", "biden.jpg", "obama2.jpg")  # one crop per synthetic person


def hour_memory(tmp: Path) -> Path:
    """The 1-hour memory with a real video file and real crops behind it."""
    from bench.bench_memory import HashEmbedder, stages_run, synthetic_video
    from m3cli.stages.core.cache import Cache, CacheKey
    from m3cli.stages.core.media import content_id

    video = make_test_video(OUT / "report_1h.mp4", 3600, fps=5, width=320, height=180)
    vid = content_id(video)
    cache = Cache(tmp / "cache")
    photos = [ROOT / "tests" / "data" / "fixture_src" / name for name in FACES]
    crops = {}
    for k in range(3):
        key = CacheKey.of(vid, 0, "faces", {}, "bench")
        crops[f"<face_{k + 1}>"] = str(cache.put_bytes(key, f"crop{k}.jpg", photos[k].read_bytes()))
    records = []
    for r in synthetic_video():
        r.video.id, r.video.path = vid, str(video)
        for t in r.faces.tracks:
            t.crop = crops.get(t.face_id)
        records.append(r)
    stages_run(records, HashEmbedder(), tmp / "cache", tmp / "hour.lance")
    return tmp / "hour.lance"


def write(memory: Path, out: Path, **kw) -> tuple[float, object]:
    from m3cli.stages.report import write_report

    t = time.perf_counter()
    stats = write_report(memory, out, **kw)
    return time.perf_counter() - t, stats


def load(page: Path) -> tuple[float, float, int, list[str]]:
    """(load seconds best of 3, script ms, DOM elements, console errors) in headless Chromium."""
    from support.browser import Browser

    best, script, elements, errors = float("inf"), 0.0, 0, []
    for _ in range(3):
        with Browser(1280, 900, timeout=120) as b:
            seconds = b.open(page)
            if seconds < best:
                best = seconds
                timing = b.eval(
                    "(() => { const n = performance.getEntriesByType('navigation')[0];"
                    " return n.loadEventStart - n.domContentLoadedEventStart; })()"
                )
                script = float(timing or 0.0)
                elements = int(b.eval("document.getElementsByTagName('*').length"))
                errors = b.errors()
    return best, script, elements, errors


def main() -> str:
    from support.browser import find_chromium

    tmp = Path(tempfile.mkdtemp(prefix="m3-bench-report-"))
    rows = []
    try:
        pages = []
        hour = hour_memory(tmp)
        seconds, stats = write(hour, tmp / "hour.html")
        pages.append(("1-hour video (120 clips)", seconds, stats))
        big = OUT / "ask_memory_1000000.lance"
        if (big / ".complete").exists():
            import lancedb

            nodes = lancedb.connect(str(big)).open_table("nodes").count_rows()
            seconds, stats = write(big, tmp / "big.html")
            pages.append((f"{nodes:,} nodes, {stats.videos} of 200 videos shown", seconds, stats))
            one = sorted(
                lancedb.connect(str(big))
                .open_table("clips")
                .search()
                .select(["video"])
                .limit(1)
                .to_arrow()
                .column("video")
                .to_pylist()
            )[0]
            seconds, stats = write(big, tmp / "big-one.html", video=one)
            pages.append((f"{nodes:,} nodes, one video (--video)", seconds, stats))
        else:
            print("  no 1M-node memory in bench/out: run bench_ask first for that row", file=sys.stderr)
        chromium = find_chromium()
        for label, seconds, stats in pages:
            row = [
                label,
                f"{stats.bytes / 1e6:.2f} MB",
                f"{stats.clips}",
                f"{stats.characters} ({stats.thumbnails} crops, {stats.voice_samples} voices)",
                f"{seconds:.1f} s",
            ]
            if chromium:
                load_s, script_ms, elements, errors = load(stats.path)
                row += [f"{load_s:.2f} s", f"{script_ms:.0f} ms", f"{elements:,}", str(len(errors))]
            else:
                row += ["no chromium"] * 4
            rows.append(row)
        return table(
            f"m3 report: page size and load time — {machine()}",
            [
                "memory",
                "page",
                "clips shown",
                "characters",
                "write",
                "load (chromium)",
                "script",
                "DOM elements",
                "console errors",
            ],
            rows,
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    print(main())
