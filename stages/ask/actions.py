"""The action grammar of `m3 ask`: a model's reply -> one :class:`Action` (tag, tool, content, reasoning).

The last ``[Tag] content`` line outside any ``<think>`` block is the action; M3-Agent's
``Action: [Search]`` / ``Content: ...`` form is accepted too. A reply with no action line is a
:class:`ToolError`: a failed round, never a crash.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from m3cli.stages.ask import prompts as P


class ToolError(ValueError):
    """A rejected action or argument: the round fails, the loop goes on."""


@dataclass
class Action:
    tag: str  # as written by the model, e.g. "Search"
    tool: str | None  # "answer", a tool name, or None when the tag is unknown
    content: str
    reasoning: str


_THINK = re.compile(r"<think>(.*?)(?:</think>|$)", re.DOTALL | re.IGNORECASE)
_TAG_LINE = re.compile(
    r"(?im)^[ \t>*_#\-]*(?:action\s*[:\uff1a]\s*)?[*_]*\[([A-Za-z][A-Za-z_ \-]{0,29})\][*_]*[ \t]*"
    r"[:\uff1a]?[ \t]*(.*)$"
)
_CONTENT = re.compile(r"(?im)^[ \t*_]*content\s*[:\uff1a]\s*(.*)$")
ALIASES = {
    "searchnode": "search",
    "search_node": "search",
    "searchclip": "search_clip",
    "search_clip": "search_clip",
    "answer": "answer",
    "final": "answer",
    "finalanswer": "answer",
    "character": "character",
    "characters": "character",
    "expand": "expand",
    "window": "window",
    "count": "count",
    "rewatch": "rewatch",
    "listen": "listen",
    "search": "search",
}


def _norm_tag(tag: str) -> str:
    return re.sub(r"[\s_\-]+", "", tag.lower())


def split_reasoning(reply: str) -> tuple[str, str]:
    """(reasoning inside <think> blocks, the visible rest); a lone ``</think>`` ends the reasoning."""
    thoughts = [m.group(1).strip() for m in _THINK.finditer(reply)]
    visible = _THINK.sub("", reply)
    if "</think>" in visible.lower():
        head, _, visible = visible.rpartition("</think>")
        thoughts.append(head.strip())
    return "\n".join(t for t in thoughts if t), visible


def parse_action(reply: str) -> Action:
    """The last action line of a reply; ToolError if there is none."""
    thoughts, visible = split_reasoning(reply)
    matches = list(_TAG_LINE.finditer(visible))
    if not matches:
        raise ToolError("the reply has no action line such as [Search] <query> or [Answer] <answer>")
    m = matches[-1]
    tag = m.group(1).strip()
    norm = _norm_tag(tag)
    tool = ALIASES.get(norm) or ALIASES.get(norm.replace("_", "")) or P.TAG_TO_TOOL.get(norm)
    rest = visible[m.end() :]
    content = m.group(2).strip()
    follow = _CONTENT.search(rest)
    if follow:
        content = (
            (follow.group(1) + rest[follow.end() :]).strip() if tool == "answer" else follow.group(1).strip()
        )
    elif tool == "answer":
        content = (content + rest).strip()
    elif not content:
        content = next((line.strip() for line in rest.splitlines() if line.strip()), "")
    content = content.strip().strip("`").strip()
    if len(content) >= 2 and content[0] == content[-1] and content[0] in "\"'":
        content = content[1:-1].strip()
    reasoning = "\n".join(p for p in (thoughts, visible[: m.start()].strip()) if p)
    return Action(tag=tag, tool=tool, content=content, reasoning=reasoning)
