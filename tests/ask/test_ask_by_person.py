"""Questions naming a memory-wide person (``<person_N>``) are answered from that person's own lines.

Before, "What did <person_2> say?" matched no one the per-video answerers knew and fell through to the
nearest line of the whole memory: another person's words, given as the answer.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import DATA
from support.fake_openai import FakeOpenAI

PHOTOS = DATA / "people" / "photos"


def _inside(item: dict, spans: list[list[float]]) -> bool:
    """An evidence line lies in one of the person's spans of that video (the spans are what the
    person's face and voice cover; a line may start or end a little outside them)."""
    return any(item["start"] >= s - 1.0 and item["end"] <= e + 1.0 for s, e in spans)


@pytest.mark.slow
def test_a_person_is_answered_from_their_own_lines_in_every_video(m3, tmp_path, cache_dir):
    mem = tmp_path / "mem.lance"
    m3("batch", PHOTOS, "--no-llm", "-o", mem, check=True)
    people = [json.loads(x) for x in m3("people", mem, "-f", "jsonl", check=True).stdout.splitlines()]
    # Biden: the portrait in p1 (beside Obama) and in p3 (beside reader 1998), truth.json
    biden = next(
        p
        for p in people
        if {Path(v["path"]).name for v in p["videos"]} == {"p1_obama_biden.mp4", "p3_biden_1998.mp4"}
    )
    spans = {v["video"]: v["spans"] for v in biden["videos"]}

    def ask(q: str) -> dict:
        return json.loads(m3("ask", mem, q, "--no-llm", check=True).stdout)

    said = ask(f"What did {biden['id']} say?")
    assert said["answer"].startswith("In p1_obama_biden.mp4 (2026-11-10): ")
    assert "In p3_biden_1998.mp4 (2026-11-12): " in said["answer"]
    assert {e["file"] for e in said["evidence"]} == {"p1_obama_biden.mp4", "p3_biden_1998.mp4"}
    assert all(_inside(e, spans[e["video"]]) for e in said["evidence"]), said["evidence"]
    assert "<character_" not in said["answer"]  # the characters are shown as the person they are

    day = ask(f"What did {biden['id']} say on November 12?")
    assert day["evidence"] and all(e["file"] == "p3_biden_1998.mp4" for e in day["evidence"])
    assert all(e["at"].startswith("2026-11-12") and _inside(e, spans[e["video"]]) for e in day["evidence"])

    # "Who is <person_N>?" was read as "who said <person_N>" and quoted whoever's line matched best
    who = ask(f"Who is {biden['id']}?")
    assert who["answer"].startswith(f"In p1_obama_biden.mp4 (2026-11-10): {biden['id']} (speaks ")
    assert "In p3_biden_1998.mp4 (2026-11-12): " in who["answer"] and ", first says " in who["answer"]
    assert {e["file"] for e in who["evidence"]} == {"p1_obama_biden.mp4", "p3_biden_1998.mp4"}
    # each line starts in one of the person's spans (the line "seen from 6.8 to 26.2 s" spans two)
    starts = [(e["start"], spans[e["video"]]) for e in who["evidence"]]
    assert all(any(s - 1.0 <= t <= end for s, end in sp) for t, sp in starts), who["evidence"]

    nobody = ask("What did <person_99> say?")
    assert nobody["answer"].startswith("The memory knows no <person_99>: it knows 5 people")
    assert nobody["evidence"] == []

    # through an LLM: [Character] <person_N> says which character the person is in each video
    with FakeOpenAI() as server:
        server.script(f"[Character] {biden['id']}", "[Answer] done")
        env = {"M3_LLM_BASE_URL": server.url, "M3_LLM_MODEL": "fake-model", "M3_LLM_MAX_RETRIES": "1"}
        rec = json.loads(
            m3("ask", mem, f"What did {biden['id']} say?", "--tools", "character", env=env, check=True).stdout
        )
    step = rec["trajectory"][0]
    assert step["tool"] == "character" and step["error"] is None
    shown = server.chat_requests[1]["messages"][-1]["content"]
    assert f"{biden['id']} is the same person as: <character_" in shown
    assert shown.count("(recorded 2026-11-10)") == 1 and shown.count("(recorded 2026-11-12)") == 1
    assert {r["id"].split(":")[0] for r in step["results"]} == set(spans)  # lines of both videos
