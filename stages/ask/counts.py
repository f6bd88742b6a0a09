"""Answers to how many and in what order: people, turns, times a word is said, who speaks first or most.

These handlers count and order the memory's speaking turns and appearance lines
(:class:`~m3cli.stages.ask.facts.Turn`); they share nothing with the handlers of what was said or seen
beyond :class:`~m3cli.stages.ask.answerer.Answerer`, and their wording of numbers ("twice",
"2 speakers", "There is 1 person") is theirs alone.
"""

from __future__ import annotations

from m3cli.stages.ask.answerer import Answerer
from m3cli.stages.ask.facts import Line, Turn
from m3cli.stages.ask.forms import Form
from m3cli.stages.ask.route import _COUNT_WORDS
from m3cli.stages.ask.text import terms
from m3cli.stages.ask.wording import CITE_MAX, Answer, _cites, _join, _say, fmt_s


class CountAnswers(Answerer):
    """The handlers of count and order questions (``_a_<kind>``, found by the form's kind)."""

    def _a_count_people(self, question: str, form: Form) -> Answer | None:
        parts, cited = [], []
        if form.detail.startswith("times:"):
            return self._count_with_turns(int(form.detail.split(":")[1]))
        for v in self._videos():
            speakers = {t.person for t in self.facts.turns[v]}
            seen = {p for ln in self.facts.lines_of("visible", v) for p in ln.who}
            chosen = (
                speakers
                if form.detail == "speakers"
                else seen
                if form.detail == "visible"
                else speakers | seen
            )
            if not chosen:
                continue
            people = sorted(chosen, key=self.facts.people.order_key)
            what = {"speakers": "speaker", "visible": "visible person"}.get(form.detail, "person")
            word = (
                "people"
                if what == "person" and len(people) != 1
                else _plural(len(people), what).split(" ", 1)[1]
            )
            lines = self._first_lines(v, people, form.detail)
            cited += lines
            parts.append(
                f"{len(people)} {word}{self._in(v)} ({', '.join(self.name(p) for p in people)}) "
                + _cites(self, lines)
            )
        if not parts:
            return None
        return Answer(_there(parts) + "; ".join(parts) + ".", cited, "")

    def _count_with_turns(self, n: int) -> Answer | None:
        parts, cited = [], []
        for v in self._videos():
            counts: dict[str, list[Turn]] = {}
            for t in self.facts.turns[v]:
                counts.setdefault(t.person, []).append(t)
            hits = sorted((p for p, ts in counts.items() if len(ts) == n), key=self.facts.people.order_key)
            if not counts:
                continue
            lines = [t.lines[0] for p in hits for t in counts[p]]
            cited += lines
            who = f" ({_join([self.name(p) for p in hits])})" if hits else ""
            parts.append(f"{len(hits)}{self._in(v)}{who} {_cites(self, lines)}".rstrip())
        if not parts:
            return None
        return Answer(f"{'; '.join(parts)} speak {_times(n)}.", cited, "")

    def _first_lines(self, video: str, people: list[str], detail: str) -> list[Line]:
        out = []
        for p in people:
            src = []
            if detail != "visible":
                src = [t.lines[0] for t in self.facts.turns[video] if t.person == p]
            if not src and detail != "speakers":
                src = [ln for ln in self.facts.lines_of("visible", video) if p in ln.who]
            if src:
                out.append(src[0])
        return out

    def _a_count_times(self, question: str, form: Form) -> Answer | None:
        refs = self.refs(question)
        if not refs:
            return self._a_count_turns(question, form)
        p = refs[0]
        turns = [t for t in self.facts.turns.get(p.video, []) if t.person == p.id]
        if not turns:
            return None
        lines = [t.lines[0] for t in turns]
        spans = ", ".join(f"{fmt_s(t.start)}-{fmt_s(t.end)} s" for t in turns)
        return Answer(
            f"{self.name(p.id)} speaks {_times(len(turns))}{self._in(p.video)} ({spans}) "
            + f"{_cites(self, lines)}.",
            lines,
            "",
        )

    def _a_count_said(self, question: str, form: Form) -> Answer | None:
        """How many times words were said: the speech lines holding every content word of the topic
        (one memory line per utterance, so per occurrence), by whom; restricted to a person the question
        names ("how many times does the first speaker say ...")."""
        refs = self.refs(question)
        want = terms(self.facts.people.strip_refs(form.topic)) - _COUNT_WORDS
        if not want:
            return None
        parts, cited = [], []
        for v in self._videos():
            lines = [
                ln
                for ln in self.facts.lines_of("speech", v)
                if ln.who
                and want <= terms(ln.quote or "")
                and (not refs or any(r.id == ln.who[0] for r in refs))
            ]
            if not lines:
                continue
            cited += lines[:CITE_MAX]  # the lines the answer quotes
            who = _join([self.name(p) for p in dict.fromkeys(ln.who[0] for ln in lines)])
            parts.append(f"{_times(len(lines))}{self._in(v)}, by {who}: {_say(self.facts, lines)}")
        if not parts:
            return None
        return Answer(f'"{form.topic}" is said ' + "; ".join(parts) + ".", cited, "")

    def _a_count_turns(self, question: str, form: Form) -> Answer | None:
        parts, cited = [], []
        for v in self._videos():
            turns = self.facts.turns[v]
            if turns:
                cited += [t.lines[0] for t in turns]
                parts.append(f"{_plural(len(turns), 'speaking turn')}{self._in(v)}")
        if not parts:
            return None
        return Answer(_there(parts) + "; ".join(parts) + f" {_cites(self, cited)}.", cited, "")

    def _a_who_times(self, question: str, form: Form) -> Answer | None:
        n = int(form.detail)
        parts, cited = [], []
        for v in self._videos():
            counts: dict[str, list[Turn]] = {}
            for t in self.facts.turns[v]:
                counts.setdefault(t.person, []).append(t)
            hits = [p for p, ts in counts.items() if len(ts) == n]
            for p in sorted(hits, key=self.facts.people.order_key):
                lines = [t.lines[0] for t in counts[p]]
                cited += lines
                parts.append(f"{self.name(p)}{self._in(v)} {_cites(self, lines)}")
        if not parts:
            return None
        verb = "speaks" if len(parts) == 1 else "speak"
        return Answer(f"{_join(parts)} {verb} {_times(n)}.", cited, "")

    def _a_order(self, question: str, form: Form) -> Answer | None:
        order, kind = form.detail.split(":")
        parts, cited = [], []
        for v in self._videos():
            if kind == "visible":
                firsts: dict[str, Line] = {}
                for ln in self.facts.lines_of("visible", v):
                    for p in ln.who:
                        firsts.setdefault(p, ln)
                seq = sorted(firsts, key=lambda p: firsts[p].start or 0.0)
                pick = _pick(seq, order)
                if pick is None:
                    continue
                cited.append(firsts[pick])
                parts.append(f"{self.name(pick)} is seen {order}{self._in(v)} {_cites(self, [firsts[pick]])}")
                continue
            turns = self.facts.turns[v]
            if not turns:
                continue
            if order in ("most", "least", "longest", "shortest"):
                total: dict[str, float] = {}
                for t in turns:
                    total[t.person] = total.get(t.person, 0.0) + (t.end - t.start)
                if order in ("most", "longest"):
                    pick = max(total, key=lambda p: (total[p], -self.facts.people.order_key(p)[0]))
                else:
                    pick = min(total, key=lambda p: (total[p], self.facts.people.order_key(p)[0]))
                lines = [t.lines[0] for t in turns if t.person == pick]
                cited += lines
                parts.append(
                    f"{self.name(pick)} speaks {order if order != 'most' else 'the most'}{self._in(v)} "
                    f"({total[pick]:.1f} s in {_plural(len(lines), 'turn')}) {_cites(self, lines)}"
                )
                continue
            if order == "last":
                turn = turns[-1]
            else:
                idx = {"first": 0, "second": 1, "third": 2, "fourth": 3}[order]
                if idx >= len(turns):
                    continue
                turn = turns[idx]
            cited.append(turn.lines[0])
            said = f"{self.name(turn.person)} speaks {order}{self._in(v)}"
            parts.append(f"{said} {_cites(self, [turn.lines[0]])}")
        if not parts:
            return None
        return Answer("; ".join(parts) + ".", cited, "")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _times(n: int) -> str:
    return {1: "once", 2: "twice"}.get(n, f"{n} times")


def _pick(seq: list[str], order: str) -> str | None:
    if not seq:
        return None
    if order == "last":
        return seq[-1]
    idx = {"first": 0, "second": 1, "third": 2, "fourth": 3}.get(order, 0)
    return seq[idx] if idx < len(seq) else None


def _there(parts: list[str]) -> str:
    """ "There is" before a single count of one ("1 person"), else "There are"."""
    return "There is " if len(parts) == 1 and parts[0].startswith("1 ") else "There are "
