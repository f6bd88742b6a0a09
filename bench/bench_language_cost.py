"""What knowing the spoken language costs on English speech (`just bench language_cost`).

The whole pipeline, `m3 run FILE -o MEMORY --no-llm`, as a cold process on an empty cache, on English
recordings of the test data, two ways run one after the other in each round: as the default install
runs it (each speaker's language identified by Whisper base, foreign speakers read by it) and with
``--set diarize.second_reading=off`` (tiny.en alone, the behaviour before language identification).
CPU seconds are user + system of the process and its children; the median of
``M3_BENCH_LANGUAGE_ROUNDS`` rounds (default 3) is reported. Both ways must write the same English
words: the table says whether every utterance's text was the same.

``M3_BENCH_LANGUAGE_LONG=600`` adds a long recording: the six recordings' sound, 16 kHz mono, one
after the other and repeated to that many seconds (a WAV: sound alone, so no faces or sight dilute the
cost of listening; an upper bound for video). It is reported on its own row, outside the six's total:
the language ID's fixed cost (loading Whisper base) weighs on short files, its per-speaker cost on long
ones.

Target (issue 35): English footage's whole-pipeline cost up by at most 5%, its words unchanged.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # bench.*, behind the installed m3cli

import bench  # noqa: E402,F401 - finds m3 (bench/__init__.py)
from bench.bench_footage import Cost, measure  # noqa: E402
from bench.common import OUT, m3, machine, table  # noqa: E402

DATA = ROOT / "tests" / "data"
#: English speech only (truth in tests/data/README.md): LibriSpeech readers, the White House clip,
#: AMI meeting excerpts and the 1961 inaugural address
ENGLISH = [
    DATA / "short_hamilton_clip.mp4",
    DATA / "jfk.wav",
    DATA / "dev00.wav",
    DATA / "dev01.wav",
    DATA / "libri5.mp4",
    DATA / "fixture.mp4",
]
ROUNDS = int(os.environ.get("M3_BENCH_LANGUAGE_ROUNDS", "3"))
LONG_SECONDS = float(os.environ.get("M3_BENCH_LANGUAGE_LONG", "0"))
WAYS = {"default": (), "tiny.en alone": ("--set", "diarize.second_reading=off")}


def _seconds(path: Path) -> float:
    import av

    with av.open(str(path)) as container:
        return float(container.duration or 0) / 1e6


def long_english(seconds: float) -> Path:
    """The English recordings' sound one after the other, repeated to ``seconds`` (kept in bench/out)."""
    out = OUT / f"english-{seconds:g}s.wav"
    if out.exists():
        return out
    OUT.mkdir(parents=True, exist_ok=True)
    inputs = [arg for path in ENGLISH for arg in ("-i", str(path))]
    joined = "".join(f"[{i}:a]aresample=16000,pan=mono|c0=c0[a{i}];" for i in range(len(ENGLISH)))
    chain = "".join(f"[a{i}]" for i in range(len(ENGLISH))) + f"concat=n={len(ENGLISH)}:v=0:a=1[all]"
    once = out.with_suffix(".once.wav")
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", *inputs, "-filter_complex", joined + chain,
                    "-map", "[all]", "-ac", "1", "-ar", "16000", str(once)], check=True)  # fmt: skip
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", "-stream_loop", "-1", "-i", str(once),
                    "-t", f"{seconds:g}", "-c", "copy", str(out)], check=True)  # fmt: skip
    once.unlink()
    return out


def _words(memory: Path) -> list[tuple[str, str]]:
    """Every utterance's (language, text), in order, from the memory's clips table."""
    import lancedb

    rows = lancedb.connect(str(memory)).open_table("nodes").to_arrow().to_pylist()
    said = [r for r in rows if r.get("kind") == "episodic" and " says" in (r.get("text") or "")]
    return sorted((str(r.get("clip")), r["text"]) for r in said)


def run_once(video: Path, way: tuple[str, ...], tmp: Path) -> tuple[Cost, list[tuple[str, str]]]:
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    memory = tmp / "mem.lance"
    cost = measure(
        m3("-q", "run", str(video), "-o", str(memory), "--no-llm", *way), {"M3_CACHE": str(tmp / "c")}
    )
    return cost, _words(memory)


def main() -> str:
    work = Path(tempfile.mkdtemp(prefix="m3-bench-language-"))
    long = [long_english(LONG_SECONDS)] if LONG_SECONDS else []
    cpu: dict[tuple[str, str], list[float]] = {}
    same: dict[str, bool] = {}
    try:
        for i in range(ROUNDS):
            for video in ENGLISH + long:
                print(f"== language cost, round {i + 1}/{ROUNDS}: {video.name}", file=sys.stderr, flush=True)
                words = {}
                for name, way in WAYS.items():
                    cost, words[name] = run_once(video, way, work / "run")
                    cpu.setdefault((video.name, name), []).append(cost.cpu)
                same[video.name] = same.get(video.name, True) and words["default"] == words["tiny.en alone"]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rows = []
    totals = dict.fromkeys(WAYS, 0.0)

    def row(video: Path) -> list[str]:
        med = {name: statistics.median(cpu[(video.name, name)]) for name in WAYS}
        return [
            f"{video.name}, {_seconds(video):.1f} s",
            f"{med['tiny.en alone']:.1f}",
            f"{med['default']:.1f}",
            f"{med['default'] / med['tiny.en alone'] - 1:+.1%}",
            "same" if same[video.name] else "**differ**",
        ]

    for video in ENGLISH:
        for name in WAYS:
            totals[name] += statistics.median(cpu[(video.name, name)])
        rows.append(row(video))
    rows.append(
        [
            "**all**",
            f"**{totals['tiny.en alone']:.1f}**",
            f"**{totals['default']:.1f}**",
            f"**{totals['default'] / totals['tiny.en alone'] - 1:+.1%}**",
            "same" if all(same.values()) else "**differ**",
        ]
    )
    for video in long:
        rows.append(row(video))
    return table(
        f"Knowing the language on English speech: `m3 run --no-llm`, cold, median CPU-s of {ROUNDS} "
        f"rounds — {machine()}",
        ["recording", "tiny.en alone", "default (language ID)", "cost", "words"],
        rows,
    )


if __name__ == "__main__":
    print(main())
