"""The ``m3`` command line: argument parsing, JSONL plumbing, progress and exit codes only.

The top-level folders stages/ and schemas/ are installed as ``m3cli.stages`` and ``m3cli.schemas``
(pyproject.toml's package-dir; an editable install maps them the same way). This package never adds
the checkout to its own ``__path__``: each source file has exactly one module name, so no file can load
twice (two ``M3Error`` classes, two thread pools). ``tests/cli/test_packaging.py`` holds that.
"""

__version__ = "0.1.0"
