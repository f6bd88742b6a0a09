"""Memories on object storage: `m3 index -o s3://...`, `m3 ask s3://...` and `m3 batch -o s3://...`
against a real S3-compatible server (moto's server mode) started by the test on 127.0.0.1, with the
credentials in the standard AWS variables only — and never in any output."""

from __future__ import annotations

import os
import subprocess
import sys

import orjson
import pytest
from memory_helpers import clip

from conftest import HAMILTON
from m3cli.stages.abstract.stage import AbstractConfig, abstract_records
from m3cli.stages.link.stage import LinkConfig, link_records
from m3cli.stages.memorize.stage import MemorizeConfig, memorize_records
from support.clips import cut_pieces
from support.fake_openai import FakeOpenAI
from support.memory_rows import memory_rows
from support.s3_server import s3_server

SECRET = "s3cr3t-Zq9-never-printed"
BUCKET = "memories"


@pytest.fixture(scope="module")
def s3_env(tmp_path_factory):
    """A moto S3 server on 127.0.0.1 with one bucket; the AWS variables that reach it."""
    pytest.importorskip("moto.server")
    pytest.importorskip("boto3")
    with s3_server(BUCKET, tmp_path_factory.mktemp("moto"), secret=SECRET) as env:
        yield env


@pytest.fixture(scope="module")
def embed_server():
    with FakeOpenAI() as server:
        yield server


def m3_env(s3_env: dict, embed_server: FakeOpenAI, cache) -> dict:
    return {
        **os.environ,
        **s3_env,
        "M3_CACHE": str(cache),
        "HF_HUB_OFFLINE": "1",
        "M3_LLM_BASE_URL": "",
        "M3_LLM_MODEL": "",
        "M3_EMBED_BACKEND": "openai",
        "M3_EMBED_BASE_URL": embed_server.url,
        "M3_EMBED_MODEL": "fake-embed",
    }


def run(env: dict, *args) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, "-m", "m3cli", *map(os.fsdecode, args)], capture_output=True, env=env, timeout=600
    )
    assert SECRET.encode() not in proc.stdout + proc.stderr
    return proc


def _records(path) -> None:
    recs = [
        clip(
            i,
            {"<face_1>": [(30.0 * i, 30.0 * i + 10)]},
            [("<voice_1>", 30.0 * i + 0.5, 30.0 * i + 9.5, "Hello, my name is Anna. I grow tomatoes.")],
        )
        for i in range(3)
    ]
    recs = memorize_records(recs, MemorizeConfig())
    recs = abstract_records(link_records(recs, LinkConfig()), AbstractConfig(embed=False))
    path.write_bytes(b"".join(orjson.dumps(r.to_json()) + b"\n" for r in recs))


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
