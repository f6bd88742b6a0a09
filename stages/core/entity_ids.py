"""The id grammar of people in m3 (``<face_3>``, ``<voice_1>``, ``<character_2>``) and names stated in text.

Every stage writes and reads these ids: faces and voices mint them, link joins them into characters,
memorize writes them into memory lines, abstract, index and report read them back out of text. The
grammar lives here once, so a stage never imports another stage to parse an id and no two modules can
disagree on what an id is:

* an id is ``<KIND_N>`` with KIND one of :data:`KINDS` and N a decimal number (:data:`ID_RE`);
* prompts accept at most six digits (:data:`PROMPT_ID_RE`): a longer "id" in untrusted text is text;
* ids of one kind sort by number (:func:`number_of`), lists of mixed ids by kind then number
  (:func:`sorted_ids`) or by number then text (:func:`by_number`) where characters and unlinked faces
  or voices are listed together.

Names are the other half of who someone is: :func:`name_fact` reads "The name of <voice_1> is Anna"
style statements (from a model or from what people said) that every reader of memory turns into a name.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

FACE, VOICE, CHARACTER = "face", "voice", "character"
KINDS = (FACE, VOICE, CHARACTER)
_KIND = "|".join(KINDS)

#: Any id inside text; group 1 is its kind, group 2 its number.
ID_RE = re.compile(rf"<({_KIND})_(\d+)>")
#: A person of the memory's people table (the same person across videos), not a perception kind.
PERSON = "person"
#: An id as prompts and their data blocks accept it (a person's too): at most six digits.
PROMPT_ID_RE = re.compile(rf"<(?:{_KIND}|{PERSON})_\d{{1,6}}>")
#: Ids of one kind inside text.
FACE_ID_RE = re.compile(rf"<{FACE}_\d+>")
VOICE_ID_RE = re.compile(rf"<{VOICE}_\d+>")
CHARACTER_ID_RE = re.compile(rf"<{CHARACTER}_\d+>")
#: Prefix every character id starts with (a cheap test on ids that are known to be well formed).
CHARACTER_PREFIX = f"<{CHARACTER}_"
#: "Equivalence: <face_i>, <voice_j>" — a semantic line joining a face and a voice.
EQUIVALENCE_RE = re.compile(
    rf"^\s*equivalence\s*:\s*({FACE_ID_RE.pattern})\s*,\s*({VOICE_ID_RE.pattern})\s*\.?\s*$", re.I
)


def format_id(kind: str, number: int) -> str:
    """``<kind_number>``: the one way an id is written."""
    return f"<{kind}_{number}>"


def face_id(number: int) -> str:
    return format_id(FACE, number)


def voice_id(number: int) -> str:
    return format_id(VOICE, number)


def character_id(number: int) -> str:
    return format_id(CHARACTER, number)


def parse_id(text: str) -> tuple[str, int] | None:
    """(kind, number) when ``text`` is exactly one id, else None."""
    m = ID_RE.fullmatch(text)
    return (m.group(1), int(m.group(2))) if m else None


def is_id(text: str, kind: str | None = None) -> bool:
    """Whether ``text`` is exactly one id (of ``kind``, when given)."""
    parsed = parse_id(text)
    return parsed is not None and (kind is None or parsed[0] == kind)


def kind_of(text: str) -> str | None:
    """The kind of id ``text`` is (``"face"``, ``"voice"``, ``"character"``), None when it is none."""
    parsed = parse_id(text)
    return parsed[0] if parsed else None


def number_of(text: str) -> int:
    """The number of id ``text`` (``<voice_12>`` -> 12); ValueError when it is not an id."""
    parsed = parse_id(text)
    if parsed is None:
        raise ValueError(f"not an id: {text!r}")
    return parsed[1]


def sorted_ids(ids: Iterable[str]) -> list[str]:
    """Ids sorted by kind, then number (``<face_2>`` before ``<face_10>``)."""
    return sorted(ids, key=lambda s: (s.split("_")[0], int(re.sub(r"\D", "", s) or 0)))


@functools.lru_cache(maxsize=4096)
def by_number(text: str) -> tuple[int, str]:
    """Sort key: an id's number, then its text (what is not an id goes last)."""
    m = re.search(r"(\d+)>$", text)
    return (int(m.group(1)) if m else 10**9, text)


def without_ids(text: str) -> str:
    """``text`` with every id replaced by "someone": what a text embedder is given.

    An id's number says nothing about meaning, and numbers move: the linker numbers characters by
    first appearance, so one join renumbers every later character of the video, and every line that
    names one is rewritten. With the ids in its input, each rewritten line had to be embedded again
    (249 of 627 lines at one commit of a 12-minute watch, 5 s of a restart's first commit, growing
    with the video); without them a rewritten line keeps its vector, and a memory's vectors do not
    depend on how its characters happen to be numbered."""
    return ID_RE.sub("someone", text)


def entities_in(text: str) -> list[str]:
    """Ids mentioned in ``text``, in order of first mention, without repeats."""
    seen: dict[str, None] = {}
    for m in ID_RE.finditer(text):
        seen.setdefault(m.group(0), None)
    return list(seen)


# -- names --------------------------------------------------------------------------------------------
#: A name is one or two capitalised words.
NAME = r"([A-Z][a-z'\-]+(?:\s+[A-Z][a-z'\-]+)?)"
#: Capitalised words that are never names (after "I'm"/"I am", or starting a stated name).
NOT_NAMES = frozenset(
    "I A An The So Not Just Here There Very Really Sorry Glad Happy Going Fine Good Sure Okay OK Yes No "
    "Well Now Still Also Afraid Trying Looking Back Done Ready Pleased Honored Honoured Proud Delighted "
    "Thrilled Excited Grateful Thankful Always Never All".split()
)
_ANY_ID = rf"<(?:{_KIND})_\d+>"
#: Name facts in semantic lines (LLM or offline): "The name of <voice_1> is X", "<face_2>'s name is X",
#: "<face_2> is named X", "<voice_1> introduces himself as X".
NAME_FACT = re.compile(
    rf"(?:name of\s+({_ANY_ID})\s+is|({_ANY_ID})(?:'s name is|"
    r"\s+is (?:named|called)|\s+introduces (?:himself|herself|themselves|themself) as))\s+\"?" + NAME
)


def name_fact(text: str) -> tuple[str, str] | None:
    """(id, name) when ``text`` states someone's name, else None."""
    m = NAME_FACT.search(text)
    if not m:
        return None
    name = m.group(3).strip()
    first = name.split()[0]
    if first in NOT_NAMES:
        return None
    return (m.group(1) or m.group(2), name)
