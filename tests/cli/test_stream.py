"""JSONL plumbing: validation with file:line errors, pass-through of unknown fields, atomic output."""

from __future__ import annotations

import orjson
import pytest

from conftest import FIXTURE, run_m3
from m3cli import stream
from m3cli.schemas.records import ClipRecord
from m3cli.stages.core.errors import InputError


@pytest.fixture
def clip_lines(cache_dir) -> list[bytes]:
    return run_m3("segment", FIXTURE, check=True).stdout.splitlines()


def test_unknown_fields_pass_through_unchanged(clip_lines, tmp_path):
    rec = orjson.loads(clip_lines[0])
    rec["my_notes"] = {"reviewer": "ana", "ok": True}
    rec["video"]["source"] = "archive-7"
    rec["clip"]["tags"] = ["intro"]
    src = tmp_path / "in.jsonl"
    src.write_bytes(orjson.dumps(rec) + b"\n" + clip_lines[1] + b"\n")
    out = run_m3("validate", "--pass", src, check=True).stdout.splitlines()
    assert orjson.loads(out[0]) == rec
    assert out[1] == clip_lines[1]


def test_bad_line_is_reported_with_file_and_line(clip_lines, tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_bytes(clip_lines[0] + b"\n\n" + b'{"schema": "m3.clip/1", "video": {}}\n')
    proc = run_m3("validate", "--pass", src)
    assert proc.returncode == 1 and proc.stdout == b""
    assert proc.stderr.decode().startswith(f"m3: error: {src}:3: video.id: Field required")


@pytest.mark.parametrize(
    "line,reason",
    [
        (b"not json", "<stdin>:1: not valid JSON"),
        (b"[1, 2]", "<stdin>:1: expected a JSON object, got list"),
        (b'{"schema": "m3.clip/9"}', "<stdin>:1: unsupported record schema 'm3.clip/9'"),
        (b"\xff\xfe", "<stdin>:1: not valid JSON"),
    ],
)
@pytest.mark.slow
def test_malformed_stdin(cache_dir, line, reason):
    proc = run_m3("validate", "--pass", input=line + b"\n")
    assert proc.returncode == 1 and proc.stdout == b""
    assert reason in proc.stderr.decode()


def test_parse_then_dump_is_byte_identical(clip_lines):
    parsed = [stream.parse_record(orjson.loads(line)) for line in clip_lines]
    assert all(isinstance(r, ClipRecord) for r in parsed)
    assert [stream.dumps(r).rstrip(b"\n") for r in parsed] == clip_lines


def test_missing_and_directory_inputs(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        stream.read_records([str(tmp_path / "absent.jsonl")])
    with pytest.raises(InputError, match="is a directory"):
        stream.read_records([str(tmp_path)])


def test_write_atomic_replaces_whole_file(tmp_path):
    target = tmp_path / "out.jsonl"
    target.write_bytes(b"old\n")
    stream.write_atomic(target, b"new\n")
    assert target.read_bytes() == b"new\n" and [p.name for p in tmp_path.iterdir()] == ["out.jsonl"]
