"""The tools that find memory lines by what they say: [Search], [SearchClip], [Count] and [Character].

Each ranks or filters the memory's lines for a query (seed 000 search_node/search_clip, CAM's frequency
statistics) or for a person (a name, a <character_k>, a face or voice id, a <person_N> across videos),
within the question's scope. They read only the memory dataset, never a video, and are kept apart from
the tools that walk from evidence (:mod:`~m3cli.stages.ask.tools_walk`) and those that look at a clip
(:mod:`~m3cli.stages.ask.tools_media`).
"""

from __future__ import annotations

from dataclasses import replace

from m3cli.stages.ask.actions import ToolError
from m3cli.stages.ask.nodes import Character, Node, Scope
from m3cli.stages.ask.retrieval import hybrid
from m3cli.stages.ask.text import fmt_time, overlap, terms
from m3cli.stages.ask.tools_context import ToolContext, ToolResult, _query_arg
from m3cli.stages.core.entity_ids import FACE, PROMPT_ID_RE, VOICE, kind_of, parse_id

CLIP_LINES = 40
COUNT_POOL = 200


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
    from m3cli.stages.people.summary import profiles_of_reader

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
    reader = getattr(ctx.memory, "reader", None)  # there is one: people_book read the people from it
    profile = profiles_of_reader(reader).get(pid) if reader is not None else None
    if profile is not None:  # `m3 people summarize`: the person across all their videos
        lines.append(
            f"Profile of {book.display(pid)} across their videos ({profile['model']}): {profile['text']}"
        )
    nodes: list[Node] = []
    for r in rows[:5]:
        sub = tool_character(
            replace(ctx, scope=Scope(r["video"], ctx.scope.before_clip, ctx.scope.kinds, ctx.scope.raw_ids)),
            r["character"],
        )
        nodes += sub.nodes
        lines += sub.lines
    return ToolResult("character", who, nodes, lines)


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
