"""What an OpenAI-compatible server and model accept, learned from its refusals and remembered.

Servers say "no" in words, not in a protocol: llama.cpp answers HTTP 500 "image input is not
supported" to a text-only model, vLLM says "At most 0 image(s) may be provided", OpenAI "Invalid
value: 'input_audio'", and context overflows come as "maximum context length is 32768 tokens" or
"exceeds the available context size". :func:`refusal` reads such a message and names the part of the
request that was refused, so the client can re-send without it at once instead of retrying a request
that can never succeed.

What was learned is kept per (base URL, model) in the cache (:class:`CapabilityStore`), so later clips
and later runs do not pay for the discovery again. Flags (``--images/--no-images``,
``--audio/--no-audio``) override both the guess and the memory.
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import asdict, dataclass, fields
from typing import Any

log = logging.getLogger(__name__)

#: Model names that announce an audio-capable (omni) model; others get audio only when told to.
AUDIO_MODEL_HINTS = ("omni", "audio", "m3-agent-memorization")

#: Content part type -> capability name.
PART_KINDS = {"image_url": "images", "input_audio": "audio"}

_NO = (
    r"(?:not supported|unsupported|not support|n't support|not enabled|not available|not allowed|"
    r"not a multimodal|only supported by certain models|text[- ]only|only (?:accepts?|supports?) text|"
    r"at most 0|invalid (?:content )?(?:type|value)|unknown (?:content )?type|"
    r"cannot (?:process|handle|accept)|"
    r"does not accept|doesn't accept|no (?:vision|audio) (?:support|encoder)|mmproj)"
)
_REFUSALS: dict[str, tuple[re.Pattern[str], re.Pattern[str]]] = {
    # (what the message must name, how it must refuse it)
    "images": (re.compile(r"image|vision|multimodal|multi-modal|mmproj", re.I), re.compile(_NO, re.I)),
    "audio": (re.compile(r"audio", re.I), re.compile(_NO, re.I)),
    "json_mode": (
        re.compile(r"response_format|json_object|json mode|json_schema", re.I),
        re.compile(_NO + r"|invalid|unrecognized|unexpected|extra (?:inputs|fields)", re.I),
    ),
}
_CONTEXT = re.compile(
    r"maximum context length|context length|context window|context size|n_ctx|too many tokens|"
    r"prompt is too long|exceeds? the (?:available )?context|reduce the length",
    re.I,
)
_CONTEXT_NUMBER = re.compile(
    r"(?:maximum context length is|context (?:length|size|window)(?: is| of)?|n_ctx(?:_slot)?\s*[=:]?)\s*"
    r"(\d+)",
    re.I,
)


def refusal(message: str, present: set[str]) -> str | None:
    """The capability a server message refuses ("images", "audio", "json_mode", "context"), or None.

    ``present`` names what the request actually carried: a message cannot refuse images that were
    never sent (a plain server error that happens to mention "image" stays a server error).
    """
    if not message:
        return None
    if _CONTEXT.search(message):
        return "context"
    for capability in ("audio", "images", "json_mode"):  # audio first: "audio" messages may say "multimodal"
        if capability not in present:
            continue
        names, refuses = _REFUSALS[capability]
        if names.search(message) and refuses.search(message):
            return capability
    return None


def context_limit(message: str) -> int | None:
    """The context length a server states in an overflow message, when it states one."""
    m = _CONTEXT_NUMBER.search(message or "")
    return int(m.group(1)) if m else None


def parts_present(messages: list[dict]) -> set[str]:
    """Capabilities a request needs: "images"/"audio" for the content parts it carries."""
    found: set[str] = set()
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            for part in content:
                kind = PART_KINDS.get(part.get("type", "")) if isinstance(part, dict) else None
                if kind:
                    found.add(kind)
    return found


def strip_parts(messages: list[dict], capability: str) -> tuple[list[dict], int]:
    """The messages without the content parts of ``capability``; also how many parts were removed."""
    out: list[dict] = []
    removed = 0
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            kept = [
                p
                for p in content
                if not (isinstance(p, dict) and PART_KINDS.get(p.get("type", "")) == capability)
            ]
            removed += len(content) - len(kept)
            message = {**message, "content": kept}
        out.append(message)
    return out, removed


@dataclass
class Capabilities:
    """What one (server, model) accepts; None = not known yet."""

    images: bool | None = None
    audio: bool | None = None
    json_mode: bool | None = None
    context: int | None = None

    @classmethod
    def from_json(cls, data: Any) -> Capabilities:
        if not isinstance(data, dict):
            return cls()
        names = {f.name for f in fields(cls)}
        clean: dict[str, Any] = {}
        for key, value in data.items():
            if key in names and (value is None or isinstance(value, (bool, int))):
                clean[key] = value
        return cls(**clean)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


class CapabilityStore:
    """Capabilities per (base URL, model) in the cache; the URL is only ever stored as a digest."""

    STAGE = "llm-capabilities"

    def __init__(self, cache: Any) -> None:
        self.cache = cache

    def _key(self, base_url: str, model: str) -> Any:
        from m3cli.stages.core.cache import CacheKey

        server = hashlib.sha256(f"{base_url.rstrip('/')}|{model}".encode()).hexdigest()[:16]
        return CacheKey.of("servers", None, self.STAGE, {"server": server}, server)

    def load(self, base_url: str, model: str) -> Capabilities:
        try:
            return Capabilities.from_json(
                self.cache.get_json(self._key(base_url, model), "capabilities.json")
            )
        except (OSError, ValueError) as exc:
            log.debug("capabilities unreadable (%s); starting afresh", exc)
            return Capabilities()

    def save(self, base_url: str, model: str, caps: Capabilities) -> None:
        try:
            self.cache.put_json(self._key(base_url, model), "capabilities.json", caps.as_json())
        except OSError as exc:  # a read-only or full cache only costs a rediscovery next run
            log.warning("could not remember the server's capabilities in the cache: %s", exc)


def audio_by_name(model: str) -> bool:
    """Whether a model's name announces that it listens (Qwen2.5-Omni, gpt-4o-audio, M3-Agent's memorizer)."""
    name = model.lower()
    return any(hint in name for hint in AUDIO_MODEL_HINTS)
