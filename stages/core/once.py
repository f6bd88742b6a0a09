"""Values made at most once per key, safely from several threads.

`m3 run` loads models from two threads (faces beside diarize -> voices): a model both ask for must be
loaded once, and one slow load must not hold up the other branch's unrelated model. Each key gets its
own lock; the first thread to ask makes the value, a second asking for that key waits for it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class MadeOnce(Generic[V]):
    """A cache of values made on first request, one lock per key."""

    def __init__(self) -> None:
        self._values: dict[Hashable, V] = {}
        self._locks: dict[Hashable, threading.Lock] = {}
        self._guard = threading.Lock()

    def get(self, key: Hashable, make: Callable[[], V]) -> V:
        """The value of ``key``, made by ``make()`` the first time (a failed make is retried next time)."""
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            if key not in self._values:
                self._values[key] = make()
            return self._values[key]
