"""`m3 abstract`: evidence-driven summaries, the clip/global pyramid, sparse fact links, contradictions.

Per video, clips are folded in order (the fold is cheap and replayed on every run; LLM answers and text
embeddings are cached per clip). The fold keeps running totals (:mod:`~m3cli.stages.abstract_tally`),
so a clip costs the same whatever number of clips came before it. After each clip the record's
``abstractions`` lists what that clip produced (item shapes in :data:`ITEM_SHAPES`):

* CAM (seed 002): a ``character`` summary when ``tau_char`` new pieces of evidence (memory lines whose
  ids belong to the character) have accumulated since its last summary, a ``relationship`` summary
  when ``tau_rel`` new interactions of a pair have (lines naming both, plus each clip both appear in);
  each summary lists the evidence node ids it rests on.
* PyraVid (seed 003): a ``clip`` summary per clip and the evolving ``global`` summary of the video.
* Sparse ``link`` items between facts: ``same_character`` (a line to the previous line about the same
  character), ``temporal`` (consecutive episodic lines), ``similar`` (cosine of text embeddings, at most
  ``similar_k`` earlier lines above ``similar_threshold``), and ``causal`` links judged by the LLM.
* With ``check``: ``conflict`` items for contradicting semantic statements about one character; the
  better-supported side (more statements with the same normalised text; ties go to the newer) is kept.

Without an LLM every text is a deterministic aggregation (counts, co-occurrences, quoted statements):
nothing is invented.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import logging
import re
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import orjson

from m3cli.schemas.records import Abstraction, ClipRecord, Problem
from m3cli.stages.abstract_tally import CharTally, FoldTally, PairTally
from m3cli.stages.configs.abstract import AbstractConfig
from m3cli.stages.core import memory_prompts as prompts
from m3cli.stages.core.cache import Cache, CacheKey
from m3cli.stages.core.common import RunContext, by_video
from m3cli.stages.core.errors import InputError
from m3cli.stages.core.memory_store import (
    character_node_id,
    clip_node_id,
    conflict_node_id,
    fact_id,
    global_node_id,
    link_id,
    relationship_node_id,
)
from m3cli.stages.core.redact import mask_credentials
from m3cli.stages.memorize import ID_RE, entities_in, name_fact

log = logging.getLogger(__name__)

STAGE = "abstract"
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


@dataclass
class Fact:
    """One memory line as abstraction sees it."""

    id: str
    clip: int
    section: str  # episodic | semantic
    kind: str
    text: str
    entities: list[str]
    start: float
    end: float
    order: int


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^\w<>' ]+", " ", text.lower()).split())


def _quote(text: str, limit: int = 120) -> str:
    m = re.search(r'"([^"]+)"', text)
    q = m.group(1) if m else text
    return q if len(q) <= limit else q[: limit - 1].rstrip() + "…"


# =============================================================================== contradictions

_NEG_AUX = {"does not": "", "doesn't": "", "did not": "", "didn't": "", "do not": "", "don't": ""}
_ANTONYMS = {
    "dislikes": ("likes", -1),
    "hates": ("likes", -1),
    "detests": ("likes", -1),
    "loves": ("likes", 1),
    "enjoys": ("likes", 1),
    "unmarried": ("married", -1),
    "single": ("married", -1),
    "unhappy": ("happy", -1),
    "dishonest": ("honest", -1),
    "unfriendly": ("friendly", -1),
    "distrusts": ("trusts", -1),
    "disagrees": ("agrees", -1),
    "unemployed": ("employed", -1),
    "unable": ("able", -1),
    "impatient": ("patient", -1),
    "unkind": ("kind", -1),
}
_THIRD_PERSON = {"have": "has", "do": "does", "go": "goes", "be": "is"}
_FILLER = {"really", "very", "also", "still", "actually", "definitely", "clearly"}


def polarity_form(text: str) -> tuple[int, str] | None:
    """(polarity, normalised predicate) of a statement, or None if it is not a simple claim.

    Documented patterns: "does not / doesn't / did not / do not VERB" -> VERB(s) negated; "is not /
    isn't / was not / are not" -> negated; "cannot / can't / can not" -> "can" negated; "never" and
    "no longer" negate; antonyms in ``_ANTONYMS`` ("dislikes" = not "likes", "single" = not "married").
    """
    words = _norm(text).replace("can't", "can not").replace("cannot", "can not").split()
    pol = 1
    out: list[str] = []
    i = 0
    while i < len(words):
        w = words[i]
        pair = " ".join(words[i : i + 2])
        if pair in _NEG_AUX and i + 2 < len(words):
            pol = -pol
            verb = words[i + 2]
            out.append(_THIRD_PERSON.get(verb, verb if verb.endswith("s") else verb + "s"))
            i += 3
            continue
        if w in ("doesn't", "didn't", "don't") and i + 1 < len(words):
            pol = -pol
            verb = words[i + 1]
            out.append(_THIRD_PERSON.get(verb, verb if verb.endswith("s") else verb + "s"))
            i += 2
            continue
        if w in ("not", "never") or pair == "no longer":
            pol = -pol
            i += 2 if pair == "no longer" else 1
            continue
        if w in ("isn't", "wasn't", "aren't", "weren't"):
            pol = -pol
            out.append({"isn't": "is", "wasn't": "was", "aren't": "are", "weren't": "were"}[w])
            i += 1
            continue
        if w in _ANTONYMS:
            base, sign = _ANTONYMS[w]
            pol *= sign
            out.append(base)
            i += 1
            continue
        if w not in _FILLER:
            out.append(w)
        i += 1
    if len(out) < 2:
        return None
    return pol, " ".join(out)


# =============================================================================== the fold


@dataclass
class VideoState:
    """What one video's fold carries from clip to clip."""

    video: str
    facts: list[Fact] = field(default_factory=list)
    vectors: np.ndarray | None = None  # text vectors of ``facts`` (row i = fact with order i), with room
    n_vectors: int = 0  # rows of ``vectors`` in use
    tally: FoldTally | None = None  # running totals under the current character mapping
    entities_seen: set[str] = field(default_factory=set)  # every id any fact so far names
    episodic: list[Fact] = field(default_factory=list)  # episodic facts of earlier clips, in order
    summarized_char: dict[str, set[str]] = field(default_factory=dict)
    summary_char: dict[str, str] = field(default_factory=dict)
    summarized_rel: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    summary_rel: dict[tuple[str, str], str] = field(default_factory=dict)
    global_text: str | None = None
    clip_nodes: list[str] = field(default_factory=list)
    clip_span: tuple[float, float] | None = None
    last_by_entity: dict[str, int] = field(default_factory=dict)
    last_episodic: int | None = None
    conflicts_seen: set[tuple[str, str]] = field(default_factory=set)
    names: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))

    def add_vectors(self, rows: np.ndarray) -> None:
        """Append rows, doubling the buffer when full (a copy per clip made the fold quadratic)."""
        need = self.n_vectors + len(rows)
        if self.vectors is None or need > len(self.vectors) or self.vectors.shape[1] != rows.shape[1]:
            grown = np.zeros((max(need, 2 * need, 64), rows.shape[1]), np.float32)
            if self.vectors is not None:
                grown[: self.n_vectors] = self.vectors[: self.n_vectors]
            self.vectors = grown
        self.vectors[self.n_vectors : need] = rows
        self.n_vectors = need


class Abstractor:
    """Runs the fold for one video; ``client`` (an LlmClient) and ``embedder`` are optional."""

    def __init__(
        self, config: AbstractConfig, client: Any = None, embedder: Any = None, cache: Cache | None = None
    ) -> None:
        self.config = config
        self.client = client
        self.embedder = embedder if config.embed else None
        self.cache = cache
        self.errors: list[dict[str, Any]] = []
        self._memo: dict[tuple[str, ...], list[str]] = {}
        self._memo_for: dict[str, str] | None = None

    # ----------------------------------------------------------------- helpers
    def _chars(self, entities: list[str], mapping: dict[str, str]) -> list[str]:
        """Characters named by ``entities`` under ``mapping`` (memoised per clip: the fold asks often)."""
        if mapping is not self._memo_for:
            self._memo, self._memo_for = {}, mapping
        key = tuple(entities)
        hit = self._memo.get(key)
        if hit is None:
            hit = self._memo[key] = list(dict.fromkeys(mapping.get(e, e) for e in entities))
        return hit

    def _render(self, text: str, mapping: dict[str, str]) -> str:
        return ID_RE.sub(lambda m: mapping.get(m.group(0), m.group(0)), text)

    def _llm(
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
        if self.cache is not None:
            hit = self.cache.get_json(key, "reply.json")
            if isinstance(hit, dict):
                return hit
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
            return None
        if self.cache is not None:
            self.cache.put_json(key, "reply.json", obj)
        return obj

    def _summary_check(self, state: VideoState, mapping: dict[str, str]) -> Any:
        """Validator of summary replies: only ids this video has, no placeholder copied from the prompt."""
        assert state.tally is not None
        known = state.tally.all_chars | state.entities_seen

        def validate(obj: Any) -> list[str]:
            text = " ".join(str(obj.get("summary", "")).split())
            if re.fullmatch(r"\.{2,}|…+|<[^<>]{0,80}>", text):
                return [f"the summary is the placeholder {text!r}; write the summary itself"]
            unknown = sorted({m.group(0) for m in ID_RE.finditer(text)} - known, key=_char_key)
            if unknown:
                listed = ", ".join(sorted((k for k in known if k.startswith("<character_")), key=_char_key))
                return [
                    f"the summary names {', '.join(unknown)}, which this video does not have; use only "
                    f"{listed or 'the ids in the evidence'}"
                ]
            return []

        return validate

    def _embed(self, video: str, clip: int, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 1), np.float32)
        neutral = [ID_RE.sub("someone", t) for t in texts]
        digest = hashlib.sha256(orjson.dumps(neutral)).hexdigest()[:32]
        key = CacheKey.of(video, clip, f"{STAGE}-embed", {"texts": digest}, self.embedder.version)
        if self.cache is not None:
            hit = self.cache.get_arrays(key, "vectors.npz")
            if hit is not None and hit["v"].shape[0] == len(texts):
                return hit["v"]
        vectors = np.asarray(self.embedder.embed(neutral), dtype=np.float32)
        if self.cache is not None:
            self.cache.put_arrays(key, "vectors.npz", v=vectors)
        return vectors

    # ----------------------------------------------------------------- per clip
    def clip_facts(self, record: ClipRecord, state: VideoState) -> list[Fact]:
        vid, idx = record.video.id, record.clip.index
        facts = []
        mem = record.memory
        if mem is None:
            return facts
        for section, items in (("episodic", mem.episodic), ("semantic", mem.semantic)):
            for i, item in enumerate(items):
                ents = item.entities if item.entities is not None else entities_in(item.text)
                start = item.start if item.start is not None else record.clip.start
                end = (
                    item.end
                    if item.end is not None
                    else (item.start if item.start is not None else record.clip.end)
                )
                facts.append(
                    Fact(
                        fact_id(vid, idx, section, i),
                        idx,
                        section,
                        item.kind or section,
                        item.text,
                        list(ents),
                        float(start),
                        float(end),
                        len(state.facts) + len(facts),
                    )
                )
                fact = name_fact(item.text) if section == "semantic" else None
                if fact or getattr(item, "name", None) and section == "semantic":
                    who, name = fact if fact else (ents[0] if ents else "", item.name)
                    if who:
                        state.names[who][name] += 1
        return facts

    def step(self, record: ClipRecord, state: VideoState) -> list[dict[str, Any]]:
        """Abstractions produced by one clip (the clip is appended to ``state``)."""
        mapping = dict(record.characters or {})
        new = self.clip_facts(record, state)
        state.facts.extend(new)
        self._tally(record, state, new, mapping)
        out: list[dict[str, Any]] = []
        out += self._links(record, state, new, mapping)
        out += self._clip_and_global(record, state, new, mapping)
        out += self._characters(record, state, mapping)
        out += self._relationships(record, state, mapping)
        if self.config.check:
            out += self._conflicts(record, state, new, mapping)
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
                self._chars,
                self._form,
                lambda f, m: _support_key(f, m, self._render),
                lambda clip: clip_node_id(record.video.id, clip),
                _char_key,
            )
            for clip, facts in itertools.groupby(state.facts, key=lambda f: f.clip):
                tally.add_clip(clip, list(facts), state.summarized_char, state.summarized_rel)
        state.entities_seen.update(e for f in new for e in f.entities)

    def _form(self, fact: Fact, character: str, mapping: dict[str, str]) -> tuple[int, str] | None:
        return polarity_form(self._render(fact.text, mapping).replace(character, "<subject>"))

    # ----------------------------------------------------------------- links
    def _links(
        self, record: ClipRecord, state: VideoState, new: list[Fact], mapping: dict[str, str]
    ) -> list[dict[str, Any]]:
        links: list[dict[str, Any]] = []
        seen: set[tuple[str, str]] = set()

        def add(src: Fact, dst: Fact, relation: str, weight: float, description: str | None = None) -> None:
            if src.id == dst.id or (src.id, dst.id) in seen:
                return
            seen.add((src.id, dst.id))
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
            links.append(item)

        facts = state.facts
        # same character: each line to the previous line about each of its characters
        for f in new:
            for c in self._chars(f.entities, mapping):
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
            vecs = self._embed(record.video.id, record.clip.index, [f.text for f in new])
            if state.n_vectors:
                sims = vecs @ state.vectors[: state.n_vectors].T
                for i, f in enumerate(new):
                    # the similar_k most similar earlier lines above the threshold (ties: the earlier line)
                    above = np.flatnonzero(sims[i] >= self.config.similar_threshold)
                    order = above[np.argsort(-sims[i, above], kind="stable")[: self.config.similar_k]]
                    for j in order:
                        add(f, facts[int(j)], "similar", float(sims[i, j]))
            state.add_vectors(vecs)
        # causal links judged by the LLM
        if self.client is not None and self.config.causal and new:
            links += self._causal(record, state, new)
        return links

    def _causal(self, record: ClipRecord, state: VideoState, new: list[Fact]) -> list[dict[str, Any]]:
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

        obj = self._llm(
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
        out: list[dict[str, Any]] = []
        for link in obj["links"]:
            src, dst = by_id[link["source"]], by_id[link["target"]]
            item = {
                "id": link_id(src.id, dst.id, "causal"),
                "kind": "link",
                "src": src.id,
                "dst": dst.id,
                "relation": "causal",
                "weight": round(float(link["weight"]), 4),
            }
            if link.get("description"):
                item["description"] = link["description"]
            out.append(item)
        return out

    # ----------------------------------------------------------------- pyramid
    def _clip_and_global(
        self, record: ClipRecord, state: VideoState, new: list[Fact], mapping: dict[str, str]
    ) -> list[dict[str, Any]]:
        vid, idx = record.video.id, record.clip.index
        start, end = record.clip.start, record.clip.end
        chars = sorted({c for f in new for c in self._chars(f.entities, mapping)}, key=_char_key)
        text = None
        if self.client is not None and new:
            lines = [self._render(f.text, mapping) for f in new][: self.config.max_evidence]
            obj = self._llm(
                vid,
                idx,
                "clip",
                prompts.clip_summary_prompt(idx, start, end, lines),
                prompts.SUMMARY_SCHEMA,
                self._summary_check(state, mapping),
            )
            text = obj["summary"] if obj else None
        source = "llm" if text else "offline"
        text = text or self._offline_clip(record, new, mapping)
        cid = clip_node_id(vid, idx)
        clip_item = {
            "id": cid,
            "kind": "clip",
            "text": text,
            "entities": chars,
            "evidence": [f.id for f in new],
            "source": source,
            "start": start,
            "end": end,
        }
        state.clip_nodes.append(cid)
        state.clip_span = (state.clip_span[0] if state.clip_span else start, end)
        gtext = None
        if self.client is not None:
            obj = self._llm(
                vid,
                idx,
                "global",
                prompts.global_summary_prompt(state.global_text, text),
                prompts.SUMMARY_SCHEMA,
                self._summary_check(state, mapping),
            )
            gtext = obj["summary"] if obj else None
        gsource = "llm" if gtext else "offline"
        gtext = gtext or self._offline_global(state, mapping, text)
        state.global_text = gtext
        assert state.tally is not None
        all_chars = sorted(state.tally.all_chars, key=_char_key)
        global_item = {
            "id": global_node_id(vid),
            "kind": "global",
            "text": gtext,
            "entities": all_chars,
            "evidence": list(state.clip_nodes),
            "source": gsource,
            "start": state.clip_span[0],
            "end": state.clip_span[1],
        }
        return [clip_item, global_item]

    def _offline_clip(self, record: ClipRecord, new: list[Fact], mapping: dict[str, str]) -> str:
        idx, start, end = record.clip.index, record.clip.start, record.clip.end
        speech: dict[str, list[Fact]] = defaultdict(list)
        seen: dict[str, None] = {}
        for f in new:
            chars = self._chars(f.entities, mapping)
            if f.kind == "speech":
                speech[chars[0] if chars else "an unidentified voice"].append(f)
            for c in chars:
                seen.setdefault(c, None)
        parts = [f"Clip {idx} ({start:.1f}-{end:.1f} s)"]
        said = []
        for who, fs in sorted(speech.items(), key=lambda kv: (kv[1][0].start, kv[0])):
            quote = _quote(max(fs, key=lambda f: (len(f.text), -f.order)).text, 80)
            said.append(f'{who} speaks {len(fs)} time{"s" if len(fs) != 1 else ""} (e.g. "{quote}")')
        if said:
            parts.append("; ".join(said))
        silent = [c for c in seen if c not in speech]
        if silent:
            parts.append("also present: " + ", ".join(sorted(silent, key=_char_key)))
        n_e = sum(1 for f in new if f.section == "episodic")
        n_s = len(new) - n_e
        parts.append(f"{n_e} episodic and {n_s} semantic memory lines")
        return ": ".join(parts[:2]) + (". " + ". ".join(parts[2:]) if len(parts) > 2 else "") + "."

    def _offline_global(self, state: VideoState, mapping: dict[str, str], latest: str) -> str:
        assert state.tally is not None
        stats = state.tally.stats
        s, e = state.clip_span or (0.0, 0.0)
        ranked = sorted(
            stats.items(), key=lambda kv: (-len(kv[1]["clips"]), -kv[1]["speech"], _char_key(kv[0]))
        )
        people = []
        for c, st in ranked[:10]:
            people.append(
                f"{c} in {len(st['clips'])} clip{'s' if len(st['clips']) != 1 else ''}, "
                f"{st['speech']} utterance{'s' if st['speech'] != 1 else ''}"
            )
        who = "; ".join(people) if people else "no identified people"
        more = f" (+{len(ranked) - 10} more)" if len(ranked) > 10 else ""
        n = len(state.clip_nodes)
        return (
            f"Video so far: {n} clip{'s' if n != 1 else ''}, {s:.1f}-{e:.1f} s. People: {who}{more}. "
            f"Latest: {latest}"
        )

    def _name_of(self, character: str, state: VideoState, mapping: dict[str, str]) -> str | None:
        votes: Counter = Counter()
        for eid, names in state.names.items():
            if mapping.get(eid, eid) == character:
                votes.update(names)
        return min(votes.items(), key=lambda kv: (-kv[1], kv[0]))[0] if votes else None

    # ----------------------------------------------------------------- CAM abstractions
    def _characters(
        self, record: ClipRecord, state: VideoState, mapping: dict[str, str]
    ) -> list[dict[str, Any]]:
        vid, idx = record.video.id, record.clip.index
        assert state.tally is not None
        out = []
        for c, tally in sorted(state.tally.characters.items(), key=lambda kv: _char_key(kv[0])):
            fresh = tally.pending
            if len(fresh) < self.config.tau_char:
                continue
            batch = fresh[-self.config.max_evidence :]
            text = None
            if self.client is not None:
                ev = [(f.id, self._render(f.text, mapping)) for f in batch]
                obj = self._llm(
                    vid,
                    idx,
                    f"char{c}",
                    prompts.character_prompt(c, state.summary_char.get(c), ev),
                    prompts.SUMMARY_SCHEMA,
                    self._summary_check(state, mapping),
                )
                text = obj["summary"] if obj else None
            source = "llm" if text else "offline"
            text = text or self._offline_character(c, tally, state, mapping)
            self._mark_character_done(c, tally, state, mapping)
            state.summary_char[c] = text
            out.append(
                {
                    "id": character_node_id(vid, idx, c),
                    "kind": "character",
                    "text": text,
                    "character": c,
                    "entities": [c],
                    "evidence": [f.id for f in fresh],
                    "evidence_count": tally.count,
                    "source": source,
                    "start": min(f.start for f in fresh),
                    "end": max(f.end for f in fresh),
                }
            )
            tally.pending = []
        return out

    def _mark_character_done(
        self, c: str, tally: CharTally, state: VideoState, mapping: dict[str, str]
    ) -> None:
        """The summarised set becomes every fact of ``c``: add the fresh ones, or recount after a remap."""
        done = state.summarized_char.setdefault(c, set())
        if len(done) == tally.count - len(tally.pending):  # done holds exactly the facts of c not fresh
            done.update(f.id for f in tally.pending)
        else:  # ids of facts a mapping change moved to another character: as from scratch
            state.summarized_char[c] = {f.id for f in state.facts if c in self._chars(f.entities, mapping)}

    def _offline_character(self, c: str, tally: CharTally, state: VideoState, mapping: dict[str, str]) -> str:
        n_clips, others = len(tally.clips), tally.others
        name = self._name_of(c, state, mapping)
        parts = [
            f"{c}"
            + (f" (says their name is {name})" if name else "")
            + f" appears in {tally.count} memory lines across {n_clips} clip{_s(n_clips)}"
            f" ({tally.start:.1f}-{tally.end:.1f} s)"
        ]
        if tally.speech:
            parts.append(f"speaks {tally.speech} time{'s' if tally.speech != 1 else ''} ({tally.talk:.0f} s)")
        if others:
            top = sorted(others.items(), key=lambda kv: (-kv[1], _char_key(kv[0])))[:3]
            parts.append(
                "is mentioned together with "
                + ", ".join(f"{o} ({n} line{'s' if n != 1 else ''})" for o, n in top)
            )
        quotes = tally.quotes
        if quotes:
            parts.append(
                "says for example "
                + "; ".join(f'"{_quote(f.text, 80)}"' for f in sorted(quotes, key=lambda f: f.order))
            )
        return "; ".join(parts) + "."

    def _relationships(
        self, record: ClipRecord, state: VideoState, mapping: dict[str, str]
    ) -> list[dict[str, Any]]:
        vid, idx = record.video.id, record.clip.index
        assert state.tally is not None
        out = []
        # evidence of a pair: the lines naming both (in order), then the clips both appear in
        for (a, b), pair in sorted(
            state.tally.pairs.items(), key=lambda kv: (_char_key(kv[0][0]), _char_key(kv[0][1]))
        ):
            if len(pair.pending_facts) + len(pair.pending_clips) < self.config.tau_rel:
                continue
            direct = pair.pending_facts
            fresh = [f.id for f in direct] + pair.pending_clips
            text = None
            if self.client is not None:
                ev = [(f.id, self._render(f.text, mapping)) for f in direct[-self.config.max_evidence :]]
                ev += [(i, "both appear in this clip") for i in pair.pending_clips][-10:]
                obj = self._llm(
                    vid,
                    idx,
                    f"rel{a}{b}",
                    prompts.relationship_prompt(a, b, state.summary_rel.get((a, b)), ev),
                    prompts.SUMMARY_SCHEMA,
                    self._summary_check(state, mapping),
                )
                text = obj["summary"] if obj else None
            source = "llm" if text else "offline"
            if not text:
                n_clips, n_lines = pair.clips, pair.lines
                text = (
                    f"{a} and {b} appear in the same clip {n_clips} time{_s(n_clips)} and are "
                    f"named together in {n_lines} memory line{'s' if n_lines != 1 else ''}"
                )
                if direct:
                    text += "; e.g. " + "; ".join(
                        f'"{_quote(self._render(f.text, mapping), 80)}"' for f in direct[:2]
                    )
                text += "."
            self._mark_pair_done((a, b), pair, state, mapping)
            state.summary_rel[(a, b)] = text
            times = [(f.start, f.end) for f in direct] or [(record.clip.start, record.clip.end)]
            out.append(
                {
                    "id": relationship_node_id(vid, idx, a, b),
                    "kind": "relationship",
                    "text": text,
                    "characters": [a, b],
                    "entities": [a, b],
                    "evidence": fresh,
                    "evidence_count": pair.lines + pair.clips,
                    "source": source,
                    "start": min(t[0] for t in times),
                    "end": max(t[1] for t in times),
                }
            )
            pair.pending_facts, pair.pending_clips = [], []
        return out

    def _mark_pair_done(
        self, key: tuple[str, str], pair: PairTally, state: VideoState, mapping: dict[str, str]
    ) -> None:
        """As :meth:`_mark_character_done`, for a pair's evidence (its lines and shared clips)."""
        done = state.summarized_rel.setdefault(key, set())
        fresh = len(pair.pending_facts) + len(pair.pending_clips)
        if len(done) == pair.lines + pair.clips - fresh:
            done.update(f.id for f in pair.pending_facts)
            done.update(pair.pending_clips)
            return
        a, b = key
        ids, clips = set(), set()
        for f in state.facts:
            chars = self._chars(f.entities, mapping)
            if a in chars and b in chars:
                ids.add(f.id)
        per_clip: dict[int, set[str]] = defaultdict(set)
        for f in state.facts:
            per_clip[f.clip].update(self._chars(f.entities, mapping))
        clips = {clip_node_id(state.video, c) for c, chars in per_clip.items() if a in chars and b in chars}
        state.summarized_rel[key] = ids | clips

    # ----------------------------------------------------------------- contradictions
    def _conflicts(
        self, record: ClipRecord, state: VideoState, new: list[Fact], mapping: dict[str, str]
    ) -> list[dict[str, Any]]:
        vid, idx = record.video.id, record.clip.index
        tally = state.tally
        assert tally is not None
        new_ids = {f.id for f in new}
        sides: list[tuple[list[Fact], list[Fact], str, str]] = []
        if self.client is not None:
            groups = tally.groups
            for a, b, c in self._llm_conflict_pairs(record, tally.semantic, new_ids, mapping):
                sides.append(
                    (
                        groups[_support_key(a, mapping, self._render)],
                        groups[_support_key(b, mapping, self._render)],
                        c,
                        "llm",
                    )
                )
        else:  # groups of one character and predicate that this clip's statements joined
            for c, pred in tally.touched_forms(new):
                by_pol = tally.forms[(c, pred)]
                if 1 in by_pol and -1 in by_pol:
                    sides.append((by_pol[1], by_pol[-1], c, "offline"))
        out = []
        for side_a, side_b, c, source in sides:
            rank_a = (len(side_a), max(f.order for f in side_a))
            rank_b = (len(side_b), max(f.order for f in side_b))
            keep, drop = (side_a, side_b) if rank_a > rank_b else (side_b, side_a)
            tag = (tuple(f.id for f in keep), tuple(f.id for f in drop))
            if tag in state.conflicts_seen:
                continue
            state.conflicts_seen.add(tag)
            kt, dt = self._render(keep[-1].text, mapping), self._render(drop[-1].text, mapping)
            text = (
                f'Contradiction about {c}: "{kt}" ({len(keep)} statement{"s" if len(keep) != 1 else ""}) vs '
                f'"{dt}" ({len(drop)}); kept "{kt}"'
            )
            out.append(
                {
                    "id": conflict_node_id(vid, idx, len(out)),
                    "kind": "conflict",
                    "text": text,
                    "character": c,
                    "entities": [c],
                    "kept": [f.id for f in keep],
                    "dropped": [f.id for f in drop],
                    "weights": {"kept": len(keep), "dropped": len(drop)},
                    "evidence": [f.id for f in keep + drop],
                    "source": source,
                    "start": min(f.start for f in keep + drop),
                    "end": max(f.end for f in keep + drop),
                }
            )
        return out

    def _llm_conflict_pairs(
        self,
        record: ClipRecord,
        by_char: dict[str, list[Fact]],
        new_ids: set[str],
        mapping: dict[str, str],
    ) -> list[tuple[Fact, Fact, str]]:
        """Contradictions the LLM finds between a character's new and recent semantic statements."""
        pairs = []
        for c, facts in sorted(by_char.items()):
            fresh = len(facts)
            while fresh and facts[fresh - 1].id in new_ids:  # this clip's statements close the list
                fresh -= 1
            new, old = facts[fresh:][:20], facts[:fresh][-40:]
            if not new or len(new) + len(old) < 2:
                continue
            ids = {f.id: f for f in new + old}

            def validate(obj: Any, ids=ids) -> list[str]:
                return [
                    f"conflicts[{i}] uses an unknown id"
                    for i, p in enumerate(obj["conflicts"])
                    if p["a"] not in ids or p["b"] not in ids or p["a"] == p["b"]
                ][:5]

            obj = self._llm(
                record.video.id,
                record.clip.index,
                f"conflict{c}",
                prompts.conflict_prompt(
                    c,
                    [(f.id, self._render(f.text, mapping)) for f in new],
                    [(f.id, self._render(f.text, mapping)) for f in old],
                ),
                prompts.CONFLICT_SCHEMA,
                validate,
                task="conflicts",
            )
            for p in (obj or {}).get("conflicts", []):
                pairs.append((ids[p["a"]], ids[p["b"]], c))
        return pairs


def _support_key(f: Fact, mapping: dict[str, str], render: Any) -> str:
    """Statements with the same normalised text (ids resolved to characters) support each other."""
    return _norm(render(f.text, mapping))


def _s(n: int) -> str:
    return "" if n == 1 else "s"


@functools.lru_cache(maxsize=4096)
def _char_key(c: str) -> tuple[int, str]:
    m = re.search(r"(\d+)>$", c)
    return (int(m.group(1)) if m else 10**9, c)


def abstract_records(
    records: list[ClipRecord],
    config: AbstractConfig,
    client: Any = None,
    embedder: Any = None,
    ctx: RunContext | None = None,
) -> list[ClipRecord]:
    """Every video folded in clip order; each record gets ``abstractions`` (``errors`` on LLM fallback)."""
    ctx = ctx or RunContext()
    if client is not None:
        client.use_cache(ctx.cache)
    out: list[ClipRecord] = []
    for clips in by_video(records):
        runner = Abstractor(config, client, embedder, ctx.cache)
        state = VideoState(video=clips[0].video.id)
        for record in ctx.progress(clips, desc="abstract", total=len(clips)):
            if record.memory is None:
                raise InputError(
                    f"clip {record.clip.index} of {record.video.path} has no memory: run "
                    "`m3 memorize` (and `m3 link`) before `m3 abstract`"
                )
            runner.errors = []
            items = runner.step(record, state)
            update: dict[str, Any] = {"abstractions": [Abstraction.model_validate(item) for item in items]}
            if runner.errors:
                update["errors"] = [*(record.errors or []), *map(Problem.model_validate, runner.errors)]
            # A shallow copy: the input's parts are shared, not changed (a deep copy per clip cost more
            # than the fold itself and left a heap for the garbage collector that grew with the video).
            out.append(record.model_copy(update=update))
    return out


def config_dict(config: AbstractConfig) -> dict[str, Any]:
    return asdict(config)
