"""Running m3 against a real, small tmpfs mounted in a private mount namespace (``unshare``): the
disk-full tests' shell, the mark that skips them where no namespace can mount one, and records as
JSONL bytes to feed it."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import orjson
import pytest


def jsonl(records) -> bytes:
    return b"".join(orjson.dumps(r.to_json()) + b"\n" for r in records)


def _namespace_prefix() -> list[str] | None:
    """The ``unshare`` invocation that may mount a tmpfs here (unprivileged first, then as root)."""
    if not shutil.which("unshare"):
        return None
    target = tempfile.mkdtemp(prefix="m3-tmpfs-probe-")
    try:
        for prefix in (["unshare", "--user", "--map-root-user", "--mount"], ["unshare", "--mount"]):
            probe = subprocess.run(
                [*prefix, "mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", target], capture_output=True
            )
            if probe.returncode == 0:
                return prefix
    finally:
        os.rmdir(target)
    return None


NAMESPACE = _namespace_prefix()
needs_small_fs = pytest.mark.skipif(NAMESPACE is None, reason="cannot mount a tmpfs in a private namespace")


def in_small_fs(mount: Path, size: str, script: str, tmp_path: Path) -> str:
    """Run the shell ``script`` with a ``size`` tmpfs mounted on ``mount`` (gone when it ends); returns
    what the script printed. ``$M3`` in the script runs this m3."""
    mount.mkdir(parents=True, exist_ok=True)
    m3 = " ".join(shlex.quote(p) for p in (sys.executable, "-m", "m3cli"))
    body = f"set -u\nmount -t tmpfs -o size={size} tmpfs {shlex.quote(str(mount))}\nM3={shlex.quote(m3)}\n"
    body += textwrap.dedent(script)
    (tmp_path / "script.sh").write_text(body)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONSAFEPATH": "1"}
    proc = subprocess.run(
        [*NAMESPACE, "sh", str(tmp_path / "script.sh")],
        capture_output=True,
        env=env,
        cwd=tmp_path,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout.decode()


def fill(mount: Path) -> str:
    return f"cat /dev/zero > {shlex.quote(str(mount))}/filler 2>/dev/null || true\n"
