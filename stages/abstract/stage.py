"""`m3 abstract`: evidence-driven summaries, the clip/global pyramid, sparse fact links, contradictions.

Per video, clips are folded in order (the fold is cheap and replayed on every run; LLM answers and text
embeddings are cached per clip). The fold keeps running totals (:mod:`~m3cli.stages.abstract.tally`),
so a clip costs the same whatever number of clips came before it. After each clip the record's
``abstractions`` lists what that clip produced (item shapes in :data:`ITEM_SHAPES`). This module runs
the fold; each kind of item has its own module:

* :mod:`~m3cli.stages.abstract.summaries`: CAM (seed 002) ``character`` and ``relationship``
  summaries, each after enough new evidence, and PyraVid (seed 003) ``clip`` and ``global`` summaries.
* :mod:`~m3cli.stages.abstract.links`: sparse ``link`` items between facts (``same_character``,
  ``temporal``, ``similar`` text, and ``causal`` links judged by the LLM).
* :mod:`~m3cli.stages.abstract.conflicts`: with ``check``, ``conflict`` items for contradicting
  semantic statements about one character, keeping the better-supported side.
* :mod:`~m3cli.stages.abstract.facts` (the facts and the per-video state) and
  :mod:`~m3cli.stages.abstract.llm` (the cached LLM calls) serve them all.

Without an LLM every text is a deterministic aggregation (counts, co-occurrences, quoted statements):
nothing is invented.
"""

from __future__ import annotations

import itertools
from typing import Any

from m3cli.schemas.records import Abstraction, ClipRecord, Problem
from m3cli.stages.abstract.conflicts import ConflictFinder, subject_form, support_key
from m3cli.stages.abstract.facts import CharacterView, Fact, VideoState, clip_facts
from m3cli.stages.abstract.links import Linker
from m3cli.stages.abstract.llm import LlmCalls
from m3cli.stages.abstract.summaries import Summariser
from m3cli.stages.abstract.tally import FoldTally
from m3cli.stages.configs.abstract import AbstractConfig
from m3cli.stages.core.cache import Cache
from m3cli.stages.core.common import RunContext, by_video
from m3cli.stages.core.entity_ids import by_number
from m3cli.stages.core.errors import InputError
from m3cli.stages.core.memory_store import clip_node_id

VERSION = "abstract-v1"

ITEM_SHAPES = {
    "character": "id, kind, text, character, entities, evidence, evidence_count, source, start, end",
    "relationship": "id, kind, text, characters, entities, evidence, evidence_count, source, start, end",
    "clip": "id, kind, text, entities, evidence, source, start, end",
    "global": "id, kind, text, entities, evidence (clip node ids), source, start, end",
    "link": "id, kind, src, dst, relation (same_character|temporal|similar|causal), weight, description?",
    "conflict": "id, kind, text, character, entities, kept, dropped, weights {kept, dropped}, evidence, "
    "source",
}


class Abstractor:
    """Runs the fold for one video; ``client`` (an LlmClient) and ``embedder`` are optional."""

    def __init__(
        self, config: AbstractConfig, client: Any = None, embedder: Any = None, cache: Cache | None = None
    ) -> None:
        self.config = config
        self.errors: list[dict[str, Any]] = []  # llm_fallback problems of the current clip
        self.view = CharacterView()
        llm = LlmCalls(client, cache, self.errors) if client is not None else None
        self.linker = Linker(self.view, config, embedder, cache, llm)
        self.summariser = Summariser(self.view, config, llm)
        self.conflicts = ConflictFinder(self.view, llm)

    def step(self, record: ClipRecord, state: VideoState) -> list[dict[str, Any]]:
        """Abstractions produced by one clip (the clip is appended to ``state``)."""
        mapping = dict(record.characters or {})
        new = clip_facts(record, state)
        state.facts.extend(new)
        self._tally(record, state, new, mapping)
        out: list[dict[str, Any]] = []
        out += self.linker.links(record, state, new, mapping)
        out += self.summariser.summaries(record, state, new, mapping)
        if self.config.check:
            out += self.conflicts.conflicts(record, state, new, mapping)
        state.episodic.extend(f for f in new if f.section == "episodic")
        return out

    def _tally(self, record: ClipRecord, state: VideoState, new: list[Fact], mapping: dict[str, str]) -> None:
        """Fold the clip's facts into the running totals; rebuild them when the mapping moved old facts."""
        tally = state.tally
        if tally is not None and tally.still_valid(mapping, record.clip.index, state.entities_seen):
            tally.add_clip(record.clip.index, new, state.summarized_char, state.summarized_rel)
        else:
            tally = state.tally = FoldTally(
                mapping,
                self.view.chars,
                subject_form,
                lambda f, m: support_key(f, m, self.view.render),
                lambda clip: clip_node_id(record.video.id, clip),
                by_number,
            )
            for clip, facts in itertools.groupby(state.facts, key=lambda f: f.clip):
                tally.add_clip(clip, list(facts), state.summarized_char, state.summarized_rel)
        state.entities_seen.update(e for f in new for e in f.entities)


def abstract_records(
    records: list[ClipRecord],
    config: AbstractConfig,
    client: Any = None,
    embedder: Any = None,
    ctx: RunContext | None = None,
    folds: dict[str, tuple[Abstractor, VideoState]] | None = None,
) -> list[ClipRecord]:
    """Every video folded in clip order; each record gets ``abstractions`` (``errors`` on LLM fallback).

    ``folds`` (video id -> its abstractor and state) lets a caller that feeds one video's clips in
    several calls (`m3 watch`) continue each call from the last; without it every video starts anew."""
    ctx = ctx or RunContext()
    if client is not None:
        client.use_cache(ctx.cache)
    folds = {} if folds is None else folds
    out: list[ClipRecord] = []
    for clips in by_video(records):
        vid = clips[0].video.id
        if vid not in folds:
            folds[vid] = (Abstractor(config, client, embedder, ctx.cache), VideoState(video=vid))
        runner, state = folds[vid]
        for record in ctx.progress(clips, desc="abstract", total=len(clips)):
            if record.memory is None:
                raise InputError(
                    f"clip {record.clip.index} of {record.video.path} has no memory: run "
                    "`m3 memorize` (and `m3 link`) before `m3 abstract`"
                )
            runner.errors.clear()
            items = runner.step(record, state)
            update: dict[str, Any] = {"abstractions": [Abstraction.model_validate(item) for item in items]}
            if runner.errors:
                update["errors"] = [*(record.errors or []), *map(Problem.model_validate, runner.errors)]
            # A shallow copy: the input's parts are shared, not changed (a deep copy per clip cost more
            # than the fold itself and left a heap for the garbage collector that grew with the video).
            out.append(record.model_copy(update=update))
    return out
