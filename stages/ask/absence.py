"""Absence as an answer: "nobody is seen", "nothing is said", "no text is on screen", or why it cannot say.

Where a handler finds nothing, the answer is not simply "no evidence": the memory holds the line a stage
wrote when it looked over a clip and found nothing, or holds no such line (the stage left no record
there), or the question's time lies outside the clips. The three are told apart here, by the memory's own
lines and clips, never assumed; kept apart from the handlers because every kind of question (counts,
who is seen, what was said, what is on screen) falls back to the same three answers.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from m3cli.stages.ask.facts import Line, _overlaps
from m3cli.stages.ask.forms import Form
from m3cli.stages.ask.wording import Answer, _cites, fmt_s

if TYPE_CHECKING:
    from m3cli.stages.ask.answerer import Answerer


_TEXT_QUOTE = re.compile(r"on screen:\s*(?P<q>.+)$", re.I | re.S)


# ============================================================================== the scope's clips


def _videos(a: Answerer) -> list[str]:
    return [a.scope.video] if a.scope.video else a._videos()


def _absent(a: Answerer, video: str, what: str, t: float | None = None) -> list[Line]:
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


def _clips(a: Answerer, video: str) -> list[Any]:
    reader = getattr(a.memory, "clips_of", None)
    return list(reader(video)) if reader else []


def _covered(a: Answerer, video: str, t: float) -> tuple[bool, str]:
    """Whether the memory's clips of ``video`` cover second ``t``, and the span they cover."""
    clips = _clips(a, video)
    if not clips:
        return True, ""
    lo, hi = min(c.start for c in clips), max(c.end for c in clips)
    return any(c.start - 0.05 <= t <= c.end + 0.05 for c in clips), f"{fmt_s(lo)}-{fmt_s(hi)} s"


def uncovered(a: Answerer, t: float) -> Answer | None:
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


def _file(a: Answerer, video: str) -> str:
    return a.facts.files.get(video, video)


def _no_record(a: Answerer, video: str, what: str) -> str:
    stage = {
        "faces": "faces (`m3 faces`)",
        "text": "on-screen text (`m3 sight`)",
        "speech": "speech (`m3 diarize`)",
    }
    return (
        f"the memory of {_file(a, video)} holds no record that {stage[what]} looked at it, so it cannot say "
        f"whether {'anyone is seen' if what == 'faces' else 'any text is on screen' if what == 'text' else 'anything is said'}"  # noqa: E501
    )


# ============================================================================== absence


def absence_for(a: Answerer, question: str, form: Form) -> Answer | None:
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


def _heard_or_seen(a: Answerer, video: str, what: str) -> bool:
    """Whether the memory holds any positive line of this modality for the video (a face seen, a word
    or turn heard, a text read)."""
    if what == "faces":
        return bool(a.facts.lines_of("visible", video))
    if what == "speech":
        return bool(a.facts.turns.get(video) or a.facts.lines_of("speech", video))
    return any(_TEXT_QUOTE.search(ln.text) for ln in a.facts.lines_of("sight", video))


def _none_of(a: Answerer, what: str, t: float | None = None, count: bool = False) -> Answer | None:
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


def _nobody_in(a: Answerer, v: str, count: bool) -> tuple[str, list[Line]]:
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


def _nobody(a: Answerer, count: bool) -> Answer:
    """ "0 people: nobody is seen or heard", cited by both absence lines, per video."""
    parts, cited = [], []
    for v in _videos(a):
        text, lines = _nobody_in(a, v, count)
        parts.append(text)
        cited += lines
    return Answer("; ".join(parts) + ".", cited, "", supported=bool(cited))
