"""The benchmarks. Importing this package finds m3 for them, the one way: a benchmark run from a checkout
measures that checkout's code. That is the installed m3 when the install maps this checkout (an
editable install); otherwise (no install, or a copy installed by `pip install .`, which may be older)
this checkout laid out as installed.

In a checkout, stages/ and schemas/ sit beside m3cli/ and only installing maps them to m3cli.stages and
m3cli.schemas (pyproject.toml's package-dir). So without an install, ``python bench/run.py`` would find
the checkout's m3cli/ (the preamble puts the checkout on sys.path for ``bench.*``) but no m3cli.stages.
Then this lays the installed tree out as symbolic links under bench/out/tree (scripts/typecheck.py's
``lay_out``, as the type check does), puts it first on sys.path, and on PYTHONPATH so that the
``python -m m3cli`` the benchmarks start runs the same checkout.

A process that has already imported m3 (a test that borrows a benchmark's helper) keeps the m3 it has:
swapping modules under a running program leaves it two copies of every class, so an ``isinstance`` or
an ``except M3Error`` on one copy misses objects of the other.

Every script starts with the same preamble, before any ``m3cli`` import::

    sys.path.append(str(Path(__file__).resolve().parent.parent))  # bench.*, behind the installed m3cli
    import bench  # noqa: E402 - finds m3 (bench/__init__.py)
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TREE = ROOT / "bench" / "out" / "tree"


def _installed_is_this_checkout() -> bool:
    """Whether ``m3cli.stages`` imports as it is and is this checkout's stages/ (an editable install)."""
    try:
        stages = importlib.import_module("m3cli.stages")
    except ImportError:
        return False
    return Path(str(stages.__file__)).resolve().parent == ROOT / "stages"


def _lay_out_checkout() -> None:
    """This checkout, laid out as installed under TREE, first on sys.path and on PYTHONPATH."""
    spec = importlib.util.spec_from_file_location("typecheck", ROOT / "scripts" / "typecheck.py")
    assert spec is not None and spec.loader is not None
    typecheck = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(typecheck)
    typecheck.lay_out(TREE, typecheck.package_dirs())
    for name in [n for n in sys.modules if n == "m3cli" or n.startswith("m3cli.")]:
        del sys.modules[name]  # the checkout's bare m3cli/ without its stages, or another install
    sys.path.insert(0, str(TREE))
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(TREE), os.environ.get("PYTHONPATH")) if p)
    importlib.invalidate_caches()


def _already_imported() -> bool:
    """Whether this process holds m3 already (bench imported after m3, as by a test)."""
    return any(n == "m3cli" or n.startswith("m3cli.") for n in sys.modules)


#: True when m3 is this checkout laid out under TREE (no install of this checkout found, m3 not yet
#: imported by this process)
LAID_OUT = not _already_imported() and not _installed_is_this_checkout()
if LAID_OUT:
    _lay_out_checkout()
