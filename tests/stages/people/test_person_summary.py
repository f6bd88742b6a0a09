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


@pytest.mark.slow
def test_stored_profiles_are_shown_kept_renewed_and_read_by_the_answerer(
    m3, photos_memory, cache_dir, tmp_path
):
    import shutil

    mem = tmp_path / "mem.lance"
    shutil.copytree(photos_memory[0], mem)
    people = [json.loads(x) for x in m3("people", mem, "-f", "jsonl", check=True).stdout.splitlines()]
    with FakeOpenAI() as server:
        server.responder = lambda body: json.dumps(
            {"summary": "Profiled from the lines given.", "evidence": LINE_ID.findall(_prompt(body))[:1]}
        )
        env = {"M3_LLM_BASE_URL": server.url, "M3_LLM_MODEL": "fake-model"}
        first = m3("people", "summarize", mem, env=env, check=True)
        assert (
            first.stderr.decode()
            .strip()
            .splitlines()[-1]
            .endswith(f"{len(people)} profile(s) written, 0 up to date")
        )
        asked = len(server.chat_requests)
        assert asked == len(people)
        again = m3("people", "summarize", mem, env=env, check=True)
        assert again.stderr.decode().strip().endswith(f"0 profile(s) written, {len(people)} up to date")
        assert len(server.chat_requests) == asked  # nothing asked again

        # shown without an LLM, and current
        pid = people[0]["id"]
        shown = m3("people", "show", mem, pid, check=True).stdout.decode()
        assert "  profile (fake-model, stored): Profiled from the lines given." in shown
        assert "renews it" not in shown
        rec = json.loads(m3("people", "show", mem, pid, "-f", "jsonl", check=True).stdout)
        assert rec["profile"]["current"] is True and len(rec["profile"]["evidence"]) == 1

        # the answerer's [Character] <person_N> gives the profile to the LLM
        server.responder = None
        server.script(f"[Character] {pid}", "[Answer] done")
        m3("ask", mem, f"Who is {pid}?", "--tools", "character", env=env, check=True)
        shown_to_llm = server.chat_requests[-1]["messages"][-1]["content"]
        assert (
            f"Profile of {pid} across their videos (fake-model): Profiled from the lines given."
            in shown_to_llm
        )

    # a new video of one of them: that profile is older than their lines, the others' still current
    m3("run", PHOTOS / "p3_biden_1998.mp4", "--no-llm", "-o", mem, check=True)
    after = [json.loads(x) for x in m3("people", mem, "-f", "jsonl", check=True).stdout.splitlines()]
    grown = [
        p
        for p in after
        if p["id"] in {q["id"] for q in people}
        and len(p["videos"]) > len(next(q for q in people if q["id"] == p["id"])["videos"])
    ]
    assert len(grown) == 1  # Biden, now in p1 and p3
    stale = m3("people", "show", mem, grown[0]["id"], check=True).stdout.decode()
    assert "written before the person's latest lines" in stale
