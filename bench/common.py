"""Helpers for the benchmark scripts: run a command, measure wall time and peak memory, print tables."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

OUT = Path(__file__).parent / "out"

#: How every bench runs diarize: as the default install does, with the second reading (multilingual
#: Whisper base is a dependency; it reads the turns tiny.en left without words). The one place to pin it
#: otherwise: ``m3 diarize`` takes DIARIZE_DEFAULT (``("--second-reading", "off")`` for one reading),
#: ``m3 run``/``batch``/``watch`` take PIPELINE_DEFAULT (``("--set", "diarize.second_reading=off")``).
DIARIZE_DEFAULT: tuple[str, ...] = ()
PIPELINE_DEFAULT: tuple[str, ...] = ()
DEFAULT_INSTALL_NOTE = "diarize as the default install runs it (second reading on)"


@dataclass
class Run:
    seconds: float
    peak_rss_mb: float
    stdout: bytes


_MEASURE = (
    "import resource, subprocess, sys\n"
    "code = subprocess.call(sys.argv[1:])\n"
    "sys.stderr.write('\\nPEAK_RSS_KB %d\\n' % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    "sys.exit(code)\n"
)


def run_cmd(args: list[str], env: dict | None = None, stdin: bytes | None = None) -> Run:
    """Run a command in a fresh process; a wrapper process reports the command's own peak RSS."""
    full_env = dict(os.environ, **(env or {}))
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", _MEASURE, *args], input=stdin or b"", capture_output=True, env=full_env
    )
    seconds = time.perf_counter() - start
    if proc.returncode:
        raise SystemExit(f"{' '.join(args)} failed:\n{proc.stderr.decode()}")
    peak_kb = int(proc.stderr.decode().rsplit("PEAK_RSS_KB", 1)[1].split()[0])
    return Run(seconds, peak_kb / 1024, proc.stdout)


def m3(*args: str) -> list[str]:
    return [sys.executable, "-m", "m3cli", *args]


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def table(title: str, header: list[str], rows: list[list[object]]) -> str:
    lines = [f"### {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def make_test_video(path: Path, seconds: int, fps: int = 30, width: int = 640, height: int = 360) -> Path:
    """A real H.264 + AAC file with changing pictures and a tone, written with PyAV (kept between runs)."""
    import av

    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".part.mp4")
    rng = np.random.default_rng(0)
    base = rng.integers(0, 255, (height // 8, width // 8, 3), dtype=np.uint8).repeat(8, 0).repeat(8, 1)
    with av.open(str(tmp), "w") as out:
        vs = out.add_stream("libx264", rate=fps)
        vs.width, vs.height, vs.pix_fmt = width, height, "yuv420p"
        vs.options = {"preset": "ultrafast", "crf": "30", "g": str(fps * 2)}
        aus = out.add_stream("aac", rate=16000)
        aus.layout = "mono"
        t = np.arange(16000) / 16000
        tone = (0.1 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)
        for i in range(seconds * fps):
            img = np.roll(base, i * 4, axis=1)
            frame = av.VideoFrame.from_ndarray(img, format="rgb24")
            frame.pts, frame.time_base = i, Fraction(1, fps)
            out.mux(vs.encode(frame))
        out.mux(vs.encode())
        for s in range(seconds):
            for j in range(0, 16000, 1000):
                frame = av.AudioFrame.from_ndarray(
                    tone[j : j + 1000].reshape(1, -1), format="flt", layout="mono"
                )
                frame.sample_rate, frame.pts, frame.time_base = 16000, s * 16000 + j, Fraction(1, 16000)
                out.mux(aus.encode(frame))
        out.mux(aus.encode())
    tmp.rename(path)
    return path
