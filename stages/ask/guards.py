"""What small real models do wrong in the ask loop, caught before it costs a round's search.

Seen with a 0.5B instruct model on llama.cpp: it sent the template's placeholder (``[SearchClip]
{content}``) four rounds in a row, echoed m3's own rejection text back as its next query, repeated
one query verbatim, answered ``[Answer]`` with nothing after it, and gave final answers with an
"Answer:" prefix and ``<character_1>`` ids the user cannot read. :func:`check_query` turns the first
three into failed rounds whose correction says exactly what to do instead; :func:`clean_answer`
strips the prefixes and alias citations, and replaces ids with the names the memory knows.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from m3cli.stages.ask.tools_context import MAX_QUERY_CHARS
from m3cli.stages.core.entity_ids import PROMPT_ID_RE

if TYPE_CHECKING:
    from m3cli.schemas.records import AnswerRound

#: Placeholders the prompts (ours and M3-Agent's) could suggest; a query equal to one is no query.
PLACEHOLDERS = frozenset(
    {
        "content",
        "query",
        "answer",
        "name",
        "search query",
        "your query",
        "the query",
        "question",
        "argument",
        "tool argument",
        "...",
        "…",
        "t0-t1",
        "clip n: question",
        "clip n",
        "phrase",
        "node ids",
    }
)
_BRACKETED = re.compile(r"^[\[{<(]+\s*([^\[\]{}<>()]{0,40}?)\s*[\]}>)]+$")
_TEMPLATE = re.compile(
    r"\{[a-z_]+\}|<(?:query|answer|content|name|question|phrase|n|t0|t1|your answer|best answer)>", re.I
)
#: Phrases only m3's own messages contain: a query carrying one is an echo, not a question.
ECHO_MARKERS = (
    "your previous action was rejected",
    "characters, at most",
    "output [answer] <answer> or one of the actions",
    "searched knowledge:",
    "the action of this round must be",
    "is not available in this run",
    "unknown action [",
    "reply now with one line: [answer]",
)
_ALIAS_CITE = re.compile(r"\s*\[(n\d{1,5}(?:\s*,\s*n\d{1,5})*)\]")
_PREFIX = re.compile(
    r"^\s*(?:[*_#>`\s]*)(?:action\s*[:\uff1a]\s*)?(?:\[\s*answer\s*\]|final\s+answer|answer|content|"
    r"the answer is)\s*[*_]*\s*[:\uff1a\-]?\s*[*_]*\s*",
    re.I,
)


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^\w<>{}\[\]\s.-]+", " ", text.casefold()).split())


def is_placeholder(content: str) -> bool:
    """Whether ``content`` is a template placeholder rather than real content."""
    text = " ".join(content.split()).strip("\"'` ")
    if not text:
        return False
    if _TEMPLATE.fullmatch(text):
        return True
    m = _BRACKETED.fullmatch(text)
    inner = (m.group(1) if m else text).strip().casefold()
    if m and not re.search(r"\d", inner):  # <character_1> is an id, <name> is a placeholder
        return True
    return inner in PLACEHOLDERS


def echoes_m3(text: str) -> bool:
    """Whether ``text`` carries one of m3's own messages (seen as a whole "answer" from a 270M model)."""
    low = text.casefold()
    return any(marker in low for marker in ECHO_MARKERS)


def check_query(tag: str, tool: str, content: str, history: Iterable[AnswerRound]) -> str | None:
    """Why this tool call is a wasted round (placeholder, repeat, echo of m3's text), or None if it is not."""
    if is_placeholder(content) or _TEMPLATE.search(content):
        return (
            f"{content.strip()[:60]!r} is a placeholder from the instructions, not a query: write the "
            f"actual words to search for after [{tag}], e.g. [{tag}] what does <character_1> drink"
        )
    if echoes_m3(content):
        return (
            "that is m3's own message, not a query: write a short query (a few words, at most "
            f"{MAX_QUERY_CHARS} characters) for the information you still need"
        )
    mine = _norm(content)
    for step in history:
        said = " ".join(str(x or "") for x in (step.error, step.note))
        if len(mine) >= 20 and mine in _norm(said):
            return (
                "that repeats m3's previous error message instead of a query: write a short query "
                "for the information you still need"
            )
        if step.tool == tool and not step.error:
            if _norm(str(step.query or "")) == mine:
                return (
                    f"you already ran [{tag}] {content.strip()[:80]!r} in round {step.round} and have its "
                    "results: search for something different (other words, a character id, a time "
                    "window) or give the [Answer]"
                )
    return None


@dataclass
class CleanAnswer:
    text: str
    cited: list[str] = field(default_factory=list)  # node aliases (n3) the answer cites
    unnamed: list[str] = field(default_factory=list)  # ids left in the text: the memory has no name


def clean_answer(raw: str, names: dict[str, str | None]) -> CleanAnswer:
    """The user-facing answer: prefixes and alias citations stripped, ids replaced by known names.

    ``names`` maps every id the memory knows (``<character_1>``, and its ``<face_i>``/``<voice_j>``
    members) to the character's name, or None when unnamed; unnamed ids stay in the text and are
    listed in ``unnamed``.
    """
    text = raw.strip()
    for _ in range(3):
        stripped = _PREFIX.sub("", text, count=1).strip()
        if stripped == text:
            break
        text = stripped
    text = text.strip("*_` ").strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1].strip()
    cited: list[str] = []
    for m in _ALIAS_CITE.finditer(text):
        cited += [a.strip() for a in m.group(1).split(",")]
    text = _ALIAS_CITE.sub("", text).strip()
    unnamed: list[str] = []

    def name_of(m: re.Match) -> str:
        token = m.group(0)
        name = names.get(token)
        if name:
            return name
        if token not in unnamed:
            unnamed.append(token)
        return token

    text = PROMPT_ID_RE.sub(name_of, text)  # ids as prompts write them: at most six digits
    # "Alice (Alice)" after replacing "<character_1> (Alice)"
    text = re.sub(r"\b([A-Z][\w'\- ]{0,40}?)\s*\(\s*\1\s*\)", r"\1", text)
    return CleanAnswer(" ".join(text.split()), list(dict.fromkeys(cited)), unnamed)


def known_names(characters: Iterable) -> dict[str, str | None]:
    """id -> name for every character id and member id; an id two characters share with different
    names (two videos) maps to None."""
    out: dict[str, str | None] = {}
    for c in characters:
        for token in (c.id, *c.members):
            if token in out and out[token] != c.name:
                out[token] = None
            else:
                out[token] = c.name
    return out
