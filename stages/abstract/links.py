"""`m3 abstract`'s sparse links from a clip's new facts to earlier ones.

``same_character`` (a line to the previous line about the same character), ``temporal`` (consecutive
episodic lines, across clip boundaries), ``similar`` (cosine of text embeddings, at most ``similar_k``
earlier lines above ``similar_threshold``; the vectors are cached per clip) and ``causal`` links judged
by the LLM. Each link is one ``link`` item: id, src, dst, relation, weight, description?.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from m3cli.schemas.records import ClipRecord
from m3cli.stages.abstract.facts import STAGE, CharacterView, Fact, VideoState
from m3cli.stages.abstract.llm import LlmCalls
from m3cli.stages.configs.abstract import AbstractConfig
from m3cli.stages.core import memory_prompts as prompts
from m3cli.stages.core.cache import Cache
from m3cli.stages.core.entity_ids import without_ids
from m3cli.stages.core.memory_store import link_id


class Linker:
    """Links of one video's fold; ``embedder`` (similar text) and ``llm`` (causal) are optional."""

    def __init__(
        self,
        view: CharacterView,
        config: AbstractConfig,
        embedder: Any = None,
        cache: Cache | None = None,
        llm: LlmCalls | None = None,
    ) -> None:
        self.view = view
        self.similar_threshold = config.similar_threshold
        self.similar_k = config.similar_k
        self.embedder: Any = embedder if config.embed else None  # .version and .embed(texts), or None
        self.cache = cache
        self.llm = llm if config.causal else None

    def links(
        self, record: ClipRecord, state: VideoState, new: list[Fact], mapping: dict[str, str]
    ) -> list[dict[str, Any]]:
        links: list[dict[str, Any]] = []
        seen: set[tuple[str, str]] = set()

        def add(src: Fact, dst: Fact, relation: str, weight: float, description: str | None = None) -> None:
            if src.id == dst.id or (src.id, dst.id) in seen:
                return
            seen.add((src.id, dst.id))
            links.append(link_item(src, dst, relation, weight, description))

        facts = state.facts
        # same character: each line to the previous line about each of its characters
        for f in new:
            for c in self.view.chars(f.entities, mapping):
                members = [e for e, ch in mapping.items() if ch == c] or [c]
                prev = max(
                    (state.last_by_entity[m] for m in members if m in state.last_by_entity), default=None
                )
                if prev is not None:
                    add(f, facts[prev], "same_character", 1.0)
            for e in f.entities:
                state.last_by_entity[e] = f.order
        # temporal adjacency: episodic lines in time order, across the clip boundary
        episodic = sorted((f for f in new if f.section == "episodic"), key=lambda f: (f.start, f.order))
        for f in episodic:
            if state.last_episodic is not None:
                add(f, facts[state.last_episodic], "temporal", 1.0)
            state.last_episodic = f.order
        # similar text
        if self.embedder is not None and new:
            vecs = self._embed(self.embedder, record.video.id, record.clip.index, [f.text for f in new])
            if state.n_vectors and state.vectors is not None:  # rows in use imply the array
                sims = vecs @ state.vectors[: state.n_vectors].T
                for i, f in enumerate(new):
                    # the similar_k most similar earlier lines above the threshold (ties: the earlier line)
                    above = np.flatnonzero(sims[i] >= self.similar_threshold)
                    order = above[np.argsort(-sims[i, above], kind="stable")[: self.similar_k]]
                    for j in order:
                        add(f, facts[int(j)], "similar", float(sims[i, j]))
            state.add_vectors(vecs)
        # causal links judged by the LLM
        if self.llm is not None and new:
            links += self._causal(record, state, new)
        return links

    def _embed(self, embedder: Any, video: str, clip: int, texts: list[str]) -> np.ndarray:
        """Vectors of ``texts`` with ids made neutral (an id says nothing about meaning), cached per clip."""
        if not texts:
            return np.zeros((0, 1), np.float32)
        from m3cli.stages.backends.embed import embed_cached

        return embed_cached(
            embedder, [without_ids(t) for t in texts], self.cache, video, clip, f"{STAGE}-embed"
        )

    def _causal(self, record: ClipRecord, state: VideoState, new: list[Fact]) -> list[dict[str, Any]]:
        assert self.llm is not None
        queries = [f for f in new if f.section == "episodic"][:30]
        if not queries:
            return []
        earlier = state.episodic[-40:]
        by_id = {f.id: f for f in queries + earlier}

        def fmt(fs: list[Fact]) -> list[dict]:
            return [{"node_id": f.id, "timestamp": round(f.start, 1), "text": f.text} for f in fs]

        def validate(obj: Any) -> list[str]:
            bad = [
                f"links[{i}] uses an unknown node id"
                for i, link in enumerate(obj["links"])
                if link["source"] not in by_id or link["target"] not in by_id
            ]
            return bad[:5]

        obj = self.llm(
            record.video.id,
            record.clip.index,
            "links",
            prompts.links_prompt(fmt(queries), fmt(earlier)),
            prompts.LINKS_SCHEMA,
            validate,
            task="links",
        )
        if obj is None:
            return []
        return [
            link_item(
                by_id[link["source"]],
                by_id[link["target"]],
                "causal",
                link["weight"],
                link.get("description"),
            )
            for link in obj["links"]
        ]


def link_item(
    src: Fact, dst: Fact, relation: str, weight: float, description: str | None = None
) -> dict[str, Any]:
    """One ``link`` item (a description only when there is one)."""
    item = {
        "id": link_id(src.id, dst.id, relation),
        "kind": "link",
        "src": src.id,
        "dst": dst.id,
        "relation": relation,
        "weight": round(float(weight), 4),
    }
    if description:
        item["description"] = description
    return item
