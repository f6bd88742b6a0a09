"""The heap of a process that works for a long time: capping glibc's malloc arenas, giving free pages
back, and reading the resident size.

Why it is separate: it talks to the C library (``mallopt``, ``malloc_trim``, ``/proc``), not to the
stream or the memory. ``m3 watch`` calls :func:`bound_heap` before any model thread starts and its
rounds (:mod:`~m3cli.stages.live.stage`) call :func:`trim_heap` after each commit; ``m3 run`` calls
:func:`trim_heap` between the passes of a long video (:func:`~m3cli.stages.pipeline.process_video`).
"""

from __future__ import annotations

import functools
import os
from typing import Any

#: mallopt's parameter for the number of malloc arenas (glibc's malloc.h: M_ARENA_MAX)
_M_ARENA_MAX = -8


@functools.cache
def _libc() -> Any:
    """The C library, opened once (each commit trims the heap through it)."""
    import ctypes

    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc (musl, macOS): nothing to bound or trim
        return None


def bound_heap(arenas: int = 2) -> bool:
    """Cap glibc's malloc arenas for the long-running watcher; call it before the model threads start.

    Why: glibc gives a thread that meets a locked arena an arena of its own (up to 8 per core), and the
    threads of onnxruntime, CTranslate2 and the video decoder allocate and free large buffers each clip;
    what they free stays mapped in their arenas, fragmented, so on a cold cache the watcher's RSS grew
    about 190 MB per 30-s clip for the whole stream. With two arenas and :func:`trim_heap` after each
    commit it stays flat after the first clips, for about 3% more CPU (both measured with
    bench/bench_watch.py; the figures are in the README). True when the cap was set."""
    libc = _libc()
    try:
        return bool(libc is not None and libc.mallopt(_M_ARENA_MAX, arenas))
    except AttributeError:
        return False


def trim_heap() -> None:
    """Give the heap's free pages back to the system (glibc's ``malloc_trim``; nothing elsewhere); a
    few tens of ms. A round's or a pass's records, frames and model buffers are freed in many small
    holes that Python and the libraries would otherwise keep resident for the rest of the run."""
    libc = _libc()
    try:
        if libc is not None:
            libc.malloc_trim(0)
    except AttributeError:
        pass


def resident_mb() -> float | None:
    """This process's resident size in MiB (Linux's ``/proc``), or None where it cannot be read."""
    try:
        with open("/proc/self/statm") as fh:
            return round(int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20, 1)
    except (OSError, ValueError, IndexError):
        return None
