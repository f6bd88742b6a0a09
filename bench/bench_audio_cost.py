"""The speaker stack's cost beside plain faster-whisper on the real footage (`just bench audio_cost`).

The same measurement as the audio rows of bench_footage.py without the face, memory and start-up rows:
`m3 segment | m3 diarize | m3 voices`, each a cold process from an empty cache, and the peer (plain
faster-whisper tiny.en with its default settings, the WHISPER snippet of bench_footage.py) on the same
video. The peer is also run on one thread (``cpu_threads=1``, as m3 runs CTranslate2): by default
CTranslate2 starts 4 threads, whose waiting costs CPU seconds that change with the machine's load (0.114
to 0.216 CPU-s per second for the same run here). Peers and stack run alternately
``M3_BENCH_AUDIO_ROUNDS`` times (default 1) and the median of each is reported.
``M3_BENCH_FOOTAGE_SECONDS`` picks the footage length (default 600; 60 for a quick look, where start-up
weighs more). A second table runs the stack and both peers once on the short test videos (10-50 s),
where each process's start-up weighs most.

Targets (issues 9, 10): diarize + voices <= 1.3x the peer's CPU seconds and <= 0.15 CPU-s per second.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # bench.*, behind the installed m3cli

from bench.bench_footage import SECONDS, WHISPER, WHISPER_1T, Cost, measure  # noqa: E402
from bench.common import DIARIZE_DEFAULT, OUT, m3, machine, table  # noqa: E402

ROUNDS = int(os.environ.get("M3_BENCH_AUDIO_ROUNDS", "1"))
DATA = ROOT / "tests" / "data"
SHORT = [DATA / "short_hamilton_clip.mp4", DATA / "libri5.mp4", DATA / "fixture.mp4"]


def short_videos(tmp: Path) -> str:
    """The same comparison on the short test videos, where each process's start-up weighs most."""
    import av

    rows = []
    for video in SHORT:
        with av.open(str(video)) as container:
            seconds = float(container.duration or 0) / 1e6
        print(f"== audio cost, {video.name}", file=sys.stderr, flush=True)
        peer = measure([sys.executable, "-c", WHISPER, str(video)], {})
        peer_1t = measure([sys.executable, "-c", WHISPER_1T, str(video)], {})
        costs = stack(video, tmp)
        both = costs["diarize"].cpu + costs["voices"].cpu
        rows.append(
            [
                f"{video.name}, {seconds:.1f} s",
                f"{both:.1f}",
                f"{both / seconds:.3f}",
                f"{both / peer.cpu:.2f}x",
                f"{both / peer_1t.cpu:.2f}x",
            ]
        )
    return table(
        f"Speaker stack (diarize + voices) on short videos, cold processes — {machine()}",
        ["video", "CPU-s", "per audio s", "x peer", "x peer on 1 thread"],
        rows,
    )


def stack(video: Path, tmp: Path) -> dict[str, Cost]:
    """segment, diarize and voices as cold processes over an empty cache, as in the shell pipe."""
    env = {"M3_CACHE": str(tmp / "cache")}
    shutil.rmtree(tmp / "cache", ignore_errors=True)
    costs, previous = {}, None
    for stage in ("segment", "diarize", "voices"):
        out = tmp / f"{stage}.jsonl"
        args = m3("segment", str(video)) if stage == "segment" else m3(stage)
        args += list(DIARIZE_DEFAULT) if stage == "diarize" else []  # as the default install
        costs[stage] = measure(args, env, stdin=previous, stdout=out)
        previous = out
    return costs


def main() -> str:
    from bench.footage import make_footage, sources

    if not sources():
        return "### speaker stack vs plain faster-whisper\n\n../shared/media/video is missing: skipped.\n"
    video = make_footage(OUT / f"footage-{int(SECONDS)}s.mp4", SECONDS)
    tmp = Path(tempfile.mkdtemp(prefix="m3-bench-audio-"))
    runs: list[dict[str, Cost]] = []
    peers: list[Cost] = []
    peers_1t: list[Cost] = []
    try:
        for i in range(ROUNDS):
            print(f"== audio cost {SECONDS:.0f} s, round {i + 1}/{ROUNDS}: peer", file=sys.stderr, flush=True)
            peers.append(measure([sys.executable, "-c", WHISPER, str(video)], {}))
            peers_1t.append(measure([sys.executable, "-c", WHISPER_1T, str(video)], {}))
            print("   segment | diarize | voices", file=sys.stderr, flush=True)
            runs.append(stack(video, tmp))
        short = short_videos(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    def med(values: list[float]) -> float:
        return statistics.median(values) / SECONDS

    peer = med([p.cpu for p in peers])
    peer_1t = med([p.cpu for p in peers_1t])
    diar = med([r["diarize"].cpu for r in runs])
    voices = med([r["voices"].cpu for r in runs])
    both = diar + voices
    rows = [
        ["`m3 diarize`", f"{diar:.3f}", f"{diar / peer:.2f}x", f"{diar / peer_1t:.2f}x", ""],
        ["`m3 voices`", f"{voices:.3f}", f"{voices / peer:.2f}x", f"{voices / peer_1t:.2f}x", ""],
        [
            "**diarize + voices**",
            f"**{both:.3f}**",
            f"**{both / peer:.2f}x**",
            f"**{both / peer_1t:.2f}x**",
            "targets <= 0.15 CPU-s/s and <= 1.3x",
        ],
        ["plain faster-whisper tiny.en (peer)", f"{peer:.3f}", "1.00x", "", "default settings (4 threads)"],
        ["the same on 1 thread (peer)", f"{peer_1t:.3f}", "", "1.00x", "cpu_threads=1"],
    ]
    totals = [r["diarize"].cpu + r["voices"].cpu for r in runs]
    spread = ", ".join(
        f"{t / p.cpu:.2f}x / {t / q.cpu:.2f}x" for t, p, q in zip(totals, peers, peers_1t, strict=True)
    )
    footage = table(
        f"Speaker stack vs plain faster-whisper, real footage {SECONDS:.0f} s, cold processes, median of "
        f"{ROUNDS} (each round: {spread}) — {machine()}",
        ["what", "CPU-s per audio s", "x peer", "x peer on 1 thread", "note"],
        rows,
    )
    return footage + "\n" + short


if __name__ == "__main__":
    print(main())
