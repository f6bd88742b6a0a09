"""How many intra-op threads each numeric library may use (torch, onnxruntime, CTranslate2, BLAS).

Measured on a busy 2-core machine (bench/bench_threads.py; README, Performance): one thread per library
was as fast or faster than the libraries' defaults for every model m3 ships, and spent less CPU —
MiniLM embeddings took 9.1 s with torch on 1 thread and 14.6 s on 2, 4.7 s vs 7.4 s with onnxruntime;
Whisper tiny.en in CTranslate2 took the same wall time on 1 or 2 threads. Stages of a shell pipe run
side by side, so each process using one core is also what keeps the pipe from oversubscribing.

The counts come from ``Settings.threads`` (``[threads]`` in m3.toml, ``M3_TORCH_THREADS``,
``M3_ONNX_THREADS``, ``M3_CT2_THREADS``, ``M3_BLAS_THREADS``) through :func:`configure`; code that
runs stages without settings gets the measured defaults.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

DEFAULT = 1
LIBRARIES = ("torch", "onnxruntime", "ctranslate2", "blas")
_BLAS_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")

_counts: dict[str, int] = {}


def configure(thread_settings: Any) -> None:
    """Adopt ``Settings.threads``; BLAS is limited now (before numpy loads, through its environment)."""
    for library in LIBRARIES:
        value = getattr(thread_settings, library, None)
        if value:
            _counts[library] = int(value)
    limit_blas()


def count(library: str) -> int:
    """Threads for ``library`` (one of LIBRARIES)."""
    if library not in LIBRARIES:
        raise ValueError(f"unknown library {library!r}; valid: {', '.join(LIBRARIES)}")
    return _counts.get(library, DEFAULT)


def limit_blas() -> None:
    """Cap BLAS thread pools. The environment is always set (a variable the user set wins): a BLAS
    library reads it when it loads, which covers numpy's when numpy is not loaded yet, scipy's own copy
    that loads later, and every process this one spawns (`m3 batch`'s workers once ran numpy on every
    core because the parent had loaded numpy before its settings were read). threadpoolctl caps the
    pools already loaded."""
    n = count("blas")
    for var in _BLAS_ENV:
        os.environ.setdefault(var, str(n))
    if "numpy" not in sys.modules:
        return
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
        return
    threadpool_limits(limits=n, user_api="blas")


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """BLAS on one thread inside the block, whatever the settings: for a computation whose result must
    not depend on the thread count. OpenBLAS splits a matrix product differently on 1 and 2 threads and
    the last bits move; Whisper's log-mel features are such a product, and tiny.en's beam search turns
    those bits into other words ("So, this was" vs "This was" on latentsync_2people_turns)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield


def apply_torch(torch: Any) -> None:
    """Set torch's intra-op threads (call right after importing torch to load a model)."""
    n = count("torch")
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)


def onnx_session_options(ort: Any) -> Any:
    """onnxruntime SessionOptions with this process's intra-op thread count, no inter-op pool and no
    memory arena.

    The arena keeps every buffer a run allocated for the next run and grows by doubling; with inputs
    whose shapes change from call to call (speech turns, token counts, text lines) it only grows, by
    amounts that depend on the order of the calls. Over 30 minutes of footage in passes, turning it off
    here and in the text reader lowered the peak by 300-350 MB for no more CPU (docs/scale-length.md).
    """
    options = ort.SessionOptions()
    options.intra_op_num_threads = count("onnxruntime")
    options.inter_op_num_threads = 1
    options.enable_cpu_mem_arena = False
    return options
