"""Thin client for OpenAI-compatible chat servers (vLLM, llama.cpp, Ollama, OpenAI itself).

The official `openai` client does the HTTP; we switch its own retrying off and retry here instead, so
the policy (which failures, how long to wait, how often) is deterministic, shared with the embedding
client, and testable against the loopback fake server in tests/support/fake_openai.py. What the client
sends and reads lives beside it: frames and audio as message parts in :mod:`~m3cli.stages.backends.llm.media`,
reading and repairing a JSON reply in :mod:`~m3cli.stages.backends.llm.json_reply`; what a server accepts is
learned in :mod:`~m3cli.stages.backends.llm.capabilities`.
"""

from __future__ import annotations

import email.utils
import json
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

from m3cli.stages.backends.llm.json_reply import extract_json, repair_prompt, schema_problems
from m3cli.stages.core.errors import M3Error
from m3cli.stages.core.redact import mask_credentials, mask_url

log = logging.getLogger(__name__)

T = TypeVar("T")

LOCAL_API_KEY = "not-needed"  # local servers ignore the key, but the openai client insists on one


class ServerError(M3Error):
    """An OpenAI-compatible server could not answer; `status` is the last failure ("HTTP 503", "timeout")."""

    def __init__(self, message: str, *, status: str | None = None):
        super().__init__(message)
        self.status = status


class LlmError(ServerError):
    """The LLM server gave no usable answer; the message says which server and model, and what to check."""


class LlmContextError(LlmError):
    """The request does not fit the model's context; ``limit`` is the context length when the server said."""

    def __init__(self, message: str, *, limit: int | None = None):
        super().__init__(message, status="context length")
        self.limit = limit


class LlmJsonError(LlmError):
    """The model kept answering with JSON that does not parse or does not fit the schema."""

    def __init__(self, message: str, *, text: str, problems: list[str]):
        super().__init__(message, status="invalid json")
        self.text = text
        self.problems = problems


@dataclass
class LlmReply:
    """One answer plus what it cost, so stages can report tokens and time per clip."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    attempts: int
    model: str
    finish_reason: str | None = None
    #: capabilities whose parts the client had to leave out of this request ("images", "audio")
    dropped: tuple[str, ...] = ()


@dataclass
class Usage:
    """Running totals over every successful call of one client (for `--stats` and bench reports)."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0

    def add(self, reply: LlmReply) -> None:
        self.calls += 1
        self.prompt_tokens += reply.prompt_tokens
        self.completion_tokens += reply.completion_tokens
        self.latency_s += reply.latency_s

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# ----------------------------------------------------------------------------------------------- retries


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff without jitter (deterministic); `max_wait` caps both backoff and Retry-After."""

    max_retries: int = 4
    backoff: float = 0.5
    max_wait: float = 30.0

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """Seconds to sleep after failed attempt number `attempt` (1-based)."""
        if retry_after is not None and retry_after >= 0:
            return min(retry_after, self.max_wait)
        return min(self.backoff * (2 ** (attempt - 1)), self.max_wait)


class MalformedResponse(Exception):
    """The server answered 200 but the body is not what the protocol promises (retried like a 5xx)."""


@dataclass
class _Failure:
    status: str
    retryable: bool
    retry_after: float | None = None
    detail: str = ""
    message: str = ""  # the server's whole error message, for capability detection


def parse_retry_after(headers: Any) -> float | None:
    """Seconds from `retry-after-ms` / `retry-after` (number or HTTP date); None when absent or garbage."""
    if headers is None:
        return None
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) / divisor
        except ValueError:
            parsed = email.utils.parsedate_tz(value)
            if parsed is None:
                continue
            seconds = email.utils.mktime_tz(parsed) - time.time()
        if math.isfinite(seconds):
            return max(seconds, 0.0)
    return None


def _server_message(exc: Any) -> str:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        msg = inner.get("message") if isinstance(inner, dict) else inner
        if msg:
            return str(msg)[:2000]
    return ""


def _classify(exc: Exception) -> _Failure | None:
    """Map an exception to a retry decision; None means 'not ours' (a bug) and it propagates."""
    import openai  # already loaded by whoever made the call; kept lazy so the CLI starts fast

    if isinstance(exc, openai.APITimeoutError):
        return _Failure("timeout", True)
    if isinstance(exc, openai.APIConnectionError):
        return _Failure("connection error", True)
    if isinstance(exc, openai.APIStatusError):
        code = exc.status_code
        retryable = code == 429 or code >= 500
        after = parse_retry_after(exc.response.headers) if retryable else None
        message = _server_message(exc)
        return _Failure(f"HTTP {code}", retryable, after, message[:300], message)
    if isinstance(exc, (MalformedResponse, openai.APIResponseValidationError, json.JSONDecodeError)):
        return _Failure("malformed response", True, detail=str(exc)[:300])
    return None


def redact(text: str, secret: str | None) -> str:
    """Remove the API key (and credentials inside URLs) from anything we are about to log or raise."""
    if secret and secret != LOCAL_API_KEY and len(secret) >= 4:
        text = text.replace(secret, "***")
    return mask_credentials(text)


def call_with_retries(
    fn: Callable[[], T],
    *,
    policy: RetryPolicy,
    where: str,
    error_cls: type[ServerError] = LlmError,
    secret: str | None = None,
    sleep: Callable[[float], None] = time.sleep,
    adapt: Callable[[_Failure], str | None] | None = None,
) -> tuple[T, int]:
    """Run `fn` until it succeeds; return (result, attempts).

    429, 5xx, timeouts, connection errors and malformed bodies are retried up to `policy.max_retries`
    times; any other 4xx fails at once (retrying a bad request or a wrong key only wastes time).
    `where` names the server and model for the error message.

    `adapt(failure)` sees every failure first and may change what `fn` sends: it returns "resend" when
    it removed what the server refused (re-sent at once, not counted as a retry; it can only happen as
    often as there are things to remove), or None to let the policy decide.
    """
    attempt = 0
    while True:
        attempt += 1
        try:
            return fn(), attempt
        except Exception as exc:  # classified below; unknown ones (bugs) are re-raised
            failure = _classify(exc)
            if failure is None:
                raise
        if adapt is not None and adapt(failure) == "resend":
            attempt -= 1
            continue
        detail = redact(f": {failure.detail.rstrip('.')}" if failure.detail else "", secret)
        if not failure.retryable:
            raise error_cls(
                f"{where} rejected the request with {failure.status}{detail}. Check the model name, the API "
                "key and the request options for this server.",
                status=failure.status,
            ) from None
        if attempt > policy.max_retries:
            raise error_cls(
                f"{where} failed after {attempt} attempts; last status: {failure.status}{detail}. Check that "
                "the server is running and reachable at that URL, that it serves that model, and that it is "
                "not overloaded (raise the timeout or max_retries if it is just slow).",
                status=failure.status,
            ) from None
        wait = policy.delay(attempt, failure.retry_after)
        log.warning(
            "%s: %s%s; retry %d/%d in %.2fs", where, failure.status, detail, attempt, policy.max_retries, wait
        )
        sleep(wait)


# ----------------------------------------------------------------------------------------------- client


#: Completion budget per task, in tokens: a runaway generation stops here instead of at the timeout.
#: Override per task with ``[llm.max_tokens]`` in m3.toml (e.g. ``memorize = 3000``).
DEFAULT_MAX_TOKENS: dict[str, int] = {
    "memorize": 1536,
    "summary": 400,
    "links": 1024,
    "conflicts": 512,
    "ask": 768,
    "prune": 256,
    "rewatch": 400,
    "listen": 400,
    "judge": 16,
    "chat": 1024,
}
MIN_MAX_TOKENS = 64

#: Sent as an extra turn when a request timed out or ran out of tokens: the retry is never the same.
BRIEF_TURN = (
    "Your previous answer took too long or was cut off. Answer again, much more briefly: the fewest, "
    "shortest items that are still correct, in the same format."
)


class LlmClient:
    """Chat with an OpenAI-compatible server; deterministic by default (temperature 0, fixed seed).

    The client learns what the server accepts (:mod:`m3cli.stages.backends.llm.capabilities`): a
    refused image or audio part or ``response_format`` is dropped and the request re-sent at once,
    and the refusal is remembered (in the cache once :meth:`use_cache` is called). Every call sends a
    ``max_tokens`` for its task; a timed-out request is retried shorter ("be brief", half the budget).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 4,
        backoff: float = 0.5,
        temperature: float = 0.0,
        seed: int | None = 0,
        *,
        json_mode: bool = False,
        max_wait: float = 30.0,
        max_tokens: dict[str, int] | None = None,
    ):
        from m3cli.stages.backends.llm.capabilities import Capabilities

        self.base_url = base_url
        self.model = model
        self.timeout = timeout
        self.temperature = temperature
        self.seed = seed
        self.json_mode = json_mode
        self.policy = RetryPolicy(max_retries=max_retries, backoff=backoff, max_wait=max_wait)
        self.usage = Usage()
        unknown = sorted(set(max_tokens or {}) - set(DEFAULT_MAX_TOKENS))
        if unknown:
            raise M3Error(
                f"llm.max_tokens: unknown task(s) {', '.join(unknown)}; "
                f"valid: {', '.join(DEFAULT_MAX_TOKENS)}"
            )
        bad = sorted(k for k, v in (max_tokens or {}).items() if not isinstance(v, int) or v < 1)
        if bad:
            raise M3Error(f"llm.max_tokens: {', '.join(bad)} must be a positive number of tokens")
        self.max_tokens = {**DEFAULT_MAX_TOKENS, **(max_tokens or {})}
        self.capabilities = Capabilities()
        self.forced: dict[str, bool] = {}
        self._store: Any = None
        self._secret = api_key or LOCAL_API_KEY
        import openai  # ~0.3 s; only commands that talk to a model pay it

        self._client = openai.OpenAI(base_url=base_url, api_key=self._secret, timeout=timeout, max_retries=0)
        self._lock = threading.Lock()
        self._sleep: Callable[[float], None] = time.sleep

    def __repr__(self) -> str:
        return f"LlmClient(base_url={mask_url(self.base_url)!r}, model={self.model!r})"

    @property
    def where(self) -> str:
        return f"LLM server {mask_url(self.base_url)} (model {self.model})"

    # ------------------------------------------------------------------ capabilities
    def use_cache(self, cache: Any) -> None:
        """Remember capabilities in ``cache`` (per base URL and model) and load what is known already."""
        from m3cli.stages.backends.llm.capabilities import CapabilityStore

        if cache is None or self._store is not None:
            return
        self._store = CapabilityStore(cache)
        known = self._store.load(self.base_url, self.model)
        with self._lock:
            for name, value in known.as_json().items():
                if getattr(self.capabilities, name) is None:
                    setattr(self.capabilities, name, value)

    def force(self, **flags: bool | None) -> None:
        """Flags override detection: ``force(images=False)`` never sends images, ``True`` always does."""
        for name, value in flags.items():
            if value is None:
                self.forced.pop(name, None)
            else:
                self.forced[name] = bool(value)

    def accepts(self, capability: str) -> bool:
        """Whether to send ``capability`` ("images", "audio", "json_mode") to this server now."""
        from m3cli.stages.backends.llm.capabilities import audio_by_name

        if capability in self.forced:
            return self.forced[capability]
        known = getattr(self.capabilities, capability)
        if known is not None:
            return known
        if capability == "audio":
            return audio_by_name(self.model)
        if capability == "json_mode":
            return self.json_mode
        return True  # images: try, and learn from a refusal

    def refuses(self, capability: str) -> bool:
        """Whether ``capability`` is known not to work here (forced off, or refused before)."""
        if capability in self.forced:
            return not self.forced[capability]
        return getattr(self.capabilities, capability) is False

    def _learn(self, capability: str, value: Any) -> None:
        with self._lock:
            if getattr(self.capabilities, capability) == value:
                return
            setattr(self.capabilities, capability, value)
            caps = self.capabilities
        log.info("%s: learned %s = %s", self.where, capability, value)
        if self._store is not None:
            self._store.save(self.base_url, self.model, caps)

    def prepare(self, messages: list[dict]) -> list[dict]:
        """The messages as they will be sent: parts of capabilities known to be refused are left out."""
        from m3cli.stages.backends.llm.capabilities import parts_present, strip_parts

        for capability in sorted(parts_present(messages)):
            if self.refuses(capability):
                messages, _ = strip_parts(messages, capability)
        return messages

    # ------------------------------------------------------------------ calls
    def chat(
        self,
        messages: list[dict],
        *,
        task: str = "chat",
        max_tokens: int | None = None,
        response_format: dict | None = None,
    ) -> LlmReply:
        """One completion, retried per the policy; raises LlmError when the server cannot answer.

        ``task`` picks the ``max_tokens`` budget (see :data:`DEFAULT_MAX_TOKENS`) unless one is given.
        """
        from m3cli.stages.backends.llm.capabilities import parts_present

        original = parts_present(messages)
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": self.prepare(messages),
            "temperature": self.temperature,
            "max_tokens": max_tokens or self.max_tokens.get(task, DEFAULT_MAX_TOKENS["chat"]),
        }
        if self.seed is not None:
            kwargs["seed"] = self.seed
        if response_format is not None and (
            self.forced.get("json_mode") or self.capabilities.json_mode is not False
        ):
            kwargs["response_format"] = response_format
        started = time.monotonic()
        (text, prompt_tokens, completion_tokens, model, finish), attempts = call_with_retries(
            lambda: self._complete(kwargs),
            policy=self.policy,
            where=self.where,
            secret=self._secret,
            sleep=self._sleep,
            adapt=lambda failure: self._adapt(failure, kwargs),
        )
        dropped = tuple(sorted(original - parts_present(kwargs["messages"])))
        reply = LlmReply(
            text,
            prompt_tokens,
            completion_tokens,
            time.monotonic() - started,
            attempts,
            model,
            finish_reason=finish,
            dropped=dropped,
        )
        with self._lock:
            self.usage.add(reply)
        return reply

    def _adapt(self, failure: _Failure, kwargs: dict[str, Any]) -> str | None:
        """Change the request after a failure: drop what was refused, or make a timed-out one shorter."""
        from m3cli.stages.backends.llm.capabilities import context_limit, parts_present, refusal, strip_parts

        if failure.status == "timeout":
            cap = kwargs["max_tokens"]
            kwargs["max_tokens"] = max(MIN_MAX_TOKENS, cap // 2)
            if not any(m.get("content") == BRIEF_TURN for m in kwargs["messages"]):
                kwargs["messages"] = [*kwargs["messages"], {"role": "user", "content": BRIEF_TURN}]
            elif kwargs["max_tokens"] == cap:
                kwargs["temperature"] = round(kwargs["temperature"] + 0.1, 2)  # still never byte-identical
            return None
        present = parts_present(kwargs["messages"])
        if "response_format" in kwargs:
            present.add("json_mode")
        refused = refusal(failure.message, present)
        if refused is None:
            return None
        detail = redact(failure.detail.rstrip("."), self._secret)
        if refused == "context":
            limit = context_limit(failure.message)
            if limit:
                self._learn("context", limit)
            raise LlmContextError(
                f"{self.where}: the request does not fit the model's context"
                + (f" ({limit} tokens)" if limit else "")
                + f": {detail}. Send less (fewer frames with --frames, fewer rounds) or serve the model "
                "with a longer context.",
                limit=limit,
            )
        if self.forced.get(refused):
            flag = {"images": "--images", "audio": "--audio", "json_mode": "json_mode"}[refused]
            raise LlmError(
                f"{self.where} refused {refused} ({detail}) although {flag} was given; drop {flag} to "
                "let m3 leave them out, or serve a model that accepts them.",
                status=failure.status,
            )
        log.warning("%s does not accept %s (%s); re-sending without", self.where, refused, detail)
        self._learn(refused, False)
        if refused == "json_mode":
            kwargs.pop("response_format", None)
        else:
            kwargs["messages"], _ = strip_parts(kwargs["messages"], refused)
        return "resend"

    def _complete(self, kwargs: dict[str, Any]) -> tuple[str, int, int, str, str | None]:
        response = self._client.chat.completions.create(**kwargs)
        choices = getattr(response, "choices", None)
        if not choices:
            raise MalformedResponse("the reply has no choices")
        message = getattr(choices[0], "message", None)
        if message is None:
            raise MalformedResponse("the first choice has no message")
        usage = getattr(response, "usage", None)
        prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        finish = getattr(choices[0], "finish_reason", None)
        return message.content or "", prompt_tokens, completion_tokens, response.model or self.model, finish

    def chat_json(
        self,
        messages: list[dict],
        schema: dict,
        *,
        repairs: int = 2,
        validator: Callable[[Any], list[str]] | None = None,
        **kw: Any,
    ) -> tuple[Any, LlmReply]:
        """Ask for JSON and insist: parse, validate (schema + `validator`), and ask for repairs.

        Returns the object and an LlmReply whose tokens, latency and attempts add up every round.
        """
        if self.json_mode:
            kw.setdefault("response_format", {"type": "json_object"})
        convo = list(messages)
        total: LlmReply | None = None
        problems: list[str] = []
        for _ in range(repairs + 1):
            reply = self.chat(convo, **kw)
            total = reply if total is None else _accumulate(total, reply)
            obj, problems = self._check(reply.text, schema, validator)
            if not problems:
                return obj, total
            log.info("%s: JSON reply rejected (%s)", self.where, "; ".join(problems))
            if reply.finish_reason == "length":  # ran out of tokens: the repair asks for less, not again
                problems = [
                    f"the reply was cut off after {reply.completion_tokens or 'the most'} tokens",
                    *problems,
                ]
                repair = repair_prompt(problems) + " " + BRIEF_TURN
            else:
                repair = repair_prompt(problems)
            convo += [
                {"role": "assistant", "content": reply.text},
                {"role": "user", "content": repair},
            ]
        assert total is not None
        raise LlmJsonError(
            f"{self.where} did not return valid JSON after {repairs + 1} tries; last problems: "
            f"{'; '.join(problems)}. Check that the model can follow JSON instructions (try a stronger "
            "model, or json_mode if the server supports response_format).",
            text=total.text,
            problems=problems,
        )

    @staticmethod
    def _check(
        text: str, schema: dict, validator: Callable[[Any], list[str]] | None
    ) -> tuple[Any, list[str]]:
        try:
            obj = extract_json(text)
        except ValueError as exc:
            return None, [str(exc)]
        problems = schema_problems(obj, schema)
        if not problems and validator is not None:
            problems = list(validator(obj))
        return obj, problems


def _accumulate(total: LlmReply, reply: LlmReply) -> LlmReply:
    return LlmReply(
        text=reply.text,
        prompt_tokens=total.prompt_tokens + reply.prompt_tokens,
        completion_tokens=total.completion_tokens + reply.completion_tokens,
        latency_s=total.latency_s + reply.latency_s,
        attempts=total.attempts + reply.attempts,
        model=reply.model,
        finish_reason=reply.finish_reason,
        dropped=tuple(sorted(set(total.dropped) | set(reply.dropped))),
    )


def client_from_settings(llm: Any) -> LlmClient | None:
    """The client for ``Settings.llm``, or None when no LLM is configured (stages then go offline)."""
    if not llm.configured:
        if llm.base_url and not llm.model:
            log.warning(
                "an LLM server is set (%s, from --llm-base-url, M3_LLM_BASE_URL, OPENAI_BASE_URL or "
                "m3.toml) but no model: it is NOT used; give --llm-model or M3_LLM_MODEL",
                mask_url(llm.base_url),
            )
        return None
    key = llm.api_key.get_secret_value() if llm.api_key else None
    return LlmClient(
        llm.base_url,
        llm.model,
        api_key=key,
        timeout=llm.timeout,
        max_retries=llm.max_retries,
        max_tokens=dict(getattr(llm, "max_tokens", None) or {}),
    )
