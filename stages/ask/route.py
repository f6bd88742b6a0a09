"""The form of a question: the older forms read from its words, and the ordered routes every question takes.

:func:`route` gives a question the :class:`~m3cli.stages.ask.forms.Form` its answer is computed by, trying
:data:`ROUTES` in order (the newer forms of :mod:`m3cli.stages.ask.forms`, then :func:`classify_older`).
Reading a question is kept apart from answering it: the benchmarks, the QA evaluation and the tests route
questions with no memory at all, and a new form is one more entry here, not a change to the handlers.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from m3cli.stages.ask.forms import FORMS, Form, decline_reason, quote_form
from m3cli.stages.ask.text import terms

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
