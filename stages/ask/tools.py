"""The tools `m3 ask` can call, their validation, and the registry the loop calls them through.

The loop (:mod:`m3cli.stages.ask.loop`) only ever calls a tool through :func:`run_action`, which

* takes one :class:`~m3cli.stages.ask.actions.Action` parsed from the model's reply
  (:mod:`m3cli.stages.ask.actions`),
* rejects unknown or disabled tags and malformed arguments with :class:`ToolError` (a failed round,
  never a crash): integers must be in range, clips must exist and be inside the question's scope, node
  ids must be well formed and known,
* runs the tool against a :class:`MemoryView`, whose scope (video, ``--before-clip``, node kinds) is
  fixed by the caller and cannot be widened by the model.

Tools (seed 000 search_node/search_clip; seed 002 CAM temporal/frequency/traversal/rewatch/listen;
seed 003 PyraVid expansion with LLM pruning) are plain functions of a :class:`ToolContext` and the
argument string. Nothing here reads files other than the memory dataset and a clip's own video.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from m3cli.stages.ask import prompts as P
from m3cli.stages.ask.actions import Action, ToolError
from m3cli.stages.ask.nodes import Character, ClipInfo, MemoryView, Node, Scope
from m3cli.stages.ask.retrieval import LEX_WEIGHT, hybrid
from m3cli.stages.ask.text import SIGHT_LINE, fmt_time, overlap, parse_time, terms
from m3cli.stages.core.entity_ids import FACE, PROMPT_ID_RE, VOICE, kind_of, parse_id

if TYPE_CHECKING:
    from m3cli.schemas.records import VideoInfo

log = logging.getLogger(__name__)

MAX_QUERY_CHARS = 500
MAX_EXPAND_IDS = 20
EXPAND_CANDIDATES = 16
WINDOW_LINES = 30
CLIP_LINES = 40
COUNT_POOL = 200
REWATCH_FRAMES = 8


# ============================================================================== tool context


@dataclass
class ToolResult:
    tool: str
    query: str
    nodes: list[Node] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    llm_s: float = 0.0
    note: str | None = None


@dataclass
class ToolContext:
    """Everything a tool may touch. ``seen_*`` and ``aliases`` carry state across rounds of one question."""

    memory: MemoryView
    embed: Callable[[str], np.ndarray | None]
    scope: Scope
    k: int = 5
    threshold: float = 0.5
    clip_k: int = 2
    clip_threshold: float = 0.5
    llm: Any = None
    cache: Any = None
    question: str = ""
    multi_video: bool = False
    aliases: dict[str, str] = field(default_factory=dict)  # n1 -> node id
    alias_of: dict[str, str] = field(default_factory=dict)  # node id -> n1
    seen_clips: set[tuple[str, int]] = field(default_factory=set)
    evidence: list[Node] = field(default_factory=list)  # every node shown to the model, in order
    _evidence_ids: set[str] = field(default_factory=set)
    _chars: dict[str | None, list[Character]] = field(default_factory=dict)
    #: what "today" means for dates in [Window] (ISO 8601; None: the newest recording's end)
    now: str | None = None
    _timeline: Any = None

    def timeline(self) -> Any:
        """Each video's recording start (:mod:`m3cli.stages.ask.dates`), read once per question."""
        if self._timeline is None:
            from m3cli.stages.ask.dates import load_timeline

            self._timeline = load_timeline(self.memory)
        return self._timeline

    def alias(self, node: Node) -> str:
        if node.id not in self.alias_of:
            name = f"n{len(self.aliases) + 1}"
            self.aliases[name] = node.id
            self.alias_of[node.id] = name
        return self.alias_of[node.id]

    def remember(self, nodes: Iterable[Node]) -> None:
        for n in nodes:
            if n.id not in self._evidence_ids:
                self._evidence_ids.add(n.id)
                self.evidence.append(n)

    def characters(self, video: str | None) -> list[Character]:
        if video not in self._chars:
            self._chars[video] = self.memory.characters(video)
        return self._chars[video]

    def text_of(self, node: Node) -> str:
        return node.raw_text if self.scope.raw_ids and node.raw_text else node.text

    def render(self, node: Node) -> str:
        where = f"clip {node.clip}" + (f" of video {node.video}" if self.multi_video else "")
        span = f" {fmt_time(node.t_start)}-{fmt_time(node.t_end)}" if node.t_start is not None else ""
        if node.t_start is not None and (when := self.timeline().at(node.video, node.t_start)) is not None:
            span += f", {when.strftime('%Y-%m-%d %H:%M:%S')}"  # the line's absolute time, when known
        return f"[{self.alias(node)}] ({where}{span}, {node.kind}) {self.text_of(node)}"

    def video_for(self, what: str) -> str:
        """The video a clip number or time refers to: the scope's, the only one, or the latest evidence's."""
        if self.scope.video:
            return self.scope.video
        videos = self.memory.videos()
        if len(videos) == 1:
            return videos[0]
        if self.evidence:
            return self.evidence[-1].video
        raise ToolError(f"{what}: the memory holds {len(videos)} videos; search first so the video is known")

    def check_clip(self, video: str, clip: int) -> ClipInfo:
        if self.scope.before_clip is not None and clip > self.scope.before_clip:
            raise ToolError(
                f"clip {clip} is after the question's time (clips 0-{self.scope.before_clip} only)"
            )
        info = self.memory.clip_info(video, clip)
        if info is None:
            raise ToolError(f"clip {clip} does not exist in video {video}")
        return info


def _query_arg(arg: str, what: str) -> str:
    q = " ".join(arg.split())
    if not q:
        raise ToolError(f"{what} needs a query")
    if len(q) > MAX_QUERY_CHARS:
        raise ToolError(f"{what} query is too long ({len(q)} characters, at most {MAX_QUERY_CHARS})")
    return q


# ============================================================================== the tools


def tool_search(ctx: ToolContext, arg: str) -> ToolResult:
    query = _query_arg(arg, "[Search]")
    nodes = hybrid(ctx.memory, query, ctx.embed(query), ctx.k, ctx.threshold, ctx.scope)
    return ToolResult("search", query, nodes, [ctx.render(n) for n in nodes])


def tool_search_clip(ctx: ToolContext, arg: str) -> ToolResult:
    """search_clip: clips scored by their best line; the ``clip_k`` best unseen clips, all their lines."""
    query = _query_arg(arg, "[SearchClip]")
    cands = hybrid(ctx.memory, query, ctx.embed(query), 10_000, ctx.clip_threshold, ctx.scope, pool=64)
    best: dict[tuple[str, int], float] = {}
    for n in cands:
        key = (n.video, n.clip)
        if key not in ctx.seen_clips:
            best[key] = max(best.get(key, -1e9), n.score)
    chosen = sorted(best, key=lambda key: (-best[key], key))[: ctx.clip_k]
    nodes: list[Node] = []
    lines: list[str] = []
    for video, clip in chosen:
        ctx.seen_clips.add((video, clip))
        info = ctx.memory.clip_info(video, clip)
        members = ctx.memory.clip_nodes(video, [clip], ctx.scope)[:CLIP_LINES]
        span = f" {fmt_time(info.start)}-{fmt_time(info.end)}" if info else ""
        lines.append(f"Clip {clip}{span}" + (f" of video {video}" if ctx.multi_video else "") + ":")
        lines += [ctx.render(n) for n in members]
        for n in members:
            n.score = best[(video, clip)]
        nodes += members
    return ToolResult("search_clip", query, nodes, lines)


def tool_character(ctx: ToolContext, arg: str) -> ToolResult:
    """Name <-> <character_k> <-> face/voice ids, clips, and the memory lines that mention them."""
    who = " ".join(arg.split()).strip("\"'")
    if not who or len(who) > 100:
        raise ToolError("[Character] needs a name or an id such as <character_1> (at most 100 characters)")
    person = _person_of(ctx, who)
    if person is not None:
        return person
    looks_like_id = who.startswith("<") or parse_id(f"<{who}>") is not None
    if looks_like_id:
        token = who if who.startswith("<") else f"<{who}>"
        if not PROMPT_ID_RE.fullmatch(token):
            raise ToolError(f"malformed id {who!r}: ids look like <character_1>, <face_2>, <voice_3>")
    else:
        token = None
    video = ctx.scope.video
    chars = ctx.characters(video)
    hits: list[Character] = []
    for c in chars:
        if token and (c.id == token or token in c.members):
            hits.append(c)
        elif (
            not token and c.name and (c.name.lower() == who.lower() or who.lower() in c.name.lower().split())
        ):
            hits.append(c)
    lines: list[str] = []
    nodes: list[Node] = []
    for c in hits[:5]:
        if ctx.scope.before_clip is not None:
            clips = [x for x in c.clips if x <= ctx.scope.before_clip]
        else:
            clips = c.clips
        faces = [m for m in c.members if kind_of(m) == FACE]
        voices = [m for m in c.members if kind_of(m) == VOICE]
        shown = ", ".join(map(str, clips[:20])) + (" ..." if len(clips) > 20 else "")
        lines.append(
            f"{c.name or '(name unknown)'} = {c.id}"
            + (f" in video {c.video}" if ctx.multi_video else "")
            + f"; faces: {', '.join(faces) or 'none'}; voices: {', '.join(voices) or 'none'}"
            + f"; appears in clips: {shown or 'none'}"
        )
        about = hybrid(
            ctx.memory,
            f"{c.name or ''} {c.id}".strip(),
            ctx.embed(f"{c.name or c.id}"),
            4 * ctx.k,
            -1.0,
            Scope(c.video, ctx.scope.before_clip, ctx.scope.kinds, ctx.scope.raw_ids),
        )
        about = [n for n in about if c.id in n.characters or (c.name and c.name in n.names)][: ctx.k]
        nodes += about
        lines += [ctx.render(n) for n in about]
    if not hits:
        names = sorted({c.name for c in chars if c.name})
        lines.append(
            f"No character matches {who!r}."
            + (
                f" Known names: {', '.join(names[:30])}."
                if names
                else " No names are known; search what people said."
            )
        )
    return ToolResult("character", who, nodes, lines)


def _person_of(ctx: ToolContext, who: str) -> ToolResult | None:
    """[Character] <person_N>: a person of the memory's people table, across videos. Each video names its
    own characters, so the tool says which character the person is in each video (with its recording
    date), then shows their lines there as for a character (None: ``who`` is no person id, or the
    memory has no people table)."""
    from m3cli.stages.ask.across import people_book
    from m3cli.stages.people.store import PERSON_RE

    m = PERSON_RE.fullmatch(who if who.startswith("<") else f"<{who}>")
    book = people_book(ctx.memory) if m else None
    if m is None or book is None:
        return None
    pid = book.edits.resolve(f"<person_{int(m.group(1))}>")
    person = book.people.get(pid)
    if person is None:
        return ToolResult(
            "character",
            who,
            [],
            [f"No person {who} in this memory; it knows {', '.join(list(book.people)[:30])}."],
        )
    rows = [r for r in person.rows if not ctx.scope.video or r["video"] == ctx.scope.video]
    where = [
        f"{r['character']} in video {r['video']}"
        + (f" (recorded {r['recorded'][:10]})" if r.get("recorded") else "")
        for r in rows
    ]
    lines = [
        f"{book.display(pid)} is the same person as: {'; '.join(where) or 'nobody in the videos in scope'}."
    ]
    nodes: list[Node] = []
    for r in rows[:5]:
        sub = tool_character(
            replace(ctx, scope=Scope(r["video"], ctx.scope.before_clip, ctx.scope.kinds, ctx.scope.raw_ids)),
            r["character"],
        )
        nodes += sub.nodes
        lines += sub.lines
    return ToolResult("character", who, nodes, lines)


_NODE_ID = re.compile(r"^[0-9A-Za-z_\-]{1,64}(?::[0-9A-Za-z_\-]{1,40}){1,2}$")
_ALIAS = re.compile(r"^n\d{1,5}$")


def tool_expand(ctx: ToolContext, arg: str) -> ToolResult:
    """PyraVid: follow links from the given (or current) evidence, then let the LLM prune the candidates."""
    tokens = [t for t in re.split(r"[\s,;]+", arg.strip().strip("[]")) if t]
    if len(tokens) > MAX_EXPAND_IDS:
        raise ToolError(f"[Expand] takes at most {MAX_EXPAND_IDS} node ids, got {len(tokens)}")
    seeds: list[str] = []
    for t in tokens:
        t = t.strip("[]()")
        if _ALIAS.match(t):
            if t not in ctx.aliases:
                raise ToolError(f"unknown node {t!r}: use the [n...] labels shown with the results")
            seeds.append(ctx.aliases[t])
        elif _NODE_ID.match(t):
            seeds.append(t)
        else:
            raise ToolError(f"malformed node id {t!r}: use the [n...] labels shown with the results")
    if tokens:
        known = {n.id for n in ctx.memory.get_nodes(seeds, ctx.scope)}
        missing = [s for s in seeds if s not in known]
        if missing:
            raise ToolError(f"unknown or out-of-scope node id(s): {', '.join(missing[:5])}")
    else:
        seeds = [n.id for n in ctx.evidence[-10:]]
        if not seeds:
            raise ToolError("[Expand] has nothing to expand yet: search first")
    shown = set(ctx.alias_of)
    weights: dict[str, float] = {}
    for e in ctx.memory.edges_of(seeds, limit=200):
        for other in (e.src, e.dst):
            if other not in seeds and other not in shown:
                weights[other] = max(weights.get(other, -1e9), e.weight)
    order = sorted(weights, key=lambda x: (-weights[x], x))
    cands = ctx.memory.get_nodes(order[: 4 * EXPAND_CANDIDATES], ctx.scope)
    cands.sort(key=lambda n: (-weights.get(n.id, 0.0), n.id))
    cands = cands[:EXPAND_CANDIDATES]
    result = ToolResult("expand", " ".join(tokens) or "(evidence so far)")
    if not cands:
        result.lines = ["No linked memory lines beyond what was already shown."]
        return result
    kept = cands
    if ctx.llm is not None:
        kept, result.note = _prune(ctx, cands, result)
    result.nodes = kept
    result.lines = [ctx.render(n) for n in kept] or ["The linked memory lines were judged irrelevant."]
    return result


def _prune(ctx: ToolContext, cands: list[Node], result: ToolResult) -> tuple[list[Node], str | None]:
    from m3cli.stages.backends.llm import LlmError
    from m3cli.stages.backends.llm.json_reply import extract_json

    labels = {f"c{i + 1}": n for i, n in enumerate(cands)}
    block = P.data_block(
        P.nonce(ctx.question, "prune", *labels),
        'kind="candidates"',
        [f"[{label}] {ctx.text_of(n)}" for label, n in labels.items()],
    )
    kept_ctx = P.data_block(
        P.nonce(ctx.question, "kept"), 'kind="evidence"', [ctx.text_of(n) for n in ctx.evidence[-10:]]
    )
    messages = [
        {"role": "system", "content": P.PRUNE_PROMPT},
        {
            "role": "user",
            "content": f"Question: {ctx.question}\n\nEvidence so far:\n{kept_ctx}\n\nCandidates:\n{block}",
        },
    ]
    try:
        reply = ctx.llm.chat(messages)
    except LlmError as exc:
        return cands[:5], f"pruning failed ({exc}); kept the 5 strongest links"
    result.prompt_tokens += reply.prompt_tokens
    result.completion_tokens += reply.completion_tokens
    result.llm_s += reply.latency_s
    try:
        obj = extract_json(reply.text)
        keep = obj.get("keep") if isinstance(obj, dict) else obj
        if not isinstance(keep, list):
            raise ValueError("no 'keep' list")
    except ValueError:
        keep = re.findall(r"\bc\d+\b", reply.text)
        if not keep:
            return cands[:5], "the pruning reply was unusable; kept the 5 strongest links"
    chosen = dict.fromkeys(str(x).strip("[] ") for x in keep)
    return [labels[x] for x in chosen if x in labels], None


_WINDOW = re.compile(
    r"^\s*(?:clips?\s*(\d{1,6})(?:\s*-\s*(\d{1,6}))?|([\d:.]+)\s*(?:-|to)\s*([\d:.]+)\s*s?)"
    r"\s*(?::\s*(.*))?$",
    re.IGNORECASE,
)


def tool_window(ctx: ToolContext, arg: str) -> ToolResult:
    """CAM's temporal context: the memory of a time span (or clip range), in time order."""
    m = _WINDOW.match(arg)
    if not m:
        dated = _day_window(ctx, arg)
        if dated is not None:
            return dated
        raise ToolError(
            "[Window] takes <t0>-<t1> (seconds or mm:ss), clip <N> or a date (November 12, 2026-11-12, "
            "yesterday, last week), optionally ': <query>'"
        )
    video = ctx.video_for("[Window]")
    if m.group(1) is not None:
        c0 = int(m.group(1))
        c1 = int(m.group(2)) if m.group(2) else c0
        if c1 < c0 or c1 - c0 > 20:
            raise ToolError(f"[Window] clip range {c0}-{c1} is invalid (at most 20 clips, in order)")
        first, last = ctx.check_clip(video, c0), ctx.check_clip(video, c1)
        t0, t1 = first.start, last.end
    else:
        try:
            t0, t1 = parse_time(m.group(3)), parse_time(m.group(4))
        except ValueError as exc:
            raise ToolError(str(exc)) from None
        if not 0 <= t0 < t1 or t1 - t0 > 3600:
            raise ToolError(f"[Window] {t0:g}-{t1:g} s is not a valid span (start < end, at most one hour)")
    query = (m.group(5) or "").strip()
    q_vec = ctx.embed(query) if query else None
    nodes = ctx.memory.window(video, t0, t1, ctx.scope, limit=500, query_vec=q_vec)
    if query:
        q_terms = terms(query)
        for n in nodes:
            n.score = n.sim + LEX_WEIGHT * overlap(q_terms, n.text)
        nodes = sorted(nodes, key=lambda n: -n.score)[:WINDOW_LINES]
        nodes.sort(key=lambda n: (n.t_start or 0.0, n.id))
    else:
        nodes = nodes[:WINDOW_LINES]
    lines = [ctx.render(n) for n in nodes] or [
        f"Nothing is remembered between {fmt_time(t0)} and {fmt_time(t1)}."
    ]
    return ToolResult(
        "window", f"{fmt_time(t0)}-{fmt_time(t1)}" + (f": {query}" if query else ""), nodes, lines
    )


def _day_window(ctx: ToolContext, arg: str) -> ToolResult | None:
    """[Window] <date>[: query]: the lines of every video recorded in that stretch of days, in time
    order (None: ``arg`` names no date). A day no recording covers is said so, with the days covered."""
    from datetime import datetime

    from m3cli.stages.ask import dates
    from m3cli.stages.core.recorded import parse_time

    head, _, query = arg.partition(":")
    tl = ctx.timeline()
    now = (parse_time(ctx.now) if ctx.now else None) or tl.now() or datetime.now().astimezone()
    found = dates.find_window(head, now)
    if found is None:
        return None
    window, _ = found
    query = query.strip()
    if not tl.start:
        return ToolResult("window", head.strip(), [], ["No video in the memory has a known recording time."])
    videos = [v for v in tl.covering(window) if not ctx.scope.video or v == ctx.scope.video]
    if not videos:
        line = f"Nothing was recorded {window.label}; the memory covers {dates.coverage(tl.days())}."
        return ToolResult("window", head.strip(), [], [line])
    q_vec = ctx.embed(query) if query else None
    nodes: list[Node] = []
    for v in videos:
        t0 = 0.0 if window.lo is None else max(0.0, (window.lo - tl.wall(v, 0.0)).total_seconds())
        t1 = tl.length.get(v, 0.0) if window.hi is None else (window.hi - tl.wall(v, 0.0)).total_seconds()
        nodes += ctx.memory.window(v, t0, min(t1, tl.length.get(v, t1)) + 1e-6, ctx.scope, 500, q_vec)
    if query:
        q_terms = terms(query)
        for n in nodes:
            n.score = n.sim + LEX_WEIGHT * overlap(q_terms, n.text)
        nodes = sorted(nodes, key=lambda n: -n.score)[:WINDOW_LINES]
    nodes.sort(key=lambda n: (tl.at(n.video, n.t_start or 0.0), n.id))
    nodes = nodes[:WINDOW_LINES]
    lines = [ctx.render(n) for n in nodes] or [f"Nothing is remembered {window.label}."]
    return ToolResult("window", window.label + (f": {query}" if query else ""), nodes, lines)


def tool_count(ctx: ToolContext, arg: str) -> ToolResult:
    """CAM's frequency statistics: memory lines matching a phrase, counted per clip."""
    query = _query_arg(arg, "[Count]")
    qterms = terms(query)
    q_vec = ctx.embed(query)
    pool = hybrid(ctx.memory, query, q_vec, COUNT_POOL, ctx.threshold, ctx.scope, pool=COUNT_POOL)
    matched = [n for n in pool if (qterms and overlap(qterms, n.text) >= 1.0) or n.sim >= ctx.threshold]
    matched = [n for n in matched if n.kind in ("episodic", "semantic")] or matched
    per_clip: dict[tuple[str, int], int] = {}
    for n in matched:
        per_clip[(n.video, n.clip)] = per_clip.get((n.video, n.clip), 0) + max(1, int(n.weight or 1))
    total = sum(per_clip.values())
    clips = ", ".join(f"clip {c} ({x}x)" for (_, c), x in sorted(per_clip.items())[:40])
    lines = [
        f"{total} matching memory line occurrence(s) in {len(per_clip)} clip(s)"
        + (f": {clips}" if clips else "")
        + (" (capped: there may be more)" if len(pool) >= COUNT_POOL else "")
    ]
    examples = sorted(matched, key=lambda n: -n.score)[: ctx.k]
    lines += [ctx.render(n) for n in examples]
    return ToolResult("count", query, examples, lines)


_CLIP_Q = re.compile(r"^\s*clip\s*(\d{1,6})\s*[:,\-]?\s*(.*)$", re.IGNORECASE | re.DOTALL)
_ABOUT_TEXT = re.compile(r"\b(written|writing|text|read|says?|sign|caption|title|words?|letters?)\b", re.I)


def _clip_arg(ctx: ToolContext, arg: str, tag: str) -> tuple[ClipInfo, str]:
    m = _CLIP_Q.match(arg)
    if not m:
        raise ToolError(f"[{tag}] takes 'clip <N>: <question>'")
    question = _query_arg(m.group(2), f"[{tag}]")
    return ctx.check_clip(ctx.video_for(f"[{tag}]"), int(m.group(1))), question


def _clip_question(ctx: ToolContext, arg: str, tag: str) -> tuple[ClipInfo, str]:
    info, question = _clip_arg(ctx, arg, tag)
    if not info.path or not Path(info.path).is_file():
        raise ToolError(f"the video file of clip {info.clip} is not available ({info.path or 'no path'})")
    if ctx.llm is None:
        raise ToolError(f"[{tag}] needs a multimodal LLM")
    return info, question


def _ask_media(
    ctx: ToolContext, tool: str, info: ClipInfo, question: str, parts: list[dict], prompt: str
) -> ToolResult:
    from m3cli.stages.backends.llm import LlmError

    text = prompt.format(
        clip=info.clip, start=fmt_time(info.start), end=fmt_time(info.end), question=question
    )
    try:
        reply = ctx.llm.chat([{"role": "user", "content": [{"type": "text", "text": text}, *parts]}])
    except LlmError as exc:
        raise ToolError(f"[{tool.capitalize()}] failed: {exc}") from None
    result = ToolResult(
        tool,
        f"clip {info.clip}: {question}",
        lines=[
            f"What clip {info.clip} ({fmt_time(info.start)}-{fmt_time(info.end)}) shows, "
            f"asked {question!r}: {reply.text.strip()}"
        ],
        prompt_tokens=reply.prompt_tokens,
        completion_tokens=reply.completion_tokens,
        llm_s=reply.latency_s,
    )
    result.nodes = ctx.memory.clip_nodes(info.video, [info.clip], ctx.scope)[:3]
    return result


def rewatch_from_sight(ctx: ToolContext, info: ClipInfo, question: str, why: str) -> ToolResult | None:
    """[Rewatch] with no frames to look at (``why``): the clip's sight lines, what `m3 sight` read on its
    keyframes and tagged in them, those sharing words with the question first (on-screen text first
    when the question asks what was written). None when the clip has no sight lines."""
    members = ctx.memory.clip_nodes(info.video, [info.clip], ctx.scope)
    said = {
        n.id: m.group(0).strip()
        for n in members
        if n.kind == "episodic" and (m := SIGHT_LINE.match(n.raw_text or n.text))
    }
    nodes = [n for n in members if n.id in said]
    if not nodes:
        return None
    q = terms(question)
    text_first = bool(_ABOUT_TEXT.search(question))

    def order(n: Node) -> tuple:
        on_screen = "on screen" in (n.raw_text or n.text).lower()
        return (-(overlap(q, n.text) if q else 0.0), on_screen != text_first, n.t_start or 0.0, n.id)

    ranked = sorted(nodes, key=order)[: max(ctx.k, 8)]
    what = "; ".join(said[n.id] for n in ranked)
    result = ToolResult(
        "rewatch",
        f"clip {info.clip}: {question}",
        ranked,
        [
            f"What clip {info.clip} ({fmt_time(info.start)}-{fmt_time(info.end)}) shows, asked {question!r}: "
            f"its keyframes as read offline (on-screen text and object tags; {why}): {what}",
            *(ctx.render(n) for n in ranked),
        ],
    )
    result.note = f"answered from the clip's sight lines: {why}"
    return result


def tool_rewatch(ctx: ToolContext, arg: str) -> ToolResult:
    """CAM's watch_video_clip: frames of one clip to the multimodal LLM with a focused question. Without
    an LLM, or the video file, or when the LLM refuses the frames, the clip's sight lines answer
    (:func:`rewatch_from_sight`) where it has any."""
    info, question = _clip_arg(ctx, arg, "Rewatch")
    why = None
    if ctx.llm is None:
        why = "no multimodal LLM to look at the frames"
    elif not info.path or not Path(info.path).is_file():
        why = "the video file is not available"
    if why:
        found = rewatch_from_sight(ctx, info, question, why)
        if found is not None:
            return found
    try:
        return _rewatch_frames(ctx, arg)
    except ToolError as exc:
        found = rewatch_from_sight(ctx, info, question, str(exc))
        if found is None:
            raise
        return found


def _rewatch_frames(ctx: ToolContext, arg: str) -> ToolResult:
    from m3cli.stages.backends.llm.media import image_part
    from m3cli.stages.core import media, media_frames

    info, question = _clip_question(ctx, arg, "Rewatch")
    fps = max(REWATCH_FRAMES / max(info.end - info.start, 1e-3), 0.05)
    try:
        frames = media_frames.sample_frames(
            media.source_path(_video_of(info), ctx.cache),
            info.video,
            info.clip,
            info.start,
            info.end,
            fps=fps,
            max_side=512,
            cache=ctx.cache,
        )
    except Exception as exc:  # decoding errors of a damaged file: the round fails, the question goes on
        raise ToolError(f"cannot read frames of clip {info.clip}: {exc}") from None
    images = frames.images[:REWATCH_FRAMES]
    if not images:
        raise ToolError(f"clip {info.clip} has no frames")
    return _ask_media(
        ctx,
        "rewatch",
        info,
        question,
        [image_part(media_frames.encode_jpeg(i, 85)) for i in images],
        P.REWATCH_PROMPT,
    )


def _video_of(info: ClipInfo) -> VideoInfo:
    """The clip's video as the media readers take it: only its path and id are read."""
    from m3cli.schemas.records import VideoInfo

    return VideoInfo.model_construct(path=info.path, id=info.video)


def tool_listen(ctx: ToolContext, arg: str) -> ToolResult:
    """CAM's listen_to_audio: the clip's audio (16 kHz WAV) to an omni model with a focused question."""
    from m3cli.stages.backends.llm.media import audio_part, wav_bytes
    from m3cli.stages.core import media, media_audio

    info, question = _clip_question(ctx, arg, "Listen")
    try:
        audio = media_audio.clip_audio(
            media.source_path(_video_of(info), ctx.cache),
            info.video,
            info.clip,
            info.start,
            info.end,
            cache=ctx.cache,
        )
    except Exception as exc:
        raise ToolError(f"cannot read the audio of clip {info.clip}: {exc}") from None
    if audio.size == 0:
        raise ToolError(f"clip {info.clip} has no audio")
    return _ask_media(
        ctx, "listen", info, question, [audio_part(wav_bytes(audio, media_audio.AUDIO_RATE))], P.LISTEN_PROMPT
    )


TOOLS: dict[str, Callable[[ToolContext, str], ToolResult]] = {
    "search": tool_search,
    "search_clip": tool_search_clip,
    "character": tool_character,
    "expand": tool_expand,
    "window": tool_window,
    "count": tool_count,
    "rewatch": tool_rewatch,
    "listen": tool_listen,
}
assert set(TOOLS) == set(P.ALL_TOOLS)


def parse_tools(spec: str | Sequence[str] | None) -> tuple[str, ...]:
    """``--tools`` value -> enabled tool names, in canonical order ("all", "paper" and "default" allowed)."""
    from m3cli.stages.core.errors import InputError

    if spec is None:
        return P.DEFAULT_TOOLS
    items = [s.strip().lower() for s in (spec.split(",") if isinstance(spec, str) else spec) if s.strip()]
    chosen: set[str] = set()
    for item in items:
        if item == "all":
            chosen |= set(P.ALL_TOOLS)
        elif item == "paper":
            chosen |= set(P.PAPER_TOOLS)
        elif item == "default":
            chosen |= set(P.DEFAULT_TOOLS)
        elif item in TOOLS:
            chosen.add(item)
        else:
            raise InputError(
                f"--tools: unknown tool {item!r}; valid: {', '.join(P.ALL_TOOLS)}, all, paper, default"
            )
    return tuple(t for t in P.ALL_TOOLS if t in chosen)


def run_action(ctx: ToolContext, action: Action, enabled: Sequence[str]) -> ToolResult:
    """Run one parsed, non-answer action; ToolError for anything not allowed."""
    if action.tool is None:
        raise ToolError(
            f"unknown action [{action.tag}]; valid: "
            + ", ".join(f"[{P.TOOL_DOCS[t][0]}]" for t in enabled)
            + ", [Answer]"
        )
    if action.tool not in enabled:
        raise ToolError(
            f"[{action.tag}] is not available in this run; valid: "
            + ", ".join(f"[{P.TOOL_DOCS[t][0]}]" for t in enabled)
            + ", [Answer]"
        )
    started = time.perf_counter()
    result = TOOLS[action.tool](ctx, action.content)
    log.debug(
        "%s %r: %d nodes in %.1f ms",
        action.tool,
        action.content,
        len(result.nodes),
        1000 * (time.perf_counter() - started),
    )
    ctx.remember(result.nodes)
    return result
