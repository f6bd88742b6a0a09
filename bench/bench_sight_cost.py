"""Sight's cost, side by side in one run: `m3 sight`, plain faster-whisper tiny.en, and the whole shell
pipe with and without sight, on the real footage (`python bench/run.py sight_cost`).

The footage is bench/footage.py's (the clips of ../shared/media/video looped to
``M3_BENCH_FOOTAGE_SECONDS``, default 600). Every command is a cold process measured as in
bench_footage.py (CPU seconds of user + system, children included; wall; peak RSS):

* the peer: plain faster-whisper tiny.en with its default settings on the video's audio (bench_footage's
  WHISPER snippet), the yardstick the issue names;
* perception: `m3 segment | m3 diarize | m3 voices | m3 faces`, once, from an empty cache; diarize
  as the default install runs it, with the second reading (bench/common.py DIARIZE_DEFAULT);
* `m3 sight` on the faces records;
* the rest of the pipe, `m3 memorize | m3 link | m3 abstract | m3 index`, twice, each on the cache as
  perception and sight left it: on the sight records (with sight), then, after every file that run
  added to the cache is removed again, on the faces records (without). Both runs then embed their
  lines from scratch, as a pipe from an empty cache does. (Run on one shared cache, the second run
  found the first one's embeddings of the ~1,500 lines both have and cost ~2.4 CPU-s less: a bias
  against whichever ran first, not a cost of sight.)

Pipeline without sight = perception + rest; with sight = perception + sight + rest-with-sight.
Targets (issue 22): sight <= 0.2x the peer's CPU seconds; the pipeline with sight <= 1.10x without.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_footage import SECONDS, WHISPER, Cost, measure  # noqa: E402
from bench.common import DEFAULT_INSTALL_NOTE, DIARIZE_DEFAULT, OUT, m3, machine, table  # noqa: E402

PERCEPTION = ("segment", "diarize", "voices", "faces")
REST = ("memorize", "link", "abstract", "index")


def _pipe(stages: tuple[str, ...], first_input: Path | None, video: Path, tmp: Path, cache: Path, tag: str):
    """Run ``stages`` as cold processes, each reading the previous one's output; their costs and the
    last JSONL output."""
    env = {"M3_CACHE": str(cache)}
    costs: dict[str, Cost] = {}
    previous = first_input
    for stage in stages:
        out: Path | None = tmp / f"{tag}-{stage}.jsonl"
        if stage == "segment":
            args = m3("segment", str(video))
        elif stage == "index":
            args, out = m3("index", "-o", str(tmp / f"{tag}.lance")), None
        elif stage == "diarize":
            args = m3("diarize", *DIARIZE_DEFAULT)
        else:
            args = m3(stage)
        print(f"   {tag}: {stage}", file=sys.stderr, flush=True)
        costs[stage] = measure(args, env, stdin=previous, stdout=out)
        previous = out if out is not None else previous
    return costs, previous


def _files(cache: Path) -> set[Path]:
    return {p for p in cache.rglob("*") if not p.is_dir()}


def _forget_since(cache: Path, kept: set[Path]) -> None:
    """Remove from ``cache`` every file that is not in ``kept`` (cache entries are written once, under
    new names, so this returns it to the state ``kept`` was taken in)."""
    for path in _files(cache) - kept:
        path.unlink()


def main() -> str:
    from bench.footage import make_footage, sources

    if not sources():
        return "### sight cost\n\n../shared/media/video is missing: skipped.\n"
    video = make_footage(OUT / f"footage-{int(SECONDS)}s.mp4", SECONDS)
    tmp = Path(tempfile.mkdtemp(prefix="m3-bench-sight-"))
    try:
        print(f"== sight cost {SECONDS:.0f} s: plain faster-whisper tiny.en", file=sys.stderr, flush=True)
        whisper = measure([sys.executable, "-c", WHISPER, str(video)], {})
        perception, faces_out = _pipe(PERCEPTION, None, video, tmp, tmp / "cache", "perception")
        assert faces_out is not None
        print("   m3 sight", file=sys.stderr, flush=True)
        sight_out = tmp / "sight.jsonl"
        sight = measure(m3("sight"), {"M3_CACHE": str(tmp / "cache")}, stdin=faces_out, stdout=sight_out)
        # each rest from the cache as perception and sight left it: the second run must not find the
        # first one's embeddings of the lines both have
        kept = _files(tmp / "cache")
        rest_with, _ = _pipe(REST, sight_out, video, tmp, tmp / "cache", "with")
        _forget_since(tmp / "cache", kept)
        rest_without, _ = _pipe(REST, faces_out, video, tmp, tmp / "cache", "without")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    base = sum(c.cpu for c in perception.values())
    without = base + sum(c.cpu for c in rest_without.values())
    with_sight = base + sight.cpu + sum(c.cpu for c in rest_with.values())
    wall_without = sum(c.wall for c in perception.values()) + sum(c.wall for c in rest_without.values())
    wall_with = (
        sum(c.wall for c in perception.values()) + sight.wall + sum(c.wall for c in rest_with.values())
    )
    wall_note = f"wall {wall_without:.0f} s"
    rows = [
        [
            "`m3 sight`",
            f"{sight.cpu:.1f}",
            f"{sight.cpu / SECONDS:.4f}",
            f"**{sight.cpu / whisper.cpu:.2f}x**",
            f"{sight.rss_mb:.0f}",
            "target <= 0.2x the peer",
        ],
        [
            "plain faster-whisper tiny.en (peer)",
            f"{whisper.cpu:.1f}",
            f"{whisper.cpu / SECONDS:.4f}",
            "1.00x",
            f"{whisper.rss_mb:.0f}",
            "default settings",
        ],
        ["pipe without sight", f"{without:.1f}", f"{without / SECONDS:.4f}", "", "", wall_note],
        [
            "pipe with sight",
            f"{with_sight:.1f}",
            f"{with_sight / SECONDS:.4f}",
            "",
            "",
            f"wall {wall_with:.0f} s; **{with_sight / without:.3f}x** without (target <= 1.10x)",
        ],
    ]
    stages = [
        [
            name,
            f"{perception[name].cpu:.1f}" if name in perception else "",
            f"{rest_without[name].cpu:.1f}" if name in rest_without else "",
            (
                f"{perception[name].cpu:.1f}"
                if name in perception
                else f"{sight.cpu:.1f}"
                if name == "sight"
                else f"{rest_with[name].cpu:.1f}"
            ),
        ]
        for name in (*PERCEPTION, "sight", *REST)
    ]
    return (
        table(
            f"Sight's cost on {SECONDS:.0f} s of real footage, cold processes, one run, "
            f"{DEFAULT_INSTALL_NOTE} — {machine()}",
            ["", "CPU-s", "per video s", "x peer", "peak MB", "note"],
            rows,
        )
        + "\n"
        + table("The same run per stage (CPU-s)", ["stage", "perception (shared)", "without", "with"], stages)
    )


if __name__ == "__main__":
    print(main())
