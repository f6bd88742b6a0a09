"""`m3 link`: face-voice equivalence by weighted voting over a whole video, then `<character_k>` ids.

Votes for a (face, voice) pair come from two places, per clip:

* ``llm``: each ``memory.equivalences`` pair of an LLM-written memory (fallback memories carry none);
* ``meta``: M3-Agent's meta-clips. The clip is cut where the set of visible faces changes (the analogue
  of the paper's keyframe segmentation: visually stable stretches), each stretch into windows of at
  most 5 s (:func:`~m3cli.stages.core.media.windows`); a window in which exactly one face is visible
  and exactly one voice speaks (each for at least ``min_overlap`` s; unattributed speech counts as
  another voice) is one vote for that pair.

The fold over clips is a plain sum of per-clip votes, so it is *replayed*, never patched: appending
clips, or changing ``p``, re-sums the cheap per-clip votes (reused from the records' ``link.votes`` when
present and computed with the same settings) and re-resolves. Resolution is M3-Agent's Algorithm 2:
drop edges of weight <= ``min_weight`` - 1 (weight-1 edges by default), keep a face's top edge only
if it holds at least share ``p`` of that face's votes, the same from the voice side (so a voice keeps
only its highest-weight face), then union-find. Later majorities override early mistakes because only
totals matter.

Characters are numbered by the first appearance (clip, time, id) of their earliest member, so the
numbering is stable for a given stream.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from m3cli.schemas.records import ClipRecord, LinkSection
from m3cli.stages.core import media
from m3cli.stages.core.cache import config_hash
from m3cli.stages.core.common import by_video
from m3cli.stages.core.errors import InputError

STAGE = "link"
VERSION = "link-v1"


@dataclass(frozen=True)
class LinkConfig:
    p: float = 0.5
    min_weight: float = 2.0
    window: float = 5.0
    min_overlap: float = 0.5
    llm_weight: float = 1.0
    meta: bool = True

    def __post_init__(self) -> None:
        if not 0.0 < self.p <= 1.0:
            raise InputError(f"--p must be in (0, 1], got {self.p}")
        if self.window <= 0:
            raise InputError(f"--window must be positive, got {self.window}")

    def votes_key(self) -> str:
        """Settings that change per-clip votes (p and min_weight only change the resolution)."""
        return config_hash(
            {
                "v": VERSION,
                "window": self.window,
                "min_overlap": self.min_overlap,
                "llm_weight": self.llm_weight,
                "meta": self.meta,
            }
        )


@dataclass(frozen=True)
class Vote:
    face: str
    voice: str
    source: str  # "meta" or "llm"
    weight: float
    start: float | None = None
    end: float | None = None

    def as_json(self) -> dict[str, Any]:
        d = {"face": self.face, "voice": self.voice, "source": self.source, "weight": self.weight}
        if self.start is not None:
            d["start"] = round(self.start, 3)
            d["end"] = round(self.end or self.start, 3)
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Vote:
        return cls(d["face"], d["voice"], d["source"], float(d["weight"]), d.get("start"), d.get("end"))


# ------------------------------------------------------------------------------------ per-clip votes


def _covered(spans: Iterable[tuple[float, float]], s: float, e: float) -> float:
    return sum(max(0.0, min(b, e) - max(a, s)) for a, b in spans)


def meta_windows(record: ClipRecord, window: float) -> list[tuple[float, float]]:
    """Windows <= ``window`` s inside stretches where the set of visible faces does not change."""
    start, end = record.clip.start, record.clip.end
    cuts = {start, end}
    for t in record.faces.tracks if record.faces else []:
        for s, e in t.spans:
            cuts.update(x for x in (float(s), float(e)) if start < x < end)
    edges = sorted(cuts)
    out: list[tuple[float, float]] = []
    for s, e in zip(edges[:-1], edges[1:], strict=True):
        if e - s > 1e-6:
            out.extend(media.windows(s, e, window))
    return out


def clip_votes(record: ClipRecord, config: LinkConfig) -> list[Vote]:
    """This clip's votes, meta-clips first (in time order), then the LLM's equivalences."""
    votes: list[Vote] = []
    if config.meta:
        tracks = record.faces.tracks if record.faces else []
        utts = record.utterances or []
        for s, e in meta_windows(record, config.window):
            need = min(config.min_overlap, 0.5 * (e - s))
            faces = {t.face_id for t in tracks if _covered(t.spans, s, e) >= need}
            speech: dict[str, float] = defaultdict(float)
            for u in utts:
                speech[u.speaker or "?"] += _covered([(u.start, u.end)], s, e)
            voices = {v for v, dur in speech.items() if dur >= need}
            if len(faces) == 1 and len(voices) == 1 and "?" not in voices:
                votes.append(Vote(next(iter(faces)), next(iter(voices)), "meta", 1.0, s, e))
    memory = record.memory
    if config.llm_weight > 0 and memory is not None and memory.source == "llm" and not memory.fallback:
        for face, voice in memory.equivalences or []:
            votes.append(Vote(face, voice, "llm", config.llm_weight))
    return votes


def first_seen(record: ClipRecord) -> dict[str, tuple[int, float]]:
    """Each face/voice id of the clip -> (clip index, first time seen)."""
    seen: dict[str, tuple[int, float]] = {}
    idx = record.clip.index

    def see(eid: str, t: float) -> None:
        if eid not in seen or (idx, t) < seen[eid]:
            seen[eid] = (idx, t)

    for t in record.faces.tracks if record.faces else []:
        see(t.face_id, min((float(s) for s, _ in t.spans), default=record.clip.start))
    for u in record.utterances or []:
        if u.speaker:
            see(u.speaker, u.start)
    if record.voices and record.voices.ids:
        for v in record.voices.ids:
            see(v, record.clip.end)
    if record.memory:
        for face, voice in record.memory.equivalences or []:
            see(face, record.clip.end)
            see(voice, record.clip.end)
    return seen


# ------------------------------------------------------------------------------------ the fold


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, x: str) -> str:
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


@dataclass
class LinkState:
    """Per-video voting state: the sum of per-clip votes plus when each id was first seen."""

    config: LinkConfig
    weights: dict[tuple[str, str], float] = field(default_factory=lambda: defaultdict(float))
    sources: dict[tuple[str, str], dict[str, float]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(float))
    )
    seen: dict[str, tuple[int, float]] = field(default_factory=dict)

    def add(self, votes: Iterable[Vote], seen: dict[str, tuple[int, float]]) -> None:
        for v in votes:
            self.weights[(v.face, v.voice)] += v.weight
            self.sources[(v.face, v.voice)][v.source] += v.weight
            for eid in (v.face, v.voice):
                seen.setdefault(eid, (10**9, 0.0))
        for eid, when in seen.items():
            if eid not in self.seen or when < self.seen[eid]:
                self.seen[eid] = when

    def kept_edges(self) -> list[tuple[str, str, float]]:
        """Algorithm 2: weight filter, then the top edge per face and per voice if its share >= p."""
        edges = {k: w for k, w in self.weights.items() if w >= self.config.min_weight}

        def top(side: int) -> set[tuple[str, str]]:
            by_node: dict[str, list[tuple[tuple[str, str], float]]] = defaultdict(list)
            for pair, w in edges.items():
                by_node[pair[side]].append((pair, w))
            keep = set()
            for lst in by_node.values():
                lst.sort(key=lambda x: (-x[1], self.seen.get(x[0][1 - side], (10**9, 0.0)), x[0]))
                (pair, w), total = lst[0], sum(w for _, w in lst)
                tied = len(lst) > 1 and lst[1][1] == w
                if not tied and w / total >= self.config.p:
                    keep.add(pair)
            return keep

        kept = top(0) & top(1)
        return sorted(((f, v, edges[(f, v)]) for f, v in kept), key=lambda x: (self.seen.get(x[0]), x))

    def characters(self) -> dict[str, str]:
        """Every id seen so far -> ``<character_k>``, numbered by first appearance of the group."""
        uf = _UnionFind()
        for eid in self.seen:
            uf.find(eid)
        for face, voice, _ in self.kept_edges():
            uf.union(face, voice)
        groups: dict[str, list[str]] = defaultdict(list)
        for eid in self.seen:
            groups[uf.find(eid)].append(eid)
        order = sorted(groups.values(), key=lambda ids: min((self.seen[i], i) for i in ids))
        mapping = {}
        for k, ids in enumerate(order, 1):
            for eid in ids:
                mapping[eid] = f"<character_{k}>"
        return dict(sorted(mapping.items(), key=lambda kv: (int(kv[1][11:-1]), kv[0])))

    def snapshot(self, clip_votes: list[Vote]) -> dict[str, Any]:
        """The ``link`` section: this clip's votes, the cumulative weights and the edges kept."""
        kept = self.kept_edges()
        return {
            "version": VERSION,
            "config": self.config.votes_key(),
            "p": self.config.p,
            "min_weight": self.config.min_weight,
            "votes": [v.as_json() for v in clip_votes],
            "weights": [
                {"face": f, "voice": v, "weight": w, "sources": dict(sorted(self.sources[(f, v)].items()))}
                for (f, v), w in sorted(self.weights.items(), key=lambda kv: (-kv[1], kv[0]))
            ],
            "edges": [{"face": f, "voice": v, "weight": w} for f, v, w in kept],
        }


def _votes_for(record: ClipRecord, config: LinkConfig, reuse: bool) -> list[Vote]:
    """Votes recorded by an earlier run with the same settings, else computed from perception."""
    link = record.plain("link") or {}
    if reuse and link.get("config") == config.votes_key() and isinstance(link.get("votes"), list):
        return [Vote.from_json(v) for v in link["votes"]]
    return clip_votes(record, config)


def link_video(records: list[ClipRecord], config: LinkConfig, reuse: bool = True) -> list[ClipRecord]:
    """One video's clips (in clip order) with ``characters`` and ``link`` set after each clip."""
    state = LinkState(config)
    out = []
    for record in records:
        votes = _votes_for(record, config, reuse)
        state.add(votes, first_seen(record))
        new = record.model_copy(deep=True)
        new.characters = state.characters()
        new.link = LinkSection.model_validate(state.snapshot(votes))
        out.append(new)
    return out


def link_records(records: list[ClipRecord], config: LinkConfig, reuse: bool = True) -> list[ClipRecord]:
    """Every video folded separately; records come out grouped per video, in clip order."""
    out: list[ClipRecord] = []
    for clips in by_video(records):
        out.extend(link_video(clips, config, reuse))
    return out


def config_dict(config: LinkConfig) -> dict[str, Any]:
    return asdict(config)
