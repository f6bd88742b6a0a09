"""Memories on object storage: `m3 index -o s3://...`, `m3 ask s3://...` and `m3 batch -o s3://...`
against a real S3-compatible server (moto's server mode) started by the test on 127.0.0.1, with the
credentials in the standard AWS variables only — and never in any output."""

from __future__ import annotations

import orjson
import pytest

from conftest import HAMILTON
from support.clips import cut_pieces
from support.memory_rows import memory_rows
from support.s3_memory import BUCKET, _records, m3_env, run


@pytest.mark.slow
def test_index_and_ask_a_memory_on_s3(tmp_path, s3_env, embed_server, monkeypatch):
    env = m3_env(s3_env, embed_server, tmp_path / "cache")
    records = tmp_path / "records.jsonl"
    _records(records)
    uri = f"s3://{BUCKET}/index-test/mem.lance"
    proc = run(env, "index", "-o", uri, records)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    proc = run(env, "index", "-o", uri, records)  # idempotent on S3 too
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    assert run(env, "index", "-o", tmp_path / "local.lance", records).returncode == 0
    for key, value in s3_env.items():  # this process reads the S3 memory with the same variables
        monkeypatch.setenv(key, value)
    rows = memory_rows(uri)
    assert rows["nodes"] and rows == memory_rows(tmp_path / "local.lance")

    proc = run(env, "ask", uri, "Who grows tomatoes?", "--no-llm")
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    answer = orjson.loads(proc.stdout)
    assert answer["evidence"] and "tomatoes" in orjson.dumps(answer["evidence"]).decode()

    proc = run(env, "ask", f"s3://{BUCKET}/nothing-here.lance", "Who?", "--no-llm")
    assert proc.returncode == 1
    assert b"m3: error: s3://memories/nothing-here.lance: no such memory" in proc.stderr


@pytest.mark.slow
def test_batch_into_s3(tmp_path, s3_env, embed_server):
    env = m3_env(s3_env, embed_server, tmp_path / "cache")
    piece = cut_pieces(HAMILTON, 1, 2.5, tmp_path / "pieces")[0]
    uri = f"s3://{BUCKET}/batch-test/mem.lance"
    proc = run(env, "batch", piece, "-o", uri, "--faces-fps", "2", "--report", tmp_path / "r.jsonl")
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    assert orjson.loads((tmp_path / "r.jsonl").read_bytes())["status"] == "indexed"
    proc = run(env, "batch", piece, "-o", uri, "--faces-fps", "2", "--report", tmp_path / "r.jsonl")
    assert proc.returncode == 0 and orjson.loads((tmp_path / "r.jsonl").read_bytes())["status"] == "done"
    proc = run(env, "ask", uri, "What did they say?", "--no-llm")
    assert proc.returncode == 0 and orjson.loads(proc.stdout)["evidence"]
