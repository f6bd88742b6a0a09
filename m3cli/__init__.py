"""The ``m3`` command line: argument parsing, JSONL plumbing, progress and exit codes only."""

__version__ = "0.1.0"
