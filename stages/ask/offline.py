"""Retrieval-only answers from the memory's structure: who spoke, what, when, how often, in what order.

Without an LLM, `m3 ask` used to return the best-matching line; on natural questions ("Who spoke
first?", "What did <character_1> say?", "How many people are there?") the nearest line by similarity is
rarely the answer. This module reads the question's *form* (:func:`~m3cli.stages.ask.route.classify`),
resolves the people it refers to (:mod:`m3cli.stages.ask.people`), and answers from the memory's lines
as data: speakers and their times (``t_start``/``t_end``), the people a line is about
(``characters``/``entities`` columns), counts and orders over them. The answer is one sentence that
states the answer, names only the people it is about, and cites exactly the lines used, each with its own
time and its video's file name.

The parts, one job each: :mod:`~m3cli.stages.ask.facts` reads the lines, :mod:`~m3cli.stages.ask.route`
reads the question's form, :mod:`~m3cli.stages.ask.wording` words and cites the answer, and the handlers
of each kind of question are :mod:`~m3cli.stages.ask.counts`, :mod:`~m3cli.stages.ask.said`,
:mod:`~m3cli.stages.ask.seen` and :mod:`~m3cli.stages.ask.overview`. This module joins them: the
answerer, and the order in which a question is tried (people, dates, then its form).
"""

from __future__ import annotations

from m3cli.stages.ask import dates
from m3cli.stages.ask.counts import CountAnswers
from m3cli.stages.ask.route import route
from m3cli.stages.ask.said import SaidAnswers
from m3cli.stages.ask.seen import SeenAnswers
from m3cli.stages.ask.wording import Answer


class OfflineAnswerer(CountAnswers, SaidAnswers, SeenAnswers):
    """Answers one question from :class:`Facts`; ``search`` ranks lines for content questions."""

    # ------------------------------------------------------------------ answer
    def answer(self, question: str) -> Answer:
        from m3cli.stages.ask import across, by_person, person_times
        from m3cli.stages.ask.absence import absence_for, uncovered
        from m3cli.stages.ask.described import CannotTell
        from m3cli.stages.ask.overview import HANDLERS

        known = person_times.answer(self, question)  # "who was with X on <day>", "when was X last seen"
        names_person = by_person.PERSON_RE.search(question) is not None
        if known is None and names_person:  # "<person_2>": across videos, else video by video
            known = across.answer(self, question) or by_person.answer(self, question)
        if known is not None:
            known.form = "people"
            return known
        dated = dates.answer(self, question)  # "on November 12", "when did we last see X": by dates
        if dated is not None:
            dated.form = "dates"
            return dated
        # people across videos, from the memory's people table (already asked when it names a person)
        known = None if names_person else across.answer(self, question)
        if known is not None:
            known.form = "people"
            return known
        form = route(question)
        handler = getattr(self, f"_a_{form.kind}", None)
        ans: Answer | None
        try:
            outside = uncovered(self, form.time) if form.time is not None else None
            if outside is not None:  # a time no clip of the memory holds: say so, not "nobody"
                ans = outside
            elif handler is not None:
                ans = handler(question, form)
            else:
                ans = HANDLERS[form.kind](self, question, form)
            if ans is None:
                ans = absence_for(
                    self, question, form
                )  # nobody seen / nothing said, where the memory says so
        except CannotTell as who:
            ans = who.answer
        if ans is None:
            ans = self._a_fallback(question, form)
        ans.form = form.kind
        return ans
