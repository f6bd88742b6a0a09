"""A real loopback HTTP server speaking enough of the OpenAI protocol for the official `openai` client.

Tests exercise the genuine client, HTTP stack and retry code against scripted behaviour (rate limits,
5xx, slow replies, broken bodies) instead of mock objects:

    with FakeOpenAI() as server:
        server.script("hello", Fault.status(429, retry_after=0.1), '{"a": 1}')
        client = LlmClient(server.url, "fake-model")

Chat replies come from the queue (`script`), then from `responder(request_json)`; embeddings are
deterministic bag-of-words hashes, so texts sharing words are similar.

`refuse` makes the server behave like a model that lacks a capability, with the words real servers
use: {"images"} answers like llama.cpp serving a text-only model (HTTP 500 "image input is not
supported"), {"audio"} like vLLM ("At most 0 audio(s) may be provided"), {"response_format"} with a
400; `context` rejects prompts longer than that many words like vLLM's context check. Refused requests
do not consume scripted replies.
"""

from __future__ import annotations

import base64
import collections
import hashlib
import json
import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

WORD = re.compile(r"\w+")


@dataclass
class Fault:
    """A scripted misbehaviour; build one with the classmethods."""

    kind: str
    code: int = 200
    retry_after: float | None = None
    seconds: float = 0.0
    then: Reply | None = None
    text: str = ""

    @classmethod
    def status(cls, code: int, retry_after: float | None = None, message: str = "") -> Fault:
        """An HTTP error with an OpenAI-style error body (and a Retry-After header if given)."""
        return cls("status", code=code, retry_after=retry_after, text=message)

    @classmethod
    def slow(cls, seconds: float, then: Reply = "") -> Fault:
        """Sleep before answering with `then` (a client with a shorter timeout gives up first)."""
        return cls("slow", seconds=seconds, then=then)

    @classmethod
    def malformed_body(cls) -> Fault:
        """200 with Content-Type application/json but a body that is not JSON."""
        return cls("malformed")

    @classmethod
    def truncated_json(cls, text: str, keep: float = 0.5) -> Fault:
        """The assistant's JSON `text` cut off part-way, finish_reason "length" (ran out of tokens)."""
        return cls("truncated", text=text[: max(1, int(len(text) * keep))])


Reply = str | Fault


@dataclass
class Recorded:
    """One request as the server saw it."""

    path: str
    body: Any
    headers: dict[str, str]

    def __iter__(self):  # lets tests unpack `path, body, headers = request`
        return iter((self.path, self.body, self.headers))


def words(value: Any) -> int:
    """Rough token count: words in any strings inside `value` (messages, content parts, inputs)."""
    if isinstance(value, str):
        return len(WORD.findall(value))
    if isinstance(value, dict):
        return sum(words(v) for k, v in value.items() if k in ("content", "text"))
    if isinstance(value, list):
        return sum(words(v) for v in value)
    return 0


def hash_embedding(text: str, dim: int = 64, seed: int = 0) -> list[float]:
    """Hashing trick over lower-cased words (unsigned counts), L2-normalised.

    Unsigned so a shared word always adds similarity and a hash collision never subtracts it.
    """
    vec = np.zeros(dim, dtype=np.float64)
    tokens = [w.lower() for w in WORD.findall(text)] or [f"\0{text}"]
    for token in tokens:
        digest = hashlib.sha256(f"{seed}:{token}".encode()).digest()
        index = int.from_bytes(digest[:4], "little") % dim
        vec[index] += 1.0
    return (vec / np.linalg.norm(vec)).tolist()


class FakeOpenAI:
    """The server; `url` is the base URL to give the client (ends in /v1)."""

    def __init__(
        self, *, model: str = "fake-model", embed_dim: int = 64, api_key: str | None = None, seed: int = 0
    ):
        self.model = model
        self.embed_dim = embed_dim
        self.api_key = api_key  # when set, requests without `Authorization: Bearer <key>` get a 401
        self.seed = seed
        self.responder: Callable[[dict], Reply] | None = None
        self.refuse: set[str] = set()  # "images", "audio", "response_format"
        self.context: int | None = None  # words
        self.requests: list[Recorded] = []
        self._queue: collections.deque[Reply] = collections.deque()
        self._embed_faults: collections.deque[Fault] = collections.deque()
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ----------------------------------------------------------------------------------- lifecycle

    def start(self) -> FakeOpenAI:
        handler = type("Handler", (_Handler,), {"fake": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.02,), name="fake-openai", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._httpd is not None, "server not started"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    # ----------------------------------------------------------------------------------- scripting

    def script(self, *replies: Reply) -> None:
        """Queue chat replies, consumed one per /v1/chat/completions request."""
        with self._lock:
            self._queue.extend(replies)

    def script_embeddings(self, *faults: Fault) -> None:
        """Queue faults for the next /v1/embeddings requests; after them the server answers normally."""
        with self._lock:
            self._embed_faults.extend(faults)

    def next_embed_fault(self) -> Fault | None:
        with self._lock:
            return self._embed_faults.popleft() if self._embed_faults else None

    @property
    def pending(self) -> int:
        return len(self._queue)

    def requests_to(self, path_suffix: str) -> list[Recorded]:
        return [r for r in self.requests if r.path.endswith(path_suffix)]

    @property
    def chat_requests(self) -> list[dict]:
        """Bodies of every chat request, in order."""
        return [r.body for r in self.requests_to("/chat/completions")]

    def next_reply(self, body: dict) -> Reply | None:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        return self.responder(body) if self.responder else None

    def record(self, path: str, body: Any, headers: dict[str, str]) -> None:
        with self._lock:
            self.requests.append(Recorded(path, body, headers))


class _Handler(BaseHTTPRequestHandler):
    """Per-connection handler; `fake` is bound on a subclass made by FakeOpenAI.start."""

    fake: FakeOpenAI
    protocol_version = "HTTP/1.1"  # keep-alive, like real servers; every reply has Content-Length

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        log.debug("fake-openai: " + format, *args)

    # ----------------------------------------------------------------------------------- plumbing

    def _send(
        self,
        code: int,
        payload: Any = None,
        *,
        raw: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        data = raw if raw is not None else json.dumps(payload).encode()
        try:
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            log.debug("fake-openai: client went away before the reply")  # e.g. it timed out

    def _error(self, code: int, message: str, headers: dict[str, str] | None = None) -> None:
        kind = "rate_limit_exceeded" if code == 429 else "server_error" if code >= 500 else "invalid_request"
        self._send(code, {"error": {"message": message, "type": kind, "code": code}}, headers=headers)

    def _authorised(self) -> bool:
        key = self.fake.api_key
        if key is None or self.headers.get("Authorization") == f"Bearer {key}":
            return True
        self._error(401, "Incorrect API key provided.")
        return False

    def _read_body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return raw.decode("utf-8", "replace")

    # ----------------------------------------------------------------------------------- routes

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        self.fake.record(self.path, None, {k.lower(): v for k, v in self.headers.items()})
        if not self._authorised():
            return
        if self.path.rstrip("/").endswith("/v1/models"):
            model = {"id": self.fake.model, "object": "model", "created": 0, "owned_by": "fake"}
            self._send(200, {"object": "list", "data": [model]})
        else:
            self._error(404, f"no route {self.path}")

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        body = self._read_body()
        self.fake.record(self.path, body, {k.lower(): v for k, v in self.headers.items()})
        if not self._authorised():
            return
        if not isinstance(body, dict):
            self._error(400, "request body must be a JSON object")
        elif self.path.endswith("/chat/completions"):
            self._chat(body)
        elif self.path.endswith("/embeddings"):
            self._embeddings(body)
        else:
            self._error(404, f"no route {self.path}")

    def _chat(self, body: dict) -> None:
        refusal = self._refusal(body)
        if refusal is not None:
            self._error(*refusal)
            return
        self._reply(body, self.fake.next_reply(body), self._completion)

    def _refusal(self, body: dict) -> tuple[int, str] | None:
        """What a server lacking a capability answers to this request, if it lacks one the request needs."""
        types = {
            part.get("type")
            for message in body.get("messages", [])
            if isinstance(message.get("content"), list)
            for part in message["content"]
            if isinstance(part, dict)
        }
        refuse = self.fake.refuse
        if "images" in refuse and "image_url" in types:  # llama.cpp, text-only model, no --mmproj
            return 500, (
                "image input is not supported - hint: if this is unexpected, you may need to provide "
                "the mmproj"
            )
        if "audio" in refuse and "input_audio" in types:  # vLLM, a model without an audio encoder
            return 400, "At most 0 audio(s) may be provided in one request."
        if "response_format" in refuse and "response_format" in body:
            return 400, "response_format is not supported by this server"
        words_in = words(body.get("messages", []))
        if self.fake.context is not None and words_in > self.fake.context:
            return 400, (
                f"This model's maximum context length is {self.fake.context} tokens. However, you "
                f"requested {words_in} tokens in the messages. Please reduce the length of the messages."
            )
        return None

    def _reply(self, body: dict, reply: Reply | None, answer: Callable[[dict, str, str], Any]) -> None:
        """Play a scripted reply; plain strings (and `slow(..., then=str)`) go through `answer`."""
        while isinstance(reply, Fault) and reply.kind == "slow":
            time.sleep(reply.seconds)
            reply = reply.then
        if reply is None:
            self._error(400, "fake_openai: no scripted reply left and no responder set")
        elif isinstance(reply, str):
            self._send(200, answer(body, reply, "stop"))
        elif reply.kind == "status":
            headers = {"Retry-After": f"{reply.retry_after:g}"} if reply.retry_after is not None else None
            self._error(reply.code, reply.text or f"fake_openai: scripted HTTP {reply.code}", headers)
        elif reply.kind == "malformed":
            self._send(200, raw=b'{"id": "chatcmpl-broken", "choices": [{"mess')
        elif reply.kind == "truncated":
            self._send(200, answer(body, reply.text, "length"))
        else:
            raise ValueError(f"unknown fault {reply.kind}")

    def _completion(self, body: dict, text: str, finish_reason: str) -> dict:
        prompt_tokens = words(body.get("messages", []))
        completion_tokens = words(text)
        serial = len(self.fake.requests)
        return {
            "id": f"chatcmpl-fake{serial}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", self.fake.model),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": finish_reason,
                    "logprobs": None,
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }

    def _embeddings(self, body: dict) -> None:
        inputs = body.get("input")
        if isinstance(inputs, str):
            inputs = [inputs]
        if not isinstance(inputs, list) or not all(isinstance(t, str) and t for t in inputs):
            self._error(400, "'input' must be a non-empty string or a list of non-empty strings")
            return
        fault = self.fake.next_embed_fault()
        if fault is not None:
            self._reply(body, fault, lambda b, _text, _finish: self._embedding_list(b, inputs))
        else:
            self._send(200, self._embedding_list(body, inputs))

    def _embedding_list(self, body: dict, inputs: list[str]) -> dict:
        as_base64 = body.get("encoding_format") == "base64"
        data = []
        for i, text in enumerate(inputs):
            vector = hash_embedding(text, self.fake.embed_dim, self.fake.seed)
            if as_base64:
                vector = base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode()
            data.append({"object": "embedding", "index": i, "embedding": vector})
        tokens = words(inputs)
        return {
            "object": "list",
            "data": data,
            "model": body.get("model", self.fake.model),
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
