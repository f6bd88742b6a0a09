"""File locks across processes: ``flock`` on a lock file, waited for or refused at once.

Why ``flock``: the kernel drops the lock when its holder's last descriptor closes, also when the
process is killed with ``SIGKILL``, so a crash never leaves a stale lock for a restart to remove by
hand. The lock file itself stays; only the lock on it counts.

Two uses:

* :func:`hold` waits for (or tries) the lock on an open descriptor: the model store's make lock and
  the memory's writer lock wait for their turn.
* :class:`Exclusive` is one owner for as long as it runs (``m3 watch`` of a source into a memory): a
  second one is refused at once, told who holds it (process id, host and since when, written into the
  lock file by the holder).
"""

from __future__ import annotations

import os
import socket
from datetime import datetime, timezone
from pathlib import Path

import orjson

try:
    import fcntl
except ImportError:  # no flock on this platform: locks are advisory no-ops
    fcntl = None  # type: ignore[assignment]


def hold(fd: int, wait: bool = True) -> bool:
    """Take the exclusive ``flock`` on ``fd``: wait for it, or (``wait=False``) False at once when
    another process holds it. True where the platform has no ``flock`` (nothing to take)."""
    if fcntl is None:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except BlockingIOError:
        return False
    return True


class Held(Exception):
    """Another process holds the lock; ``holder`` is what it wrote (pid, host, since), maybe empty."""

    def __init__(self, path: Path, holder: dict) -> None:
        super().__init__(f"{path}: held by {holder}")
        self.path = path
        self.holder = holder

    def who(self) -> str:
        """``process 12345 on host (since 2026-12-05T18:30:00Z)``, or less where it was not said."""
        pid, host, since = (self.holder.get(k) for k in ("pid", "host", "since"))
        text = f"process {pid}" if pid else "another process"
        if host and host != socket.gethostname():
            text += f" on {host}"
        return text + (f" (since {since})" if since else "")


class Exclusive:
    """An exclusive lock on ``path``, taken without waiting, until :meth:`release` or the process ends.

    The holder writes ``{"pid", "host", "since"}`` into the file, for the message the next one gets.
    ``pid`` defaults to this process; a command that works in a child process names itself, the
    process a user would stop."""

    def __init__(self, path: Path, pid: int | None = None) -> None:
        self.path = Path(path)
        self.fd: int | None = None
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            if not hold(fd, wait=False):
                holder = _read_holder(fd)
                os.close(fd)
                raise Held(self.path, holder)
            try:
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)  # the file was removed by its last holder meanwhile: lock the new one
        self.fd = fd
        since = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        info = {"pid": pid or os.getpid(), "host": socket.gethostname(), "since": since}
        os.ftruncate(fd, 0)
        os.pwrite(fd, orjson.dumps(info) + b"\n", 0)

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing releases the flock
            self.fd = None

    def __enter__(self) -> Exclusive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _read_holder(fd: int) -> dict:
    try:
        data = orjson.loads(os.pread(fd, 4096, 0))
    except (OSError, orjson.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}
