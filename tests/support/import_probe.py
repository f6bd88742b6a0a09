"""`m3 ARGS` in a fresh interpreter, and which of some top-level packages it imported.

Start-up and the read/write paths promise to stay clear of heavy libraries (numpy for `--help`,
LanceDB for `m3 ask` and `m3 index`); only a new process shows what a command really imports.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable, Mapping

#: run `m3 ARGS` as the CLI does, then name the watched packages it loaded (stderr), keeping its exit code
PROBE = """
import json, sys
watched = set(json.loads(sys.argv[1]))
sys.argv = ["m3", *sys.argv[2:]]
from m3cli.app import main
code = 0
try:
    main()
except SystemExit as exc:
    code = exc.code
sys.stdout.flush()
loaded = sorted({m.split(".")[0] for m in sys.modules} & watched)
print("\\nIMPORTED=" + json.dumps(loaded), file=sys.stderr)
sys.exit(code)
"""


def m3_imports(
    args: Iterable[str], watched: Iterable[str], env: Mapping[str, str] | None = None, timeout: int = 300
) -> tuple[subprocess.CompletedProcess, set[str]]:
    """Run ``m3 ARGS``; the finished process (text output) and which of ``watched`` it imported."""
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(sorted(watched)), *map(str, args)],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=timeout,
    )
    tail = proc.stderr.rsplit("IMPORTED=", 1)
    assert len(tail) == 2, proc.stderr[-2000:]
    return proc, set(json.loads(tail[1]))
