"""`m3 abstract`'s LLM calls: one cached JSON request per summary, link batch or conflict check.

A failed call never stops the fold: it is logged, recorded as an ``llm_fallback`` problem on the clip,
and answered with None so the caller writes its offline aggregation instead. Replies are cached per
clip under the digest of the exact messages, so a rerun replays them without the server.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

import orjson

from m3cli.stages.abstract.facts import STAGE
from m3cli.stages.core import memory_prompts as prompts
from m3cli.stages.core.cache import Cache, CacheKey, memo
from m3cli.stages.core.redact import mask_credentials

log = logging.getLogger(__name__)


class LlmCalls:
    """Cached JSON calls through ``client`` (an LlmClient); failures land in ``errors``."""

    def __init__(self, client: Any, cache: Cache | None, errors: list[dict[str, Any]]) -> None:
        self.client = client
        self.cache = cache
        self.errors = errors

    def __call__(
        self,
        video: str,
        clip: int,
        what: str,
        prompt: str,
        schema: dict,
        validator: Any = None,
        task: str = "summary",
    ) -> dict | None:
        """One cached JSON call; None (and an error entry) when the LLM fails."""
        from m3cli.stages.backends.llm import LlmError

        messages = [
            {"role": "system", "content": prompts.ABSTRACT_SYSTEM},
            {"role": "user", "content": prompt},
        ]
        digest = hashlib.sha256(orjson.dumps(messages)).hexdigest()[:32]
        key = CacheKey.of(
            video,
            clip,
            f"{STAGE}-{what}",
            {"prompt": prompts.PROMPT_VERSION, "in": digest},
            f"{self.client.base_url}|{self.client.model}",
        )

        def ask() -> dict | None:
            try:
                obj, _ = self.client.chat_json(messages, schema, validator=validator, task=task)
            except LlmError as exc:
                log.warning("clip %d: LLM %s failed, using the offline aggregation: %s", clip, what, exc)
                self.errors.append(
                    {
                        "stage": STAGE,
                        "error": "llm_fallback",
                        "what": what,
                        "status": getattr(exc, "status", None),
                        "message": mask_credentials(str(exc)),
                    }
                )
                return None  # not cached: the next run asks again
            return obj

        return memo(self.cache, key, "reply.json", ask, usable=lambda hit: isinstance(hit, dict))
