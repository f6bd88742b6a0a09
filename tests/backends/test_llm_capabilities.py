"""The client learns what a server accepts from its refusals, bounds every call, never retries identically.

All against the loopback server behaving like real servers that lack a capability (llama.cpp's
"image input is not supported", vLLM's "At most 0 audio(s)", a context overflow), not mocks.
"""

from __future__ import annotations

import json

import pytest

from m3cli.stages.backends.llm import (
    BRIEF_TURN,
    DEFAULT_MAX_TOKENS,
    LlmClient,
    LlmContextError,
    LlmError,
)
from m3cli.stages.backends.llm.capabilities import refusal
from m3cli.stages.backends.llm.media import audio_part, image_part
from m3cli.stages.core.cache import Cache
from m3cli.stages.core.errors import M3Error
from support.fake_openai import FakeOpenAI, Fault

TEXT = {"type": "text", "text": "describe the clip"}
SCHEMA = {"type": "object", "required": ["ids"], "properties": {"ids": {"type": "array"}}}


def multimodal() -> list[dict]:
    return [{"role": "user", "content": [TEXT, image_part(b"\xff\xd8jpeg"), audio_part(b"RIFFwav")]}]


def part_types(body: dict) -> list[str]:
    return [p["type"] for m in body["messages"] if isinstance(m["content"], list) for p in m["content"]]


@pytest.fixture
def server():
    with FakeOpenAI() as fake:
        yield fake


def client_for(server, **kw) -> LlmClient:
    kw.setdefault("backoff", 0.01)
    kw.setdefault("timeout", 5.0)
    return LlmClient(server.url, "qwen2.5-0.5b-instruct", **kw)


def test_image_refusal_is_resent_without_images_once_and_remembered(server, tmp_path):
    server.refuse = {"images"}
    server.script("a clip", "another clip")
    client = client_for(server, max_retries=4)
    client.use_cache(Cache(tmp_path / "cache"))
    reply = client.chat(multimodal())
    assert reply.text == "a clip" and reply.dropped == ("images",) and reply.attempts == 1
    first, second = server.chat_requests  # one refusal, one re-send: no retries of a refusal
    assert "image_url" in part_types(first) and part_types(second) == ["text", "input_audio"]
    assert client.capabilities.images is False
    # the next request of this client leaves images out from the start
    client.chat(multimodal())
    assert len(server.chat_requests) == 3 and "image_url" not in part_types(server.chat_requests[2])
    # and so does a new client (a later run) on the same cache, for this server and model only
    server.script("third")
    fresh = client_for(server)
    fresh.use_cache(Cache(tmp_path / "cache"))
    assert fresh.refuses("images") and fresh.chat(multimodal()).dropped == ("images",)
    assert len(server.chat_requests) == 4
    other = LlmClient(server.url, "another-model")
    other.use_cache(Cache(tmp_path / "cache"))
    assert other.capabilities.images is None and other.accepts("images")


def test_audio_and_response_format_refusals(server):
    server.refuse = {"audio", "response_format"}
    server.script('{"ids": []}')
    client = client_for(server, json_mode=True)
    obj, reply = client.chat_json(multimodal(), SCHEMA)
    assert obj == {"ids": []} and reply.dropped == ("audio",)
    bodies = server.chat_requests
    assert len(bodies) == 3  # audio refused, response_format refused, then answered
    assert "response_format" not in bodies[-1] and "input_audio" not in part_types(bodies[-1])
    assert client.capabilities.audio is False and client.capabilities.json_mode is False


def test_forced_capability_that_is_refused_fails_at_once(server):
    server.refuse = {"images"}
    client = client_for(server, max_retries=4)
    client.force(images=True)
    with pytest.raises(LlmError, match="although --images was given"):
        client.chat(multimodal())
    assert len(server.chat_requests) == 1
    client.force(images=False)  # --no-images: never sent, whatever is known
    server.script("ok")
    assert client.chat(multimodal()).dropped == ("images",) and len(server.chat_requests) == 2


def test_context_overflow_is_not_retried_and_the_limit_is_learned(server):
    server.context = 3
    client = client_for(server, max_retries=4)
    with pytest.raises(LlmContextError, match="does not fit the model's context") as info:
        client.chat([{"role": "user", "content": "a question with rather many words in it"}])
    assert info.value.limit == 3 and client.capabilities.context == 3
    assert len(server.chat_requests) == 1


def test_a_plain_server_error_mentioning_images_is_still_retried(server):
    server.script(Fault.status(500, message="internal error while loading the image cache"), "fine")
    reply = client_for(server).chat([{"role": "user", "content": "no pictures here"}])
    assert reply.text == "fine" and reply.attempts == 2 and reply.dropped == ()


@pytest.mark.parametrize(
    "message, present, expected",
    [
        ("image input is not supported - hint: you may need to provide the mmproj", {"images"}, "images"),
        ("At most 0 image(s) may be provided in one request.", {"images"}, "images"),
        ("Invalid content type. image_url is only supported by certain models.", {"images"}, "images"),
        ("Qwen2ForCausalLM is not a multimodal model", {"images"}, "images"),
        ("At most 0 audio(s) may be provided in one request.", {"audio", "images"}, "audio"),
        ("Invalid value: 'input_audio'. Supported values are: 'text' and 'image_url'.", {"audio"}, "audio"),
        ("the request exceeds the available context size, try increasing it", set(), "context"),
        ("image input is not supported", set(), None),  # no image was sent: not about us
        ("CUDA out of memory", {"images"}, None),
        ("", {"images"}, None),
    ],
)
def test_refusal_words_of_real_servers(message, present, expected):
    assert refusal(message, present) == expected


def test_every_call_sends_a_task_sized_max_tokens(server):
    server.responder = lambda body: "ok"
    client = client_for(server, max_tokens={"summary": 50})
    client.chat([{"role": "user", "content": "hi"}], task="summary")
    client.chat([{"role": "user", "content": "hi"}], task="memorize")
    client.chat([{"role": "user", "content": "hi"}])
    sent = [b["max_tokens"] for b in server.chat_requests]
    assert sent == [50, DEFAULT_MAX_TOKENS["memorize"], DEFAULT_MAX_TOKENS["chat"]]
    with pytest.raises(M3Error, match="unknown task"):
        client_for(server, max_tokens={"everything": 10})
    with pytest.raises(M3Error, match="positive"):
        client_for(server, max_tokens={"ask": 0})


def test_a_timed_out_request_is_retried_shorter_never_identical(server):
    server.script(Fault.slow(1.0, then="late"), Fault.slow(1.0, then="late"), "in time")
    client = client_for(server, timeout=0.3, max_retries=3)
    reply = client.chat([{"role": "user", "content": "summarise"}], task="summary")
    assert reply.text == "in time" and reply.attempts == 3
    bodies = server.chat_requests
    assert len({json.dumps(b, sort_keys=True) for b in bodies}) == 3  # three different requests
    assert [b["max_tokens"] for b in bodies] == [400, 200, 100]
    assert bodies[1]["messages"][-1]["content"] == BRIEF_TURN
    assert sum(m["content"] == BRIEF_TURN for m in bodies[2]["messages"]) == 1


def test_a_truncated_json_reply_is_repaired_with_a_shorter_request(server):
    server.script(Fault.truncated_json('{"ids": ["a", "b", "c", "d"]}'), '{"ids": ["a"]}')
    obj, reply = client_for(server).chat_json([{"role": "user", "content": "ids?"}], SCHEMA)
    assert obj == {"ids": ["a"]}
    repair = server.chat_requests[1]["messages"][-1]["content"]
    assert "cut off" in repair and BRIEF_TURN in repair
