"""How a retrieval-only answer is said: the :class:`Answer`, its citations, quotes and lists, its evidence.

Every answerer of `m3 ask` without an LLM (the form handlers, the date, people and across-video
answerers) words its answer the same way: each line cited with its video's file name, its own times and,
where known, its date; the words said quoted with the memory's note on their language. Kept in one place
so the answers read alike and the evidence the trajectory records is exactly what the sentence cites.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from m3cli.stages.ask import dates
from m3cli.stages.ask.facts import Facts, Line

if TYPE_CHECKING:
    from m3cli.stages.ask.answerer import Answerer


CITE_MAX = 4


@dataclass
class Answer:
    text: str
    cited: list[Line]
    form: str
    supported: bool = True


def fmt_s(t: float | None) -> str:
    return "?" if t is None else f"{t:.1f}"


def cite(facts: Facts, ln: Line) -> str:
    when = dates.stamp(facts.timeline.at(ln.node.video, ln.start))
    at = f", {when}" if when else ""
    return f"({facts.files.get(ln.node.video, ln.node.video)}, {fmt_s(ln.start)}-{fmt_s(ln.end)} s{at})"


def quoted(ln: Line) -> str:
    """A speech line's words as the answer quotes them, with the memory's note on their language: a
    Portuguese sentence quoted bare would read as if the person had said it in English."""
    return f'({ln.note}) "{ln.quote}"' if ln.note else f'"{ln.quote}"'


def _say(facts: Facts, lines: list[Line]) -> str:
    parts = [f"{quoted(ln)} {cite(facts, ln)}" if ln.quote else cite(facts, ln) for ln in lines[:CITE_MAX]]
    more = f" and {len(lines) - CITE_MAX} more line(s)" if len(lines) > CITE_MAX else ""
    return _join(parts) + more


def _join(items: list[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def _line_text(a: Answerer, ln: Line) -> str:
    text = a.facts.people.rename(ln.node.raw_text if a.scope.raw_ids and ln.node.raw_text else ln.text)
    return text.rstrip(".")


def _cites(a: Answerer, lines: list[Line]) -> str:
    shown = list({ln.node.id: ln for ln in lines}.values())
    out = [cite(a.facts, ln) for ln in shown[:CITE_MAX]]
    return ("" if not out else out[0]) if len(out) <= 1 else "(" + "; ".join(o[1:-1] for o in out) + ")"


def evidence_of(a: Answerer, lines: list[Line]) -> list[dict[str, Any]]:
    """One evidence entry per cited line, with the line's own times and its video's file name."""
    out = []
    for ln in {ln.node.id: ln for ln in lines}.values():
        out.append(
            {
                "video": ln.node.video,
                "file": a.facts.files.get(ln.node.video, ln.node.video),
                "clip": ln.node.clip,
                "start": ln.start,
                "end": ln.end,
                "node_ids": [ln.node.id],
                "quote": ln.node.raw_text if a.scope.raw_ids and ln.node.raw_text else ln.text,
                "characters": [{"id": p, "name": a.facts.people.names.get(p)} for p in ln.who],
            }
        )
        at = dates.line_time(a.facts.timeline, ln.node.video, ln.start)
        if at is not None:
            out[-1]["at"] = at  # the line's absolute time, when its video's recording start is known
    return out
