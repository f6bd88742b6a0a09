"""The ``m3`` command line: argument parsing, JSONL plumbing, progress and exit codes only."""

import os as _os

__version__ = "0.1.0"

# Installed, the top-level folders stages/ and schemas/ become m3cli.stages and m3cli.schemas. In a
# source checkout they sit beside this folder instead, and some launchers import this file from the
# checkout whatever is installed: Ray puts its driver's working directory first on each worker's
# sys.path, so `m3 batch --engine ray` started from the repository root must find them here too.
_checkout = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
if not _os.path.isdir(_os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "stages")) and (
    _os.path.isfile(_os.path.join(_checkout, "stages", "__init__.py"))
):
    __path__.append(_checkout)  # noqa: F821 (a package's own __path__)
