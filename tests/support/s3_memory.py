"""A moto S3 server with one bucket, the loopback embedding server, the environment that runs m3
against both, and a small memory's records to index there: what the object-storage tests share."""

from __future__ import annotations

import os
import subprocess
import sys

import orjson
import pytest
from memory_helpers import clip

from m3cli.stages.abstract.stage import AbstractConfig, abstract_records
from m3cli.stages.link.stage import LinkConfig, link_records
from m3cli.stages.memorize.stage import MemorizeConfig, memorize_records
from support.fake_openai import FakeOpenAI
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
