"""``m3 watch FOLDER``: a drop folder, each new file (once it stops growing) through the pipeline like
one video of ``m3 run``.

Why it is separate: a drop folder has no stream id, no clips planned while the file grows and no
rounds; it shares only the watcher's status, stop flag and commit lock with the rounds over a
growing recording (:mod:`~m3cli.stages.live.stage`), which call :func:`run_folder` for a folder.
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path
from typing import TYPE_CHECKING

from m3cli.stages.core import media
from m3cli.stages.core.errors import M3Error
from m3cli.stages.live.status import WatchStatus, _now

if TYPE_CHECKING:
    from m3cli.stages.live.stage import Watcher


def run_folder(watcher: Watcher) -> WatchStatus:
    """Files appearing in the folder, each once it has not grown for ``idle`` seconds (or at once
    with ``until_eof``), through the pipeline like ``m3 run``; files already in the memory are
    skipped (by content id), so restarts do nothing twice.

    A file is known by what it is, not by its name: (device, inode, size, modification time). New
    content moved or copied over a name already processed is a new file and is processed. Entries
    that cannot be read as files (a dangling symbolic link, a file removed between the listing and
    its ``stat``) are passed over with one line each, never ending the watch. Each failed file is
    one ``m3: error:`` line and is counted: ``--until-eof`` fails when any file failed."""
    from m3cli.stages.batch.stage import expand_inputs, indexed_videos
    from m3cli.stages.pipeline import content_id, run_videos

    folder = Path(watcher.source)
    seen: dict[Path, tuple[int, int, int, int, float]] = {}
    handled: set[tuple[int, int, int, int]] = set()
    told: set[tuple[Path, str]] = set()
    watcher.status.state = "running"
    watcher._publish()

    def shown(path: Path) -> str:
        try:
            return media.display_name(path.relative_to(folder))
        except ValueError:
            return media.display_name(path)

    def once(path: Path, why: str) -> None:
        if (path, why) not in told:
            told.add((path, why))
            watcher.say(f"{shown(path)}: {why}; skipped")

    while not watcher.stopping.is_set():
        ready = []
        now = time.monotonic()
        for path in expand_inputs([folder]):
            try:
                st = path.stat()
            except FileNotFoundError:
                if path.is_symlink():
                    once(path, "a symbolic link to nothing")
                seen.pop(path, None)  # removed since the listing: nothing to do
                continue
            except OSError as exc:
                once(path, f"cannot be read ({exc.strerror or exc})")
                continue
            if not stat.S_ISREG(st.st_mode):
                once(path, "not a regular file")
                continue
            stamp = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
            if stamp in handled:
                continue
            if path not in seen or seen[path][:4] != stamp:
                seen[path] = (*stamp, now)
            if watcher.config.until_eof or now - seen[path][4] >= watcher.config.idle:
                ready.append((path, stamp))
        indexed = indexed_videos(watcher.memory) if ready else set()
        for path, stamp in ready:
            handled.add(stamp)
            if watcher.stopping.is_set():
                break
            try:
                if content_id(path, watcher.ctx) in indexed:
                    continue
                start = time.monotonic()
                with watcher.commit_lock:
                    for outcome, _ in run_videos(
                        [path], watcher.models, watcher.ctx, watcher.memory, keep_going=True
                    ):
                        if outcome.error:
                            _failed(watcher, shown(path), outcome.error)
                        else:
                            watcher.status.clips_committed += outcome.clips
                            watcher.status.last_commit = _now()
                            watcher.status.latencies.append(round(time.monotonic() - start, 3))
                            watcher.say(f"{shown(path)}: {outcome.clips} clips committed")
            except M3Error as exc:
                if not os.path.lexists(path):
                    once(path, "removed before it was read")
                else:
                    _failed(watcher, shown(path), str(exc))
            watcher._publish()
        if watcher.config.until_eof and not ready:
            break
        watcher.stopping.wait(watcher.config.poll * 5)
    watcher.status.state = "stopped" if watcher.stopping.is_set() else "ended"
    watcher._publish()
    return watcher.status


def _failed(watcher: Watcher, name: str, error: str) -> None:
    """One drop-folder file failed: counted, and one ``m3: error:`` line that names it once."""
    watcher.status.failed.append(name)
    full = media.display_name(Path(watcher.source) / name)
    for prefix in (full, name):  # the stages' messages begin with the path already
        if error.startswith(prefix + ":"):
            error = error[len(prefix) + 1 :].lstrip()
            break
    watcher.fail(f"{name}: {error}")
