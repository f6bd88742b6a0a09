"""Where a memory lives: a local directory or an object-store URI that LanceDB opens (``s3://...``).

Object stores are reached with the standard variables of their SDKs (for S3: ``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_REGION``/``AWS_DEFAULT_REGION``, and
``AWS_ENDPOINT_URL`` with ``AWS_ALLOW_HTTP=true`` for an S3-compatible server such as MinIO). m3 never
reads, copies or prints them: LanceDB's object-store layer takes them from the environment itself.
"""

from __future__ import annotations

import re
from pathlib import Path

_URI = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")


def is_uri(target: str | Path) -> bool:
    """True for ``s3://bucket/mem.lance``-style locations (not plain paths, not ``file://``)."""
    text = str(target) if isinstance(target, str) else ""
    return bool(_URI.match(text)) and not text.startswith("file://")


def memory_location(target: str | Path) -> str | Path:
    """A URI stays a string (``Path`` would fold ``s3://`` into ``s3:/``); anything else is a Path."""
    if isinstance(target, str) and is_uri(target):
        return target.rstrip("/")
    return Path(target)
