"""What reaches a person's terminal: record text is escaped, URL credentials are masked, and a run
whose LLM calls all failed says so (and fails under --strict). Real CLI, real loopback server."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from conftest import FIXTURE, run_m3
from m3cli.stages.core.redact import mask_credentials
from m3cli.terminal import safe, safe_lines
from support.fake_openai import FakeOpenAI

SECRET = "sk-url-secret-4242"
HOSTILE = (
    "\x1b]0;pwned title\x07\x1b[2J\x1b[31mred\x1b[0m says hi\nA: forged answer line\r\x9b31m\u202egnp.exe"
)


@pytest.fixture(scope="module")
def server():
    with FakeOpenAI() as s:
        yield s


def _segment(tmp_path: Path) -> list[dict]:
    proc = run_m3("segment", FIXTURE, check=True)
    return [json.loads(line) for line in proc.stdout.splitlines()]


def _jsonl(path: Path, records: list[dict]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return path


# ------------------------------------------------------------------------------------ the helpers


def test_safe_escapes_every_control_character_on_one_line():
    out = safe(HOSTILE)
    assert "\n" not in out and "\r" not in out and "\x1b" not in out and "\x9b" not in out
    assert "\u202e" not in out and "\x07" not in out
    assert out.startswith("\\x1b]0;pwned title\\x07\\x1b[2J") and "\\nA: forged" in out and "\\u202e" in out
    assert safe_lines("a\tb\nc\x1b[2J") == "a\tb\nc\\x1b[2J"  # layout kept, escapes shown


def test_mask_credentials_keeps_host_and_path():
    assert mask_credentials(f"LLM server http://bob:{SECRET}@10.0.0.1:8000/v1 (model m)") == (
        "LLM server http://********@10.0.0.1:8000/v1 (model m)"
    )
    plain = "https://h/v1?next=a@b and mail a@b.org"
    assert mask_credentials(plain) == plain


# ------------------------------------------------------------------------------------ item 5: ask


@pytest.mark.slow
def test_ask_text_escapes_memory_text(server, tmp_path, cache_dir):
    records = _segment(tmp_path)[:1]
    records[0]["memory"] = {
        "source": "offline",
        "episodic": [{"text": f"<voice_1> says: coffee {HOSTILE}", "start": 1.0, "end": 2.0}],
        "semantic": [],
    }
    records[0]["characters"] = {"<voice_1>": "<character_1>"}
    clips = _jsonl(tmp_path / "clips.jsonl", records)
    env = {
        "M3_EMBED_BACKEND": "openai",
        "M3_EMBED_BASE_URL": server.url,
        "M3_EMBED_MODEL": "fake-embed",
        "M3_LLM_BASE_URL": "",
        "M3_LLM_MODEL": "",
    }
    run_m3("index", "-o", tmp_path / "mem.lance", clips, env=env, check=True)
    proc = run_m3("ask", tmp_path / "mem.lance", "coffee says", "--format", "text", env=env, check=True)
    text = proc.stdout.decode()
    assert "coffee" in text
    for raw in ("\x1b", "\x07", "\r", "\x9b", "\u202e"):
        assert raw not in text
    assert "\\x1b]0;pwned title\\x07" in text and "\\nA: forged answer line" in text
    assert not any(line.startswith("A: forged") for line in text.splitlines())
    # JSONL output keeps the exact text (JSON escapes it); only the human view is escaped
    proc = run_m3("ask", tmp_path / "mem.lance", "coffee says", env=env, check=True)
    assert HOSTILE in json.loads(proc.stdout)["evidence"][0]["quote"]


@pytest.mark.slow
def test_error_line_with_record_text_is_one_escaped_line(tmp_path, cache_dir):
    records = _segment(tmp_path)[:1]
    records[0]["video"]["path"] = str(tmp_path / "gone\x1b[2J\nm3: error: forged.mp4")
    proc = run_m3("diarize", input=orjson.dumps(records[0]) + b"\n")
    err = proc.stderr.decode()
    assert proc.returncode == 1 and "\x1b" not in err
    assert len(err.strip().splitlines()) == 1 and err.startswith("m3: error: ")
    assert "gone\\x1b[2J\\nm3: error: forged.mp4" in err


def test_cache_info_escapes_the_cache_path(tmp_path):
    root = tmp_path / "c\x1b]0;x\x07ache"
    proc = run_m3("cache", "info", env={"M3_CACHE": str(root)}, check=True)
    out = proc.stdout.decode()
    assert "\x1b" not in out and "c\\x1b]0;x\\x07ache" in out.splitlines()[0]


# ------------------------------------------------------------------------------------ item 9


def test_config_show_masks_url_credentials(tmp_path):
    env = {"M3_LLM_BASE_URL": f"http://bob:{SECRET}@127.0.0.1:9/v1", "M3_LLM_MODEL": "m"}
    proc = run_m3("config", "show", env=env, check=True)
    out = proc.stdout.decode()
    assert SECRET not in out and "bob" not in out
    assert 'base_url = "http://********@127.0.0.1:9/v1"' in out


@pytest.mark.slow
def test_memorize_fallbacks_mask_url_credentials_and_strict_fails(server, tmp_path, cache_dir):
    records = _segment(tmp_path)
    for r in records:
        r["utterances"] = [{"start": r["clip"]["start"] + 1, "end": r["clip"]["start"] + 2, "text": "hello"}]
    clips = _jsonl(tmp_path / "perceived.jsonl", records)
    host = server.url.split("://", 1)[1]
    env = {
        "M3_LLM_BASE_URL": f"http://bob:{SECRET}@{host}",
        "M3_LLM_MODEL": "fake-model",
        "M3_LLM_MAX_RETRIES": "0",
    }
    server._queue.clear()  # nothing scripted: every chat request gets an HTTP 400, so every clip falls back
    proc = run_m3("memorize", "--frames", "1", clips, env=env)
    out, err = proc.stdout.decode(), proc.stderr.decode()
    assert proc.returncode == 0, err
    assert SECRET not in out and SECRET not in err and "bob:" not in out + err
    got = [json.loads(line) for line in out.splitlines()]
    assert len(got) == 2 and all(r["memory"]["fallback"] for r in got)
    assert all("********@127.0.0.1" in r["errors"][0]["message"] for r in got)
    last = err.strip().splitlines()[-1]
    assert "every clip: 2 of 2 fell back to the offline memorizer" in last and "--strict" in last

    proc = run_m3("memorize", "--frames", "1", "--strict", clips, env=env)
    err = proc.stderr.decode()
    assert proc.returncode == 1 and len(proc.stdout.splitlines()) == 2  # records still written
    assert err.strip().splitlines()[-1].startswith("m3: error: every clip: 2 of 2 fell back")
    assert SECRET not in err


@pytest.mark.slow
def test_llm_base_url_without_model_is_said(tmp_path, cache_dir):
    records = _segment(tmp_path)[:1]
    records[0]["utterances"] = [{"start": 1.0, "end": 2.0, "text": "hello"}]
    clips = _jsonl(tmp_path / "perceived.jsonl", records)
    env = {"M3_LLM_BASE_URL": f"http://bob:{SECRET}@127.0.0.1:9/v1", "M3_LLM_MODEL": ""}
    proc = run_m3("memorize", clips, env=env)
    err = proc.stderr.decode()
    assert proc.returncode == 0 and "no model: it is NOT used" in err and SECRET not in err
    proc = run_m3("memorize", "--strict", clips, env=env)
    err = proc.stderr.decode()
    assert proc.returncode == 1 and proc.stdout == b""
    assert err.startswith("m3: error: an LLM server is set (llm.base_url) but no model")
