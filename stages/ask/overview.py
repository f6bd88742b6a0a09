"""Answers to the first questions a user asks: who is in it, who speaks, what was said, what it is about.

The forms are read in :mod:`m3cli.stages.ask.forms`; each handler here answers one from the memory's
lines and records, citing the lines it rests on, like the handlers of
:class:`m3cli.stages.ask.offline.OfflineAnswerer`:

- who is in the video, who speaks, what was said, what the video is about, what text was on screen,
  which language each person speaks, how long they speak or are seen, with whom they speak.

Absence as an answer is worded in :mod:`m3cli.stages.ask.absence`, and the people a question
describes are resolved in :mod:`m3cli.stages.ask.described`.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from m3cli.stages.ask.absence import (
    _TEXT_QUOTE,
    _absent,
    _covered,
    _file,
    _no_record,
    _nobody_in,
    _none_of,
    _videos,
)
from m3cli.stages.ask.described import (
    CannotTell,
    _candidates,
    _cannot,
    _person_summary,
    _seen,
    _seen_spans,
    _speakers,
    describe,
)
from m3cli.stages.ask.facts import Line, _overlaps
from m3cli.stages.ask.forms import Form
from m3cli.stages.ask.people import Person
from m3cli.stages.ask.wording import CITE_MAX, Answer, _cites, _join, _line_text, cite, fmt_s, quoted

if TYPE_CHECKING:
    from m3cli.stages.ask.answerer import Answerer


# ============================================================================== the forms


def who_in(a: Answerer, question: str, form: Form) -> Answer:
    """Everyone the memory hears or sees in the video, with when; absence stated where nobody is."""
    parts, cited = [], []
    for v in _videos(a):
        people = sorted(set(_speakers(a, v)) | set(_seen(a, v)), key=a.facts.people.order_key)
        if not people:
            text, lines = _nobody_in(a, v, count=False)
            parts.append(text)
            cited += lines
            continue
        said = []
        for p in people:
            text, lines = _person_summary(a, v, p)
            said.append(text)
            cited += lines
        notes = []
        pictureless = _absent(a, v, "pictures")  # an audio-only recording: people are heard, never seen
        if not _seen(a, v) and pictureless:
            notes.append("the recording has no pictures, so they are only heard")
            cited += pictureless[:1]
        elif not _seen(a, v) and _absent(a, v, "faces"):
            notes.append("no face is seen")
            cited += _absent(a, v, "faces")[:1]
        if not _speakers(a, v) and _absent(a, v, "speech"):
            notes.append("nobody speaks")
            cited += _absent(a, v, "speech")[:1]
        n = len(people)
        note = f"; {', '.join(notes)}" if notes else ""
        parts.append(f"{n} {'person' if n == 1 else 'people'}{a._in(v)}: {_join(said)}{note}")
    text = "; ".join(parts)
    return Answer(f"{text} {_cites(a, cited)}.", cited, "", supported=bool(cited))


def who_speaks(a: Answerer, question: str, form: Form) -> Answer | None:
    parts, cited = [], []
    for v in _videos(a):
        people = _speakers(a, v)
        if not people:
            continue
        said = []
        for p in people:
            turns = [t for t in a.facts.turns[v] if t.person == p]
            said.append(
                f"{a.name(p)} ({sum(t.end - t.start for t in turns):.1f} s from {fmt_s(turns[0].start)} s)"
            )
            cited.append(turns[0].lines[0])
        n = len(people)
        parts.append(f"{n} {'person speaks' if n == 1 else 'people speak'}{a._in(v)}: {_join(said)}")
    if not parts:
        return _none_of(a, "speech")
    return Answer("; ".join(parts) + f" {_cites(a, cited)}.", cited, "")


def said_all(a: Answerer, question: str, form: Form) -> Answer | None:
    """What was said: every speech line in order (the first few quoted), and the stretches heard but not
    transcribed; "nothing is said" where the memory says so."""
    parts, cited = [], []
    for v in _videos(a):
        speech = a.facts.lines_of("speech", v)
        heard = [
            ln
            for ln in a.facts.lines_of("turn", v)
            if not any(_overlaps(s, ln.start or 0, ln.end or 0) for s in speech)
        ]
        if not speech and not heard:
            continue
        shown = speech[:CITE_MAX]
        bits = [
            f"{a.name(ln.who[0]) if ln.who else 'someone'} says {quoted(ln)} {cite(a.facts, ln)}"
            for ln in shown
        ]
        if len(speech) > CITE_MAX:
            bits.append(f"{len(speech) - CITE_MAX} more line(s)")
        if heard:
            bits.append(f"{len(heard)} stretch(es) heard but not transcribed {_cites(a, heard)}")
        cited += shown + heard[:2]
        parts.append(f"{a._in(v).strip().capitalize() + ': ' if a._multi() else ''}{_join(bits)}")
    if not parts:
        return _none_of(a, "speech")
    return Answer("; ".join(parts) + ".", cited, "")


def summary(a: Answerer, question: str, form: Form) -> Answer:
    """The memory's own summary of the video (its global summary line, else its clip summaries), with
    who is in it and any text on screen."""
    parts, cited = [], []
    for v in _videos(a):
        glob = [ln for ln in a.facts.lines if ln.node.video == v and ln.node.kind == "global"]
        clips = [ln for ln in a.facts.lines if ln.node.video == v and ln.node.kind == "clip"]
        use = glob[-1:] or clips[:CITE_MAX]
        if use:
            cited += use
            parts.append(
                f"{a._in(v).strip().capitalize() + ': ' if a._multi() else ''}"
                + " ".join(_line_text(a, ln) + "." for ln in use)
            )
            continue
        # no summary line: the memory's structure says who speaks and is seen, and what is on screen
        people = who_in(a, question, form)
        cited += people.cited
        screen = [ln for ln in a.facts.lines_of("sight", v)][:3]
        cited += screen
        text = people.text
        if screen:
            text += " On screen: " + "; ".join(_line_text(a, ln) for ln in screen) + "."
        parts.append(text)
    if not parts:
        return Answer("The memory holds no summary and no lines of this video.", [], "", supported=False)
    return Answer(
        " ".join(parts) + (f" {_cites(a, cited)}" if cited and "(" not in parts[-1][-40:] else ""), cited, ""
    )


def text_on_screen(a: Answerer, question: str, form: Form) -> Answer:
    """What text sight read: every on-screen line (at the time asked, if any); "no text is on screen"
    where sight read the clip's keyframes and found none; a title question takes the title card, the
    text that stays on screen longest in the largest letters the memory knows (its last line)."""
    t = form.time
    parts, cited = [], []
    for v in _videos(a):
        lines = [ln for ln in a.facts.lines_of("sight", v) if _TEXT_QUOTE.search(ln.text)]
        if t is not None:
            inside, span = _covered(a, v, t)
            if not inside:
                parts.append(f"the memory of {_file(a, v)} does not cover {t:g} s (it holds {span})")
                continue
            lines = [ln for ln in lines if _overlaps(ln, t, t)]
        if lines:
            if form.detail == "title":
                # the title card: the credits come first ("X presents"), the title after them
                lines = [
                    ln for ln in lines if not re.search(r"\bpresents?\b|\bproduc|\bstudio", ln.text, re.I)
                ] or lines
                lines = lines[-1:]
            cited += lines[:CITE_MAX]
            quotes = [
                f"{m.group('q').strip()} {cite(a.facts, ln)}"
                for ln in lines[:CITE_MAX]
                if (m := _TEXT_QUOTE.search(ln.text))
            ]
            lead = "The title on screen is" if form.detail == "title" else "On screen"
            at = f" at {t:g} s" if t is not None else ""
            parts.append(f"{lead}{at}{a._in(v)}: {_join(quotes)}")
            continue
        absent = _absent(a, v, "text", t)
        if t is not None and not absent and a.facts.lines_of("sight", v):
            # text was read elsewhere in the video, none at t: say what was looked at, not "no text"
            said, near = _nothing_read_at(a, v, t)
            cited += near
            parts.append(said)
            continue
        if absent:
            cited += absent
            at = f" at {t:g} s" if t is not None else ""
            read = [
                m.group(1) for ln in absent if (m := re.search(r"\((\d+ keyframes? read[^)]*)\)", ln.text))
            ]
            how = f": {'; '.join(read)}" if read else ""
            parts.append(f"no text is on screen{at}{a._in(v)}{how} {_cites(a, absent)}".rstrip())
            continue
        parts.append(_no_record(a, v, "text"))
    text = "; ".join(parts)
    return Answer(text[:1].upper() + text[1:] + ".", cited, "", supported=bool(cited))


#: how far from the time asked (s) the nearest text read is still worth naming
NEAR_TEXT_S = 10.0


def _nothing_read_at(a: Answerer, video: str, t: float) -> tuple[str, list[Line]]:
    """Why the memory has no text at ``t`` of a video where sight read text elsewhere: the keyframe that
    stood for that moment and when it was taken (a picture sampled once per stretch can miss text that
    fades in after it), and the nearest text read, with its lines. Never "no text is on screen": nothing
    read at one keyframe is not nothing shown."""
    looked = ""
    keyframes = getattr(a.memory, "keyframes", None)
    for frames in (keyframes(video) if keyframes else {}).values():
        for k in frames or []:
            if float(k.get("start", 0.0)) <= t < float(k.get("end", 0.0)) and not k.get("text"):
                looked = (
                    f": the picture sampled at {fmt_s(float(k['t']))} s stands for "
                    f"{fmt_s(float(k['start']))}-{fmt_s(float(k['end']))} s and shows none"
                )
    said = f"no text was read at {t:g} s{a._in(video)}{looked}"

    def gap(ln: Line) -> float:
        return min(abs(float(ln.start or 0.0) - t), abs(float(ln.end or 0.0) - t))

    lines = [
        ln for ln in a.facts.lines_of("sight", video) if _TEXT_QUOTE.search(ln.text) and ln.start is not None
    ]
    nearest = min(lines, key=gap, default=None)
    if nearest is None or gap(nearest) > NEAR_TEXT_S:
        return said, []
    m = _TEXT_QUOTE.search(nearest.text)
    assert m is not None
    return f"{said}; the nearest text read is {m.group('q').strip()} {cite(a.facts, nearest)}", [nearest]


def _languages(a: Answerer, video: str) -> dict[str, dict[str, list[Line]]]:
    """Person -> language -> the lines it was heard in. A transcribed line with no language note is
    English: the memory notes every other language ("says (in Portuguese)")."""
    out: dict[str, dict[str, list[Line]]] = {}
    for ln in a.facts.lines_of("speech", video) + a.facts.lines_of("turn", video):
        if not ln.who:
            continue
        lang = ln.language or ("English" if ln.kind == "speech" and not ln.note else "")
        if lang:
            out.setdefault(ln.who[0], {}).setdefault(lang, []).append(ln)
    return out


def language(a: Answerer, question: str, form: Form) -> Answer | None:
    """The language each person speaks, from the speech stage's lines; "who speaks Spanish"; "what
    languages are spoken"."""
    wanted = form.detail
    refs = [] if wanted and re.match(r"\s*who\b", question, re.I) else a.refs(question)
    parts, cited = [], []
    for v in _videos(a):
        langs = _languages(a, v)
        if refs:
            for p in [r for r in refs if r.video == v]:
                got = langs.get(p.id, {})
                if not got:
                    parts.append(
                        f"the memory holds no language for {a.name(p.id)}{a._in(v)} (no words of theirs were read)"  # noqa: E501
                    )
                    continue
                lines = [ln for ls in got.values() for ln in ls[:1]]
                cited += lines
                parts.append(f"{a.name(p.id)} speaks {_join(sorted(got))}{a._in(v)} {_cites(a, lines)}")
            continue
        if wanted and re.match(r"\s*who\b", question, re.I):
            who = [p for p, got in langs.items() if wanted in got]
            who.sort(key=a.facts.people.order_key)
            lines = [langs[p][wanted][0] for p in who]
            cited += lines
            if who:
                parts.append(
                    f"{_join([a.name(p) for p in who])} speak{'s' if len(who) == 1 else ''} {wanted}{a._in(v)} {_cites(a, lines)}"  # noqa: E501
                )
            continue
        if not langs:
            continue
        each = []
        for pid in sorted(langs, key=a.facts.people.order_key):
            lines = [ls[0] for ls in langs[pid].values()]
            cited += lines
            each.append(f"{a.name(pid)}: {_join(sorted(langs[pid]))} {_cites(a, lines)}")
        every = sorted({lang for got in langs.values() for lang in got})
        parts.append(
            f"{_join(every)} {'is' if len(every) == 1 else 'are'} spoken{a._in(v)} ({'; '.join(e.replace('(', '').replace(')', '') for e in each)})"  # noqa: E501
        )
    if not parts:
        if wanted and re.match(r"\s*who\b", question, re.I):
            return Answer(
                f"Nobody is heard speaking {wanted} in the memory's lines.", [], "", supported=False
            )
        return _none_of(a, "speech")
    text = "; ".join(parts)
    return Answer(text[:1].upper() + text[1:] + ".", cited, "")


def duration(a: Answerer, question: str, form: Form) -> Answer | None:
    """How long a person speaks (the sum of their turns) or is seen (their visible spans)."""
    refs = a.refs(question)
    people: list[Person] = refs or [
        Person(v, p)
        for v in _videos(a)
        for p in (_speakers(a, v) if form.detail == "speech" else list(_seen(a, v)))
    ]
    if not people:
        return None
    parts, cited = [], []
    for p in people:
        if form.detail == "visible":
            lines = _seen(a, p.video).get(p.id, [])
            if not lines:
                parts.append(f"{a.name(p.id)} is not seen{a._in(p.video)} in the memory's lines")
                continue
            spans = _seen_spans(lines)
            total = sum(e - s for s, e in spans)
            cited += lines[:2]
            parts.append(
                f"{a.name(p.id)} is seen for {total:.1f} s{a._in(p.video)} ("
                + ", ".join(f"{fmt_s(s)}-{fmt_s(e)} s" for s, e in spans[:4])
                + f") {_cites(a, lines[:2])}"
            )
        else:
            turns = [t for t in a.facts.turns.get(p.video, []) if t.person == p.id]
            if not turns:
                parts.append(f"{a.name(p.id)} is not heard speaking{a._in(p.video)}")
                continue
            lines = [t.lines[0] for t in turns]
            cited += lines[:2]
            total = sum(t.end - t.start for t in turns)
            parts.append(
                f"{a.name(p.id)} speaks for {total:.1f} s{a._in(p.video)} in {len(turns)} turn{'s' if len(turns) != 1 else ''} ("  # noqa: E501
                + ", ".join(f"{fmt_s(t.start)}-{fmt_s(t.end)} s" for t in turns[:4])
                + f") {_cites(a, lines[:2])}"
            )
    return Answer("; ".join(parts) + ".", cited, "", supported=bool(cited))


def with_whom(a: Answerer, question: str, form: Form) -> Answer | None:
    """Whom a person speaks with: the others who speak in the same clips, turn after turn."""
    refs = a.refs(question)
    if not refs:
        return None
    p = refs[0]
    turns = a.facts.turns.get(p.video, [])
    mine = [t for t in turns if t.person == p.id]
    if not mine:
        return None
    clips = {ln.node.clip for t in mine for ln in t.lines}
    others = [t for t in turns if t.person != p.id and any(ln.node.clip in clips for ln in t.lines)]
    who = sorted({t.person for t in others}, key=a.facts.people.order_key)
    if not who:
        return Answer(
            f"{a.name(p.id)} is the only one who speaks{a._in(p.video)} {_cites(a, [mine[0].lines[0]])}.",
            [mine[0].lines[0]],
            "",
        )
    cited = [mine[0].lines[0]] + [next(t for t in others if t.person == w).lines[0] for w in who]
    return Answer(
        f"{a.name(p.id)} speaks with {_join([a.name(w) for w in who])}{a._in(p.video)} (they take turns in the same clips) {_cites(a, cited)}.",  # noqa: E501
        cited,
        "",
    )


def about(a: Answerer, question: str, form: Form) -> Answer:
    """ "Who is <character_2>?": what the memory holds of the person the id names (how long they speak
    and are seen, and the first thing they say), from their own lines only; an id the memory does not
    hold is said so."""
    people = [p for p in a.facts.people.find(form.detail, a.facts.turns) if p.video in _videos(a)]
    if not people:
        return Answer(f"The memory holds no {form.detail}.", [], "", supported=False)
    parts, cited = [], []
    for p in people:
        text, lines = _person_summary(a, p.video, p.id)
        said = [ln for ln in a.facts.lines_of("speech", p.video) if p.id in ln.who]
        if said:
            text += f", first says {quoted(said[0])}"
            lines = [*lines, said[0]]
        if not lines:
            text = f"{a.name(p.id)}, of whom the memory holds no line of speech or sight"
        parts.append(f"{text}{a._in(p.video)} {_cites(a, lines)}".rstrip())
        cited += lines
    return Answer("; ".join(parts) + ".", cited, "", supported=bool(cited))


def who_is(a: Answerer, question: str, form: Form) -> Answer | None:
    """ "Who is the pianist?": the described person if the memory can tell, else "cannot tell" and the
    candidates."""
    people = describe(a, f"the {form.detail}", strict=True)
    if not people:  # a role the describer has no word for ("the reciter"): nothing says who holds it
        raise _cannot(
            a, f"the {form.detail}", f"nothing in the memory says who is the {form.detail}", _candidates(a)
        )
    p = people[0]
    text, lines = _person_summary(a, p.video, p.id)
    return Answer(f"The {form.detail} is {text}{a._in(p.video)} {_cites(a, lines)}.", lines, "")


def quote(a: Answerer, question: str, form: Form) -> Answer | None:
    """The line of speech the answer lies in: the best match for the question's words among the lines
    said (by the person the question names, if any), when one reaches the threshold."""
    try:
        refs = a.refs(question)
    except CannotTell:
        refs = []
    topic = a.facts.people.strip_refs(question)
    ranked = a.ranked(topic, ("speech",))
    if refs:
        ranked = [(sc, ln) for sc, ln in ranked if ln.who and any(r.id == ln.who[0] for r in refs)]
    ranked = [(sc, ln) for sc, ln in ranked if a.supported(topic, ln)]
    if not ranked:
        return None
    best = ranked[0][1]
    who = a.name(best.who[0]) if best.who else "Someone"
    return Answer(
        f"{who} says {quoted(best)} {cite(a.facts, best)} (the line of speech nearest the question).",
        [best],
        "",
    )


def decline(a: Answerer, question: str, form: Form) -> Answer:
    """A question that needs more than the memory's structure: the nearest lines, and the reason."""
    ans = a._a_fallback(question, form)
    why = f"This question {form.detail}."
    if ans.supported:
        ans.text = f"{ans.text} (The nearest line, not an answer: this question {form.detail}.)"
    else:
        ans.text = f"{ans.text} {why}"
    return ans


HANDLERS = {
    "text": text_on_screen,
    "summary": summary,
    "who_in": who_in,
    "who_speaks": who_speaks,
    "said_all": said_all,
    "language": language,
    "duration": duration,
    "with_whom": with_whom,
    "about": about,
    "who_is": who_is,
    "decline": decline,
    "quote": quote,
}
