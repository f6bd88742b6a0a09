"""What a tool of `m3 ask` may touch and what it returns: :class:`ToolContext` and :class:`ToolResult`.

The context fixes the question's scope (video, ``--before-clip``, node kinds), which the model cannot
widen, and carries state across the rounds of one question (the ``n1`` aliases shown to the model, the
clips already shown, every node shown as evidence). Kept apart from the tools themselves so that the
loop (:mod:`m3cli.stages.ask.loop`), the guards and every tool module share one context without
importing each other.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from m3cli.stages.ask.actions import ToolError
from m3cli.stages.ask.nodes import Character, ClipInfo, MemoryView, Node, Scope
from m3cli.stages.ask.text import fmt_time

MAX_QUERY_CHARS = 500


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
