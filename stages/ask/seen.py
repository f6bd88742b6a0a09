"""Answers to who and what is seen: who is visible, what is on screen at a time, who is seen while
someone speaks (and who speaks while someone is seen).

These handlers read the appearance and sight lines by their own spans (a line may list several), not the
speaking turns; they build on :class:`~m3cli.stages.ask.answerer.Answerer` beside the handlers of counts
(:mod:`~m3cli.stages.ask.counts`) and of what was said (:mod:`~m3cli.stages.ask.said`).
"""

from __future__ import annotations

from m3cli.stages.ask.answerer import Answerer
from m3cli.stages.ask.facts import Line, _gap, _overlaps, seen_during
from m3cli.stages.ask.forms import Form
from m3cli.stages.ask.wording import CITE_MAX, Answer, _cites, _join, _line_text, cite, fmt_s


class SeenAnswers(Answerer):
    """The handlers of who-and-what-is-seen questions (``_a_<kind>``, found by the form's kind)."""

    def _a_cross(self, question: str, form: Form) -> Answer | None:
        refs = self.refs(question)
        if form.detail == "visible_while_speaking":
            people = [r for r in refs] or None
            out, cited = [], []
            for v in self._videos():
                turns = [
                    t for t in self.facts.turns[v] if people is None or any(r.id == t.person for r in people)
                ]
                for t in turns[:CITE_MAX]:
                    seen = [ln for ln in self.facts.lines_of("visible", v) if seen_during(ln, t.start, t.end)]
                    who = sorted({p for ln in seen for p in ln.who}, key=self.facts.people.order_key)
                    if not who:
                        continue
                    cited += [t.lines[0], *seen[:2]]
                    out.append(
                        f"while {self.name(t.person)} speaks ({fmt_s(t.start)}-{fmt_s(t.end)} s) "
                        f"{_join([self.name(p) for p in who])} {'is' if len(who) == 1 else 'are'} visible"
                    )
            if not out:
                return None
            text = "; ".join(out)
            return Answer(text[0].upper() + text[1:] + f" {_cites(self, cited)}.", cited, "")
        # who speaks while someone is visible
        if not refs:
            return None
        p = refs[0]
        vis = [ln for ln in self.facts.lines_of("visible", p.video) if p.id in ln.who]
        spoken = [
            t for t in self.facts.turns.get(p.video, []) if any(seen_during(ln, t.start, t.end) for ln in vis)
        ]
        if not spoken:
            return None
        who = list(dict.fromkeys(t.person for t in spoken))
        cited = vis[:1] + [t.lines[0] for t in spoken]
        return Answer(
            f"While {self.name(p.id)} is visible, {_join([self.name(w) for w in who])} speak"
            f"{'s' if len(who) == 1 else ''} {_cites(self, cited)}.",
            cited,
            "",
        )

    def _a_who_visible(self, question: str, form: Form) -> Answer | None:
        parts, cited = [], []
        for v in self._videos():
            vis = self.facts.lines_of("visible", v)
            first: dict[str, Line] = {}
            for ln in vis:
                for p in ln.who:
                    first.setdefault(p, ln)
            if not first:
                continue
            people = sorted(first, key=self.facts.people.order_key)
            lines = list(dict.fromkeys(first[p].node.id for p in people))
            used = [next(ln for ln in vis if ln.node.id == i) for i in lines]
            cited += used
            parts.append(f"{_join([self.name(p) for p in people])}{self._in(v)} {_cites(self, used)}")
        if not parts:
            return None
        return Answer("Visible: " + "; ".join(parts) + ".", cited, "")

    def _a_seen(self, question: str, form: Form) -> Answer | None:
        if form.time is not None:
            return self._seen_at(float(form.time), people_only=form.detail == "who_at")
        sights = self.facts.lines_of("sight")
        if sights:
            ranked = self.ranked(question, ("sight",))
            best = [ln for _, ln in ranked[:2]] or sights[:2]
            return Answer(
                "Seen: " + _join([f"{_line_text(self, ln)} {cite(self.facts, ln)}" for ln in best]) + ".",
                best,
                "",
            )
        return self._a_who_visible(question, form)

    def _seen_at(self, t: float, people_only: bool = False) -> Answer | None:
        """What is seen at a time: the sight lines whose span holds it (text on screen, tags), and the
        people visible then (their appearance lines' own spans)."""
        videos = [self.scope.video] if self.scope.video else self._videos()
        sights = [ln for v in videos for ln in self.facts.lines_of("sight", v) if _overlaps(ln, t, t)]
        sights = [] if people_only else sights
        faces = [
            ln
            for v in videos
            for ln in self.facts.lines_of("visible", v)
            if any(a <= t <= b for a, b in (ln.spans or [(ln.start or 0.0, ln.end or 0.0)]))
        ]
        if not sights and not faces:
            near = sorted(
                (ln for v in videos for ln in self.facts.lines_of("sight", v) if ln.start is not None),
                key=lambda ln: _gap(ln, t),
            )[:1]
            if not near:
                return None
            return Answer(
                f"Nothing is recorded as seen at {t:g} s; the nearest is {_line_text(self, near[0])} "
                f"{cite(self.facts, near[0])}.",
                near,
                "",
                supported=False,
            )
        parts = [f"{_line_text(self, ln)} {cite(self.facts, ln)}" for ln in sights[:CITE_MAX]]
        who = sorted({p for ln in faces for p in ln.who}, key=self.facts.people.order_key)
        if who:
            verb = "is" if len(who) == 1 else "are"
            parts.append(f"{_join([self.name(p) for p in who])} {verb} visible {_cites(self, faces)}")
        return Answer(f"At {t:g} s: " + "; ".join(parts) + ".", sights[:CITE_MAX] + faces[:CITE_MAX], "")
