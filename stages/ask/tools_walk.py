"""The tools that walk out from what is known: [Expand] along the memory's links, [Window] through time.

[Expand] follows the graph's edges from the evidence so far and lets the LLM prune the candidates
(seed 003 PyraVid); [Window] reads a time span, a clip range or a stretch of days in time order (seed 002
CAM temporal context). Both start from a place in the memory rather than from a query's words, which is
why they are apart from the search tools (:mod:`~m3cli.stages.ask.tools_search`).
"""

from __future__ import annotations

import re

from m3cli.stages.ask import prompts as P
from m3cli.stages.ask.actions import ToolError
from m3cli.stages.ask.nodes import Node
from m3cli.stages.ask.retrieval import LEX_WEIGHT
from m3cli.stages.ask.text import fmt_time, overlap, parse_time, terms
from m3cli.stages.ask.tools_context import ToolContext, ToolResult

MAX_EXPAND_IDS = 20
EXPAND_CANDIDATES = 16
WINDOW_LINES = 30


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
