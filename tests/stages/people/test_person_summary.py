"""`m3 people show --summary`: a person's profile across videos, written by an LLM (a real loopback
OpenAI-compatible server) from their lines in every video, citing only lines it was given."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import DATA
from support.fake_openai import FakeOpenAI

PHOTOS = DATA / "people" / "photos"
LINE_ID = re.compile(r"^\[([^\]]+)\] ", re.M)


@pytest.fixture(scope="module")
def photos_memory(tmp_path_factory):
    """p1_obama_biden.mp4 and p2_obama_367.mp4 in one memory: Obama is one person in both."""
    import os

    from conftest import run_m3

    root = tmp_path_factory.mktemp("person_summary")
    mem = root / "mem.lance"
    env = {**os.environ, "M3_CACHE": str(root / "cache")}
    for name in ("p1_obama_biden.mp4", "p2_obama_367.mp4"):
        run_m3("run", PHOTOS / name, "--no-llm", "-o", mem, env=env, check=True)
    people = [
        json.loads(x) for x in run_m3("people", mem, "-f", "jsonl", env=env, check=True).stdout.splitlines()
    ]
    (both,) = [p for p in people if len(p["videos"]) == 2]
    return mem, both["id"]


def _prompt(body: dict) -> str:
    """The request's first user message (a repair round adds the repair request after it)."""
    return next(m["content"] for m in body["messages"] if m["role"] == "user")


@pytest.mark.slow
def test_the_profile_reads_both_videos_as_one_person_and_cites_what_it_was_given(
    m3, photos_memory, cache_dir
):
    mem, pid = photos_memory
    with FakeOpenAI() as server:
        # the first reply cites a line it was not given: sent back for repair, never shown
        server.script('{"summary": "He speaks.", "evidence": ["made-up:0:e9"]}')
        server.responder = lambda body: json.dumps(
            {
                "summary": f"{pid} talks about a shop boy on one day and about Mr. Hale on the next.",
                "evidence": LINE_ID.findall(_prompt(body))[:1] + LINE_ID.findall(_prompt(body))[-1:],
            }
        )
        env = {"M3_LLM_BASE_URL": server.url, "M3_LLM_MODEL": "fake-model"}
        out = m3("people", "show", mem, pid, "--summary", "-f", "jsonl", env=env, check=True)
        asked = [_prompt(b) for b in server.chat_requests]
    rec = json.loads(out.stdout)
    summary = rec["summary"]
    assert summary["text"].startswith(pid) and summary["model"] == "fake-model"
    assert len(asked) == 2  # the bad citation, then its repair
    prompt = asked[0]
    # one person across both videos: both files, both days, and no per-video character id
    assert "p1_obama_biden.mp4" in prompt and "p2_obama_367.mp4" in prompt
    assert "2026-11-10" in prompt and "2026-11-11" in prompt
    assert pid in prompt and "<character_" not in prompt
    given = LINE_ID.findall(prompt)
    assert [e["id"] for e in summary["evidence"]] == [given[0], given[-1]]
    assert {Path(e["path"]).name for e in summary["evidence"]} == {"p1_obama_biden.mp4", "p2_obama_367.mp4"}

    # the same question again is answered from the cache: no server
    again = m3("people", "show", mem, pid, "--summary", env=env, check=True).stdout.decode()
    assert f"summary (fake-model): {pid} talks about a shop boy" in again
    assert "rests on: p1_obama_biden.mp4 2026-11-10" in again


@pytest.mark.slow
def test_a_summary_without_an_llm_is_one_clear_line(m3, photos_memory, cache_dir):
    mem, pid = photos_memory
    proc = m3("people", "show", mem, pid, "--summary", env={"M3_LLM_BASE_URL": "", "M3_LLM_MODEL": ""})
    assert proc.returncode != 0
    err = proc.stderr.decode().strip().splitlines()
    assert len(err) == 1 and "--summary needs an LLM" in err[0] and "--llm-base-url" in err[0]
    plain = m3("people", "show", mem, pid, check=True).stdout.decode()
    assert "summary" not in plain and "first seen:" in plain
