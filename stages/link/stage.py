"""`m3 link`: face-voice equivalence by weighted voting over a whole video, then `<character_k>` ids.

Evidence for a (face, voice) pair comes from two places, per clip:

* ``seen`` (default ``--method seen``): who is seen speaking. A face whose mouth moves (the inner-lip
  opening recorded by `m3 faces` changes between sampled frames) while a voice is active earns the
  seconds of that agreement; when several visible mouths move at once, each earns its share, so a
  crowded scene still yields evidence and the person who keeps moving their lips while the voice
  speaks gathers most of it. Clips without mouth readings (a backend without dense landmarks, older
  records) fall back to the seconds in which exactly one face is visible and exactly one voice speaks.
  Evidence is measured in seconds, so a person seen speaking alone for 4 s is linked.
* ``meta`` (``--method meta``, for ablations): M3-Agent's meta-clips. The clip is cut where the set
  of visible faces changes, each stretch into windows of at most ``window`` s; a window in which
  exactly one face is visible and exactly one voice speaks (each for at least ``min_overlap`` s;
  unattributed speech counts as another voice) is one vote for that pair.
* ``llm``: each ``memory.equivalences`` pair of an LLM-written memory (fallback memories carry none),
  worth ``llm_weight`` (seconds under ``seen``, windows under ``meta``).

Before voting, each clip goes through the seen-speaking fold (``stages/link/seen_speaking.py``): a voice that
two faces seen together are each seen speaking alone in is split into one voice per face, so a merge
the diarizer made from the audio does not join two people to one character (``link.voice_splits``).

Voice activity is the diarizer's speaker ``turns`` when they carry voice ids, else the utterances.
For identity a voice's time is cut at the clip's ends and at every shot change (``faces.shots``), so
it never lands on the next shot's faces; an utterance's piece beyond a cut that is shorter than
``min_piece`` and than the rest of it is ASR timing spill (segments run on past a cut) and dropped.

The fold over clips is a plain sum of per-clip votes, so it is *replayed*, never patched: appending
clips, or changing ``p``, re-sums the cheap per-clip votes (reused from the records' ``link.votes`` when
present and computed with the same settings) and re-resolves. Resolution is M3-Agent's Algorithm 2:
drop edges lighter than ``min_weight`` (1 s under ``seen``; 2 windows, i.e. weight-1 edges dropped,
under ``meta``), keep a face's top edge only if it holds at least share ``p`` of that face's votes, the
same from the voice side; an edge is kept when it is the top of both. One more join repairs a
diarizer that split one person: a voice whose own top is face F, left out because F kept another
voice, joins F when `m3 voices` found the two alike (``voices.alike``; :meth:`LinkState.resolve`).
Then union-find. Later majorities override early mistakes because only totals matter.

Characters are numbered by the first appearance (clip, time, id) of their earliest member, so the
numbering is stable for a given stream.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from m3cli.schemas.records import ClipRecord, LinkSection
from m3cli.stages.configs.link import LinkConfig
from m3cli.stages.core import media_probe
from m3cli.stages.core.common import by_video
from m3cli.stages.core.entity_ids import character_id, number_of
from m3cli.stages.core.lips import mouth_motion, moving_times, shot_bounds  # noqa: F401 (re-exported)
from m3cli.stages.link.seen_speaking import SeenSpeaking, SplitConfig

STAGE = "link"
VERSION = "link-v3"


@dataclass(frozen=True)
class Vote:
    face: str
    voice: str
    source: str  # "seen", "meta" or "llm"
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


# ------------------------------------------------------------------------------------ voice activity


def _covered(spans: Iterable[tuple[float, float]], s: float, e: float) -> float:
    return sum(max(0.0, min(b, e) - max(a, s)) for a, b in spans)


def _field(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


def voice_activity(record: ClipRecord) -> tuple[list[tuple[str, float, float]], bool]:
    """(voice, start, end) stretches of attributed speech, and whether their ends are trusted.

    The diarizer's speaker turns (overlap-aware, precise ends) when they carry voice ids, else the
    ASR utterances, whose ends can run on past a speaker change.
    """
    turns = getattr(record, "turns", None) or []
    stretches = [
        (str(_field(t, "speaker")), float(_field(t, "start")), float(_field(t, "end")))
        for t in turns
        if _field(t, "speaker")
    ]
    if stretches:
        return stretches, True
    return [(u.speaker, u.start, u.end) for u in record.utterances or [] if u.speaker], False


def cut_activity(record: ClipRecord, min_piece: float) -> list[tuple[str, float, float]]:
    """Voice stretches cut at the clip's ends and at shot changes (spill pieces of utterances dropped)."""
    stretches, trusted = voice_activity(record)
    bounds = shot_bounds(record)
    out: list[tuple[str, float, float]] = []
    for voice, s, e in stretches:
        s, e = max(s, bounds[0]), min(e, bounds[-1])
        if e <= s:
            continue
        pieces = [(max(s, a), min(e, b)) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
        pieces = [(a, b) for a, b in pieces if b > a]
        for a, b in pieces:
            spill = b - a < min_piece and b - a < (e - s) / 2
            if trusted or len(pieces) == 1 or not spill:
                out.append((voice, a, b))
    return out


# ------------------------------------------------------------------------------------ per-clip votes


def seen_votes(record: ClipRecord, config: LinkConfig) -> list[Vote]:
    """Who is seen speaking: per sampled frame, the voice time shared by the faces moving their lips.

    The clip is walked in steps of one sampled frame. In a step where some visible face's lips move,
    each active voice's seconds in it are shared among those faces. In a step where no lips are seen
    moving (still photos, a face too small to read, no mouth readings) and exactly one face is visible
    while exactly one voice speaks, that face gets the seconds (M3-Agent's one-face-one-voice rule).
    """
    faces = record.faces
    activity = cut_activity(record, config.min_piece)
    if faces is None or not faces.tracks or not activity:
        return []
    tracks = faces.tracks
    bounds = shot_bounds(record)
    step = 1.0 / (faces.fps or 5.0)
    moving: dict[str, list[float]] = {}  # face -> sample times at which its lips move
    for track in tracks:
        moving[track.face_id] = moving_times(track, bounds, config.moving, config.smooth)
    totals: dict[tuple[str, str, int], float] = defaultdict(float)
    k = 0
    while k * step < bounds[-1] - bounds[0] - 1e-9:
        lo, hi = bounds[0] + k * step, min(bounds[0] + (k + 1) * step, bounds[-1])
        k += 1
        mid = (lo + hi) / 2
        speech: dict[str, float] = defaultdict(float)
        for voice, s, e in activity:
            speech[voice] += max(0.0, min(e, hi) - max(s, lo))
        speech = {v: d for v, d in speech.items() if d > 0}
        if not speech:
            continue
        visible = [t.face_id for t in tracks if any(a <= mid < b for a, b in t.spans)]
        movers = [f for f in visible if any(lo - 1e-6 <= t < hi - 1e-6 for t in moving[f])]
        if movers:
            share = {f: 1.0 / len(movers) for f in movers}
        elif len(visible) == 1 and len(speech) == 1:
            share = {visible[0]: 1.0}
        else:
            continue
        shot = sum(1 for b in bounds[1:-1] if b <= mid)
        for voice, seconds in speech.items():
            for face, part in share.items():
                totals[(face, voice, shot)] += seconds * part
    return _shot_votes(totals, bounds, "seen")


def _shot_votes(totals: dict[tuple[str, str, int], float], bounds: list[float], source: str) -> list[Vote]:
    """One vote per (face, voice, shot) with the seconds of evidence, in time then id order."""
    votes = [
        Vote(face, voice, source, round(w, 3), bounds[k], bounds[k + 1])
        for (face, voice, k), w in totals.items()
        if round(w, 3) > 0
    ]
    return sorted(votes, key=lambda v: (v.start, v.face, v.voice))


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
            out.extend(media_probe.windows(s, e, window))
    return out


def meta_votes(record: ClipRecord, config: LinkConfig) -> list[Vote]:
    """M3-Agent's meta-clips: a window with exactly one face and one voice is one vote."""
    votes: list[Vote] = []
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
    return votes


def clip_votes(record: ClipRecord, config: LinkConfig) -> list[Vote]:
    """This clip's votes, perception first (in time order), then the LLM's equivalences."""
    votes: list[Vote] = []
    if config.perception:
        votes = seen_votes(record, config) if config.method == "seen" else meta_votes(record, config)
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
    for turn in getattr(record, "turns", None) or []:
        if _field(turn, "speaker"):
            see(str(_field(turn, "speaker")), float(_field(turn, "start")))
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

    #: voice pairs that sound alike and are never heard at once (``voices.alike``) -> the best cosine
    alike: dict[tuple[str, str], float] = field(default_factory=dict)

    def add(
        self,
        votes: Iterable[Vote],
        seen: dict[str, tuple[int, float]],
        alike: Iterable[tuple[str, str, float]] = (),
    ) -> None:
        for v in votes:
            self.weights[(v.face, v.voice)] += v.weight
            self.sources[(v.face, v.voice)][v.source] += v.weight
            for eid in (v.face, v.voice):
                seen.setdefault(eid, (10**9, 0.0))
        for eid, when in seen.items():
            if eid not in self.seen or when < self.seen[eid]:
                self.seen[eid] = when
        for a, b, cosine in alike:
            pair = (min(a, b), max(a, b))
            self.alike[pair] = max(cosine, self.alike.get(pair, cosine))

    def kept_edges(self) -> list[tuple[str, str, float]]:
        """Algorithm 2's edges, then the voices joined because they sound like their face's voice."""
        return self._in_order(*self.resolve())

    def _in_order(
        self, mutual: list[tuple[str, str, float]], joined: list[tuple[str, str, float, str, float]]
    ) -> list[tuple[str, str, float]]:
        edges = [*mutual, *((f, v, w) for f, v, w, _, _ in joined)]
        return sorted(edges, key=lambda x: (self.seen.get(x[0]), x))

    def resolve(self) -> tuple[list[tuple[str, str, float]], list[tuple[str, str, float, str, float]]]:
        """Algorithm 2: weight filter, then the top edge per face and per voice if its share >= p; an
        edge is kept when it is the top of both its face and its voice.

        Then one more join, for a diarizer that split one person: a voice whose own top is face F, left
        out because F's top is another voice u, joins F when it sounds like u (``alike``: the bank's
        bar, never heard at once). Returns the mutual edges and the joins (face, voice, weight, u,
        cosine). Algorithm 2 alone gives such a voice a character of its own: a second person who
        never shows a face, speaking where the first one is seen speaking."""
        edges = {k: w for k, w in self.weights.items() if w >= self.config.weight_floor}

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

        voice_tops = top(1)
        kept = top(0) & voice_tops
        voice_of_face = {f: v for f, v in kept}
        joined = []
        for face, voice in sorted(voice_tops - kept):
            mate = voice_of_face.get(face)
            cosine = self.alike.get((min(voice, mate), max(voice, mate))) if mate else None
            if mate is not None and cosine is not None:
                joined.append((face, voice, edges[(face, voice)], mate, cosine))
        return [(f, v, edges[(f, v)]) for f, v in sorted(kept)], joined

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
                mapping[eid] = character_id(k)
        return dict(sorted(mapping.items(), key=lambda kv: (number_of(kv[1]), kv[0])))

    def snapshot(self, clip_votes: list[Vote]) -> dict[str, Any]:
        """The ``link`` section: this clip's votes, the cumulative weights and the edges kept (a join by
        sound names the voice it sounds like and the cosine)."""
        mutual, joined = self.resolve()
        why = {(f, v): {"sounds_like": mate, "cosine": round(c, 4)} for f, v, _, mate, c in joined}
        kept = self._in_order(mutual, joined)
        return {
            "version": VERSION,
            "config": self.config.votes_key(),
            "p": self.config.p,
            "min_weight": self.config.weight_floor,
            "votes": [v.as_json() for v in clip_votes],
            "weights": [
                {
                    "face": f,
                    "voice": v,
                    "weight": round(w, 3),
                    "sources": {k: round(x, 3) for k, x in sorted(self.sources[(f, v)].items())},
                }
                for (f, v), w in sorted(self.weights.items(), key=lambda kv: (-kv[1], kv[0]))
            ],
            "edges": [
                {"face": f, "voice": v, "weight": round(w, 3)} | why.get((f, v), {}) for f, v, w in kept
            ],
        }


def _votes_for(record: ClipRecord, config: LinkConfig, reuse: bool) -> list[Vote]:
    """Votes recorded by an earlier run with the same settings, else computed from perception."""
    link = record.plain("link") or {}
    if reuse and link.get("config") == config.votes_key() and isinstance(link.get("votes"), list):
        return [Vote.from_json(v) for v in link["votes"]]
    return clip_votes(record, config)


@dataclass
class LinkFold:
    """One video's votes so far and its seen-speaking evidence: what the stage folds over the clips."""

    state: LinkState
    seen: SeenSpeaking

    @classmethod
    def start(cls, config: LinkConfig) -> LinkFold:
        return cls(LinkState(config), SeenSpeaking(SplitConfig(moving=config.moving, smooth=config.smooth)))

    def dump(self, arrays: Any = None) -> dict[str, Any]:
        """The fold as a checkpoint document (:mod:`~m3cli.stages.core.checkpoint`), every table in the
        order it was filled (ties in the voting are broken by first appearance)."""
        st, seen = self.state, self.seen
        return {
            "weights": [[f, v, w] for (f, v), w in st.weights.items()],
            "sources": [[f, v, list(by.items())] for (f, v), by in st.sources.items()],
            "first_seen": [[eid, clip, t] for eid, (clip, t) in st.seen.items()],
            "alike": [[a, b, cosine] for (a, b), cosine in st.alike.items()],
            "seconds": [[v, f, sec] for (v, f), sec in seen.seconds.items()],
            "together": sorted(list(p) for p in seen.together),
            "keeper": list(seen.keeper.items()),
            "into": [[v, f, new] for (v, f), new in seen.into.items()],
            "splits": seen.splits,
            "alias": list(seen.alias.items()),
            "issued": sorted(seen.issued),
            "top": seen.top,
        }

    @classmethod
    def load(cls, doc: dict[str, Any], config: LinkConfig, arrays: Any = None) -> LinkFold:
        """The fold :meth:`dump` saved, under ``config`` (the checkpoint's settings digest names it)."""
        fold = cls.start(config)
        st, seen = fold.state, fold.seen
        for f, v, w in doc["weights"]:
            st.weights[(f, v)] = float(w)
        for f, v, by in doc["sources"]:
            for src, w in by:
                st.sources[(f, v)][src] = float(w)
        st.seen = {eid: (clip, t) for eid, clip, t in doc["first_seen"]}
        st.alike = {(a, b): float(cosine) for a, b, cosine in doc["alike"]}
        for v, f, sec in doc["seconds"]:
            seen.seconds[(v, f)] = float(sec)
        seen.together = {(a, b) for a, b in doc["together"]}
        seen.keeper = dict(doc["keeper"])
        seen.into = {(v, f): new for v, f, new in doc["into"]}
        seen.splits = [dict(s) for s in doc["splits"]]
        seen.alias = dict(doc["alias"])
        seen.issued = set(doc["issued"])
        seen.top = int(doc["top"])
        return fold


def link_video(
    records: list[ClipRecord], config: LinkConfig, reuse: bool = True, fold: LinkFold | None = None
) -> list[ClipRecord]:
    """One video's clips (in clip order) with ``characters`` and ``link`` set after each clip.

    ``fold`` continues from the clips an earlier call was given; without it they are the video's first."""
    fold = fold or LinkFold.start(config)
    state, seen = fold.state, fold.seen
    out = []
    for record in records:
        moved: dict[str, float] = {}
        if config.split_voices:
            record, moved = seen.fold(record)
        votes = _votes_for(record, config, reuse)
        pairs = (record.voices.alike if record.voices else None) or []
        alike = [(a.voices[0], a.voices[1], a.cosine) for a in pairs]
        state.add(votes, first_seen(record), alike)
        new = record.model_copy(deep=True)
        new.characters = state.characters()
        snapshot = state.snapshot(votes)
        if seen.splits:
            snapshot |= {"voice_splits": [dict(s) for s in seen.splits], "voice_moved": moved}
        new.link = LinkSection.model_validate(snapshot)
        out.append(new)
    return out


def link_records(
    records: list[ClipRecord],
    config: LinkConfig,
    reuse: bool = True,
    folds: dict[str, LinkFold] | None = None,
) -> list[ClipRecord]:
    """Every video folded separately; records come out grouped per video, in clip order.

    ``folds`` (video id -> its fold) lets a caller that feeds one video's clips in several calls
    (`m3 watch`) continue each call from the last; without it every video starts a new fold."""
    out: list[ClipRecord] = []
    for clips in by_video(records):
        fold = None if folds is None else folds.setdefault(clips[0].video.id, LinkFold.start(config))
        out.extend(link_video(clips, config, reuse, fold))
    return out


def config_dict(config: LinkConfig) -> dict[str, Any]:
    return asdict(config)
