"""Answers to the first questions a user asks, absence as an answer, and people as a question describes them.

The forms are read in :mod:`m3cli.stages.ask.forms`; each handler here answers one from the memory's
lines and records, citing the lines it rests on, like the handlers of
:class:`m3cli.stages.ask.offline.OfflineAnswerer`:

- who is in the video, who speaks, what was said, what the video is about, what text was on screen,
  which language each person speaks, how long they speak or are seen, with whom they speak;
- absence: "nobody is seen", "nothing is said", "no text is on screen" are stated (and cited) where the
  memory holds the line a stage wrote when it looked over a clip and found nothing; where it holds no
  such line, the answer says that the stage left no record there, and where the question's time lies
  outside the clips, that the memory does not cover it. The three are told apart by the memory's own
  lines and clips, never assumed;
- people described ("the woman", "the man on the left", "the person who mentioned Disneyland"): resolved
  from what the memory holds (where each face is in the picture, who said what, the order of speaking,
  names). When the description fits several people, or asks what the memory does not record (who is a
  woman, who plays the piano), the answer says it cannot tell and lists the candidates with their lines.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from m3cli.stages.ask.forms import Form
from m3cli.stages.ask.offline import (
    CITE_MAX,
    Answer,
    Line,
    _cites,
    _join,
    _line_text,
    _overlaps,
    cite,
    fmt_s,
    quoted,
)
from m3cli.stages.ask.people import Person
from m3cli.stages.ask.text import terms

if TYPE_CHECKING:
    from m3cli.stages.ask.offline import OfflineAnswerer


class CannotTell(Exception):  # noqa: N818 (an outcome, not a failure: the answer says so)
    """The question describes a person the memory cannot pick out; ``answer`` says so with the candidates."""

    def __init__(self, answer: Answer):
        super().__init__(answer.text)
        self.answer = answer


# ============================================================================== helpers


def _videos(a: OfflineAnswerer) -> list[str]:
    return [a.scope.video] if a.scope.video else a._videos()


def _absent(a: OfflineAnswerer, video: str, what: str, t: float | None = None) -> list[Line]:
    """The memory's lines saying a stage found no face / no text / no speech in a clip of ``video``
    (covering ``t`` when given)."""
    prefix = {
        "faces": "no face is seen",
        "text": "no text is on screen",
        "speech": "nothing is said",
        "pictures": "the recording has no pictures",
    }[what]
    out = []
    for ln in a.facts.lines_of("absent", video):
        low = ln.text.lower()
        if (
            low.startswith(prefix)
            or (what == "speech" and low.startswith("the clip has no sound"))
            or (what == "faces" and low.startswith("the recording has no pictures"))
        ):
            if t is None or _overlaps(ln, t, t):
                out.append(ln)
    return out


def _clips(a: OfflineAnswerer, video: str) -> list[Any]:
    reader = getattr(a.memory, "clips_of", None)
    return list(reader(video)) if reader else []


def _covered(a: OfflineAnswerer, video: str, t: float) -> tuple[bool, str]:
    """Whether the memory's clips of ``video`` cover second ``t``, and the span they cover."""
    clips = _clips(a, video)
    if not clips:
        return True, ""
    lo, hi = min(c.start for c in clips), max(c.end for c in clips)
    return any(c.start - 0.05 <= t <= c.end + 0.05 for c in clips), f"{fmt_s(lo)}-{fmt_s(hi)} s"


def uncovered(a: OfflineAnswerer, t: float) -> Answer | None:
    """ "The memory does not cover 90 s (it holds 0.0-20.0 s)" when no video of the scope has a clip
    holding second ``t``; None when one does (or the memory does not list its clips)."""
    spans = []
    for v in _videos(a):
        inside, span = _covered(a, v, t)
        if inside:
            return None
        spans.append(f"{_file(a, v)}: {span}")
    if not spans:
        return None
    return Answer(
        f"The memory does not cover {t:g} s (it holds {'; '.join(spans)}).", [], "", supported=False
    )


def _file(a: OfflineAnswerer, video: str) -> str:
    return a.facts.files.get(video, video)


def _no_record(a: OfflineAnswerer, video: str, what: str) -> str:
    stage = {
        "faces": "faces (`m3 faces`)",
        "text": "on-screen text (`m3 sight`)",
        "speech": "speech (`m3 diarize`)",
    }
    return (
        f"the memory of {_file(a, video)} holds no record that {stage[what]} looked at it, so it cannot say "
        f"whether {'anyone is seen' if what == 'faces' else 'any text is on screen' if what == 'text' else 'anything is said'}"  # noqa: E501
    )


def _speakers(a: OfflineAnswerer, video: str) -> list[str]:
    return sorted({t.person for t in a.facts.turns.get(video, [])}, key=a.facts.people.order_key)


def _seen(a: OfflineAnswerer, video: str) -> dict[str, list[Line]]:
    out: dict[str, list[Line]] = {}
    for ln in a.facts.lines_of("visible", video):
        for p in ln.who:
            out.setdefault(p, []).append(ln)
    return out


def _spoken_s(a: OfflineAnswerer, video: str, pid: str) -> float:
    return sum(t.end - t.start for t in a.facts.turns.get(video, []) if t.person == pid)


def _seen_spans(lines: list[Line]) -> list[tuple[float, float]]:
    spans: list[tuple[float, float]] = []
    for ln in lines:
        spans += ln.spans or (
            [(ln.start, ln.end if ln.end is not None else ln.start)] if ln.start is not None else []
        )
    spans.sort()
    merged: list[tuple[float, float]] = []
    for s, e in spans:
        if merged and s <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], e))
        else:
            merged.append((s, e))
    return merged


def _person_summary(a: OfflineAnswerer, video: str, pid: str) -> tuple[str, list[Line]]:
    """ "<character_1> (speaks 12.3 s in 2 turns from 0.3 s; seen from 0.0 to 10.0 s)" and its lines."""
    turns = [t for t in a.facts.turns.get(video, []) if t.person == pid]
    seen = _seen(a, video).get(pid, [])
    bits, lines = [], []
    if turns:
        total = sum(t.end - t.start for t in turns)
        n = len(turns)
        bits.append(f"speaks {total:.1f} s in {n} turn{'s' if n != 1 else ''} from {fmt_s(turns[0].start)} s")
        lines.append(turns[0].lines[0])
    if seen:
        spans = _seen_spans(seen)
        bits.append("seen " + _join([f"from {fmt_s(s)} to {fmt_s(e)} s" for s, e in spans[:3]]))
        lines.append(seen[0])
    return f"{a.name(pid)} ({'; '.join(bits)})", lines


# ============================================================================== absence


def absence_for(a: OfflineAnswerer, question: str, form: Form) -> Answer | None:
    """The answer when a handler found nothing: nobody seen / nothing said / no text, stated and cited where
    the memory's absence lines say so; else why it cannot say. None where absence is no answer."""
    kind = form.kind
    what = None
    if kind == "count_people":
        what = {"speakers": "speech", "visible": "faces"}.get(form.detail, "people")
    elif kind in ("who_visible", "cross") or (kind == "seen" and form.detail == "who_at"):
        what = "faces"
    elif kind in ("what_said", "who_said", "count_turns", "count_times", "order", "who_times", "said_all"):
        what = "speech"
    elif kind == "at_time":
        what = "speech"
    if what is None:
        return None
    if what == "people":
        if any(_heard_or_seen(a, v, "faces") or _heard_or_seen(a, v, "speech") for v in _videos(a)):
            return None
        return _nobody(a, count=True)
    return _none_of(a, what, form.time, count=kind == "count_people")


def _heard_or_seen(a: OfflineAnswerer, video: str, what: str) -> bool:
    """Whether the memory holds any positive line of this modality for the video (a face seen, a word
    or turn heard, a text read)."""
    if what == "faces":
        return bool(a.facts.lines_of("visible", video))
    if what == "speech":
        return bool(a.facts.turns.get(video) or a.facts.lines_of("speech", video))
    return any(_TEXT_QUOTE.search(ln.text) for ln in a.facts.lines_of("sight", video))


def _none_of(a: OfflineAnswerer, what: str, t: float | None = None, count: bool = False) -> Answer | None:
    """ "Nobody is seen" / "nothing is said" / "no text is on screen" per video of the scope, each cited by
    the absence lines; a time outside the clips, or a video with no record, is said as such."""
    parts, cited = [], []
    for v in _videos(a):
        where = a._in(v)
        if t is not None:
            inside, span = _covered(a, v, t)
            if not inside:
                parts.append(f"the memory of {_file(a, v)} does not cover {t:g} s (it holds {span})")
                continue
        lines = _absent(a, v, what, t)
        if t is None and _heard_or_seen(a, v, what):
            return None  # the stage found something in the video: one empty clip is not the answer
        if not lines:
            if _heard_or_seen(a, v, what):
                return None  # the stage ran and found something: absence is not the answer here
            parts.append(_no_record(a, v, what))
            continue
        cited += lines
        at = f" at {t:g} s" if t is not None else ""
        sound = any(ln.text.lower().startswith("the clip has no sound") for ln in lines)
        blind = all(ln.text.lower().startswith("the recording has no pictures") for ln in lines)
        said = {
            "faces": ("0 people are seen" if count else "nobody is seen")
            + f"{at}{where}"
            + (": the recording has no pictures" if blind else ": no face is seen"),
            "text": f"no text is on screen{at}{where}",
            "speech": ("0 people speak" if count else "nothing is said")
            + f"{at}{where}"
            + (": the clip has no sound" if sound else ": nobody speaks"),
        }[what]
        parts.append(f"{said} {_cites(a, lines)}")
    text = "; ".join(parts)
    return Answer(text[:1].upper() + text[1:] + ".", cited, "", supported=bool(cited))


def _nobody_in(a: OfflineAnswerer, v: str, count: bool) -> tuple[str, list[Line]]:
    """ "There are 0 people: nobody is seen or heard" for one video, with the absence lines it rests on."""
    faces, speech = _absent(a, v, "faces"), _absent(a, v, "speech")
    lead = "There are 0 people" if count else "Nobody is in the video"
    if faces and speech:
        return f"{lead}{a._in(v)}: nobody is seen or heard {_cites(a, faces + speech)}", faces + speech
    if faces:
        return f"{lead} seen{a._in(v)}: no face is seen {_cites(a, faces)}", faces
    if speech:
        return f"{lead} heard{a._in(v)}: nobody speaks {_cites(a, speech)}", speech
    text = _no_record(a, v, "faces")
    return text[:1].upper() + text[1:], []


def _nobody(a: OfflineAnswerer, count: bool) -> Answer:
    """ "0 people: nobody is seen or heard", cited by both absence lines, per video."""
    parts, cited = [], []
    for v in _videos(a):
        text, lines = _nobody_in(a, v, count)
        parts.append(text)
        cited += lines
    return Answer("; ".join(parts) + ".", cited, "", supported=bool(cited))


# ============================================================================== the forms


def who_in(a: OfflineAnswerer, question: str, form: Form) -> Answer:
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


def who_speaks(a: OfflineAnswerer, question: str, form: Form) -> Answer | None:
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


def said_all(a: OfflineAnswerer, question: str, form: Form) -> Answer | None:
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


def summary(a: OfflineAnswerer, question: str, form: Form) -> Answer:
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


_TEXT_QUOTE = re.compile(r"on screen:\s*(?P<q>.+)$", re.I | re.S)


def text_on_screen(a: OfflineAnswerer, question: str, form: Form) -> Answer:
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
        if absent or (t is not None and a.facts.lines_of("sight", v)):
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


def _languages(a: OfflineAnswerer, video: str) -> dict[str, dict[str, list[Line]]]:
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


def language(a: OfflineAnswerer, question: str, form: Form) -> Answer | None:
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


def duration(a: OfflineAnswerer, question: str, form: Form) -> Answer | None:
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


def with_whom(a: OfflineAnswerer, question: str, form: Form) -> Answer | None:
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


def who_is(a: OfflineAnswerer, question: str, form: Form) -> Answer | None:
    """ "Who is the pianist?": the described person if the memory can tell, else "cannot tell" and the
    candidates."""
    people = describe(a, f"the {form.detail}", strict=True)
    p = people[0]
    text, lines = _person_summary(a, p.video, p.id)
    return Answer(f"The {form.detail} is {text}{a._in(p.video)} {_cites(a, lines)}.", lines, "")


def quote(a: OfflineAnswerer, question: str, form: Form) -> Answer | None:
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


def decline(a: OfflineAnswerer, question: str, form: Form) -> Answer:
    """A question that needs more than the memory's structure: the nearest lines, and the reason."""
    ans = a._a_fallback(question, form)
    why = f"This question {form.detail}."
    if ans.supported:
        ans.text = f"{ans.text} (The nearest line, not an answer: this question {form.detail}.)"
    else:
        ans.text = f"{ans.text} {why}"
    return ans


# ============================================================================== people described

_WHO_SAID = re.compile(
    r"\bthe\s+(?:person|man|woman|one|guy|lady|speaker|girl|boy)\s+who\s+(?:mentioned|mentions|said|says|"
    r"talked about|talks about|spoke about|speaks about|asked about|asks about|asked|brought up)\s+"
    r"(?P<topic>.+?)(?:\s+(?:say|said|speak|spoke|talk|do|did|mean)\b.*)?\s*[?.!]?$",
    re.I,
)
_PLACE = re.compile(
    r"\b(?:on|at|to)\s+the\s+(?P<side>left|right)\b|\bin\s+the\s+(?P<mid>middle|centre|center)\b", re.I
)
_DESCRIBED = re.compile(
    r"\bthe\s+(?:(?:young|younger|old|older|tall|taller|short|bearded|blond|little|big)\s+)?"
    r"(?P<noun>man|woman|men|women|guy|lady|girl|boy|person|speaker|pianist|singer|host|presenter|"
    r"interviewer|interviewee|narrator|vlogger|blogger|chef|teacher|student|child|kid|[a-z]+ist)\b",
    re.I,
)
_APPEARANCE = {"woman", "man", "men", "women", "guy", "lady", "girl", "boy", "child", "kid"}


def _candidates(a: OfflineAnswerer) -> list[Person]:
    out = []
    for v in _videos(a):
        for p in sorted(set(_speakers(a, v)) | set(_seen(a, v)), key=a.facts.people.order_key):
            out.append(Person(v, p))
    return out


def _cannot(a: OfflineAnswerer, what: str, why: str, cands: list[Person]) -> CannotTell:
    bits, cited = [], []
    for p in cands[:6]:
        text, lines = _person_summary(a, p.video, p.id)
        bits.append(text + a._in(p.video))
        cited += lines
    listed = (
        f" Candidates: {'; '.join(bits)} {_cites(a, cited)}." if bits else " The memory holds nobody here."
    )
    return CannotTell(
        Answer(f'The memory cannot tell who "{what}" is: {why}.{listed}', cited, "", supported=bool(cited))
    )


def describe(a: OfflineAnswerer, question: str, strict: bool = False) -> list[Person]:
    """The person a description picks out, from what the memory holds; [] when the question describes
    nobody; :class:`CannotTell` when it describes someone the memory cannot pick out."""
    m = _WHO_SAID.search(question)
    if m:
        topic = terms(m.group("topic"))
        who = []
        for v in _videos(a):
            for ln in a.facts.lines_of("speech", v):
                if ln.who and topic and topic <= terms(ln.quote or "") and Person(v, ln.who[0]) not in who:
                    who.append(Person(v, ln.who[0]))
        if len(who) == 1:
            a.described.append(m.group(0))
            return who
        what = (
            m.group(0).split(" who ")[0].strip()
            + " who "
            + m.group(0).split(" who ", 1)[1].split()[0]
            + " "
            + m.group("topic")
        )
        if not who:
            raise _cannot(a, what, f'no line of speech holds "{m.group("topic")}"', _candidates(a))
        raise _cannot(a, what, "several people said it", who)
    d = _DESCRIBED.search(question)
    place = _PLACE.search(question)
    if not d and not place:
        return []
    noun = (d.group("noun") if d else "person").lower()
    phrase = (d.group(0) if d else "the person") + (f" {place.group(0)}" if place else "")
    cands = _candidates(a)
    if place:
        side = (place.group("side") or "middle").lower()
        side = "middle" if side in ("centre", "center") else side
        want = "in the middle" if side == "middle" else f"on the {side}"
        hits = []
        for v in _videos(a):
            for ln in a.facts.lines_of("position", v):
                if want in ln.text and ln.who and Person(v, ln.who[0]) not in hits:
                    hits.append(Person(v, ln.who[0]))
        if len(hits) == 1:
            a.described.append(phrase)
            return hits
        if not hits:
            raise _cannot(a, phrase, f"no face is recorded {want} of the picture", cands)
        raise _cannot(a, phrase, f"{len(hits)} faces are recorded {want} of the picture", hits)
    if noun in ("speaker",) and not strict:
        speakers = [Person(v, p) for v in _videos(a) for p in _speakers(a, v)]
        if len(speakers) == 1:
            a.described.append(phrase)
            return speakers
        raise _cannot(a, phrase, f"{len(speakers)} people speak", speakers or cands)
    if len(cands) == 1 and noun in _APPEARANCE | {"person"} and not strict:
        a.described.append(phrase)
        return cands  # the only person the memory holds is the one the question speaks of
    if noun in _APPEARANCE:
        why = (
            "the memory does not record what people look like (no one is marked as a "
            + noun.rstrip("s")
            + ")"
        )
    else:
        why = f"nothing in the memory says who is a {noun}"
    if strict and len(cands) == 1 and noun in _APPEARANCE | {"person"}:
        return cands
    raise _cannot(a, phrase, why, cands)


HANDLERS = {
    "text": text_on_screen,
    "summary": summary,
    "who_in": who_in,
    "who_speaks": who_speaks,
    "said_all": said_all,
    "language": language,
    "duration": duration,
    "with_whom": with_whom,
    "who_is": who_is,
    "decline": decline,
    "quote": quote,
}
