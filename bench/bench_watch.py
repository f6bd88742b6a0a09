"""`m3 watch` on a live UDP stream: clip-complete -> commit latency, lag, CPU per video second, RSS over
time, and whether the memory built live equals `m3 run` on the recording.

`ffmpeg -re` sends real footage (bench/footage.py, from ../shared/media/video) as MPEG-TS over
127.0.0.1 UDP; `m3 watch` records it, cuts 30-s clips (the default) and commits each with the offline
defaults. Reported in one run, side by side: latency p50/p95 (from the moment a clip's last second
arrived to its commit; target p95 <= 10 s) and its first and last clips (a round that grew with
the clips so far would show there), the watcher's CPU per video second (models, every stage,
recording and indexing), plain faster-whisper tiny.en's CPU per video second on the footage streamed (on one
thread, as m3 runs CTranslate2), `m3 run`'s on the recording, the watcher's RSS after its first and last
clips, the machine's load average while it ran (the machine is shared: latency is wall time), and
whether the live memory equals `m3 run`'s (same clips, lines, face/voice/character ids).

Then the lag policy is exercised: the same footage is sent ``M3_BENCH_WATCH_LAG_RATE`` times faster
than real time (the watcher cannot keep up), with ``--max-lag M3_BENCH_WATCH_MAX_LAG``; the clips it
skipped and the largest lag it reached are reported.

A second table splits each clip's latency into its parts, from the watcher's status (``last_round``):
the wait from the clip's last second arriving to its round starting (the 0.5-s settle, the poll, and
an earlier round still running), then each stage of the round (diarize and voices; faces runs beside
them, so its part is what the round still waited for it after voices; decoding is inside the stages
that read the media), and the commit to the memory, with the round's CPU seconds and the watcher's
RSS after it.

Options (``python bench/bench_watch.py --help``; the environment gives the defaults `just bench watch`
uses): ``--seconds`` (``M3_BENCH_WATCH_SECONDS``, default 600) the live stream's length; ``--no-compare``
(``M3_BENCH_WATCH_COMPARE=0``) skips the `m3 run` comparison; ``--lag-rate 0``
(``M3_BENCH_WATCH_LAG_RATE=0``) skips the lag run.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # bench.*, behind the installed m3cli
sys.path.insert(0, str(ROOT / "tests"))  # support.*: the memory view the live tests compare

from bench.bench_footage import WHISPER_1T, measure  # noqa: E402
from bench.common import OUT, PIPELINE_DEFAULT, m3, machine, table  # noqa: E402
from support.memory_rows import memory_view  # noqa: E402

SECONDS = float(os.environ.get("M3_BENCH_WATCH_SECONDS", "600"))
COMPARE = os.environ.get("M3_BENCH_WATCH_COMPARE", "1") != "0"
LAG_RATE = float(os.environ.get("M3_BENCH_WATCH_LAG_RATE", "4"))
LAG_SECONDS = float(os.environ.get("M3_BENCH_WATCH_LAG_SECONDS", "300"))
MAX_LAG = float(os.environ.get("M3_BENCH_WATCH_MAX_LAG", "60"))
OFFLINE = {"HF_HUB_OFFLINE": "1", "M3_LLM_BASE_URL": "", "M3_LLM_MODEL": ""}

_MEASURE = (
    "import resource, subprocess, sys\n"
    "code = subprocess.call(sys.argv[1:])\n"
    "r = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
    "sys.stderr.write('\\nRUSAGE %.3f %d\\n' % (r.ru_utime + r.ru_stime, r.ru_maxrss))\n"
    "sys.exit(code)\n"
)


def _port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _q(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


@dataclass
class Watched:
    """One `m3 watch` of a stream, as the bench saw it."""

    final: dict
    latencies: list[float]
    cpu: float
    peak_rss_mb: float
    wall: float
    rss: dict[int, float] = field(default_factory=dict)  # clips committed -> the watcher's RSS (MB)
    rounds: dict[tuple[int, ...], dict] = field(default_factory=dict)  # clips -> last_round, rss_mb
    load: list[float] = field(default_factory=list)  # 1-min load average, sampled while it ran
    max_lag: float = 0.0
    spool: Path | None = None
    memory: Path | None = None
    log: str = ""


def watch_stream(video: Path, tmp: Path, rate: float | None = None, extra: tuple[str, ...] = ()) -> Watched:
    """Stream ``video`` at real time (or ``rate`` times it) into `m3 watch`; return what it did."""
    import orjson

    tmp.mkdir(parents=True, exist_ok=True)
    port, status, memory = _port(), tmp / "status.json", tmp / "live.lance"
    env = {**os.environ, **OFFLINE, "M3_CACHE": str(tmp / "cache")}
    args = m3("watch", f"udp://127.0.0.1:{port}", "-o", str(memory), "--no-llm", "--state",
              str(tmp / "state"), "--status", str(status), "--give-up", "6",
              *PIPELINE_DEFAULT, *extra)  # fmt: skip
    start = time.perf_counter()
    log = (tmp / "watch.err").open("wb")
    watch = subprocess.Popen([sys.executable, "-c", _MEASURE, *args], env=env, stderr=log)
    while not (status.exists() and b'"running"' in status.read_bytes()):
        if watch.poll() is not None:
            raise SystemExit((tmp / "watch.err").read_text())
        time.sleep(0.2)
    pace = ["-re"] if rate is None else ["-readrate", str(rate)]
    send = ["ffmpeg", "-nostdin", "-v", "error", *pace, "-i", str(video), "-c", "copy", "-f", "mpegts"]
    sender = subprocess.Popen([*send, f"udp://127.0.0.1:{port}?pkt_size=1316"])
    got = Watched({}, [], 0.0, 0.0, 0.0)
    while watch.poll() is None:
        try:
            now = orjson.loads(status.read_bytes())
            got.rss.setdefault(now["clips_committed"], now["rss_mb"])
            last = now.get("last_round")
            if last:
                got.rounds.setdefault(tuple(last["clips"]), {**last, "rss_mb": now["rss_mb"]})
            got.max_lag = max(got.max_lag, now["live_edge_s"] - now["committed_until_s"])
        except (OSError, orjson.JSONDecodeError, KeyError, TypeError):
            pass
        got.load.append(os.getloadavg()[0])
        time.sleep(0.25)
    sender.wait(timeout=60)
    log.close()
    got.wall = time.perf_counter() - start
    got.log = (tmp / "watch.err").read_text()
    if watch.returncode:
        raise SystemExit(f"m3 watch failed:\n{got.log[-3000:]}")
    cpu, rss_kb = got.log.rsplit("RUSAGE", 1)[1].split()[:2]
    got.cpu, got.peak_rss_mb = float(cpu), int(rss_kb) / 1024
    got.latencies = [float(x) for x in re.findall(r"committed ([0-9.]+) s after it arrived", got.log)]
    got.final = orjson.loads(status.read_bytes())
    if got.final.get("last_round"):
        last = got.final["last_round"]
        got.rounds.setdefault(tuple(last["clips"]), {**last, "rss_mb": got.final["rss_mb"]})
    got.spool, got.memory = tmp / "state" / "spool.ts", memory
    return got


def _load(values: list[float]) -> str:
    return f"{min(values):.1f}-{max(values):.1f}" if values else "-"


#: a round's parts in the order they happen (see m3cli.stages.live.status.RoundClock)
PARTS = ("diarize", "voices", "faces", "sight", "memorize", "link", "abstract", "commit")


def options(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=SECONDS, help="the live stream's length (s)")
    parser.add_argument("--no-compare", dest="compare", action="store_false", default=COMPARE,
                        help="skip `m3 run` on the recording")  # fmt: skip
    parser.add_argument("--lag-rate", type=float, default=LAG_RATE,
                        help="the lag run's stream rate (x real time); 0 skips it")  # fmt: skip
    parser.add_argument("--lag-seconds", type=float, default=LAG_SECONDS)
    return parser.parse_args(argv or [])


def _per_clip(live: Watched) -> str:
    """One row per round: the latency of its clips and where the time went."""
    latency = dict(zip(_clip_order(live.log), live.latencies, strict=False))
    rows = []
    for clips, r in sorted(live.rounds.items()):
        spans = r.get("stages_s", {})
        rows.append(
            [
                " ".join(map(str, clips)),
                " ".join(f"{latency[c]:.1f}" for c in clips if c in latency) or "-",
                f"{r['waited_s']:.1f}",
                *(f"{spans[k]:.1f}" if k in spans else "-" for k in PARTS),
                f"{r['cpu_s']:.1f}",
                f"{r['rss_mb']:.0f}" if r.get("rss_mb") else "-",
            ]
        )
    return table(
        "where each clip's latency went (s): wait = last second arrived -> round started; faces = waited "
        "for it after voices (it runs beside diarize and voices); stages include their decoding",
        ["clip", "latency", "wait", *PARTS, "round CPU-s", "RSS after (MB)"],
        rows,
    )


def _clip_order(log: str) -> list[int]:
    return [int(x) for x in re.findall(r"clip (\d+) \[[^]]*\] committed", log)]


def _growth(rss: list[float], skip: int = 3) -> str:
    """MB per clip after the first ``skip`` clips (least squares), the figure 'RSS flat' is about."""
    tail = rss[skip:]
    if len(tail) < 2:
        return "-"
    xs = list(range(len(tail)))
    mx, my = statistics.mean(xs), statistics.mean(tail)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, tail, strict=True)) / sum((x - mx) ** 2 for x in xs)
    return f"{slope:+.1f}"


def main(argv: list[str] | None = None) -> str:
    import bench.footage as footage

    opts = options(argv)
    seconds = opts.seconds
    if not footage.SHARED_VIDEO.is_dir():  # a checkout placed deeper than beside ../shared
        found = [d for d in (p / "shared" / "media" / "video" for p in ROOT.parents) if d.is_dir()]
        if found:
            footage.SHARED_VIDEO = found[0]
    video = footage.make_footage(OUT / f"footage_{int(seconds)}s.mp4", seconds)
    parts = []
    with tempfile.TemporaryDirectory(prefix="m3-bench-watch-") as tmp_name:
        tmp = Path(tmp_name)
        print(f"== streaming {seconds:.0f} s of footage (load {os.getloadavg()[0]:.1f})", file=sys.stderr)
        live = watch_stream(video, tmp / "live")
        # on the footage that was streamed, not the spool: faster-whisper's decode_audio stops at the
        # first undecodable packet, and a UDP drop leaves one where the recording resumed
        print("== faster-whisper on the streamed footage", file=sys.stderr, flush=True)
        peer = measure([sys.executable, "-c", WHISPER_1T, str(video)], {})
        same, run_cost = "not compared", None
        if opts.compare:
            print("== m3 run on the recording", file=sys.stderr, flush=True)
            offline = tmp / "run.lance"
            run_cost = measure(m3("run", str(live.spool), "-o", str(offline), "--no-llm", *PIPELINE_DEFAULT),
                               {"M3_CACHE": str(tmp / "run-cache")})  # fmt: skip
            a, b = memory_view(live.memory), memory_view(offline)
            differ = [k for k in a if a[k] != b[k]]
            same = (
                f"yes ({len(a['clips'])} clips, {len(a['nodes'])} lines, {len(a['entities'])} ids)"
                if not differ
                else f"NO: {', '.join(differ)} differ ({len(a['clips'])} vs {len(b['clips'])} clips)"
            )
        lat, final = live.latencies, live.final
        n = len(lat)
        k = min(3, n)
        rss = [live.rss[c] for c in sorted(live.rss) if c > 0 and live.rss[c] is not None]
        in_rounds = sum(r["cpu_s"] for r in live.rounds.values())
        row = [
            f"{seconds:.0f} s, {final['clips_committed']} clips",
            _load(live.load),
            f"{statistics.median(lat):.1f}" if lat else "-",
            f"{_q(lat, 0.95):.1f}" if lat else "-",
            f"{max(lat):.1f}" if lat else "-",
            f"{statistics.mean(lat[:k]):.1f} / {statistics.mean(lat[-k:]):.1f}" if lat else "-",
            f"{final['lag_s']:.1f}",
            f"{live.cpu / seconds:.3f}",
            f"{in_rounds:.0f} / {live.cpu - in_rounds:.0f}",
            f"{peer.cpu / seconds:.3f}",
            f"{run_cost.cpu / seconds:.3f}" if run_cost else "-",
            f"{statistics.mean(rss[:k]):.0f} / {statistics.mean(rss[-k:]):.0f}" if rss else "-",
            _growth(rss),
            f"{live.peak_rss_mb:.0f}",
            same,
            f"{live.wall:.0f}",
        ]
        parts.append(
            table(
                f"m3 watch on a live UDP stream (offline defaults, 30-s clips) — {machine()}",
                [
                    "stream",
                    "load avg (1 min) while watching",
                    "latency p50 (s)",
                    "p95 (s)",
                    "max (s)",
                    f"mean of first / last {k} clips (s)",
                    "lag at end (s)",
                    "watch CPU-s / video s",
                    "watch CPU-s in rounds / outside (start-up, recording, waiting)",
                    "faster-whisper CPU-s / video s",
                    "m3 run CPU-s / video s",
                    f"RSS after first / last {k} clips (MB)",
                    "RSS growth after clip 3 (MB/clip)",
                    "peak RSS (MB)",
                    "memory = m3 run on the recording",
                    "wall (s)",
                ],
                [row],
            )  # fmt: skip
        )
        parts.append(_per_clip(live))
        parts.append(
            "Per clip (commit order): latency (s) "
            + " ".join(f"{x:.1f}" for x in lat)
            + "\n\nRSS after each commit (MB): "
            + " ".join(f"{x:.0f}" for x in rss)
            + "\n"
        )
        if opts.lag_rate > 0:
            lag_seconds, rate = opts.lag_seconds, opts.lag_rate
            lag_video = footage.make_footage(OUT / f"footage_{int(lag_seconds)}s.mp4", lag_seconds)
            print(f"== lag policy: {lag_seconds:.0f} s at {rate:g}x real time", file=sys.stderr)
            fast = watch_stream(lag_video, tmp / "lag", rate, ("--max-lag", f"{MAX_LAG:g}"))
            parts.append(
                table(
                    f"lag policy: the stream arrives {rate:g}x faster than real time, --max-lag {MAX_LAG:g}",
                    [
                        "stream",
                        "load avg (1 min)",
                        "clips committed",
                        "clips skipped",
                        "largest lag seen (s)",
                        "lag at end (s)",
                        "latency p95 (s)",
                        "wall (s)",
                    ],
                    [
                        [
                            f"{lag_seconds:.0f} s",
                            _load(fast.load),
                            fast.final["clips_committed"],
                            " ".join(map(str, fast.final["skipped"])) or "none",
                            f"{fast.max_lag:.0f}",
                            f"{fast.final['lag_s']:.1f}",
                            f"{_q(fast.latencies, 0.95):.1f}" if fast.latencies else "-",
                            f"{fast.wall:.0f}",
                        ]
                    ],
                )  # fmt: skip
            )
    return "\n".join(parts)


if __name__ == "__main__":
    print(main(sys.argv[1:]))
