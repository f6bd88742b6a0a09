"""Lazy imports of scipy, scikit-learn and hdbscan, one thread at a time.

Why: `m3 run` runs the faces stage beside diarize -> voices in a second thread, and both branches import
parts of scipy and scikit-learn the first time a clip needs them (hdbscan and linkage in faces; KMeans,
linkage and linear_sum_assignment in the speaker stack). These packages import each other in circles.
Python's per-module import locks, when two threads enter such a circle from different ends, hand one
thread a module that is still being initialised: a run failed with "cannot import name 'euclidean' from
partially initialized module 'scipy.spatial.distance'". Every lazy import of these packages goes
through :func:`heavy_import`, under one process-wide lock; a thread importing alone pays nothing, and
two threads would have taken turns on the interpreter lock anyway.
"""

from __future__ import annotations

import importlib
import threading
from types import ModuleType

_LOCK = threading.RLock()


def heavy_import(name: str) -> ModuleType:
    """``importlib.import_module(name)`` under the process-wide lock for scipy/scikit-learn/hdbscan."""
    with _LOCK:
        return importlib.import_module(name)
