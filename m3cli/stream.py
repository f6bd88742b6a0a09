"""JSONL in and out.

Input is read and validated completely before a stage does any work, so a bad line fails the run
with ``<file>:<line>: <reason>`` and nothing is emitted. Output is written only once the stage has
finished: to stdout in one go, or to ``-o FILE`` through a temporary file renamed into place, so a
failure never leaves half a stream for the next stage to mistake for a whole one.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

import orjson
from pydantic import ValidationError

from m3cli.schemas import CLIP_SCHEMA
from m3cli.schemas.records import ClipRecord
from m3cli.stages.core.errors import InputError

STDIO = "-"


def _lines(source: str) -> Iterator[tuple[str, int, bytes]]:
    if source == STDIO:
        if sys.stdin is None or sys.stdin.isatty():
            raise InputError("no input: pipe clip records into this command or name a JSONL file")
        name, fh = "<stdin>", sys.stdin.buffer
        yield from ((name, n, line) for n, line in enumerate(fh, 1))
        return
    path = Path(source)
    try:
        with path.open("rb") as fh:
            yield from ((source, n, line) for n, line in enumerate(fh, 1))
    except FileNotFoundError:
        raise InputError(f"{source}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{source}: is a directory, not a JSONL file") from None
    except PermissionError:
        raise InputError(f"{source}: permission denied") from None


def _reason(exc: ValidationError) -> str:
    err = exc.errors(include_url=False)[0]
    where = ".".join(str(p) for p in err["loc"])
    more = f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    msg = err["msg"].removeprefix("Value error, ")
    return f"{where}: {msg}{more}" if where else f"{msg}{more}"


def parse_record(obj: Any) -> ClipRecord:
    """Validate one decoded JSON value as a clip record (raises ValueError with a short reason)."""
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    schema = obj.get("schema")
    if schema != CLIP_SCHEMA:
        raise ValueError(f"unsupported record schema {schema!r} (this m3 reads {CLIP_SCHEMA!r})")
    try:
        return ClipRecord.model_validate(obj)
    except ValidationError as exc:
        raise ValueError(_reason(exc)) from None


def read_records(sources: Iterable[str]) -> list[ClipRecord]:
    """Every clip record of ``sources`` (``-`` is stdin), validated; blank lines are skipped.

    A clip given twice is dropped or refused the same way for every stage
    (:func:`~m3cli.stages.core.common.unique_clips`).
    """
    from m3cli.stages.core.common import unique_clips

    located: list[tuple[str, ClipRecord]] = []
    for source in sources:
        for name, lineno, raw in _lines(source):
            if not raw.strip():
                continue
            try:
                obj = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                raise InputError(f"{name}:{lineno}: not valid JSON: {exc.msg}") from None
            try:
                located.append((f"{name}:{lineno}", parse_record(obj)))
            except ValueError as exc:
                raise InputError(f"{name}:{lineno}: {exc}") from None
    return unique_clips(located)


def dumps(record: ClipRecord | dict) -> bytes:
    data = record.to_json() if isinstance(record, ClipRecord) else record
    return orjson.dumps(data, option=orjson.OPT_APPEND_NEWLINE | orjson.OPT_SERIALIZE_NUMPY)


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary sibling and a rename: readers see all or nothing."""
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_records(
    records: Iterable[ClipRecord | dict], output: str | None = None, stdout: IO[bytes] | None = None
) -> int:
    """Emit records to stdout (``output`` None or ``-``) or atomically to a file; returns the count."""
    lines = [dumps(r) for r in records]
    blob = b"".join(lines)
    if output in (None, STDIO):
        out = stdout or sys.stdout.buffer
        out.write(blob)
        out.flush()
    else:
        try:
            write_atomic(Path(output), blob)
        except OSError as exc:
            raise InputError(f"{output}: cannot write output: {exc.strerror}") from None
    return len(lines)
