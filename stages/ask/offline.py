"""Retrieval-only answers from the memory's structure: who spoke, what, when, how often, in what order.

Without an LLM, `m3 ask` used to return the best-matching line; on natural questions ("Who spoke
first?", "What did <character_1> say?", "How many people are there?") the nearest line by similarity is
rarely the answer. This module reads the question's *form* (:func:`classify`), resolves the people it
refers to (:mod:`m3cli.stages.ask.people`), and answers from the memory's lines as data: speakers and
their times (``t_start``/``t_end``), the people a line is about (``characters``/``entities`` columns),
counts and orders over them. The answer is one sentence that states the answer, names only the people
it is about, and cites exactly the lines used, each with its own time and its video's file name.

Memory lines are read in every format the offline and LLM memorizers write: ``X says: "..."``, turn
lines (``X speaks, not transcribed, 0:00–0:04``), ``X is visible ...`` (one per person, one per
occurrence, or one collapsed line naming several people), pairwise co-occurrence lines (ignored for
speaking times: they span other people's turns), and sight lines (``on screen: ...`` / ``seen: ...``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from m3cli.stages.ask import dates
from m3cli.stages.ask.forms import FORMS, Form, decline_reason, quote_form
from m3cli.stages.ask.nodes import Node, Scope
from m3cli.stages.ask.people import People, Person, resolve_people
from m3cli.stages.ask.retrieval import hybrid
from m3cli.stages.ask.text import SIGHT_LINE, overlap, terms

MAX_NODES = 20_000  # structural answers read the scope's nodes; beyond this only retrieval is used
TURN_GAP = 2.0  # seconds: one person's lines closer than this, nobody else between, are one turn
CITE_MAX = 4

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


# ============================================================================== question forms

_NUM_WORDS = {"once": 1, "twice": 2, "thrice": 3, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5}
_TIME = re.compile(
    r"\b(?:at|around|about|near)\s+(?:the\s+)?(?P<t>\d{1,2}:\d{2}(?:\.\d+)?|\d+(?:\.\d+)?)\s*"
    r"(?P<unit>s\b|sec\b|secs\b|seconds?\b|second mark)?",
    re.I,
)
_SAID_VERBS = (
    r"(?:say|says|said|saying|talk|talks|talked|talking|mention|mentions|mentioned|ask|asks|asked|tell|"
    r"tells|told|speak|speaks|spoke|discuss|discussed|describe|described)"
)


# words of a "how many times is X said" question that are not X
_COUNT_WORDS = terms(
    "someone anyone somebody anybody something anything the word words phrase name they he she people "
    "speaker person man woman first second third fourth fifth sixth last"
)
_SAID_VERB = re.compile(
    r"\b(said|says|say|saying|mentioned|mentions|mention|heard|spoken|come up|comes up|came up)\b", re.I
)
_LEAD = re.compile(r"^(?:(?:is|was|are|were|does|did|do|has|have|the|a|an|word|words|phrase)\s+)+", re.I)


def _said_topic(q: str) -> str:
    """The words a "how many times is X said / does Y say X" question counts, or "" when it names none
    (then it counts a person's turns)."""
    m = _SAID_VERB.search(q)
    if not m or not re.search(r"\btimes?\b", q[: m.start()], re.I):
        return ""
    after = q[m.end() :]
    before = re.split(r"\btimes?\b", q[: m.start()], maxsplit=1, flags=re.I)[-1]
    for cand in (after, before):
        cand = _LEAD.sub("", cand.strip(" ?.!\"'")).strip(" ?.!\"'")
        if terms(cand) - _COUNT_WORDS:
            return cand
    return ""


_WHAT_SAID_WORDS = terms("what say says said did does do tell told ask asked first last end finally")


def classify(question: str) -> Form:
    q = " ".join(question.strip().split())
    ql = q.lower()
    m = _TIME.search(ql)
    if m and re.search(r"\b(what|who|which)\b", ql) and (m.group("unit") or ":" in m.group("t")):
        t = m.group("t")
        sec = (int(t.split(":")[0]) * 60 + float(t.split(":")[1])) if ":" in t else float(t)
        seen = r"\b(seen|see|shown|show|on screen|visible|written|displayed|appears?)\b"
        if re.match(r"\s*what\b", ql) and re.search(seen, ql):
            return Form("seen", "at", time=sec, topic=q)  # "what is seen at 25 s": sight and faces then
        if re.match(r"\s*who\b", ql) and re.search(seen, ql) and not re.search(_SAID_VERBS, ql):
            return Form("seen", "who_at", time=sec, topic=q)  # "who is visible at 25 s": faces only
        return Form("at_time", "who" if re.match(r"\s*(who|which)\b", ql) else "what", time=sec)
    if re.search(r"\bhow many\b", ql):
        m_n = re.search(r"\b(once|twice|thrice|(one|two|three|four|five) times)\b", ql)
        if m_n and re.search(r"\b(people|persons|speakers|voices)\b", ql):
            return Form("count_people", "times:" + str(_NUM_WORDS[m_n.group(1).split()[0]]))
        topic = _said_topic(q)
        if topic:
            return Form("count_said", topic=topic)  # "how many times is Disneyland said"
        if re.search(r"\btimes?\b", ql):
            return Form("count_times")
        if re.search(r"\b(turns?|utterances?|lines?)\b", ql):
            return Form("count_turns")
        if re.search(r"\b(speakers?|voices?|spoke|speak|talk)", ql):
            return Form("count_people", "speakers")
        if re.search(r"\b(faces?|visible|seen|on screen|shown)\b", ql):
            return Form("count_people", "visible")
        return Form("count_people", "people")
    if (
        not ql.startswith("when")
        and re.search(r"\b(visible|on screen|seen|shown|appear)", ql)
        and re.search(
            r"\b(while|when|during)\b.*\b(speak|speaks|spoke|speaking|talk|talks|talking|say|says|said)", ql
        )
    ):
        return Form("cross", "visible_while_speaking")
    if re.search(r"\b(speak|speaks|spoke|speaking|talk|talking)\b", ql) and re.search(
        r"\b(while|when)\b.*\b(visible|on screen|seen|shown)\b", ql
    ):
        return Form("cross", "speaking_while_visible")
    if re.match(r"\s*who\b", ql):
        for word, n in _NUM_WORDS.items():
            if re.search(rf"\b{word}\b(?! (?:people|persons|speakers))", ql) and (
                word in ("once", "twice", "thrice") or re.search(rf"\b{word} times\b", ql)
            ):
                return Form("who_times", str(n))
        for order in ("first", "last", "most", "least", "longest", "shortest", "second", "third", "fourth"):
            if re.search(rf"\b{order}\b", ql) and not re.search(r"\bsays?\b|\bsaid\b", ql.split(order)[0]):
                if re.search(
                    r"\b(speak|spoke|speaks|talk|talked|talks|said|says|say|voice)", ql
                ) or re.search(r"\b(seen|visible|appear)", ql):
                    kind = "visible" if re.search(r"\b(seen|visible|appear)", ql) else "speech"
                    return Form("order", f"{order}:{kind}")
        if re.search(r"\b(visible|on screen|seen|shown|appears?)\b", ql) and not re.search(_SAID_VERBS, ql):
            return Form("who_visible")
        m2 = re.search(rf"\b{_SAID_VERBS}\b\s*(?:about|that|of|the word|the words|:)?\s*(.*)", q, re.I)
        if m2:
            return Form("who_said", topic=m2.group(1).strip(" ?.!\"'"))
        return Form("who_said", topic=q)
    if re.match(r"\s*when\b", ql):
        if re.search(r"\b(shown|written|displayed|text|title|caption|sign)s?\b", ql):
            return Form("when", "sight", topic=q)  # "when is the title shown": the sight line's own span
        if re.search(r"\b(visible|seen|on screen|appear)", ql):
            return Form("when", "visible")
        return Form("when", "speech", topic=q)
    if re.search(r"\bwhat\b.*\b(say|said|says|saying|tell|told|ask|asked)\b", ql) or re.search(
        r"\bwhat was said\b", ql
    ):
        return Form("what_said", topic=q)
    if re.search(r"\bwhat\b.*\b(seen|on screen|shown|visible|written|displayed|appears?)\b", ql):
        return Form("seen", topic=q)
    return Form("fallback", topic=q)


_SAID = re.compile(rf"\b{_SAID_VERBS}\b|\bspoken\b|\bheard\b", re.I)


_PEOPLE_WORDS = re.compile(
    r"\b(?:people|persons?|speakers?|voices?|faces?|characters?|participants?|men|women|anyone|"
    r"individuals?|guests?|someone|somebody|nobody|everyone)\b",
    re.I,
)
_SEE_VERBS = re.compile(r"\b(?:seen|see|shown|show|visible|on screen|appears?|displayed|written)\b", re.I)
_DOING = re.compile(
    r"\bwhat\s+(?:did|does|do|will|should|would|can|could)\s+.+?\s+(?:do|give|make|get|buy|bring|"
    r"take|put|use|eat|drink|cook|order|choose|pick)\b",
    re.I,
)
_GENERIC_SEEN = re.compile(
    r"^\s*what\s+(?:is|was|are|were|can be|could be)\s+(?:seen|shown|visible|on screen|displayed)\b"
    r"|^\s*what\s+(?:do|can|did)\s+(?:you|we)\s+see\b",
    re.I,
)


def classify_older(question: str) -> Form | None:
    """:func:`classify`, where its form is one the memory's structure answers. The older forms were
    written for our own questions and take many others too; M3-Bench's questions showed which ones a
    form wrongly takes ("How many servings of pasta..." is no count of people; "Who won the game?" no
    who-said question; "When is Jack's birthday?" no speaking time), and those go on to the stated
    declines or to retrieval."""
    form = classify(question)
    kind, timed = form.kind, form.time is not None
    other = Form("fallback", topic=question)
    # a "who" question with no verb of saying ("Who likes coffee?") stays a who-said question: the line
    # said that matches it best ("Alice says 'I love coffee'") is the memory's best evidence
    if kind == "count_people" and form.detail == "people" and not _PEOPLE_WORDS.search(question):
        return other
    if kind == "count_times" and not (_SAID.search(question) or _SEE_VERBS.search(question)):
        return other
    if kind == "when" and not (
        _SAID.search(question) or _SEE_VERBS.search(question) or "title" in question.lower()
    ):
        return other
    if kind == "what_said" and _DOING.search(question):
        return other
    if kind == "seen" and not timed and not _GENERIC_SEEN.search(question):
        return other
    return form


#: The question forms, tried in order: each reads the question and returns a :class:`Form` or None.
#: The form's handler is ``OfflineAnswerer._a_<kind>``, else ``overview.HANDLERS[kind]``. A new form
#: goes into this list (before ``classify_older``, which takes every question).
ROUTES: list[Callable[[str], Form | None]] = [*FORMS, classify_older, quote_form]


def route(question: str) -> Form:
    """The form of a question: the first route that takes it; a question none answers from the
    memory's structure gets a ``decline`` form with the reason it needs more, else ``fallback``
    (the nearest lines, retrieval only)."""
    q = " ".join(question.strip().split())
    for rule in ROUTES:
        form = rule(q)
        if form is not None and form.kind != "fallback":
            return form
    reason = decline_reason(q)
    return Form("decline", reason, topic=q) if reason else Form("fallback", topic=q)


# ============================================================================== the answerer


@dataclass
class Answer:
    text: str
    cited: list[Line]
    form: str
    supported: bool = True


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


def load_facts(memory: Any, scope: Scope) -> Facts:
    nodes: list[Node] = []
    reader = getattr(memory, "scope_nodes", None)
    if reader is not None:
        nodes = reader(scope, MAX_NODES)
    lines = [parse_line(n, scope.raw_ids) for n in nodes]
    lines.sort(key=lambda ln: (ln.node.video, ln.start if ln.start is not None else -1.0, ln.node.id))
    videos = sorted({ln.node.video for ln in lines} | ({scope.video} if scope.video else set()))
    files = {}
    for v in videos:
        path = memory.video_path(v) if hasattr(memory, "video_path") else None
        files[v] = PurePath(path).name if path else v
    people = resolve_people(memory, videos, lines, scope.raw_ids)
    turns = {v: speaking_turns([ln for ln in lines if ln.node.video == v]) for v in videos}
    return Facts(lines, people, files, turns, dates.load_timeline(memory))


def fmt_s(t: float | None) -> str:
    return "?" if t is None else f"{t:.1f}"


def _gap(ln: Line, t: float) -> float:
    """Seconds from ``t`` to the nearer end of ``ln`` (a line with a start)."""
    start = ln.start or 0.0
    return min(abs(start - t), abs((ln.end or start) - t))


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


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


class OfflineAnswerer:
    """Answers one question from :class:`Facts`; ``search`` ranks lines for content questions."""

    def __init__(self, memory: Any, embed: Any, scope: Scope, threshold: float, now: str | None = None):
        self.memory, self.embed, self.scope, self.threshold = memory, embed, scope, threshold
        self.now = now  # what "today" means (ISO 8601); None: the end of the newest recording
        self.facts = load_facts(memory, scope)
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
        from m3cli.stages.ask.overview import describe

        return describe(self, question)

    # ------------------------------------------------------------------ answer
    def answer(self, question: str) -> Answer:
        from m3cli.stages.ask import across, by_person, person_times
        from m3cli.stages.ask.overview import HANDLERS, CannotTell, absence_for, uncovered

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


def _line_text(a: OfflineAnswerer, ln: Line) -> str:
    text = a.facts.people.rename(ln.node.raw_text if a.scope.raw_ids and ln.node.raw_text else ln.text)
    return text.rstrip(".")


def _cites(a: OfflineAnswerer, lines: list[Line]) -> str:
    shown = list({ln.node.id: ln for ln in lines}.values())
    out = [cite(a.facts, ln) for ln in shown[:CITE_MAX]]
    return ("" if not out else out[0]) if len(out) <= 1 else "(" + "; ".join(o[1:-1] for o in out) + ")"


def _spans(a: OfflineAnswerer, lines: list[Line]) -> str:
    """A visible line's own spans (several when the line lists them), each cited with its line."""
    out = []
    for ln in lines[:CITE_MAX]:
        spans: Sequence[tuple[float | None, float | None]] = ln.spans or [(ln.start, ln.end)]
        out.append(
            _join([f"from {fmt_s(s0)} to {fmt_s(s1)} s" for s0, s1 in spans]) + f" {cite(a.facts, ln)}"
        )
    return _join(out)


def _times(n: int) -> str:
    return {1: "once", 2: "twice"}.get(n, f"{n} times")


def _pick(seq: list[str], order: str) -> str | None:
    if not seq:
        return None
    if order == "last":
        return seq[-1]
    idx = {"first": 0, "second": 1, "third": 2, "fourth": 3}.get(order, 0)
    return seq[idx] if idx < len(seq) else None


def _topic(question: str, people: People) -> str:
    return people.strip_refs(question)


def _has_topic(question: str, people: People) -> bool:
    rest = terms(people.strip_refs(question)) - {
        stem for stem in terms("speak talk say voice heard person first last time")
    }
    return bool(rest)


def evidence_of(a: OfflineAnswerer, lines: list[Line]) -> list[dict[str, Any]]:
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


def _there(parts: list[str]) -> str:
    """ "There is" before a single count of one ("1 person"), else "There are"."""
    return "There is " if len(parts) == 1 and parts[0].startswith("1 ") else "There are "
