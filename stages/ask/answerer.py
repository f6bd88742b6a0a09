"""The state a retrieval-only answer reads, and the steps every question handler shares.

:class:`Answerer` holds one question's memory, embedder, scope, threshold and parsed
:class:`~m3cli.stages.ask.facts.Facts`, and gives the handlers their common steps: a person's display
name, the videos in scope, lines ranked for a query, whether a line supports an answer, the people a
question names or describes, and the nearest line when no form fits (``_a_fallback``). The handlers of
each kind of question build on it (:mod:`~m3cli.stages.ask.counts`, :mod:`~m3cli.stages.ask.said`,
:mod:`~m3cli.stages.ask.seen`), and :class:`~m3cli.stages.ask.offline.OfflineAnswerer` joins them.
"""

from __future__ import annotations

from typing import Any

from m3cli.stages.ask.facts import Line, ParsedLines, load_facts, parse_line
from m3cli.stages.ask.forms import Form
from m3cli.stages.ask.nodes import Node, Scope
from m3cli.stages.ask.people import Person
from m3cli.stages.ask.retrieval import hybrid
from m3cli.stages.ask.text import overlap, terms
from m3cli.stages.ask.wording import Answer, _line_text, cite


class Answerer:
    """One question's memory and facts, and the lookups and fallback every handler uses."""

    def __init__(
        self,
        memory: Any,
        embed: Any,
        scope: Scope,
        threshold: float,
        now: str | None = None,
        parsed: ParsedLines | None = None,
    ):
        self.memory, self.embed, self.scope, self.threshold = memory, embed, scope, threshold
        self.now = now  # what "today" means (ISO 8601); None: the end of the newest recording
        self.parsed = parsed  # the run's lines parsed once (loop.Asker keeps them between questions)
        self.facts = load_facts(memory, scope, parsed)
        # the lines a similarity search returned (the trajectory shows them); structural answers (who
        # spoke first, how many) search nothing, so a cold `m3 ask` need not load the text embedder
        self.retrieved: list[Node] = []
        self.described: list[str] = []  # the descriptions refs() resolved ("the man on the left")

    # ------------------------------------------------------------------ helpers
    def name(self, pid: str) -> str:
        return self.facts.people.display(pid)

    def _videos(self) -> list[str]:
        return sorted(self.facts.turns)

    def _multi(self) -> bool:
        return len(self._videos()) > 1

    def _in(self, video: str) -> str:
        return f" in {self.facts.files.get(video, video)}" if self._multi() else ""

    def ranked(self, query: str, kinds: tuple[str, ...] | None, k: int = 40) -> list[tuple[float, Line]]:
        """Lines by hybrid score (cosine + term share) for ``query``; cosine kept on the node as ``sim``."""
        nodes = hybrid(self.memory, query, self.embed(query), k, -1.0, self.scope, pool=max(64, k))
        if not self.retrieved:
            self.retrieved = list(nodes)
        by_id = {ln.node.id: ln for ln in self.facts.lines}
        out = []
        for n in nodes:
            ln = by_id.get(n.id) or parse_line(n, self.scope.raw_ids)
            ln.node.sim, ln.node.score = n.sim, n.score
            if kinds is None or ln.kind in kinds:
                out.append((n.score, ln))
        return out

    def supported(self, query: str, ln: Line) -> bool:
        """One meaning of the threshold: a line supports an answer when its cosine reaches it, or when it
        holds at least half of the query's content terms (the same rule search_node uses)."""
        return ln.node.sim >= self.threshold or overlap(terms(query), ln.text) >= 0.5

    def refs(self, question: str) -> list[Person]:
        """The people the question names (ids, names, order), else the one it describes ("the woman",
        "the man on the left", "the person who mentioned Disneyland"); :class:`CannotTell` when the
        description fits several people or none the memory can tell apart."""
        found = self.facts.people.find(question, self.facts.turns)
        if found:
            return found
        from m3cli.stages.ask.described import describe

        return describe(self, question)

    def _a_fallback(self, question: str, form: Form, kinds: tuple[str, ...] | None = None) -> Answer:
        ranked = self.ranked(question, None)
        ranked = [(s, ln) for s, ln in ranked if ln.kind not in ("both", "global", "clip")] or ranked
        if kinds:
            ranked = [(s, ln) for s, ln in ranked if ln.kind in kinds] or ranked
        if not ranked:
            return Answer("No evidence found in memory for this question.", [], "", supported=False)
        # one meaning of the threshold: lines that qualify (cosine >= threshold, or half the question's
        # words) come first, best score first; the nearest line is shown only when none qualifies
        # (ranked as the evidence list always was: score + half the share of the question's words)
        q_terms = terms(question)
        ranked = sorted(ranked, key=lambda x: -(x[0] + 0.5 * overlap(q_terms, x[1].text)))
        qualified = [(sc, ln) for sc, ln in ranked if self.supported(question, ln)]
        best = (qualified or ranked)[0][1]
        if not qualified:
            return Answer(
                f"No line in memory supports an answer: none reaches the cosine threshold "
                f"({self.threshold:g}) or holds half the question's words; the nearest (cosine "
                f"{best.node.sim:.2f}) is {_line_text(self, best)} {cite(self.facts, best)}.",
                [best],
                "",
                supported=False,
            )
        return Answer(f"{_line_text(self, best)} {cite(self.facts, best)}.", [best], "")
