"""A user install brings the offline pipeline only; the development install adds the test tools."""

from __future__ import annotations

import re
import subprocess

import tomllib

from conftest import ROOT

DEV_ONLY = {"pytest", "ruff", "mypy", "rust-just", "insightface", "moto", "ray"}


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=\[ ;!~]", r, maxsplit=1)[0].lower() for r in requirements}


def test_user_dependencies_hold_no_dev_tools():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not _names(project["dependencies"]) & DEV_ONLY
    assert DEV_ONLY <= _names(project["optional-dependencies"]["dev"])
    assert _names(project["optional-dependencies"]["ray"]) == {"ray"}


def test_install_script_installs_dev_tools_only_when_asked():
    def plan(*args: str) -> str:
        proc = subprocess.run(
            ["bash", ROOT / "scripts" / "install.sh", "/tmp/v", *args, "--dry-run"],
            capture_output=True,
            text=True,
            check=True,
        )
        return proc.stdout.splitlines()[-1]

    assert plan().endswith("pip install .") and "[dev]" not in plan()
    assert plan("--dev").endswith("pip install .[dev]")
    assert plan("--editable", "--dev").endswith("pip install -e .[dev]")
    assert plan("--asr-base").endswith("pip install .[asr-base]")  # --asr-model base
    assert plan("--dev", "--asr-base").endswith("pip install .[dev,asr-base]")
    assert "--dev" in (ROOT / ".ci" / "run").read_text()  # CI runs the tests with the tools installed
