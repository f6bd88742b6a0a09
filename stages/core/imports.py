"""Lazy imports of scipy, scikit-learn, hdbscan and torch, one thread at a time.

Why: `m3 run` runs the faces stage beside diarize -> voices in a second thread, and both branches import
parts of scipy and scikit-learn the first time a clip needs them (hdbscan and linkage in faces; KMeans,
linkage and linear_sum_assignment in the speaker stack). These packages import each other in circles.
Python's per-module import locks, when two threads enter such a circle from different ends, hand one
thread a module that is still being initialised: a run failed with "cannot import name 'euclidean' from
partially initialized module 'scipy.spatial.distance'". Every lazy import of these packages goes
through :func:`heavy_import`, under one process-wide lock; a thread importing alone pays nothing, and
two threads would have taken turns on the interpreter lock anyway.

torch goes through the same lock. scipy's array-API layer, which ``scipy.stats`` runs while it is
imported (scikit-learn and hdbscan import it), looks at ``sys.modules["torch"]`` and reads
``torch.Tensor``: on an empty model store the speaker thread imports torch to export its networks
while the faces thread imports hdbscan, and the first `m3 run` failed with "partially initialized
module 'torch' has no attribute 'Tensor'".
"""

from __future__ import annotations

import contextlib
import importlib
import threading
from collections.abc import Iterator
from types import ModuleType

_LOCK = threading.RLock()


def heavy_import(name: str) -> ModuleType:
    """``importlib.import_module(name)`` under the process-wide lock for scipy/scikit-learn/hdbscan/torch."""
    with _LOCK:
        return importlib.import_module(name)


@contextlib.contextmanager
def imports_held() -> Iterator[None]:
    """Hold :func:`heavy_import`'s lock around code that imports torch and the packages a network is
    built from (an ONNX export, once per machine): the other branch's scipy waits until it is done."""
    with _LOCK:
        yield
