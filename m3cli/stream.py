"""JSONL in and out.

Input is read and validated completely before a stage does any work, so a bad line fails the run
with ``<file>:<line>: <reason>`` and nothing is emitted. Output is written only once the stage has
finished: to stdout in one go, or to ``-o FILE`` through a temporary file renamed into place, so a
failure never leaves half a stream for the next stage to mistake for a whole one.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import orjson

from m3cli.schemas import CLIP_SCHEMA
from m3cli.stages.core.errors import InputError

if TYPE_CHECKING:  # pydantic and the records load on first use, not for `m3 <command> --help`
    from pydantic import ValidationError

    from m3cli.schemas.records import ClipRecord

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
    from pydantic import ValidationError

    from m3cli.schemas.records import ClipRecord

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
                media = media_kind(_head(source, raw), source) if lineno == 1 else None
                if media is not None:
                    raise InputError(_media_message(name, media)) from None
                raise InputError(f"{name}:{lineno}: not valid JSON: {exc.msg}") from None
            try:
                located.append((f"{name}:{lineno}", parse_record(obj)))
            except ValueError as exc:
                raise InputError(f"{name}:{lineno}: {exc}") from None
    return unique_clips(located)


_VIDEO_SUFFIXES = {
    ".mp4",
    ".m4v",
    ".mov",
    ".mkv",
    ".webm",
    ".avi",
    ".ts",
    ".mts",
    ".m2ts",
    ".mpg",
    ".mpeg",
    ".flv",
    ".wmv",
    ".3gp",
    ".ogv",
}
_AUDIO_SUFFIXES = {".wav", ".mp3", ".m4a", ".flac", ".ogg", ".opus", ".aac"}


def media_kind(head: bytes, source: str = STDIO) -> str | None:
    """``"video"``/``"audio"`` when ``head`` (a file's first bytes) or the file name says media, else None.

    Used only once a first line failed to parse, so valid streams pay nothing for it.
    """
    if head[4:8] in (b"ftyp", b"moov", b"mdat", b"wide", b"free") or head.startswith(
        (b"\x1a\x45\xdf\xa3", b"\x00\x00\x01\xba", b"\x00\x00\x01\xb3", b"FLV", b"\x30\x26\xb2\x75")
    ):
        return "video"
    if head[:4] == b"RIFF" and head[8:12] == b"AVI ":
        return "video"
    if head[:1] == b"\x47" and len(head) > 376 and head[188:189] == head[376:377] == b"\x47":  # MPEG-TS
        return "video"
    if (head[:4] == b"RIFF" and head[8:12] == b"WAVE") or head.startswith((b"ID3", b"fLaC", b"OggS")):
        return "audio"
    suffix = Path(source).suffix.lower() if source != STDIO else ""
    if suffix in _VIDEO_SUFFIXES:
        return "video"
    if suffix in _AUDIO_SUFFIXES:
        return "audio"
    return None


def _head(source: str, first_line: bytes) -> bytes:
    """The first bytes of ``source`` (a file is reread; stdin can only offer its first line)."""
    if source == STDIO:
        return first_line[:512]
    try:
        with open(source, "rb") as fh:
            return fh.read(512)
    except OSError:
        return first_line[:512]


_RECORD_COMMANDS = (
    "diarize",
    "voices",
    "faces",
    "sight",
    "memorize",
    "link",
    "abstract",
    "index",
    "validate",
)
_VALUED_GLOBALS = ("--config", "--cache-dir", "--device")


def _this_command() -> str:
    """The stage the user ran (for the suggested pipeline), read from the command line."""
    args = iter(sys.argv[1:])
    for arg in args:
        if arg in _VALUED_GLOBALS:
            next(args, None)
        elif not arg.startswith("-"):
            return arg if arg in _RECORD_COMMANDS else "diarize"
    return "diarize"


def _media_message(name: str, kind: str) -> str:
    stage = _this_command()
    shown = name if name != "<stdin>" else "VIDEO"
    if kind == "audio":
        return (
            f"{name}: is an audio file, not clip records; cut it into clips first: "
            f"m3 segment {name if name != '<stdin>' else 'AUDIO'} | m3 {stage}"
        )
    return (
        f"{name}: is a video file, not clip records; cut it into clips first: m3 segment {shown} | m3 {stage}"
    )


def dumps(record: ClipRecord | dict) -> bytes:
    data = record if isinstance(record, dict) else record.to_json()
    return orjson.dumps(data, option=orjson.OPT_APPEND_NEWLINE | orjson.OPT_SERIALIZE_NUMPY)


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary sibling and a rename: readers see all or nothing."""
    from m3cli.stages.core.storage import write_atomic as write

    write(Path(path), data)


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
