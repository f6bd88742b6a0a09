"""Lazy imports of scipy, scikit-learn, hdbscan and torch in the stages go through one lock.

`m3 run` runs faces beside diarize -> voices in two threads; both import parts of these packages on
first need, and two threads entering their circular imports at once once handed one of them a
partially initialised scipy.spatial.distance (a failed run). The lock lives in
stages/core/imports.py; this test keeps every stage's lazy import behind it.
"""

from __future__ import annotations

import ast
import threading
from pathlib import Path

from conftest import ROOT

GUARDED = ("scipy", "sklearn", "hdbscan", "torch")


def _direct_imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        found += [f"{path.relative_to(ROOT)}:{node.lineno} {n}" for n in names if n.split(".")[0] in GUARDED]
    return found


def test_stages_import_scipy_sklearn_hdbscan_and_torch_only_through_the_lock():
    # evaluation commands run one thread and compare with the libraries directly: they may import them
    sources = [p for p in (ROOT / "stages").rglob("*.py") if "eval" not in p.relative_to(ROOT).parts]
    assert len(sources) > 40
    offenders = [hit for p in sources for hit in _direct_imports(p)]
    assert offenders == [], "import these with m3cli.stages.core.imports.heavy_import: " + ", ".join(
        offenders
    )


def test_heavy_import_serialises_two_threads(monkeypatch):
    from m3cli.stages.core import imports

    inside, overlaps = [], []
    real = imports.importlib.import_module

    def slow_import(name: str):
        inside.append(name)
        if len(inside) > 1:
            overlaps.append(tuple(inside))
        threading.Event().wait(0.05)  # long enough for the other thread to arrive
        inside.remove(name)
        return real(name)

    monkeypatch.setattr(imports.importlib, "import_module", slow_import)
    threads = [threading.Thread(target=imports.heavy_import, args=(n,)) for n in ("json", "csv")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(inside) == [] and not overlaps  # one import at a time, the other waited


def test_an_export_holds_the_lock_while_it_imports_torch_and_builds(tmp_path):
    """On an empty model store the speaker thread exports its networks (importing torch) while the
    faces thread imports hdbscan, whose scipy reads ``torch.Tensor`` from ``sys.modules``: a first
    `m3 run` failed on a torch still being imported. The export now keeps scipy out until it is done."""
    from m3cli.stages.backends.onnx import export
    from m3cli.stages.core import imports

    building, checked = threading.Event(), threading.Event()
    lock_free_while_building = []

    def build(torch):
        building.set()
        checked.wait(10)
        module = torch.nn.Linear(4, 2).eval()
        return module, (torch.zeros(1, 4),), {}

    weights = tmp_path / "weights.bin"
    weights.write_bytes(b"tiny")
    spec = export.OnnxExport("tiny", "test-1", weights, build, ("x",), ("y",))

    def other_branch() -> None:
        building.wait(10)
        free = imports._LOCK.acquire(blocking=False)
        if free:
            imports._LOCK.release()
        lock_free_while_building.append(free)
        checked.set()

    other = threading.Thread(target=other_branch)
    other.start()
    onnx_bytes = export._export(spec)
    other.join()
    assert lock_free_while_building == [False]
    assert len(onnx_bytes) > 100  # a real export of the network
