"""`m3 memorize`: per clip, episodic and semantic memory that refers to people only by their ids.

Two memorizers share one output shape (``memory`` section of the record):

* **LLM** (any OpenAI-compatible multimodal chat server): sampled frames, labelled face crops and the
  labelled, timed utterances go in; M3-Agent's episodic lines and five semantic categories come out as
  JSON. Replies that mention ids absent from the clip are sent back for repair; server faults are retried
  by the client. When all of that fails, the clip falls back to the offline memorizer with
  ``fallback: true`` and an ``errors`` entry, so one bad clip never loses the others.
* **Offline** (the default when no LLM is configured): states only what perception established — who
  says what and when (quoted, each utterance at its own time), which speaker turns no utterance holds
  ("<voice_2> speaks, not transcribed, from 0.3 to 3.7 s"; "speaks Portuguese, not transcribed" where
  the turn's language was detected; an utterance a second reading read in another language says so:
  ``says (in Portuguese): "..."``), when each voice speaks (its diarization
  turns), where turns of two voices overlap, when each face is visible, who is seen in the clip (one line,
  not one per pair), and names people say out loud (see :data:`~m3cli.stages.memorize.offline.SELF_NAME`,
  :data:`~m3cli.stages.memorize.offline.VOCATIVE`, :data:`~m3cli.stages.memorize.offline.TITLED`) — and
  labels itself ``source: offline``. One function per line kind.

What goes to the model depends on what the server accepts (learned from its refusals, see
:mod:`m3cli.stages.backends.llm.capabilities`, or set with ``images``/``audio``): frames and crops to
vision models, the clip's audio (16 kHz WAV, at most ``max_audio_s``) to omni models as M3-Agent's
memorization model (Qwen2.5-Omni) expects. ``memory.inputs`` records what the memory was written from.
What people said goes in as a data block (:func:`memory_prompts.dialogue_block`): a crafted utterance
cannot add dialogue lines. Replies that copy the prompt's shape (placeholder text, zero times), put
prose under kind ``equivalence``, pair a face with a voice it is never seen speaking with, or name no
one at all are sent back for repair like replies with unknown ids.

LLM answers are cached per clip under a digest of the exact request (frames, crops, utterances, prompt
version) and the model name, so a rerun is free and byte-identical.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson

from m3cli.schemas.records import ClipRecord, MemoryInput, MemorySection, Problem
from m3cli.stages.configs.memorize import MemorizeConfig
from m3cli.stages.core import memory_prompts as prompts
from m3cli.stages.core.cache import Cache, CacheKey
from m3cli.stages.core.common import RunContext
from m3cli.stages.core.errors import M3Error
from m3cli.stages.core.redact import mask_credentials
from m3cli.stages.memorize.offline import absence_lines, offline_memory, sight_lines, turn_lines
from m3cli.stages.memorize.reply import _as_agent_lines, make_validator, memory_from_reply
from m3cli.stages.memorize.request import build_request, clip_ids

log = logging.getLogger(__name__)

STAGE = "memorize"


def _request_key(record: ClipRecord, config: MemorizeConfig, client: Any, messages: list[dict]) -> CacheKey:
    digest = hashlib.sha256(orjson.dumps(messages, option=orjson.OPT_SORT_KEYS)).hexdigest()[:32]
    return CacheKey.of(
        record.video.id,
        record.clip.index,
        STAGE,
        {**config.key(), "inputs": digest},
        f"{client.base_url}|{client.model}",
    )


def _sent(inputs: list[MemoryInput], dropped: Iterable[str]) -> list[MemoryInput]:
    """The inputs that reached the model, once the client left out what the server refused."""
    gone = set(dropped)
    lost = ({"frames", "crops"} if "images" in gone else set()) | ({"audio"} if "audio" in gone else set())
    return [i for i in inputs if i not in lost]


def llm_memory(record: ClipRecord, client: Any, config: MemorizeConfig, cache: Cache | None) -> MemorySection:
    """Ask the LLM (or the cache) for this clip's memory; raises LlmError when the server cannot deliver.

    A request that does not fit the model's context is sent again with half the frames (down to none,
    then without audio) before giving up.
    """
    from dataclasses import replace

    from m3cli.stages.backends.llm import LlmContextError

    faces, voices = clip_ids(record)
    while True:
        messages, inputs = build_request(record, config, cache, client)
        key = _request_key(record, config, client, messages)
        cached = cache.get_json(key, "reply.json") if cache is not None else None
        if isinstance(cached, dict) and isinstance(cached.get("obj"), dict):
            memory = memory_from_reply(cached["obj"], record, config, cached.get("model") or client.model)
            memory.inputs = cached.get("inputs") or inputs
            return memory
        validate = make_validator(faces, voices, config, record)
        if config.prompt_style == "m3-agent":  # lists of sentences, checked as the m3 lines they become
            schema = prompts.agent_memorize_schema(config.semantic)
            validator = _as_agent_lines(validate)
        else:
            schema = prompts.memorize_schema(config.semantic, config.equivalence)
            validator = validate
        try:
            obj, reply = client.chat_json(
                messages, schema, repairs=config.repairs, validator=validator, task="memorize"
            )
        except LlmContextError:
            if config.frames > 0 and "frames" in inputs:
                config = replace(config, frames=config.frames // 2)
            elif "audio" in inputs:
                config = replace(config, audio=False)
            else:
                raise
            log.warning("clip %d: request too long for the model; retrying with less", record.clip.index)
            continue
        break
    if config.prompt_style == "m3-agent":
        obj = prompts.from_agent_reply(obj)
    inputs = _sent(inputs, reply.dropped)
    log.info(
        "clip %d: memorized by %s in %.1fs (%d+%d tokens, %d attempts; from %s)",
        record.clip.index,
        reply.model,
        reply.latency_s,
        reply.prompt_tokens,
        reply.completion_tokens,
        reply.attempts,
        ", ".join(inputs) or "nothing",
    )
    if cache is not None:
        if reply.dropped:  # what a rerun will send now that the refusal is known
            key = _request_key(record, config, client, build_request(record, config, cache, client)[0])
        cache.put_json(
            key,
            "reply.json",
            {
                "obj": obj,
                "model": reply.model,
                "inputs": inputs,
                "prompt_tokens": reply.prompt_tokens,
                "completion_tokens": reply.completion_tokens,
            },
        )
    memory = memory_from_reply(obj, record, config, reply.model)
    memory.inputs = inputs
    return memory


def _ablate(memory: MemorySection, config: MemorizeConfig) -> MemorySection:
    if not config.semantic:
        memory.semantic = []
        memory.equivalences = []
    if not config.equivalence:
        memory.semantic = [i for i in memory.semantic if i.kind != "equivalence"]
        memory.equivalences = []
    return memory


def memorize_clip(
    record: ClipRecord, config: MemorizeConfig, client: Any = None, cache: Cache | None = None
) -> ClipRecord:
    """Add ``memory`` (and an ``errors`` entry on LLM fallback) to one record."""
    from m3cli.stages.backends.llm import LlmError

    out = record.model_copy(deep=True)
    if client is None:
        out.memory = _ablate(offline_memory(record), config)
        return out
    try:
        out.memory = llm_memory(record, client, config, cache)
        # what perception found that the memory must hold whoever writes the rest: the turns, the
        # on-screen text and what is seen (an LLM paraphrases or drops them), and the absences
        out.memory.episodic += turn_lines(record) + sight_lines(record) + absence_lines(record)
    except LlmError as exc:
        log.warning(
            "clip %d of %s: LLM memorization failed, using the offline memorizer: %s",
            record.clip.index,
            record.video.path,
            exc,
        )
        memory = _ablate(offline_memory(record), config)
        memory.fallback = True
        memory.model = client.model
        out.memory = memory
        out.errors = [
            *(out.errors or []),
            Problem(
                stage=STAGE,
                error="llm_fallback",
                status=getattr(exc, "status", None),
                message=mask_credentials(str(exc)),
            ),
        ]
    return out


def memorize_records(
    records: list[ClipRecord], config: MemorizeConfig, client: Any = None, ctx: RunContext | None = None
) -> list[ClipRecord]:
    """Memorize every clip, in input order; LLM calls run ``config.jobs`` at a time."""
    ctx = ctx or RunContext()
    if client is not None:  # crops go to the LLM: check every record path before the first call
        from m3cli.stages.core.record_paths import check_record_paths

        check_record_paths(records, ctx.cache)
        client.force(images=config.images, audio=config.audio)
        client.use_cache(ctx.cache)
    for r in records:
        if r.faces is None and r.utterances is None and r.sight is None:
            raise M3Error(
                f"clip {r.clip.index} of {r.video.path} has neither faces nor utterances: run "
                "`m3 faces` and/or `m3 diarize | m3 voices` before `m3 memorize`"
            )
    if client is None or config.jobs <= 1:
        return [
            memorize_clip(r, config, client, ctx.cache)
            for r in ctx.progress(records, desc="memorize", total=len(records))
        ]
    with ThreadPoolExecutor(max_workers=config.jobs) as pool:
        futures = pool.map(lambda r: memorize_clip(r, config, client, ctx.cache), records)
        return list(ctx.progress(futures, desc="memorize", total=len(records)))
