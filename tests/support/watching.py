"""Driving `m3 watch` from a test: a free UDP port for a stream, the command started in the background,
and its status file read and waited on."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import orjson


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_watch(*args: str | os.PathLike) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "m3cli", "watch", *map(os.fsdecode, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def read_status(path: Path) -> dict:
    try:
        return orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}


def wait_for(path: Path, test, timeout: float = 240.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = read_status(path)
        if status and test(status):
            return status
        time.sleep(0.2)
    raise AssertionError(f"status never reached the condition; last: {read_status(path)}")
