"""The offline memorizer: a clip's memory lines from perception alone, one function per line kind.

Who says what and when (quoted, each utterance at its own time), which speaker turns no utterance holds,
when each voice speaks and where two overlap, when and where each face is seen, who is seen in the clip,
what is on screen, what a stage looked for and did not find, and names people say out loud. Separate
from the LLM memorizer because it needs no server and writes every line itself; the LLM memorizer
borrows its turn, sight and absence lines (what perception found that a model paraphrases or drops)
and its span helpers.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Literal

from m3cli.schemas.records import ClipRecord, MemoryInput, MemoryItem, MemorySection, Turn, Utterance
from m3cli.stages.core.entity_ids import NAME, NOT_NAMES, sorted_ids
from m3cli.stages.core.languages import language_name

OFFLINE_VERSION = "offline-v3"

# -- names said out loud (offline memorizer) ---------------------------------------------------------
#: Self-introductions: "my name is X", "my name's X", "I'm X", "I am X", "call me X".
SELF_NAME = re.compile(r"\b(?:[Mm]y name is|[Mm]y name's|I'm|I am|[Cc]all me)\s+" + NAME)
#: Vocatives: a greeting or thanks directly followed by a name ("Hi, Anna", "Thank you, Joe.").
VOCATIVE = re.compile(
    r"\b(?:[Hh]i|[Hh]ello|[Hh]ey|[Tt]hanks|[Tt]hank you|[Gg]ood (?:morning|afternoon|evening)|[Ww]elcome|"
    r"[Dd]ear|[Bb]ye|[Gg]oodbye)\s*,?\s+" + NAME
)
#: Titled mentions: "Mr. Biden", "President Obama", "Dr Smith".
TITLED = re.compile(
    r"\b((?:Mr|Mrs|Ms|Miss|Dr|Prof|President|Senator|Governor|Mayor|Professor)\.?\s+[A-Z][a-z'\-]+)"
)


def _t(x: float) -> str:
    return f"{x:.1f}"


def _merge_spans(spans: Iterable[tuple[float, float]], gap: float = 0.5) -> list[tuple[float, float]]:
    out: list[list[float]] = []
    for s, e in sorted((float(a), float(b)) for a, b in spans):
        if out and s <= out[-1][1] + gap:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def _overlap(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out = []
    for s1, e1 in a:
        for s2, e2 in b:
            s, e = max(s1, s2), min(e1, e2)
            if e > s:
                out.append((s, e))
    return _merge_spans(out, gap=0.0)


def _spans_text(spans: list[tuple[float, float]]) -> str:
    return " and ".join(f"from {_t(s)} to {_t(e)} s" for s, e in spans)


# ============================================================================== offline memorizer


NameKind = Literal["self", "vocative", "mention"]


def names_said(text: str) -> list[tuple[NameKind, str]]:
    """(kind, name) for names said in one utterance: kind is self, vocative or mention."""
    found: list[tuple[NameKind, str]] = []
    patterns: tuple[tuple[NameKind, re.Pattern[str]], ...] = (
        ("self", SELF_NAME),
        ("vocative", VOCATIVE),
        ("mention", TITLED),
    )
    for kind, pattern in patterns:
        for m in pattern.finditer(text):
            name = m.group(1).strip()
            words = name.split()
            while words and words[-1] in NOT_NAMES:
                words.pop()
            if not words or words[0] in NOT_NAMES:
                continue
            name = " ".join(words)
            if all(name != n for _, n in found):
                found.append((kind, name))
    return found


#: A stretch of a speaker turn that no utterance of that speaker covers becomes its own "not transcribed"
#: line when it lasts this long (a turn no utterance touches at all always does): shorter gaps inside a
#: transcribed turn are the pauses between words and the diarizer's padding, not speech the ASR lost.
UNTRANSCRIBED_MIN_S = 1.0


def _who(speaker: str | None) -> tuple[str, list[str]]:
    """How a line names a voice, and its entities (a voice without an id is named but not an entity)."""
    return (speaker, [speaker]) if speaker else ("An unidentified voice", [])


def _speaker_keys(x: Any) -> set[str]:
    """What ties a turn to its utterances: its voice id and its clip-local label (either may be absent)."""
    return {k for k in (x.speaker, x.speaker_local) if k}


def _subtract(span: tuple[float, float], cover: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """``span`` minus the (merged, sorted) ``cover`` spans."""
    s, e = span
    out = []
    for cs, ce in cover:
        if ce <= s or cs >= e:
            continue
        if cs > s:
            out.append((s, cs))
        s = max(s, ce)
    if e > s:
        out.append((s, e))
    return out


def speech_lines(record: ClipRecord) -> list[MemoryItem]:
    """One line per utterance, quoted, at the utterance's own time, and the names said in it."""
    out: list[MemoryItem] = []
    for u in sorted(record.utterances or [], key=lambda u: (u.start, u.end)):
        text = u.text.strip()
        if not text:
            continue
        who, ents = _who(u.speaker)
        said_in = f" (in {language_name(u.language)})" if u.language and u.language != "en" else ""
        english = (getattr(u, "translation", None) or "").strip() if said_in else ""
        line = f'{who} says{said_in}: "{text}"' + (f' (English: "{english}")' if english else "")
        out.append(MemoryItem(text=line, kind="speech", start=u.start, end=u.end, entities=ents))
        for kind, name in names_said(text):
            if kind == "self":
                line = f'{who} says their name is {name} ("{text}")'
            elif kind == "vocative":
                line = f"{who} addresses someone as {name}"
            else:
                line = f"{who} mentions {name}"
            out.append(
                MemoryItem(
                    text=line,
                    kind="mention",
                    start=u.start,
                    end=u.end,
                    entities=ents,
                    name=name,
                    name_kind=kind,
                )
            )
    return out


def name_lines(record: ClipRecord) -> list[MemoryItem]:
    """Semantic: the names people said about themselves ("The name of <voice_1> is Barack")."""
    out: list[MemoryItem] = []
    for u in sorted(record.utterances or [], key=lambda u: (u.start, u.end)):
        if not u.speaker:
            continue
        for kind, name in names_said(u.text.strip()):
            if kind == "self":
                out.append(
                    MemoryItem(
                        text=f"The name of {u.speaker} is {name}",
                        kind="attribute",
                        start=u.start,
                        end=u.end,
                        entities=[u.speaker],
                        name=name,
                    )
                )
    return out


def untranscribed_lines(record: ClipRecord) -> list[MemoryItem]:
    """Speech the diarizer heard and no utterance of that speaker holds: "<voice_2> speaks, not
    transcribed, from 0.3 to 3.7 s", one line per stretch, so who spoke when stays complete."""
    said: dict[str, list[tuple[float, float]]] = {}
    for u in record.utterances or []:
        for k in _speaker_keys(u):
            said.setdefault(k, []).append((u.start, u.end))
    out: list[MemoryItem] = []
    for t in sorted(record.turns or [], key=lambda t: (t.start, t.end)):
        if t.end <= t.start:
            continue
        cover = _merge_spans([span for k in _speaker_keys(t) for span in said.get(k, [])], gap=0.0)
        gaps = _subtract((t.start, t.end), cover)
        untouched = gaps == [(t.start, t.end)]
        for s, e in gaps:
            if untouched or e - s >= UNTRANSCRIBED_MIN_S:
                who, ents = _who(t.speaker)
                # English footage keeps its lines: only another language is named
                spoken = f" {language_name(t.language)}" if t.language and t.language != "en" else ""
                out.append(
                    MemoryItem(
                        text=f"{who} speaks{spoken}, not transcribed, from {_t(s)} to {_t(e)} s",
                        kind="untranscribed",
                        start=s,
                        end=e,
                        entities=ents,
                    )
                )
    return sorted(out, key=lambda i: (i.start, i.text))


def _speaking(record: ClipRecord) -> dict[str, list[tuple[float, float]]]:
    """Voice id -> when it speaks: its diarization turns; utterances only for records whose turns carry
    no voice ids (written before turns were kept, or not through `m3 voices`)."""
    spans: dict[str, list[tuple[float, float]]] = {}
    source: list[Turn] | list[Utterance] = (
        (record.turns or []) if any(t.speaker for t in record.turns or []) else (record.utterances or [])
    )
    for x in source:
        if x.speaker and x.end > x.start:
            spans.setdefault(x.speaker, []).append((x.start, x.end))
    merged = {k: _merge_spans(v, gap=0.0) for k, v in spans.items()}
    return dict(sorted(merged.items(), key=lambda kv: (kv[1][0][0], kv[0])))


def speaking_lines(record: ClipRecord) -> list[MemoryItem]:
    """One line per voice: every span it speaks in ("<voice_3> speaks from 6.4 to 9.0 s"), from the turns."""
    return [
        MemoryItem(
            text=f"{vid} speaks {_spans_text(sp)}",
            kind="speaking",
            start=sp[0][0],
            end=sp[-1][1],
            entities=[vid],
        )
        for vid, sp in _speaking(record).items()
    ]


def overlap_lines(record: ClipRecord) -> list[MemoryItem]:
    """At most one line per clip, and only where turns of different voices overlap (the diarizer's
    ``overlap`` flag): "<voice_1> and <voice_2> speak at the same time from 3.2 to 3.6 s"."""
    turns = [t for t in record.turns or [] if t.overlap and t.speaker and t.end > t.start]
    pairs: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for i, a in enumerate(turns):
        for b in turns[i + 1 :]:
            if a.speaker == b.speaker:
                continue
            s, e = max(a.start, b.start), min(a.end, b.end)
            if e > s:
                first, second = sorted_ids([a.speaker or "", b.speaker or ""])  # both set: kept above
                pairs.setdefault((first, second), []).append((s, e))
    if not pairs:
        return []
    merged = {k: _merge_spans(v, gap=0.0) for k, v in pairs.items()}
    order = sorted(merged.items(), key=lambda kv: (kv[1][0][0], kv[0]))
    text = "; ".join(f"{a} and {b} speak at the same time {_spans_text(sp)}" for (a, b), sp in order)
    ents = list(dict.fromkeys(e for (a, b), _ in order for e in (a, b)))
    start = min(sp[0][0] for _, sp in order)
    end = max(sp[-1][1] for _, sp in order)
    return [MemoryItem(text=text, kind="overlap", start=start, end=end, entities=ents)]


def _face_spans(record: ClipRecord) -> dict[str, list[tuple[float, float]]]:
    tracks = sorted(
        record.faces.tracks if record.faces else [],
        key=lambda t: (min(s for s, _ in t.spans) if t.spans else 0.0, t.face_id),
    )
    return {t.face_id: _merge_spans(t.spans) for t in tracks if t.spans}


def appearance_lines(record: ClipRecord) -> list[MemoryItem]:
    """One line per face: every span it is visible in ("<face_1> is visible from 0.6 to 5.7 s")."""
    return [
        MemoryItem(
            text=f"{fid} is visible {_spans_text(sp)}",
            kind="appearance",
            start=sp[0][0],
            end=sp[-1][1],
            entities=[fid],
        )
        for fid, sp in _face_spans(record).items()
    ]


def position_lines(record: ClipRecord) -> list[MemoryItem]:
    """Where each face is in the picture and how large, from its boxes: "<face_1> is seen on the left of
    the picture, its face 21% of the picture's height, from 0.0 to 5.0 s". A question that describes a
    person by place ("the man on the left") is resolved from these lines; thirds of the width by the
    median box centre, the size by the median box height."""
    width = record.clip.width or record.video.width
    height = record.clip.height or record.video.height
    if not record.faces or not width or not height:
        return []
    boxes: dict[str, list[tuple[float, float, float, float, float]]] = {}
    for t in record.faces.tracks:
        boxes.setdefault(t.face_id, []).extend(t.boxes or [])
    out = []
    for fid, sp in _face_spans(record).items():
        got = boxes.get(fid)
        if not got:
            continue
        cx = sorted((b[1] + b[3]) / 2 / width for b in got)[len(got) // 2]
        hh = sorted((b[4] - b[2]) / height for b in got)[len(got) // 2]
        place = "on the left" if cx < 1 / 3 else "on the right" if cx > 2 / 3 else "in the middle"
        out.append(
            MemoryItem(
                text=f"{fid} is seen {place} of the picture, its face {round(100 * hh)}% of the "
                f"picture's height, from {_t(sp[0][0])} to {_t(sp[-1][1])} s",
                kind="position",
                start=sp[0][0],
                end=sp[-1][1],
                entities=[fid],
            )
        )
    return out


def present_lines(record: ClipRecord) -> list[MemoryItem]:
    """Who is seen in the clip, as one line (not one per pair): "2 faces are seen in this clip:
    <face_1> (from 0.6 to 5.7 s) and <face_2> (from 5.0 to 13.0 s)"; none for fewer than two faces."""
    spans = _face_spans(record)
    if len(spans) < 2:
        return []
    parts = [f"{fid} ({_spans_text(sp)})" for fid, sp in spans.items()]
    listed = ", ".join(parts[:-1]) + " and " + parts[-1]
    return [
        MemoryItem(
            text=f"{len(spans)} faces are seen in this clip: {listed}",
            kind="present",
            start=min(sp[0][0] for sp in spans.values()),
            end=max(sp[-1][1] for sp in spans.values()),
            entities=list(spans),
        )
    ]


def sight_lines(record: ClipRecord) -> list[MemoryItem]:
    """What is seen: "on screen" and "seen" lines from the record's ``sight`` section (`m3 sight`)."""
    from m3cli.stages.sight import memory_lines

    return [MemoryItem(**line) for line in memory_lines(record)]


def absence_lines(record: ClipRecord) -> list[MemoryItem]:
    """What a stage looked or listened for over the whole clip and did not find: "no face is seen in
    this clip" (faces ran: its frames held no face), "no text is on screen" (sight read its keyframes
    and found none), "nothing is said in this clip" (speech ran: no turn, no word), "the clip has no
    sound". A stage that did not run writes nothing, so a question's
    answer can tell "nobody is seen" from "nobody looked" by the memory's own lines."""
    s, e = record.clip.start, record.clip.end
    out: list[MemoryItem] = []
    faces = record.faces
    pictureless = record.video.has_video is False or record.clip.has_video is False
    if pictureless:  # nothing to look at: said once, instead of "no face is seen"
        text = f"the recording has no pictures (sound only): nobody can be seen, from {_t(s)} to {_t(e)} s"
        out.append(MemoryItem(text=text, kind="absent", start=s, end=e, entities=[]))
        faces = None
    if faces is not None and not faces.tracks:
        looked = f" ({faces.frames} frames looked at)" if faces.frames else ""
        text = f"no face is seen in this clip, from {_t(s)} to {_t(e)} s{looked}"
        out.append(MemoryItem(text=text, kind="absent", start=s, end=e, entities=[]))
    sight = None if pictureless else record.sight
    if sight is not None and sight.keyframes and not sight.text:
        times = [k.t for k in sight.keyframes]
        at = ", ".join(_t(t) for t in times[:6]) + (f" and {len(times) - 6} more" if len(times) > 6 else "")
        text = f"no text is on screen in this clip, from {_t(s)} to {_t(e)} s ({len(times)} keyframes read, at {at} s)"  # noqa: E501
        out.append(MemoryItem(text=text, kind="absent", start=s, end=e, entities=[]))
    silent = record.clip.has_audio is False or record.video.has_audio is False
    if silent:
        text = f"the clip has no sound, from {_t(s)} to {_t(e)} s"
        out.append(MemoryItem(text=text, kind="absent", start=s, end=e, entities=[]))
    elif (record.utterances is not None or record.turns is not None) and not (
        record.utterances or record.turns
    ):
        text = f"nothing is said in this clip, from {_t(s)} to {_t(e)} s"
        out.append(MemoryItem(text=text, kind="absent", start=s, end=e, entities=[]))
    return out


def turn_lines(record: ClipRecord) -> list[MemoryItem]:
    """Who speaks when, from the diarization turns alone (untranscribed stretches, speaking spans,
    overlapping speech): every memory gets them, whoever writes the rest, since an LLM reads only the
    transcript and cannot know what the ASR missed."""
    return untranscribed_lines(record) + speaking_lines(record) + overlap_lines(record)


def offline_memory(record: ClipRecord) -> MemorySection:
    """Deterministic memory from perception alone; no invented semantics.

    Each line kind has its own function (speech and names said, untranscribed turns, speaking spans,
    overlapping speech, appearances, who is seen in the clip); each line states one thing a question
    could ask about, at its own time.
    """
    faces = bool(record.faces and record.faces.tracks)
    episodic = (
        speech_lines(record)
        + turn_lines(record)
        + appearance_lines(record)
        + present_lines(record)
        + position_lines(record)
        + sight_lines(record)
        + absence_lines(record)
    )
    inputs: list[MemoryInput] = ["faces"] if faces else []
    if record.utterances:
        inputs.append("dialogue")
    return MemorySection(
        source="offline",
        model=None,
        prompt_version=OFFLINE_VERSION,
        inputs=inputs,
        episodic=episodic,
        semantic=name_lines(record),
        equivalences=[],
        fallback=False,
    )
