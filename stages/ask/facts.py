"""Memory lines read as facts: what kind each line is, about whom, when, and each video's speaking turns.

Every retrieval-only answer (:mod:`m3cli.stages.ask.offline`) rests on the scope's lines parsed once into
:class:`Facts`. Reading a line is kept apart from answering with it: the line formats follow the
memorizers (a new kind of line is one more pattern here), while the question handlers, the date and
people answerers and the QA evaluation all read the same parsed lines.

Memory lines are read in every format the offline and LLM memorizers write: ``X says: "..."``, turn
lines (``X speaks, not transcribed, 0:00–0:04``), ``X is visible ...`` (one per person, one per
occurrence, or one collapsed line naming several people), pairwise co-occurrence lines (ignored for
speaking times: they span other people's turns), and sight lines (``on screen: ...`` / ``seen: ...``).
"""

from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from m3cli.stages.ask import dates
from m3cli.stages.ask.nodes import Node, Scope
from m3cli.stages.ask.people import People, resolve_people
from m3cli.stages.ask.text import SIGHT_LINE

MAX_NODES = 20_000  # structural answers read the scope's nodes; beyond this only retrieval is used
TURN_GAP = 2.0  # seconds: one person's lines closer than this, nobody else between, are one turn

# 'says (in Portuguese): "..."': the note is the language the words were read in, kept in the answer
_SPEECH = re.compile(
    r'^(?P<who>.+?) says(?: \((?P<note>[^)]*)\))?:\s*["\u201c](?P<quote>.*?)["\u201d]'
    r'(?:\s*\(English:\s*["\u201c](?P<english>.*)["\u201d]\))?\s*$',
    re.S,
)
# "<voice_2> speaks Portuguese, not transcribed, from 0.3 to 3.7 s": the language heard, no words
_TURN_LANGUAGE = re.compile(r"\bspeaks? (?P<language>[A-Z][a-z]+), not transcribed\b")
_TURN = re.compile(r"^(?P<who>\S+(?: and \S+)*) speaks?\b(?!.*\bboth\b).*?not transcribed", re.I)
_BOTH = re.compile(r"\bboth speak\b|\bspeak at the same time\b", re.I)
_VISIBLE = re.compile(r"\b(?:is|are) visible\b|\bvisible together\b|\bon screen together\b", re.I)
_SPAN = re.compile(r"\bfrom (\d+(?:\.\d+)?) to (\d+(?:\.\d+)?)\b")
MIN_OVERLAP = 0.5  # seconds: seen "while" someone speaks means more than a shared turn edge
_SIGHT = SIGHT_LINE  # "0:20–0:23 on screen: 'THE PEACH …'" / "0:05 seen: laptop, desk"
# "<voice_1> speaks from 0.8 to 2.4 s and from 15.8 to 17.4 s": every span one voice speaks in a clip
# (a named voice: "Andrew (<character_1>) speaks from 2.0 to 12.5 s")
_SPEAKING = re.compile(r"^(?P<who>\S+|[^<>()]+ \(<\w+>\)) speaks (?=from \d)(?!.*not transcribed)", re.I)
# "4 faces are seen in this clip: <face_1> (from 0.0 to 18.0 s), …": who is seen, one line per clip
_PRESENT = re.compile(r"^\d+ (?:faces|people|persons) are seen in this clip:", re.I)
# "no face is seen in this clip, from 0.0 to 9.6 s", "nothing is said in this clip, ...", "no text is on
# screen in this clip, ...", "the clip has no sound, ...": what a stage looked for and did not find
_ABSENT = re.compile(
    r"^(?:no face is seen|nothing is said|no text is on screen|the clip has no sound"
    r"|the recording has no pictures)\b",
    re.I,
)
# "<face_1> is seen on the left of the picture, its face 21% of the picture's height, from 0.0 to 5.0 s"
_POSITION = re.compile(r"^\S+ is seen (?:on the left|on the right|in the middle) of the picture\b")


# ============================================================================== lines


@dataclass
class Line:
    """One memory line as a fact: what kind, about whom, when, and (speech) the words."""

    node: Node
    kind: str  # speech | turn | visible | both | sight | name | other
    who: list[str]
    quote: str | None = None
    note: str = ""  # a speech line's "(in Portuguese)": the words are not English, and the answer says so
    english: str = ""  # a speech line's English translation, when the memory holds one
    language: str = ""  # the language heard ("Portuguese"); "" when the line does not say
    start: float | None = None
    end: float | None = None
    spans: list[tuple[float, float]] = field(default_factory=list)  # a visible line's own spans

    @property
    def text(self) -> str:
        return self.node.text


def _ids(node: Node, raw: bool) -> list[str]:
    ids = node.entities if raw or not node.characters else node.characters
    return list(dict.fromkeys(i for i in ids if i))


def parse_line(node: Node, raw: bool = False) -> Line:
    text = (node.raw_text if raw and node.raw_text else node.text).strip()
    who = _ids(node, raw)
    line = Line(node, "other", who, start=node.t_start, end=node.t_end)
    if node.kind not in ("episodic", "semantic"):
        line.kind = node.kind or "other"
        return line
    m = _SPEECH.match(text)
    if m:
        line.kind, line.quote = "speech", m.group("quote").strip()
        line.note = (m.group("note") or "").strip()
        line.english = (m.group("english") or "").strip()
        lang = re.match(r"in ([A-Z][\w -]*)$", line.note)
        line.language = lang.group(1) if lang else ""
        line.who = who[:1]
        return line
    if _BOTH.search(text):
        line.kind = "both"
    elif _TURN.match(text):
        line.kind = "turn"  # speech heard, no words: counts as speaking, never quoted
        line.who = who[:1]
        lang = _TURN_LANGUAGE.search(text)
        line.language = lang.group("language") if lang else ""
    elif _SPEAKING.match(text):
        line.kind = "speaking"  # its spans are the voice's turns (t_start/t_end only their envelope)
        line.who = who[:1]
        line.spans = [(float(a), float(b)) for a, b in _SPAN.findall(text)]
    elif _PRESENT.match(text):
        line.kind = "present"
    elif _VISIBLE.search(text):
        line.kind = "visible"
        # one line may list several spans ("from 0.6 to 5.8 s and from 13.6 to 21.8 s"): its t_start and
        # t_end are their envelope, which would put the person on screen between the spans too
        line.spans = [(float(a), float(b)) for a, b in _SPAN.findall(text)]
    elif _SIGHT.match(text):
        line.kind = "sight"
    elif text.lower().startswith("the name of"):
        line.kind = "name"
    elif _ABSENT.match(text):
        line.kind = "absent"  # a stage looked over the clip and found no face / no text / no speech
    elif _POSITION.match(text):
        line.kind = "position"  # where a face is in the picture, and how large
    return line


@dataclass
class Turn:
    person: str
    start: float
    end: float
    lines: list[Line] = field(default_factory=list)


def speaking_turns(lines: list[Line]) -> list[Turn]:
    """Turns in time order, from the best source the memory has: ``speaking`` lines (every span a voice
    speaks in, from the diarizer), else turn lines of older memories (each a whole turn), else speech
    lines. One person's consecutive spans (nobody else speaking between, gap < TURN_GAP) are one turn.
    Each turn carries the lines inside it that can be cited at their own time: the words said (speech),
    then stretches heard but not transcribed; the source line itself only when nothing else is there."""
    speech = [ln for ln in lines if ln.kind == "speech" and ln.who and ln.start is not None]
    heard = [ln for ln in lines if ln.kind == "turn" and ln.who and ln.start is not None]
    speaking = [ln for ln in lines if ln.kind == "speaking" and ln.who and ln.spans]
    spans: list[tuple[str, float, float, Line]] = []
    if speaking:
        spans = [(ln.who[0], a, b, ln) for ln in speaking for a, b in ln.spans]
    else:
        for ln in heard or speech:
            start = float(ln.start or 0.0)  # both lists keep only lines with a start
            spans.append((ln.who[0], start, float(ln.end if ln.end is not None else start), ln))
    spans.sort(key=lambda x: (x[1], x[2], x[0]))
    turns: list[Turn] = []
    sources: list[list[Line]] = []
    for who, s, e, ln in spans:
        if turns and turns[-1].person == who and s - turns[-1].end < TURN_GAP:
            turns[-1].end = max(turns[-1].end, e)
            sources[-1].append(ln)
        else:
            turns.append(Turn(who, s, e))
            sources.append([ln])
    inner = speech + (heard if speaking else [] if heard else [])
    for t, src in zip(turns, sources, strict=True):
        own = [ln for ln in inner if ln.who[0] == t.person and _overlaps(ln, t.start, t.end)]
        if speaking:
            t.lines = sorted(own, key=lambda ln: (ln.start, ln.kind != "speech")) or src[:1]
        else:
            t.lines = src + [ln for ln in own if ln not in src]
    return turns


def seen_during(ln: Line, t0: float, t1: float) -> bool:
    """A visible line shows its people for at least MIN_OVERLAP s of [t0, t1] (or all of a shorter span)."""
    spans = ln.spans or (
        [(ln.start, ln.end if ln.end is not None else ln.start)] if ln.start is not None else []
    )
    need = min(MIN_OVERLAP, max(t1 - t0, 0.0))
    shared = sum(max(0.0, min(b, t1) - max(a, t0)) for a, b in spans)
    return shared >= need and shared > 0 or (t0 == t1 and any(a <= t0 <= b for a, b in spans))


def _overlaps(ln: Line, t0: float, t1: float) -> bool:
    if ln.start is None:
        return False
    end = ln.end if ln.end is not None else ln.start
    return ln.start < t1 and end > t0 or (ln.start <= t0 <= end)


def _gap(ln: Line, t: float) -> float:
    """Seconds from ``t`` to the nearer end of ``ln`` (a line with a start)."""
    start = ln.start or 0.0
    return min(abs(start - t), abs((ln.end or start) - t))


# ============================================================================== the scope's facts


@dataclass
class Facts:
    """The scope's lines, parsed, with the people they are about and each video's file name."""

    lines: list[Line]
    people: People
    files: dict[str, str]
    turns: dict[str, list[Turn]]  # per video
    #: each video's recording start, where known: lines are cited with their date beside their time
    timeline: dates.Timeline = field(default_factory=lambda: dates.Timeline({}, {}))

    def lines_of(self, kind: str, video: str | None = None) -> list[Line]:
        return [ln for ln in self.lines if ln.kind == kind and (video is None or ln.node.video == video)]


def _scope_lines(memory: Any, scope: Scope) -> list[Line]:
    """The scope's lines parsed, by video, then time, then id."""
    nodes: list[Node] = []
    reader = getattr(memory, "scope_nodes", None)
    if reader is not None:
        nodes = reader(scope, MAX_NODES)
    lines = [parse_line(n, scope.raw_ids) for n in nodes]
    lines.sort(key=lambda ln: (ln.node.video, ln.start if ln.start is not None else -1.0, ln.node.id))
    return lines


def _fresh(line: Line) -> Line:
    """A copy of ``line`` and of its node (their lists are shared: nothing changes them). Their fields
    copied as they are, a fifth of what ``copy.copy`` costs (3,000 lines a question)."""
    node = object.__new__(Node)
    node.__dict__.update(line.node.__dict__)
    out = object.__new__(Line)
    out.__dict__.update(line.__dict__)
    out.node = node
    return out


class ParsedLines:
    """Each scope's lines read and parsed once for all the questions of one `m3 ask` run.

    Why: reading the scope's lines and parsing them was most of a retrieval-only answer (a 1-hour
    memory, 3,000 lines: 62 of 88 ms a question, bench/scale_archive.py's questions), and a run of a
    benchmark's questions read the same lines for every one. The memory object already holds what it
    read for the run (:class:`~m3cli.stages.ask.memory.LanceMemory` keeps the nodes it loads), so these
    lines are as current as the lines a question would read itself. Each question gets its own copies:
    its handlers set each line's similarity to it (``Answerer.ranked``), and one question's cosines must
    not reach the next. At most ``SIZE`` scopes are kept (a run whose questions each name another video
    or clip keeps the last few)."""

    SIZE = 8

    def __init__(self) -> None:
        self._by_scope: OrderedDict[Scope, list[Line]] = OrderedDict()

    def lines(self, memory: Any, scope: Scope) -> list[Line]:
        kept = self._by_scope.get(scope)
        if kept is None:
            kept = self._by_scope[scope] = _scope_lines(memory, scope)
            while len(self._by_scope) > self.SIZE:
                self._by_scope.popitem(last=False)
        else:
            self._by_scope.move_to_end(scope)
        return [_fresh(ln) for ln in kept]


def load_facts(memory: Any, scope: Scope, parsed: ParsedLines | None = None) -> Facts:
    """The scope's :class:`Facts`; ``parsed``: the run's lines already parsed, when the caller keeps
    them between questions."""
    lines = parsed.lines(memory, scope) if parsed is not None else _scope_lines(memory, scope)
    videos = sorted({ln.node.video for ln in lines} | ({scope.video} if scope.video else set()))
    files = {}
    for v in videos:
        path = memory.video_path(v) if hasattr(memory, "video_path") else None
        files[v] = PurePath(path).name if path else v
    people = resolve_people(memory, videos, lines, scope.raw_ids)
    turns = {v: speaking_turns([ln for ln in lines if ln.node.video == v]) for v in videos}
    return Facts(lines, people, files, turns, dates.load_timeline(memory))
