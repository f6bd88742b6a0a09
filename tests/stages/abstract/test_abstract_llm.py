"""abstract's LLM calls are cached per clip: a rerun replays every reply without the server, and a
failed call is not remembered, so the next run asks again."""

from __future__ import annotations

import json

from test_abstract import conversation, items

from m3cli.stages.abstract.stage import AbstractConfig, abstract_records
from m3cli.stages.backends.llm import LlmClient
from m3cli.stages.core.cache import Cache
from m3cli.stages.core.common import RunContext
from support.fake_openai import FakeOpenAI, Fault

CONFIG = AbstractConfig(embed=False, tau_char=3, tau_rel=2)


def respond(body: dict) -> str:
    prompt = body["messages"][-1]["content"]
    if "New facts:" in prompt:
        new = json.loads(prompt.split("New facts: ")[1].split("\nEarlier facts: ")[0])
        return json.dumps(
            {"links": [{"source": new[-1]["node_id"], "target": new[0]["node_id"], "weight": 0.7}]}
        )
    return json.dumps({"summary": "<character_1> and <character_2> talk."})


def client_for(url: str) -> LlmClient:
    return LlmClient(url, "fake", backoff=0.01, max_retries=0, timeout=5)


def test_a_rerun_replays_every_reply_without_the_server(tmp_path):
    ctx = RunContext(cache=Cache(tmp_path / "cache"))
    with FakeOpenAI() as server:
        server.responder = respond
        url = server.url
        first = abstract_records(conversation(3), CONFIG, client_for(url), ctx=ctx)
        asked = len(server.chat_requests)
    assert asked and not any(r.errors for r in first)
    assert {a["source"] for _, a in items(first, "clip") + items(first, "character")} == {"llm"}
    again = abstract_records(conversation(3), CONFIG, client_for(url), ctx=ctx)  # the server is gone
    assert [r.to_json() for r in again] == [r.to_json() for r in first]


def test_a_failed_call_is_asked_again_on_the_next_run(tmp_path):
    ctx = RunContext(cache=Cache(tmp_path / "cache"))
    with FakeOpenAI() as server:
        server.responder = lambda body: (
            Fault.status(500)
            if body["messages"][-1]["content"].startswith("Summarise clip 1")
            else respond(body)
        )
        first = abstract_records(conversation(2), CONFIG, client_for(server.url), ctx=ctx)
        server.responder = respond
        n = len(server.chat_requests)
        again = abstract_records(conversation(2), CONFIG, client_for(server.url), ctx=ctx)
        retried = [b["messages"][-1]["content"] for b in server.chat_requests[n:]]
    assert [e.what for e in first[1].errors] == ["clip"]
    assert [a["source"] for _, a in items(first, "clip")] == ["llm", "offline"]
    assert not again[1].errors and [a["source"] for _, a in items(again, "clip")] == ["llm", "llm"]
    assert any(p.startswith("Summarise clip 1") for p in retried)
    assert not any(p.startswith("Summarise clip 0") for p in retried)  # that reply came from the cache
