"""Record contracts: one JSON Schema per record type, and the typed Python records that mirror them.

The JSON Schemas are the published contract (other tools validate against them); the pydantic models in
:mod:`m3cli.schemas.records` are what the stages use. ``tests/cli/test_schemas.py`` checks that the two agree.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Final

# One name per file: this folder is the package m3cli.schemas (see stages/__init__.py). Checked before
# importing m3cli.stages, which a bare checkout folder imported as `schemas` would not find.
if __name__ != "m3cli.schemas":
    raise ImportError(
        f"{__name__!r} is m3's schema folder under another name: import m3cli.schemas "
        "(install m3 with `pip install -e .` or scripts/install.sh)"
    )

from m3cli.stages.core.errors import M3Error  # noqa: E402 (after the name check above)

#: Record type name -> schema file shipped in this package.
SCHEMA_FILES: dict[str, str] = {
    "m3.clip/1": "clip.v1.json",
    "m3.answer/1": "answer.v1.json",
}
CLIP_SCHEMA: Final = "m3.clip/1"  # Final: typed as the literal that ClipRecord.schema_ accepts


@cache
def load_schema(name: str = CLIP_SCHEMA) -> dict:
    """Return the JSON Schema of record type ``name`` (e.g. ``m3.clip/1``)."""
    try:
        filename = SCHEMA_FILES[name]
    except KeyError:
        known = ", ".join(sorted(SCHEMA_FILES))
        raise M3Error(f"unknown schema {name!r}; known schemas: {known}") from None
    return json.loads(resources.files(__package__).joinpath(filename).read_text("utf-8"))
