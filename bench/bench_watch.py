"""`m3 watch` on a live UDP stream: clip-complete -> commit latency, lag, CPU per video second, RSS.

`ffmpeg -re` sends real footage (bench/footage.py, from ../shared/media/video) as MPEG-TS over
127.0.0.1 UDP; `m3 watch` records it, cuts 30-s clips (the default) and commits each with the offline
defaults. Reported in one run, side by side: latency p50/p95 (from the moment a clip's last second
arrived to its commit; target p95 <= 10 s), the watcher's CPU per video second (models, every stage,
recording and indexing), plain faster-whisper tiny.en's CPU per video second on the same recording (on
one thread, as m3 runs CTranslate2), and the watcher's peak RSS and RSS after each clip.
``M3_BENCH_WATCH_SECONDS`` (default 150) sets the stream's length.
"""

from __future__ import annotations

import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # bench.*, behind the installed m3cli

from bench.bench_footage import WHISPER_1T, measure  # noqa: E402
from bench.common import OUT, m3, machine, table  # noqa: E402

SECONDS = float(os.environ.get("M3_BENCH_WATCH_SECONDS", "150"))
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


def main() -> str:
    import orjson

    import bench.footage as footage

    if not footage.SHARED_VIDEO.is_dir():  # a checkout placed deeper than beside ../shared
        found = [d for d in (p / "shared" / "media" / "video" for p in ROOT.parents) if d.is_dir()]
        if found:
            footage.SHARED_VIDEO = found[0]
    make_footage = footage.make_footage
    video = make_footage(OUT / f"footage_{int(SECONDS)}s.mp4", SECONDS)
    with tempfile.TemporaryDirectory(prefix="m3-bench-watch-") as tmp_name:
        tmp = Path(tmp_name)
        port, status = _port(), tmp / "status.json"
        env = {**os.environ, **OFFLINE, "M3_CACHE": str(tmp / "cache")}
        args = m3("watch", f"udp://127.0.0.1:{port}", "-o", str(tmp / "live.lance"), "--offline",
                  "--state", str(tmp / "state"), "--status", str(status), "--give-up", "6")  # fmt: skip
        start = time.perf_counter()
        log = (tmp / "watch.err").open("wb")
        watch = subprocess.Popen([sys.executable, "-c", _MEASURE, *args], env=env, stderr=log)
        while not (status.exists() and b'"running"' in status.read_bytes()):
            if watch.poll() is not None:
                raise SystemExit((tmp / "watch.err").read_text())
            time.sleep(0.2)
        print(f"== streaming {SECONDS:.0f} s of footage", file=sys.stderr, flush=True)
        send = ["ffmpeg", "-nostdin", "-v", "error", "-re", "-i", str(video), "-c", "copy", "-f", "mpegts"]
        sender = subprocess.Popen([*send, f"udp://127.0.0.1:{port}?pkt_size=1316"])
        rss: dict[int, float] = {}  # the watcher's RSS after each commit, from its status file
        while watch.poll() is None:
            try:
                now = orjson.loads(status.read_bytes())
                rss.setdefault(now["clips_committed"], now["rss_mb"])
            except (OSError, orjson.JSONDecodeError, KeyError):
                pass
            time.sleep(0.5)
        sender.wait(timeout=60)
        log.close()
        wall = time.perf_counter() - start
        text = (tmp / "watch.err").read_text()
        if watch.returncode:
            raise SystemExit(f"m3 watch failed:\n{text[-3000:]}")
        cpu, rss_kb = text.rsplit("RUSAGE", 1)[1].split()[:2]
        latencies = [float(x) for x in re.findall(r"committed ([0-9.]+) s after it arrived", text)]
        final = orjson.loads(status.read_bytes())
        print("== faster-whisper on the recording", file=sys.stderr, flush=True)
        peer = measure([sys.executable, "-c", WHISPER_1T, str(tmp / "state" / "spool.ts")], {})
    per_s = float(cpu) / SECONDS
    rows = [
        [
            f"{SECONDS:.0f} s, {final['clips_committed']} clips of 30 s",
            f"{statistics.median(latencies):.1f}" if latencies else "-",
            f"{_q(latencies, 0.95):.1f}" if latencies else "-",
            f"{max(latencies):.1f}" if latencies else "-",
            f"{final['lag_s']:.1f}",
            f"{per_s:.3f}",
            f"{peer.cpu / SECONDS:.3f}",
            f"{per_s / (peer.cpu / SECONDS):.1f}x",
            f"{int(rss_kb) / 1024:.0f}",
            " / ".join(f"{rss[k]:.0f}" for k in sorted(rss) if k > 0),
            f"{wall:.0f}",
        ]
    ]
    return table(
        f"m3 watch on a live UDP stream (offline defaults, 30-s clips) — {machine()}",
        ["stream", "latency p50 (s)", "p95 (s)", "max (s)", "lag at end (s)", "CPU-s / video s",
         "faster-whisper CPU-s / video s", "x whisper", "peak RSS (MB)", "RSS after each clip (MB)",
         "wall (s)"],
        rows,
    )  # fmt: skip


if __name__ == "__main__":
    print(main())
