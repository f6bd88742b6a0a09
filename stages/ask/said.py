"""Answers to what was said, by whom and when: a person's words, who said a phrase, when someone speaks or
is seen, and what is said at a given time.

These handlers read the speech, turn and appearance lines at their own times and quote the words said;
they are apart from counting (:mod:`~m3cli.stages.ask.counts`) and from what is seen
(:mod:`~m3cli.stages.ask.seen`), and build on :class:`~m3cli.stages.ask.answerer.Answerer`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from m3cli.stages.ask.answerer import Answerer
from m3cli.stages.ask.facts import Line, _gap, _overlaps
from m3cli.stages.ask.forms import Form
from m3cli.stages.ask.people import People
from m3cli.stages.ask.route import _WHAT_SAID_WORDS
from m3cli.stages.ask.text import overlap, terms
from m3cli.stages.ask.wording import CITE_MAX, Answer, _cites, _join, _line_text, _say, cite, fmt_s, quoted


class SaidAnswers(Answerer):
    """The handlers of what-was-said and when questions (``_a_<kind>``, found by the form's kind)."""

    def _a_when(self, question: str, form: Form) -> Answer | None:
        if form.detail == "sight":
            ranked = self.ranked(question, ("sight",))
            if not ranked:
                return None
            best = ranked[0][1]
            return Answer(
                f"From {fmt_s(best.start)} to {fmt_s(best.end)} s: {_line_text(self, best)} "
                f"{cite(self.facts, best)}.",
                [best],
                "",
            )
        refs = self.refs(question)
        if form.detail == "visible" and refs:
            p = refs[0]
            lines = [ln for ln in self.facts.lines_of("visible", p.video) if p.id in ln.who]
            if not lines:
                return None
            return Answer(f"{self.name(p.id)} is visible {_spans(self, lines)}.", lines, "")
        # "When does the man speak?": the description that picked the person is not a topic
        undescribed = (
            re.sub("|".join(map(re.escape, self.described)), " ", question) if self.described else question
        )
        if refs and not _has_topic(undescribed, self.facts.people):
            p = refs[0]
            turns = [t for t in self.facts.turns.get(p.video, []) if t.person == p.id]
            if not turns:
                return None
            ql = question.lower()
            if re.search(r"\bfirst time\b|\bat first\b|\bfirst (?:speaks?|spoke|talks?|talked)\b", ql):
                turns = turns[:1]  # "when does X speak for the first time": the first turn only
            elif re.search(r"\blast time\b|\bat last\b|\blast (?:speaks?|spoke|talks?|talked)\b", ql):
                turns = turns[-1:]
            lines = [t.lines[0] for t in turns]
            spans = _join([f"from {fmt_s(t.start)} to {fmt_s(t.end)} s" for t in turns])
            return Answer(
                f"{self.name(p.id)} speaks {spans}{self._in(p.video)} {_cites(self, lines)}.", lines, ""
            )
        topic = _topic(question, self.facts.people)
        said = self._best_speech(topic)
        if said is None:
            return None
        return Answer(
            f"{self.name(said.who[0]) if said.who else 'Someone'} says it from {fmt_s(said.start)} to "
            f"{fmt_s(said.end)} s: {quoted(said)} {cite(self.facts, said)}.",
            [said],
            "",
        )

    def _best_speech(self, topic: str) -> Line | None:
        ranked = self.ranked(topic, ("speech",))
        ranked = [(s + 0.5 * overlap(terms(topic), ln.quote or ""), ln) for s, ln in ranked]
        ranked.sort(key=lambda x: -x[0])
        if not ranked or not self.supported(topic, ranked[0][1]):
            return None
        return ranked[0][1]

    def _a_what_said(self, question: str, form: Form) -> Answer | None:
        refs = self.refs(question)
        if not refs:
            return self._a_fallback(question, form, kinds=("speech",))
        p = refs[0]
        lines = [ln for ln in self.facts.lines_of("speech", p.video) if ln.who and ln.who[0] == p.id]
        if not lines:
            return Answer(
                f"The memory holds no words of {self.name(p.id)}{self._in(p.video)} (nothing transcribed).",
                [],
                "",
                supported=False,
            )
        # "say first / last": the words of the person's first / last turn (an utterance split at a
        # pause is several lines), else the first / last line
        turns = [t for t in self.facts.turns.get(p.video, []) if t.person == p.id]
        rest = self.facts.people.strip_refs(question).lower()  # "the first speaker" is no "first"
        for phrase in self.described:  # nor is "the man on the left" a topic
            rest = rest.replace(phrase.lower(), " ")
        pick = None
        if re.search(r"\bfirst\b", rest):
            pick = 0
        elif re.search(r"\b(last|at the end|finally)\b", rest):
            pick = -1
        if pick is not None:
            inside = [ln for ln in lines if turns and ln in turns[pick].lines]
            lines = inside or lines[pick:][:1]
        # "what does X say he liked best": the line of X's sharing most of the question's other words
        about = terms(rest) - _WHAT_SAID_WORDS
        if about:
            best = max(lines, key=lambda ln: overlap(about, ln.quote or ""))
            if overlap(about, best.quote or "") > 0:
                lines = [best]
        return Answer(f"{self.name(p.id)} says {_say(self.facts, lines)}.", lines[:CITE_MAX], "")

    def _a_who_said(self, question: str, form: Form) -> Answer | None:
        topic = form.topic or question
        best = self._best_speech(topic)
        if best is None or not best.who:
            return None
        words = terms(topic)
        # several people may have said it: every speech line holding all of the topic's words counts
        lines = [best]
        if words and words <= terms(best.quote or ""):
            lines += [
                ln
                for ln in self.facts.lines_of("speech", best.node.video)
                if ln.node.id != best.node.id and ln.who and words <= terms(ln.quote or "")
            ]
        lines.sort(key=lambda ln: ln.start or 0.0)
        said = _join(
            [f"{self.name(ln.who[0])} says {quoted(ln)} {cite(self.facts, ln)}" for ln in lines[:CITE_MAX]]
        )
        return Answer(said + ".", lines[:CITE_MAX], "")

    def _a_at_time(self, question: str, form: Form) -> Answer | None:
        t = float(form.time or 0.0)
        videos = [self.scope.video] if self.scope.video else self._videos()
        hits: list[Line] = []
        for v in videos:
            speech = [ln for ln in self.facts.lines_of("speech", v) if _overlaps(ln, t, t)]
            if not speech:
                speech = [ln for ln in self.facts.lines_of("turn", v) if _overlaps(ln, t, t)]
            hits += speech
        if not hits:
            near = sorted(
                [ln for ln in self.facts.lines if ln.kind in ("speech", "turn") and ln.start is not None],
                key=lambda ln: _gap(ln, t),
            )[:1]
            if not near:
                return None
            return Answer(
                f"Nobody speaks at {t:g} s; the nearest line is {_line_text(self, near[0])} "
                + f"{cite(self.facts, near[0])}.",
                near,
                "",
                supported=False,
            )
        if form.detail == "who":
            people = list(dict.fromkeys(p for ln in hits for p in ln.who))
            return Answer(
                f"{_join([self.name(p) for p in people])} {'is' if len(people) == 1 else 'are'} speaking at "
                f"{t:g} s {_cites(self, hits)}.",
                hits,
                "",
            )
        return Answer(
            f"At {t:g} s " + _join([f"{_line_text(self, ln)} {cite(self.facts, ln)}" for ln in hits]) + ".",
            hits,
            "",
        )


def _spans(a: Answerer, lines: list[Line]) -> str:
    """A visible line's own spans (several when the line lists them), each cited with its line."""
    out = []
    for ln in lines[:CITE_MAX]:
        spans: Sequence[tuple[float | None, float | None]] = ln.spans or [(ln.start, ln.end)]
        out.append(
            _join([f"from {fmt_s(s0)} to {fmt_s(s1)} s" for s0, s1 in spans]) + f" {cite(a.facts, ln)}"
        )
    return _join(out)


def _topic(question: str, people: People) -> str:
    return people.strip_refs(question)


def _has_topic(question: str, people: People) -> bool:
    rest = terms(people.strip_refs(question)) - {
        stem for stem in terms("speak talk say voice heard person first last time")
    }
    return bool(rest)
