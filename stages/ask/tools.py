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
They live by job: :mod:`~m3cli.stages.ask.tools_context` (what a tool may touch),
:mod:`~m3cli.stages.ask.tools_search` (lines found by their words or by person),
:mod:`~m3cli.stages.ask.tools_walk` (along links and through time) and
:mod:`~m3cli.stages.ask.tools_media` (a clip's frames and audio); this module is their registry.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from m3cli.stages.ask import prompts as P
from m3cli.stages.ask.actions import Action, ToolError
from m3cli.stages.ask.tools_context import ToolContext, ToolResult
from m3cli.stages.ask.tools_media import tool_listen, tool_rewatch
from m3cli.stages.ask.tools_search import tool_character, tool_count, tool_search, tool_search_clip
from m3cli.stages.ask.tools_walk import tool_expand, tool_window

log = logging.getLogger(__name__)


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
