"""LlmClient against a real loopback OpenAI-compatible server: retries, errors, JSON repair, accounting."""

from __future__ import annotations

import base64
import json
import logging
import time

import pytest

from m3cli.stages.backends.llm import (
    LlmClient,
    LlmError,
    LlmJsonError,
)
from m3cli.stages.backends.llm.json_reply import extract_json
from m3cli.stages.backends.llm.media import audio_part, image_part
from m3cli.stages.core.errors import M3Error
from support.fake_openai import FakeOpenAI, Fault

KEY = "sk-test-SECRET-0123456789"
USER = [{"role": "user", "content": "say hello to the world"}]
SCHEMA = {
    "type": "object",
    "required": ["ids"],
    "properties": {"ids": {"type": "array", "items": {"type": "string"}}},
    "additionalProperties": False,
}


@pytest.fixture
def server():
    with FakeOpenAI(api_key=KEY) as fake:
        yield fake


def make_client(server: FakeOpenAI, **kw) -> LlmClient:
    kw.setdefault("backoff", 0.01)
    kw.setdefault("timeout", 5.0)
    return LlmClient(server.url, "fake-model", api_key=KEY, **kw)


def assert_key_only_in_auth_header(server: FakeOpenAI) -> None:
    for path, body, headers in server.requests:
        assert KEY not in path and KEY not in json.dumps(body)
        assert headers["authorization"] == f"Bearer {KEY}"
        assert all(KEY not in v for k, v in headers.items() if k != "authorization")


def test_plain_reply_and_usage(server):
    server.script("hello world, nice to meet you")
    client = make_client(server)
    reply = client.chat(USER, max_tokens=50)

    assert reply.text == "hello world, nice to meet you"
    assert (reply.prompt_tokens, reply.completion_tokens, reply.attempts) == (5, 6, 1)
    assert reply.model == "fake-model" and reply.latency_s > 0
    sent = server.chat_requests[0]
    assert sent["temperature"] == 0.0 and sent["seed"] == 0 and sent["max_tokens"] == 50
    assert "response_format" not in sent

    server.script("again")
    client.chat(USER)
    assert client.usage.as_dict()["calls"] == 2
    assert client.usage.prompt_tokens == 10 and client.usage.completion_tokens == 7
    assert client.usage.latency_s >= reply.latency_s
    assert_key_only_in_auth_header(server)


def test_key_never_in_repr():
    client = LlmClient("http://127.0.0.1:9/v1", "m", api_key=KEY)
    assert KEY not in repr(client) and KEY not in str(vars(client).get("usage"))
    assert LlmClient("http://127.0.0.1:9/v1", "m")._secret == "not-needed"


def test_429_then_success_honours_retry_after(server):
    server.script(Fault.status(429, retry_after=0.3), "ok")
    client = make_client(server)
    started = time.monotonic()
    reply = client.chat(USER)
    assert reply.text == "ok" and reply.attempts == 2
    assert time.monotonic() - started >= 0.3  # waited what the server asked, not the 0.01 s backoff


def test_retry_after_is_capped(server):
    server.script(Fault.status(503, retry_after=120), "ok")
    client = make_client(server, max_wait=0.05)
    started = time.monotonic()
    assert client.chat(USER).text == "ok"
    assert time.monotonic() - started < 5


def test_5xx_beyond_bound_raises_helpful_error(server, caplog):
    server.script(*[Fault.status(500)] * 3)
    client = make_client(server, max_retries=2)
    with caplog.at_level(logging.DEBUG), pytest.raises(LlmError) as info:
        client.chat(USER)
    message = str(info.value)
    assert isinstance(info.value, M3Error)
    assert server.url in message and "fake-model" in message and "HTTP 500" in message
    assert "3 attempts" in message and "Check" in message
    assert KEY not in message and KEY not in caplog.text and KEY not in repr(info.value)
    assert info.value.__cause__ is None  # nothing that carries request headers hangs off it
    assert len(server.chat_requests) == 3 and server.pending == 0


def test_other_4xx_fails_at_once():
    with FakeOpenAI(api_key="sk-the-right-key") as server:
        server.script("never sent")
        client = LlmClient(server.url, "fake-model", api_key=KEY, backoff=0.01)
        with pytest.raises(LlmError) as info:
            client.chat(USER)
    assert "HTTP 401" in str(info.value) and KEY not in str(info.value)
    assert len(server.requests) == 1


def test_timeout_is_retried(server):
    server.script(Fault.slow(1.0, then="too late"), "in time")
    client = make_client(server, timeout=0.2)
    reply = client.chat(USER)
    assert reply.text == "in time" and reply.attempts == 2


def test_malformed_body_is_retried(server):
    server.script(Fault.malformed_body(), "fine")
    assert make_client(server).chat(USER).text == "fine"


def test_connection_refused_names_server():
    with FakeOpenAI() as server:
        url = server.url  # the port is free again once the server stops
    client = LlmClient(url, "fake-model", max_retries=1, backoff=0.01, timeout=2)
    with pytest.raises(LlmError, match="connection error") as info:
        client.chat(USER)
    assert url in str(info.value)


def test_chat_json_repairs_malformed_json(server):
    server.script('{"ids": ["a", "b"', '{"ids": ["a", "b"]}')
    client = make_client(server)
    obj, reply = client.chat_json(USER, SCHEMA)

    assert obj == {"ids": ["a", "b"]}
    assert reply.attempts == 2 and reply.text == '{"ids": ["a", "b"]}'
    assert client.usage.calls == 2
    assert reply.prompt_tokens == client.usage.prompt_tokens  # usage adds up across rounds
    repair = server.chat_requests[1]["messages"]
    assert repair[-2] == {"role": "assistant", "content": '{"ids": ["a", "b"'}
    assert "incomplete" in repair[-1]["content"] and "JSON object only" in repair[-1]["content"]


def test_chat_json_repairs_truncated_reply_then_schema_error(server):
    server.script(Fault.truncated_json('{"ids": ["a", "b", "c"]}'), '{"ids": [1]}', '{"ids": ["x"]}')
    obj, reply = make_client(server).chat_json(USER, SCHEMA)
    assert obj == {"ids": ["x"]} and reply.attempts == 3
    second_repair = server.chat_requests[2]["messages"][-1]["content"]
    assert "at $.ids[0]: 1 is not of type 'string'" in second_repair


def test_chat_json_extracts_fenced_json(server):
    server.script('Sure! Here it is:\n```json\n{"ids": ["face_1"]}\n```\nAnything else?')
    obj, reply = make_client(server).chat_json(USER, SCHEMA)
    assert obj == {"ids": ["face_1"]} and reply.attempts == 1


def test_chat_json_validator_rejects_unknown_id(server):
    known = {"face_1", "voice_2"}

    def only_known(obj):
        return [f"unknown id {i!r}; use one of {sorted(known)}" for i in obj["ids"] if i not in known]

    server.script('{"ids": ["face_1", "face_9"]}', 'The fix: {"ids": ["face_1"]}')
    obj, _ = make_client(server).chat_json(USER, SCHEMA, validator=only_known)
    assert obj == {"ids": ["face_1"]}
    assert "unknown id 'face_9'" in server.chat_requests[1]["messages"][-1]["content"]


def test_chat_json_gives_up_after_repairs(server):
    server.script("no json here", "still none", "nope")
    client = make_client(server)
    with pytest.raises(LlmJsonError) as info:
        client.chat_json(USER, SCHEMA, repairs=2)
    assert info.value.text == "nope" and info.value.problems == ["no JSON object found in the reply"]
    assert "3 tries" in str(info.value) and isinstance(info.value, LlmError)
    assert server.pending == 0


def test_json_mode_sets_response_format(server):
    server.script('{"ids": []}')
    make_client(server, json_mode=True).chat_json(USER, SCHEMA)
    assert server.chat_requests[0]["response_format"] == {"type": "json_object"}


def test_responder_and_multimodal_parts(server):
    server.responder = lambda body: "a red car" if "image_url" in json.dumps(body) else "no image"
    content = [{"type": "text", "text": "what is this?"}, image_part(b"\xff\xd8jpeg"), audio_part(b"RIFFwav")]
    reply = make_client(server).chat([{"role": "user", "content": content}])
    assert reply.text == "a red car"
    sent = server.chat_requests[0]["messages"][0]["content"]
    jpeg_b64 = base64.b64encode(b"\xff\xd8jpeg").decode()
    assert sent[1]["image_url"]["url"] == f"data:image/jpeg;base64,{jpeg_b64}"
    assert sent[2] == {
        "type": "input_audio",
        "input_audio": {"data": base64.b64encode(b"RIFFwav").decode(), "format": "wav"},
    }


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"a": 1}', {"a": 1}),
        ("[1, 2]", [1, 2]),
        ('I think {braces} matter. Answer: {"a": "}{"}', {"a": "}{"}),
        ('```\n{"a": {"b": [1]}}\n```', {"a": {"b": [1]}}),
        ('{"a": 1} and {"b": 2}', {"a": 1}),
    ],
)
def test_extract_json(text, expected):
    assert extract_json(text) == expected


def test_extract_json_reports_truncation():
    with pytest.raises(ValueError, match="incomplete"):
        extract_json('prefix {"a": {"b": 1}')
