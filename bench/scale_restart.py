"""Restarts in bounded time: `m3 watch` back to committing after N committed clips, resuming its folds
from the checkpoint of its last commit, against the replay of every committed clip (warm cache, and the
cache gone, as after a move to another machine or a cache eviction).

The footage is real (bench/footage.py: the shared clips looped by packet copy), remuxed to MPEG-TS and
written to a file the way a recorder grows it: first N clips and half of the next (``m3 watch`` commits
the N complete ones and is stopped with SIGTERM, as a service manager stops it), then the rest of clip
N + 1. Each restart runs on a copy of that state (memory, watch state, recording, and the cache as it
was at the stop, or none) with ``--until-eof``, and is timed from the process start to its first
commit (the status file's ``clips_committed`` going past N): model loading, the checkpoint read or the
replay, and the new clip's pipeline and commit. The table also gives the watcher's own account of the
first round (``last_round``: clips replayed, seconds to resume, CPU seconds) and the checkpoint's size.

``python -m bench.scale_restart`` (or in ``just bench scale``); ``M3_BENCH_RESTART_CLIPS`` (default 6)
sets N, ``M3_BENCH_RESTART_CLIP_SECONDS`` (default 30) the clip length, ``M3_BENCH_RESTART_COLD=0``
skips the cold-cache replay (the longest row: the whole pipeline over N clips again).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))

from bench.common import OUT, PIPELINE_DEFAULT, m3, machine, table  # noqa: E402
from bench.footage import make_footage  # noqa: E402

CLIPS = int(os.environ.get("M3_BENCH_RESTART_CLIPS", "6"))
CLIP_SECONDS = float(os.environ.get("M3_BENCH_RESTART_CLIP_SECONDS", "30"))
COLD = os.environ.get("M3_BENCH_RESTART_COLD", "1") != "0"
OFFLINE = {"HF_HUB_OFFLINE": "1", "M3_LLM_BASE_URL": "", "M3_LLM_MODEL": ""}


def _status(path: Path) -> dict:
    try:
        return orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}


def _watch(folder: Path, until_eof: bool, env: dict) -> subprocess.Popen:
    args = [folder / "camera.ts", "-o", folder / "m.lance", "--clip-seconds", f"{CLIP_SECONDS:g}",
            "--no-llm", "--state", folder / "state", "--status", folder / "status.json",
            *PIPELINE_DEFAULT]  # fmt: skip
    args += ["--until-eof"] if until_eof else ["--idle", "3600"]
    args += ["--max-lag", "100000"]  # the N clips are all there at once: none may be skipped
    return subprocess.Popen(
        m3("watch", *map(os.fspath, args)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )


def _append(path: Path, data: bytes, upto: int) -> None:
    with open(path, "ab") as fh:
        fh.write(data[path.stat().st_size if path.exists() else 0 : upto // 188 * 188])


def prepare(work: Path, env: dict) -> tuple[Path, bytes]:
    """The watch folder after N committed clips (``work/base``) and the whole recording's bytes."""
    seconds = (CLIPS + 1) * CLIP_SECONDS
    footage = make_footage(OUT / f"footage-{seconds:g}s.mp4", seconds)
    ts = work / "recording.ts"
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-i", os.fspath(footage), "-c", "copy",
                    "-f", "mpegts", os.fspath(ts)], check=True)  # fmt: skip
    data = ts.read_bytes()
    base = work / "base"
    base.mkdir()
    _append(base / "camera.ts", data, int(len(data) * (CLIPS + 0.5) / (CLIPS + 1)))
    began = time.monotonic()
    proc = _watch(base, until_eof=False, env=env)
    try:
        while _status(base / "status.json").get("clips_committed", 0) < CLIPS:
            if proc.poll() is not None:
                raise RuntimeError(f"m3 watch ended early: {proc.stderr.read().decode()[-2000:]}")
            time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    finally:
        proc.kill()
    print(f"   {CLIPS} clips committed in {time.monotonic() - began:.0f} s", file=sys.stderr)
    return base, data


def restart(
    base: Path, data: bytes, name: str, keep: bool, cache: Path | None, work: Path, env: dict
) -> dict:
    """One restart on a copy of ``base`` with the rest of the recording (``keep``: its checkpoint too,
    else the manifest's entry is removed, as a memory written before checkpoints has none); its timings."""
    folder = work / name
    shutil.copytree(base, folder, ignore=shutil.ignore_patterns("status.json"))
    state = orjson.loads((folder / "state" / "state.json").read_bytes())
    state["spool"] = os.fspath(folder / "camera.ts")
    (folder / "state" / "state.json").write_bytes(orjson.dumps(state))
    _append(folder / "camera.ts", data, len(data))
    manifest = orjson.loads((folder / "m.lance" / "m3.manifest.json").read_bytes())
    entry = next(iter(manifest.get("checkpoints", {}).values()), None)
    size = (folder / "m.lance" / entry["file"]).stat().st_size if entry else None
    if not keep:
        manifest.pop("checkpoints", None)
        (folder / "m.lance" / "m3.manifest.json").write_bytes(orjson.dumps(manifest))
    run_env = dict(env, M3_CACHE=os.fspath(work / f"cache-{name}"))
    if cache is not None:
        shutil.copytree(cache, work / f"cache-{name}")
    began = time.monotonic()
    proc = _watch(folder, until_eof=True, env=run_env)
    first = None
    while proc.poll() is None:
        if first is None and _status(folder / "status.json").get("clips_committed", 0) > CLIPS:
            first = time.monotonic() - began
        time.sleep(0.1)
    err = proc.stderr.read().decode()
    if proc.returncode != 0:
        raise RuntimeError(f"m3 watch failed: {err[-2000:]}")
    wall = time.monotonic() - began
    last = _status(folder / "status.json").get("last_round") or {}
    said = [line for line in err.splitlines() if "checkpoint of " in line]
    return {
        "first_commit_s": round(first if first is not None else wall, 1),
        "wall_s": round(wall, 1),
        "replayed": last.get("replayed"),
        "resume_s": last.get("resume_s"),
        "cpu_s": last.get("cpu_s"),
        "commit_s": (last.get("stages_s") or {}).get("commit"),
        "checkpoint_kb": round(size / 1024, 1) if size else None,
        "said": said[0].split(": ", 1)[-1] if said else "",
    }


def main() -> str:
    env = dict(os.environ, **OFFLINE)
    with tempfile.TemporaryDirectory(prefix="m3-restart-") as tmp:
        work = Path(tmp)
        env["M3_CACHE"] = os.fspath(work / "cache")
        base, data = prepare(work, env)
        shutil.copytree(work / "cache", work / "cache-at-stop")
        at_stop = work / "cache-at-stop"
        modes = [("checkpoint", True, at_stop), ("replay, warm cache", False, at_stop)]
        if COLD:
            modes.append(("replay, no cache", False, None))
        rows = []
        for name, keep, cache in modes:
            print(f"   restart: {name}", file=sys.stderr)
            r = restart(base, data, f"restart{len(rows)}", keep, cache, work, env)
            print(f"   {name}: {r}", file=sys.stderr)
            rows.append([
                name, CLIPS, r["first_commit_s"], r["replayed"], r["resume_s"], r["cpu_s"], r["commit_s"],
                r["checkpoint_kb"] if name == "checkpoint" else "", r["said"] or "(nothing)",
            ])  # fmt: skip
    title = (
        f"Restart of `m3 watch` after {CLIPS} committed {CLIP_SECONDS:g}-s clips of looped real footage, "
        f"to its first commit ({machine()}, load {os.getloadavg()[0]:.1f})"
    )
    header = [
        "restart", "committed clips", "to first commit (s)", "clips replayed", "resume (s)",
        "first round CPU (s)", "commit (s)", "checkpoint (KB)", "m3 said",
    ]  # fmt: skip
    return table(title, header, rows)


if __name__ == "__main__":
    print(main())
