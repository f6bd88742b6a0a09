"""Dates in questions, and the absolute time of every memory line, for the offline answerer.

A memory of many recordings is asked about days ("What did people say on November 12?", "Who was
there yesterday?", "When did we last see Alice?"). Each video's recording start is stored with its
clips (``clips.recorded``, from :mod:`m3cli.stages.core.recorded`), so a line at ``t`` seconds of a
video happened at ``recorded + t``. This module:

* reads those starts (:func:`load_timeline`; a memory written before the column reads as "unknown");
* finds the date or relative time a question names (:func:`find_window`): ``on November 12``,
  ``2026-11-12``, ``yesterday``, ``today``, ``this morning``, ``last week``, ``on Monday``, ``before`` /
  ``after`` / ``since`` / ``until`` one of those; relative times count from ``--now`` when given, else
  from the end of the newest recording in the memory (a memory is asked about its own past);
* answers the questions whose form is about time (:func:`answer`): what was said or who was there in a
  window, the first / last time someone was seen or heard; a day no recording covers is said to be
  uncovered, with the days the memory does cover.

Days are the recording's own calendar days: a video recorded at 23:30+01:00 belongs to that evening
wherever the memory is asked from. Lines are cited with their video time and, beside it, their date.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any

from m3cli.stages.core.recorded import iso, parse_time

MONTHS = {
    m: i + 1
    for i, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ]
    )
    for m in names
}
WEEKDAYS = {d: i for i, d in enumerate("monday tuesday wednesday thursday friday saturday sunday".split())}
#: Parts of a day, in the recording's local hours [from, to).
PARTS = {"morning": (5, 12), "afternoon": (12, 18), "evening": (18, 24), "tonight": (18, 24)}

_MONTH = "|".join(sorted(MONTHS, key=len, reverse=True))
_ORD = r"(?:st|nd|rd|th)?"
_DATE_PATTERNS = [
    ("iso", r"\b(?P<y>\d{4})-(?P<m>\d{2})-(?P<d>\d{2})\b"),
    ("md", rf"\b(?P<mon>{_MONTH})\.?\s+(?P<d>\d{{1,2}}){_ORD}\b(?:,?\s+(?P<y>\d{{4}})\b)?"),
    ("dm", rf"\b(?P<d>\d{{1,2}}){_ORD}\s+(?:of\s+)?(?P<mon>{_MONTH})\b\.?(?:,?\s+(?P<y>\d{{4}})\b)?"),
    ("rel", r"\b(?P<rel>the day before yesterday|yesterday|today|last night|tonight)\b"),
    ("part", r"\bthis (?P<part>morning|afternoon|evening)\b"),
    ("week", r"\b(?P<week>last|this|past) week\b"),
    ("ndays", r"\b(?:in )?the (?:last|past) (?P<n>\d{1,3}) days\b"),
    ("wday", r"\b(?:on |last )?(?P<wd>monday|tuesday|wednesday|thursday|friday|saturday|sunday)s?\b"),
]
_WHEN = [(kind, re.compile(p, re.I)) for kind, p in _DATE_PATTERNS]


def _first_phrase(question: str) -> tuple[str, re.Match] | None:
    """The earliest date phrase of the question (the longest where two start together)."""
    found = [(m.start(), -len(m.group(0)), kind, m) for kind, rx in _WHEN if (m := rx.search(question))]
    if not found:
        return None
    _, _, kind, m = min(found, key=lambda x: x[:2])
    return kind, m


_BOUND = re.compile(r"\b(before|until|till|after|since)\s+(?:the\s+)?$", re.I)
_ON = re.compile(r"\b(?:on|in|during|from)\s+(?:the\s+)?$", re.I)


# ============================================================================== time of lines


@dataclass
class Timeline:
    """Each video's recording start (aware datetime) and length; videos without one are unknown."""

    start: dict[str, datetime]
    length: dict[str, float]

    def at(self, video: str, t: float | None) -> datetime | None:
        """The absolute time of second ``t`` of ``video`` (in the recording's own UTC offset)."""
        if t is None or video not in self.start:
            return None
        return self.start[video] + timedelta(seconds=float(t))

    def wall(self, video: str, t: float | None) -> datetime | None:
        """The recording's local wall-clock time of second ``t`` (naive: days are the recording's own)."""
        when = self.at(video, t)
        return None if when is None else when.replace(tzinfo=None)

    def now(self) -> datetime | None:
        """The end of the newest recording: what "today" and "yesterday" mean without ``--now``."""
        ends = [self.start[v] + timedelta(seconds=self.length.get(v, 0.0)) for v in self.start]
        return max(ends) if ends else None

    def days(self) -> list[date]:
        out: set[date] = set()
        for v, s in self.start.items():
            a, b = (
                s.replace(tzinfo=None),
                (s + timedelta(seconds=self.length.get(v, 0.0))).replace(tzinfo=None),
            )
            d = a.date()
            while d <= b.date():
                out.add(d)
                d += timedelta(days=1)
        return sorted(out)

    def covering(self, window: Window) -> list[str]:
        """Videos some of whose recording falls inside ``window``."""
        out = []
        for v, s in sorted(self.start.items(), key=lambda x: x[1]):
            a = s.replace(tzinfo=None)
            b = a + timedelta(seconds=self.length.get(v, 0.0))
            if (window.hi is None or a < window.hi) and (window.lo is None or b >= window.lo):
                out.append(v)
        return out


def load_timeline(memory: Any) -> Timeline:
    """The recording starts stored in the memory's clips table; empty for a memory that has none (one
    written before the ``recorded`` column, or of videos nobody dated)."""
    reader = getattr(memory, "reader", None)
    if reader is None:
        return Timeline({}, {})
    try:
        if "recorded" not in reader.table("clips").schema.names:
            return Timeline({}, {})
        rows = reader.scan("clips", ["video", "end", "recorded"])
    except Exception:  # no clips table: nothing to date
        return Timeline({}, {})
    start: dict[str, datetime] = {}
    length: dict[str, float] = {}
    for r in rows:
        v = r["video"]
        length[v] = max(length.get(v, 0.0), float(r["end"] or 0.0))
        when = parse_time(r["recorded"]) if r.get("recorded") else None
        if when is not None:
            start[v] = when
    return Timeline(start, {v: length[v] for v in start})


def stamp(when: datetime | None) -> str:
    """A line's date as answers show it: the recording's local date and time."""
    return "" if when is None else when.strftime("%Y-%m-%d %H:%M:%S")


def day_name(d: date) -> str:
    return f"{d.strftime('%B')} {d.day}, {d.year}"


def coverage(days: list[date]) -> str:
    """``Nov 10–14, 2026`` / ``Nov 10, 12 and 14, 2026`` / across months and years, spelled out."""
    if not days:
        return "no dated recordings"
    if len({(d.year, d.month) for d in days}) == 1:
        nums = [d.day for d in days]
        run = nums == list(range(nums[0], nums[-1] + 1))
        if len(nums) == 1:
            text = str(nums[0])
        elif run:
            text = f"{nums[0]}\u2013{nums[-1]}"
        else:
            text = ", ".join(map(str, nums[:-1])) + f" and {nums[-1]}"
        return f"{days[0].strftime('%b')} {text}, {days[0].year}"
    return ", ".join(f"{d.strftime('%b')} {d.day}, {d.year}" for d in days)


# ============================================================================== windows


@dataclass
class Window:
    """A stretch of local wall-clock time [lo, hi) a question asks about (None: open)."""

    lo: datetime | None
    hi: datetime | None
    label: str  # "on November 12, 2026", "yesterday (November 13, 2026)", "before November 12, 2026"

    def holds(self, when: datetime | None) -> bool:
        return (
            when is not None and (self.lo is None or when >= self.lo) and (self.hi is None or when < self.hi)
        )


def _day(d: date, label: str) -> Window:
    start = datetime.combine(d, time())
    return Window(start, start + timedelta(days=1), label)


def _year_for(month: int, day: int, now: datetime) -> int:
    """A date without a year: the one nearest ``now`` (November 20 asked on November 14 is this year's,
    December 24 asked in January last year's)."""
    years = []
    for year in (now.year - 1, now.year, now.year + 1):
        try:
            years.append((abs((date(year, month, day) - now.date()).days), year))
        except ValueError:  # February 29 of a common year
            continue
    return min(years)[1] if years else now.year


def _match_window(kind: str, m: re.Match, now: datetime) -> Window | None:
    g = {k: v for k, v in m.groupdict().items() if v is not None}
    g[f"_{kind}"] = m.group(0)
    today = now.date()
    try:
        if "_iso" in g:
            d = date(int(g["y"]), int(g["m"]), int(g["d"]))
            return _day(d, f"on {day_name(d)}")
        if "_md" in g or "_dm" in g:
            mon, dd = MONTHS[g["mon"].lower()], int(g["d"])
            d = date(int(g["y"]) if "y" in g else _year_for(mon, dd, now), mon, dd)
            return _day(d, f"on {day_name(d)}")
    except ValueError:
        return None
    if "_rel" in g:
        rel = g["rel"].lower()
        if rel == "last night":
            lo = datetime.combine(today - timedelta(days=1), time(18))
            return Window(lo, lo + timedelta(hours=11), f"last night ({day_name(lo.date())})")
        if rel == "tonight":
            lo = datetime.combine(today, time(18))
            return Window(lo, lo + timedelta(hours=6), f"tonight ({day_name(today)})")
        back = {"today": 0, "yesterday": 1, "the day before yesterday": 2}[rel]
        d = today - timedelta(days=back)
        return _day(d, f"{rel} ({day_name(d)})")
    if "_part" in g:
        a, b = PARTS[g["part"].lower()]
        lo = datetime.combine(today, time(a))
        return Window(lo, lo + timedelta(hours=b - a), f"this {g['part'].lower()} ({day_name(today)})")
    if "_week" in g:
        monday = today - timedelta(days=today.weekday())
        if g["week"].lower() == "last":
            lo = datetime.combine(monday - timedelta(days=7), time())
            return Window(lo, lo + timedelta(days=7), f"last week ({_span(lo, 7)})")
        if g["week"].lower() == "past":
            lo = datetime.combine(today - timedelta(days=6), time())
            return Window(lo, lo + timedelta(days=7), f"in the past week ({_span(lo, 7)})")
        lo = datetime.combine(monday, time())
        return Window(lo, lo + timedelta(days=7), f"this week ({_span(lo, 7)})")
    if "_ndays" in g:
        n = max(1, int(g["n"]))
        lo = datetime.combine(today - timedelta(days=n - 1), time())
        return Window(lo, lo + timedelta(days=n), f"in the last {n} days ({_span(lo, n)})")
    if "_wday" in g:
        back = (today.weekday() - WEEKDAYS[g["wd"].lower()]) % 7
        if m.group(0).lower().startswith("last") and back == 0:
            back = 7
        d = today - timedelta(days=back)
        return _day(d, f"on {d.strftime('%A')}, {day_name(d)}")
    return None


def _span(lo: datetime, days: int) -> str:
    hi = lo + timedelta(days=days - 1)
    return f"{day_name(lo.date())} to {day_name(hi.date())}"


def find_window(question: str, now: datetime) -> tuple[Window, str] | None:
    """The time a question asks about, and the question without that phrase; None when it names none.

    ``before`` X is everything before X began and ``after`` X everything from its end on; ``until`` and
    ``since`` include X itself; a part of the day next to a day ("yesterday morning") narrows it to
    those hours."""
    phrase = _first_phrase(question)
    if phrase is None:
        return None
    kind, m = phrase
    window = _match_window(kind, m, now.replace(tzinfo=None))
    if window is None:
        return None
    lead = question[: m.start()]
    rest_start, rest_end = m.start(), m.end()
    part = re.match(r"\s+(morning|afternoon|evening)\b", question[m.end() :], re.I)
    if (
        part
        and window.lo is not None
        and window.hi is not None
        and window.hi - window.lo == timedelta(days=1)
    ):
        a, b = PARTS[part.group(1).lower()]
        day = window.lo
        window = Window(
            day + timedelta(hours=a),
            day + timedelta(hours=b),
            f"{window.label} in the {part.group(1).lower()}",
        )
        rest_end = m.end() + part.end()
    bound = _BOUND.search(lead)
    if bound:
        word = bound.group(1).lower()
        body = window.label.removeprefix("on ")
        if word == "before":
            window = Window(None, window.lo, f"before {body}")
        elif word in ("until", "till"):  # the day named included
            window = Window(None, window.hi, f"until {body}")
        elif word == "since":
            window = Window(window.lo, None, f"since {body}")
        else:
            window = Window(window.hi, None, f"after {body}")
        rest_start = bound.start()
    else:
        on = _ON.search(lead)
        if on:
            rest_start = on.start()
    rest = " ".join((question[:rest_start] + " " + question[rest_end:]).split())
    return window, rest


# ============================================================================== answers

_LAST = re.compile(
    r"\b(?:last|most recent(?:ly)?)\s+(?:time\b|seen\b|saw\b|see\b|heard\b|spoke\b|appear)"
    r"|\bwhen\b.*\b(?:see|saw|seen|hear|heard|meet|met)\b.*\blast\b"
    r"|\bwhen did (?:we|i|you) last\b",
    re.I,
)
_FIRST = re.compile(
    r"\bfirst\s+(?:time\b|seen\b|saw\b|see\b|heard\b|appear)"
    r"|\bwhen\b.*\b(?:see|saw|seen|hear|heard|meet|met)\b.*\bfirst\b"
    r"|\bwhen did (?:we|i|you) first\b",
    re.I,
)
_WHO = re.compile(r"^\s*(?:who|which (?:people|persons|speakers))\b", re.I)
_QUESTION_WORDS = (
    "what who whom did does do was were is are say said says saying talk talked speak spoke people anyone "
    "someone anybody somebody happen happened there the a an about of in on at we they us me recorded "
    "memory video videos heard hear mention mentioned tell told"
)


def now_of(answerer: Any, timeline: Timeline) -> datetime | None:
    given = getattr(answerer, "now", None)
    if given:
        return parse_time(given)
    return timeline.now()


def answer(a: Any, question: str) -> Any | None:
    """The answer to a question about time, or None for the other answerers to take it.

    ``a`` is the :class:`~m3cli.stages.ask.offline.OfflineAnswerer` (its facts, names and citations)."""
    from m3cli.stages.ask.wording import Answer

    timeline: Timeline = a.facts.timeline
    now = now_of(a, timeline) or datetime.now().astimezone()
    found = find_window(question, now)
    if found is None:
        if _LAST.search(question) or _FIRST.search(question):
            return _first_last(a, question, timeline, last=bool(_LAST.search(question)))
        return None
    window, rest = found
    if not timeline.start:
        return Answer(
            f"The memory does not know when its videos were recorded (their files carry no creation "
            f"time and none was given with --recorded-at), so it cannot tell what happened {window.label}.",
            [],
            "",
            supported=False,
        )
    videos = timeline.covering(window)
    if not videos:
        return Answer(
            f"Nothing was recorded {window.label}; the memory covers {coverage(timeline.days())}.",
            [],
            "",
            supported=False,
        )
    lines = [
        ln
        for ln in a.facts.lines
        if ln.node.video in videos and window.holds(timeline.wall(ln.node.video, ln.start))
    ]
    undated = [v for v in a.facts.files if v not in timeline.start]
    if _WHO.match(rest):
        return _who_in(a, window, lines, undated)
    return _said_in(a, window, lines, rest, undated)


def _note_undated(a: Any, undated: list[str]) -> str:
    if not undated:
        return ""
    names = ", ".join(sorted(a.facts.files.get(v, v) for v in undated))
    return f" ({names}: recording time unknown, not counted)"


def _said_in(a: Any, window: Window, lines: list[Any], rest: str, undated: list[str]) -> Any:
    from m3cli.stages.ask.text import overlap, terms
    from m3cli.stages.ask.wording import CITE_MAX, Answer, cite, quoted

    speech = sorted(
        (ln for ln in lines if ln.kind == "speech" and ln.quote),
        key=lambda ln: (a.facts.timeline.at(ln.node.video, ln.start), ln.node.id),
    )
    about = terms(a.facts.people.strip_refs(rest)) - terms(_QUESTION_WORDS)
    refs = [p.id for p in a.refs(rest)]
    if refs:
        speech = [ln for ln in speech if ln.who and ln.who[0] in refs]
    if about:
        hits = [ln for ln in speech if overlap(about, ln.quote or "") > 0]
        speech = sorted(hits, key=lambda ln: -overlap(about, ln.quote or ""))[:CITE_MAX] if hits else []
        speech.sort(key=lambda ln: (a.facts.timeline.at(ln.node.video, ln.start), ln.node.id))
    head = window.label[0].upper() + window.label[1:]
    if not speech:
        what = "nothing about that is said" if about else "nothing is said"
        who = f" by {_names(a, refs)}" if refs else ""
        return Answer(
            f"{head}, {what}{who} in the memory's lines{_note_undated(a, undated)}.", [], "", supported=False
        )
    shown = _spread(speech, CITE_MAX)
    parts = [
        f"{a.name(ln.who[0]) if ln.who else 'someone'} says {quoted(ln)} {cite(a.facts, ln)}" for ln in shown
    ]
    more = f"; and {len(speech) - len(shown)} more line(s)" if len(speech) > len(shown) else ""
    return Answer(f"{head}: " + "; ".join(parts) + more + _note_undated(a, undated) + ".", shown, "")


def _spread(lines: list[Any], most: int) -> list[Any]:
    """At most ``most`` lines in time order, the first ones of every video (at least one each): a window
    of several days cites each day's recording, not only the first one's opening lines."""
    videos = list(dict.fromkeys(ln.node.video for ln in lines))
    each = max(1, most // max(1, len(videos)))
    keep = {id(ln) for v in videos for ln in [x for x in lines if x.node.video == v][:each]}
    return [ln for ln in lines if id(ln) in keep]


def _speaker(a: Any, ln: Any) -> str:
    return a.name(ln.who[0]) if ln.who else "someone"


def _who_in(a: Any, window: Window, lines: list[Any], undated: list[str]) -> Any:
    from m3cli.stages.ask.wording import Answer, _cites, _join

    firsts: dict[tuple[str, str], Any] = {}
    for ln in sorted(lines, key=lambda ln: (a.facts.timeline.at(ln.node.video, ln.start), ln.node.id)):
        if ln.kind in ("speech", "turn", "speaking", "visible"):
            for p in ln.who:
                firsts.setdefault((ln.node.video, p), ln)
    head = window.label[0].upper() + window.label[1:]
    if not firsts:
        return Answer(f"{head}, nobody is seen or heard{_note_undated(a, undated)}.", [], "", supported=False)
    by_video: dict[str, list[str]] = {}
    for v, p in firsts:
        by_video.setdefault(v, []).append(p)
    parts, cited = [], []
    for v, people in by_video.items():
        used = [firsts[(v, p)] for p in people]
        cited += used
        where = f" in {a.facts.files.get(v, v)}" if len(by_video) > 1 or a._multi() else ""
        parts.append(f"{_join([a.name(p) for p in people])}{where} {_cites(a, used)}")
    return Answer(f"{head}: " + "; ".join(parts) + _note_undated(a, undated) + ".", cited, "")


def _names(a: Any, ids: list[str]) -> str:
    from m3cli.stages.ask.wording import _join

    return _join([a.name(p) for p in ids])


def _person_lines(a: Any, question: str) -> tuple[str, bool, list[Any]] | None:
    """Who "X" is in a question, whether the question names them by a per-video id, and every line in
    which X is seen or heard: in every video where a character of that name is known, or, for an id
    like <character_2>, in every video that has one (each video numbers its own characters)."""
    refs = a.refs(question)
    if not refs:
        return None
    p = refs[0]
    by_id = p.id.lower() in question.lower()
    name = a.facts.people.names.get(p.id)
    videos = {p.video}
    if by_id:
        videos = {ln.node.video for ln in a.facts.lines if p.id in ln.who}
    elif name:
        for v in a.facts.files:
            for c in a.memory.characters(v) if hasattr(a.memory, "characters") else []:
                if c.name and c.name.lower() == name.lower() and c.id == p.id:
                    videos.add(v)
    kinds = ("speech", "turn", "speaking", "visible")
    lines = [ln for ln in a.facts.lines if ln.node.video in videos and p.id in ln.who and ln.kind in kinds]
    return p.id, by_id, lines


def _first_last(a: Any, question: str, timeline: Timeline, last: bool) -> Any | None:
    from m3cli.stages.ask.wording import Answer, cite

    found = _person_lines(a, question)
    if found is None:
        return None
    pid, by_id, lines = found
    dated = [ln for ln in lines if timeline.at(ln.node.video, ln.start) is not None]
    if not dated:
        return None  # no dates: the per-video answer (seconds into the video) is all there is

    def moment(ln: Any) -> datetime:
        when = timeline.at(ln.node.video, ln.end if last and ln.end is not None else ln.start)
        assert when is not None  # dated lines only
        return when

    which = "last" if last else "first"
    videos = sorted({ln.node.video for ln in dated}, key=lambda v: timeline.start[v], reverse=last)
    picks = [(max if last else min)((ln for ln in dated if ln.node.video == v), key=moment) for v in videos]

    def said(ln: Any) -> str:
        verb = "heard" if ln.kind in ("speech", "turn", "speaking") else "seen"
        when = moment(ln)
        return (
            f"{which} {verb} on {day_name(when.date())} at {when.strftime('%H:%M:%S')} in "
            f"{a.facts.files.get(ln.node.video, ln.node.video)} {cite(a.facts, ln)}"
        )

    undated = sorted({ln.node.video for ln in lines} - set(timeline.start))
    note = ""
    if undated:
        names = ", ".join(a.facts.files.get(v, v) for v in undated)
        note = f" (also in {names}, whose recording time is unknown)"
    if by_id and len(picks) > 1:  # one id, a different person in each video: each one's answer
        each = "; ".join(said(ln) for ln in picks)
        return Answer(
            f"{pid} is each video's own id, so it may be {len(picks)} different people: {each}{note}.",
            picks,
            "",
        )
    pick = picks[0]
    return Answer(f"{a.name(pid)} was {said(pick)}{note}.", [pick], "")


def line_time(timeline: Timeline, video: str, t: float | None) -> str | None:
    """The ISO 8601 absolute time of second ``t`` of ``video`` (answer evidence), None when unknown."""
    when = timeline.at(video, t)
    return None if when is None else iso(when.replace(microsecond=0))
