"""Question forms beyond who-said-what: the first questions a user asks, and the ones offline cannot answer.

A new user asks "Who is in the video?", "What is this video about?", "What text was on screen?", "What
language does the first speaker speak?", "How long does she speak?". Each function here reads one such
form and returns a :class:`Form` (or None); :data:`m3cli.stages.ask.route.ROUTES` tries them in order
before the older forms of :func:`m3cli.stages.ask.route.classify`. Their handlers are in
:mod:`m3cli.stages.ask.overview`.

:func:`decline_reason` names why a question the structure cannot answer needs more than the memory's
structure ("needs an LLM: general knowledge", "needs what people look like"): the answer states it
instead of passing off the nearest line as an answer. The forms were grown from the question forms
M3-Bench's 4,490 questions show most often (`python -m bench.bench_questions`), not from our own set.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass
class Form:
    kind: str  # count_people | count_times | count_turns | order | who_times | when | what_said |
    #            who_said | at_time | cross | seen | who_visible | fallback, and the forms below
    detail: str = ""
    time: float | None = None
    topic: str = ""


_AT = re.compile(
    r"\b(?:at|around|about|near)\s+(?:the\s+)?(?P<t>\d{1,2}:\d{2}(?:\.\d+)?|\d+(?:\.\d+)?)\s*"
    r"(?:s\b|sec\b|secs\b|seconds?\b|second mark)",
    re.I,
)
_VIDEO = r"(?:video|clip|film|movie|recording|footage|scene|vlog)"

#: the languages a speech line may name ("says (in Portuguese)"), as a question may ask for them
LANGUAGES = (
    "English|German|Spanish|French|Portuguese|Italian|Japanese|Chinese|Mandarin|Cantonese|Russian|Korean|"
    "Arabic|Hindi|Dutch|Polish|Turkish|Swedish|Norwegian|Danish|Finnish|Greek|Czech|Hungarian|Romanian|"
    "Ukrainian|Vietnamese|Thai|Indonesian|Malay|Hebrew|Persian|Catalan|Tamil|Urdu|Bengali"
)


def _time(q: str) -> float | None:
    m = _AT.search(q)
    if not m:
        return None
    t = m.group("t")
    return int(t.split(":")[0]) * 60 + float(t.split(":")[1]) if ":" in t else float(t)


def text_form(q: str) -> Form | None:
    """ "What text was on screen?", "What is the title of the film shown on screen?", "Is there any text
    on screen at 10 seconds?", "What does the sign say?"."""
    ql = q.lower()
    title = re.search(rf"\btitle\b.*\b(?:{_VIDEO}|show|book|song|programme|program)\b|\btitle card\b", ql)
    text = re.search(r"\b(?:text|written on|writing on|caption|subtitles?|lettering)\b", ql) and re.search(
        r"\b(?:what|which|is there|are there|any)\b", ql
    )
    sign = re.search(r"\bwhat does the (?:sign|screen|caption|banner|poster|label)\b.*\bsay\b", ql)
    if not (title or text or sign) or re.match(r"\s*when\b", ql):
        return None
    return Form("text", "title" if title else "", time=_time(ql), topic=q)


def summary_form(q: str) -> Form | None:
    """ "What is this video about?", "Summarize the video.", "What happens in the video?"."""
    ql = q.lower()
    if re.search(
        rf"\bwhat(?:'s| is| was)\s+(?:this|the)\s+{_VIDEO}\s+about\b|\bsummar(?:y|i[sz]e)\b|"
        rf"\bwhat happens in (?:this|the) {_VIDEO}\b|\bdescribe (?:this|the) {_VIDEO}\b|\boverview\b|"
        rf"\bwhat (?:is|was) (?:going on|happening) in (?:this|the) {_VIDEO}\b",
        ql,
    ):
        return Form("summary", topic=q)
    return None


def who_in_form(q: str) -> Form | None:
    """ "Who is in the video?", "Who are the people in this video?", "Who appears in the video?"."""
    ql = q.lower().strip(" ?.!")
    if _time(ql) is not None:
        return None
    if re.fullmatch(
        rf"who\s+(?:is|are|was|were)\s+(?:(?:in|on)\s+(?:this|the)\s+{_VIDEO}|there|present|featured|in it)"
        rf"|who\s+(?:is|are|was|were)\s+the\s+(?:people|persons|characters|participants)"
        rf"(?:\s+(?:in|of|on)\s+(?:this|the)\s+{_VIDEO})?"
        rf"|who\s+(?:appears?|is shown|are shown|features?)\s+in\s+(?:this|the)\s+{_VIDEO}"
        rf"|(?:which|what)\s+people\s+(?:are|were|appear)\s+in\s+(?:this|the)\s+{_VIDEO}",
        ql,
    ):
        return Form("who_in", topic=q)
    return None


def who_speaks_form(q: str) -> Form | None:
    """ "Who speaks?", "Who is talking in the video?": every speaker, not the best-matching one."""
    ql = q.lower().strip(" ?.!")
    if re.fullmatch(
        rf"who\s+(?:speaks|talks|spoke|talked|is speaking|is talking|was speaking|was talking|"
        rf"are the speakers|is the speaker|are speaking)(?:\s+in\s+(?:this|the)\s+{_VIDEO})?",
        ql,
    ):
        return Form("who_speaks", topic=q)
    return None


def said_all_form(q: str) -> Form | None:
    """ "What was said?", "What is said in the video?", "What do they say?" (nobody named, no time)."""
    ql = q.lower().strip(" ?.!")
    if re.fullmatch(
        rf"what\s+(?:was|is|were|are|gets|got)\s+(?:said|being said|spoken|talked about|discussed)"
        rf"(?:\s+in\s+(?:this|the)\s+{_VIDEO})?"
        r"|what\s+(?:do|did|does)\s+(?:they|people|anyone|someone|somebody|anybody|the people)\s+"
        r"(?:say|talk about)(?:\s+in\s+(?:this|the)\s+" + _VIDEO + r")?",
        ql,
    ):
        return Form("said_all", topic=q)
    return None


def language_form(q: str) -> Form | None:
    """ "What language does the first speaker speak?", "Who speaks Spanish?", "What languages are spoken?"."""
    ql = q.lower()
    named = re.search(
        rf"\b(?:speaks?|spoke|spoken|speaking|talks?|talking|says?|said)\s+(?:in\s+)?({LANGUAGES.lower()})\b",
        ql,
    )
    if (
        re.search(
            r"\b(?:what|which) languages?\b|\bin (?:what|which) language\b|\bhow many languages\b|"
            r"\blanguages? (?:does|do|did|is|are|was|were)\b.*\b(?:speak|spoken|use|used|talk|fluent)",
            ql,
        )
        or named
    ):
        return Form("language", named.group(1).capitalize() if named else "", topic=q)
    return None


def duration_form(q: str) -> Form | None:
    """ "How long does the first speaker speak?", "How long is the man on screen?"."""
    ql = q.lower()
    if re.match(r"\s*(?:for\s+)?how (?:long|much time|many seconds|many minutes)\b", ql) and re.search(
        r"\b(?:speak|speaks|spoke|speaking|talk|talks|talked|talking|say|visible|on screen|seen|shown|appear)",  # noqa: E501
        ql,
    ):
        what = "visible" if re.search(r"\b(?:visible|on screen|seen|shown|appear)", ql) else "speech"
        return Form("duration", what, topic=q)
    return None


def with_whom_form(q: str) -> Form | None:
    """ "Who does the first speaker talk to?", "With whom does she speak?"."""
    ql = q.lower()
    if re.search(
        r"\bwith whom\b|\bwho\s+(?:does|did|is)\b.+\b(?:talk|speak|chat|talking|speaking)\w*\s+(?:to|with)\b",
        ql,
    ):
        return Form("with_whom", topic=q)
    return None


_ABOUT = re.compile(
    r"^\s*(?:who\s+(?:is|was)|tell\s+me\s+about|what\s+do\s+(?:we|you)\s+know\s+about|describe)\s+"
    r"(?P<who><(?:character|person|face|voice)_\d+>)\s*[?.!]?\s*$",
    re.I,
)


def about_form(q: str) -> Form | None:
    """ "Who is <character_2>?", "Tell me about <person_3>": the person the question names by id. (Read
    as "who said ...", it answered with whoever's line matched the id's words best: another person.)"""
    m = _ABOUT.match(q)
    return Form("about", m.group("who"), topic=q) if m else None


_ROLE = re.compile(r"^\s*who\s+(?:is|was)\s+the\s+(?P<role>[a-z][a-z\- ]*?)\s*\??$", re.I)


def who_is_form(q: str) -> Form | None:
    """ "Who is the pianist?", "Who is the woman?": a person by a description the memory may not hold."""
    m = _ROLE.match(q.strip())
    role = m.group("role").lower() if m else ""
    if (
        not m
        or len(role.split()) > 2
        or re.search(rf"\b(?:{_VIDEO}|first|second|third|last|most|best|least|new|\w+est)\b", role)
    ):
        return None
    return Form("who_is", m.group("role"), topic=q)


_QUOTE = re.compile(
    r"\b(?:mention|mentions|mentioned|according to|says?|said|tells?|told|recommends?|recommended|"
    r"suggests?|suggested|advice|advises?|advised|explains?|explained|claims?|claimed|promises?|promised|"
    r"asks?|asked|answers?|answered|replies|replied|describes?|described as|as stated|states?|stated|"
    r"talks? about|talked about|discuss(?:es|ed)?|introduces?|introduced|calls?|called)\b",
    re.I,
)


def quote_form(q: str) -> Form | None:
    """A question whose answer lies in something said ("What advice does the vlogger give ...", "What
    is the fine mentioned for ...", "According to Mo, ..."): the line of speech that says it, quoted and
    cited; the reader (or an LLM) takes the answer from it. Tried after every other form."""
    if _QUOTE.search(q) and re.match(r"\s*(?:what|which|who|whom|how|where|when|according)\b", q, re.I):
        return Form("quote", topic=q)
    return None


#: the forms above, in the order they are tried (before the older forms of ``classify``)
FORMS = [
    text_form,
    summary_form,
    who_in_form,
    who_speaks_form,
    said_all_form,
    language_form,
    duration_form,
    with_whom_form,
    about_form,
    who_is_form,
]


# ============================================================================== stated declines

#: (pattern, reason): a question of this form needs more than the memory's structure. Tried in order on
#: questions no handler takes; the first that matches is the reason the answer states.
DECLINES: list[tuple[re.Pattern[str], str]] = [
    (
        re.compile(
            r"\b(?:colou?rs?|wear|wears|wearing|wore|dressed|clothes|clothing|shirt|hair|glasses|hat|"
            r"tall|short|old|young|looks? like|appearance|beard|skin|shoes|jacket|dress)\b",
            re.I,
        ),
        "needs what people and things look like (no offline model describes appearance)",
    ),
    (
        re.compile(
            r"\b(?:relationship|related|relation|friends?|married|husband|wife|father|mother|son|daughter|"
            r"brother|sister|roommates?|partners?|boyfriend|girlfriend|colleagues?|boss)\b",
            re.I,
        ),
        "needs an LLM: relationships between people",
    ),
    (
        re.compile(
            r"^\s*(?:is|are|was|were|does|do|did|can|could|would|will|has|have|should)\b.*\b(?:like|likes|"
            r"enjoy|enjoys|prefer|prefers|want|wants|good at|skilled|introvert|extrovert|personality|"
            r"cautious|careful|interested|afraid|happy|sad|angry|person|type of person|kind of person|"
            r"professional|amateur|favou?rite|habit|often|usually)\b",
            re.I,
        ),
        "needs an LLM: judging a person's traits, likes or habits",
    ),
    (
        re.compile(
            r"\b(?:personality|character traits?|attitude|style|hobby|hobbies|habits?|favou?rite|prefer|"
            r"preference|likes?|dislikes?|enjoys?|profession|job|occupation|role)\b",
            re.I,
        ),
        "needs an LLM: judging a person's traits, likes or habits",
    ),
    (
        re.compile(
            r"^\s*(?:why|how come)\b|\bwhat (?:is|was) the (?:reason|purpose|cause)\b|\bbecause\b", re.I
        ),
        "needs an LLM: reasons and causes",
    ),
    (
        re.compile(
            r"\b(?:should|robot|where (?:should|to|can|do|does|is|are|was|were)|put|place[ds]?|stored?|kept|"
            r"located|location|shelf|drawer|cabinet|fridge|refrigerator|table|room)\b",
            re.I,
        ),
        "needs an LLM: where objects are and what to do with them (object positions are not in the memory)",
    ),
    (
        re.compile(r"^\s*(?:who|which)\b.*\b(?:more|most|less|least|better|best|worse|worst)\b", re.I),
        "needs an LLM: judging a person's traits, likes or habits",
    ),
    (
        re.compile(
            r"\bwhat happen(?:s|ed)\b|\bnext step\b|\b(?:do|does|did)\b.*\b(?:after|before|next|then)\b",
            re.I,
        ),
        "needs an LLM: events in order (the memory orders speech and faces, not actions)",
    ),
    (
        re.compile(r"^\s*where\b", re.I),
        "needs an LLM: places (the memory holds no place unless a line says it)",
    ),
    (
        re.compile(r"^\s*how (?:skilled|good|well|does|do|did|would|is|are)\b|\bfeel about\b", re.I),
        "needs an LLM: judging how someone does or feels",
    ),
    (
        re.compile(
            r"\b(?:marital|status|goal|skill|skills|interest|interests|services?|method|tools?)\b", re.I
        ),
        "needs an LLM: general knowledge and details of objects",
    ),
    (
        re.compile(r"^\s*(?:is|are|was|were|does|do|did|can|could|would|will|has|have|had)\b", re.I),
        "needs an LLM: a yes/no judgement over several lines",
    ),
    (
        re.compile(r"\bhow (?:many|much)\b", re.I),
        "needs an LLM: counting objects or amounts (the memory counts people, turns and words said)",
    ),
    (
        re.compile(
            r"^\s*(?:what|which)\b.*\b(?:brand|type|kind|sort|model|name of|price|cost|costs)\b", re.I
        ),
        "needs an LLM: general knowledge and details of objects",
    ),
    (
        re.compile(
            r"^\s*(?:what|how)\b.*\b(?:do|does|did)\b.*\b(?:do|make|cook|use|feed|buy|eat|drink)\b", re.I
        ),
        "needs an LLM: actions seen (the memory holds who speaks and is seen, not what they do)",
    ),
]


def decline_reason(question: str) -> str | None:
    """Why a question no structural handler takes needs more than the memory's structure, or None."""
    for pattern, reason in DECLINES:
        if pattern.search(question):
            return reason
    return None
