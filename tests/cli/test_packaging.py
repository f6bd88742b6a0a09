"""One name per source file: stages/ and schemas/ load only as m3cli.stages and m3cli.schemas.

The folders sit at the top of the checkout and are installed into the m3cli namespace. Were a folder
importable under a second name (``stages`` from a checkout on sys.path, or ``m3cli.tests`` through a
patched ``__path__``), one file could load as two modules: two ``M3Error`` classes that ``except``
clauses tell apart, two thread pools. These tests hold the rule in this process, in a plain
``python`` started at the repository root (where the root is first on sys.path), and for Ray's
workers, which put the driver's working directory first on theirs.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

SOURCE = [ROOT / "stages", ROOT / "schemas", ROOT / "m3cli"]
FOREIGN_NAMES = ("stages", "schemas", "m3cli.tests", "m3cli.bench", "stages.core.errors", "schemas.records")


@pytest.mark.parametrize("name", FOREIGN_NAMES)
def test_source_folders_do_not_import_under_a_second_name(name):
    # tests/ is on the test run's sys.path, so ``stages`` may resolve to the namespace of the test
    # folder tests/stages/ (which holds no package code): the rule is that no source folder loads
    try:
        module = importlib.import_module(name)
    except ImportError:
        assert name not in sys.modules
        return
    places = [Path(p).resolve() for p in getattr(module, "__path__", [])]
    assert module.__file__ is None and places, module
    assert all(p.is_relative_to(ROOT / "tests") for p in places), places
    sys.modules.pop(name)


def test_m3cli_path_is_its_own_folder_only():
    import m3cli

    assert len(m3cli.__path__) == 1, m3cli.__path__


def test_no_source_file_is_loaded_twice():
    # what the suite has imported so far, plus the modules that carry process-wide state
    for name in ("m3cli.app", "m3cli.stages.core.errors", "m3cli.stages.batch.ray", "m3cli.schemas.records"):
        importlib.import_module(name)
    # the folders this process runs (installed or editable) and the checkout's own
    packages = [sys.modules[n].__file__ for n in ("m3cli", "m3cli.stages", "m3cli.schemas")]
    folders = {Path(f).resolve().parent for f in packages} | {p.resolve() for p in SOURCE}
    by_file: dict[Path, list[str]] = {}
    for name, module in list(sys.modules.items()):
        origin = getattr(module, "__file__", None)
        if not origin:
            continue
        path = Path(origin).resolve()
        ours = any(path.is_relative_to(folder) for folder in folders)
        if ours or name.split(".")[0] in ("stages", "schemas"):
            by_file.setdefault(path, []).append(name)
    assert len(by_file) > 10
    twice = {str(p): names for p, names in by_file.items() if len(names) > 1}
    assert twice == {}
    assert all(n == "m3cli" or n.startswith("m3cli.") for names in by_file.values() for n in names)


def test_a_checkout_on_sys_path_still_refuses_the_bare_names():
    # `python -c` at the repository root puts the root first on sys.path, as a user's shell would
    env = {k: v for k, v in os.environ.items() if k != "PYTHONSAFEPATH"}
    for name, right in (("stages", "m3cli.stages"), ("schemas.records", "m3cli.schemas")):
        proc = subprocess.run(
            [sys.executable, "-c", f"import {name}"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 1
        assert f"ImportError: '{name.split('.')[0]}' is m3's" in proc.stderr
        assert f"import {right}" in proc.stderr


def test_ray_driver_refuses_a_directory_whose_m3cli_would_shadow_its_own(tmp_path):
    import m3cli
    from m3cli.stages.batch.ray import check_workers_see_this_m3
    from m3cli.stages.core.errors import M3Error

    check_workers_see_this_m3(str(tmp_path))  # a user's directory: nothing to shadow
    check_workers_see_this_m3(str(Path(m3cli.__file__).parent.parent))  # where this m3cli lives
    (tmp_path / "m3cli").mkdir()
    (tmp_path / "m3cli" / "__init__.py").write_text("")
    with pytest.raises(M3Error, match="run m3 batch from another directory"):
        check_workers_see_this_m3(str(tmp_path))


def test_the_type_check_sees_the_installed_layout(tmp_path):
    spec = importlib.util.spec_from_file_location("typecheck", ROOT / "scripts" / "typecheck.py")
    typecheck = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(typecheck)
    mapping = typecheck.package_dirs()
    assert mapping["m3cli.stages"] == "stages" and mapping["m3cli.schemas"] == "schemas"
    typecheck.lay_out(tmp_path / "tree", mapping)
    tree = tmp_path / "tree" / "m3cli"
    assert (tree / "stages" / "core" / "errors.py").resolve() == ROOT / "stages" / "core" / "errors.py"
    assert (tree / "schemas" / "records.py").resolve() == ROOT / "schemas" / "records.py"
    assert (tree / "app.py").resolve() == ROOT / "m3cli" / "app.py"


def test_ci_and_just_check_lint_format_and_type_check_before_the_tests():
    ci = (ROOT / ".ci" / "run").read_text()
    steps = ["ruff check ", "ruff format --check ", "scripts/typecheck.py", "python -m pytest"]
    at = [ci.index(step) for step in steps]
    assert at == sorted(at), "CI lints, checks formatting and types, then runs the suite"
    assert '-m "not slow"' not in ci  # the full suite, not the fast tier again
    just = (ROOT / "justfile").read_text()
    check = just[just.index("\ncheck:") :].split("\n\n")[0]
    at = [
        check.index(step) for step in ("ruff check ", "ruff format --check ", "typecheck.py", '-m "not slow"')
    ]
    assert at == sorted(at)


def test_a_benchmark_helper_imported_after_m3_keeps_the_m3_this_process_has():
    # a test borrowing bench.synth_memory once swapped m3cli for the checkout's laid-out tree under a
    # non-editable install (CI's), leaving later tests two M3Error classes
    code = (
        "import m3cli.stages.core.errors as before, sys\n"
        "sys.path.append(sys.argv[1])\n"
        "import bench\n"
        "import m3cli.stages.core.errors as after\n"
        "assert after is before and not bench.LAID_OUT, (before.__file__, after.__file__)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [sys.executable, "-c", code, str(ROOT)], cwd="/", env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
