"""Read `m3 ask` output (m3.answer/1 JSONL) for the report's answers section."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from m3cli.stages.core.errors import InputError
from m3cli.stages.core.redact import mask_credentials

SCHEMA = "m3.answer/1"


def read_answers(path: Path, limit: int) -> tuple[list[dict[str, Any]], int]:
    """(the first ``limit`` answer records, how many the file holds); one clear error for a bad line."""
    if not path.is_file():
        raise InputError(
            f"--answers {path}: no such file (write one with `m3 ask MEMORY QUESTION -o answers.jsonl`)"
        )
    out: list[dict[str, Any]] = []
    total = 0
    with path.open("rb") as fh:
        for number, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            try:
                rec = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                raise InputError(f"{path}:{number}: not JSON ({exc})") from None
            if not isinstance(rec, dict) or rec.get("schema") != SCHEMA:
                got = rec.get("schema") if isinstance(rec, dict) else type(rec).__name__
                raise InputError(
                    f"{path}:{number}: not an {SCHEMA} record (schema {got!r}); expected `m3 ask` output"
                )
            if not isinstance(rec.get("question"), str):
                raise InputError(f"{path}:{number}: the record has no question")
            total += 1
            if isinstance(rec.get("memory"), str):  # written by an older m3: no secret on the page
                rec["memory"] = mask_credentials(rec["memory"])
            if len(out) < limit:
                out.append(rec)
    return out, total
