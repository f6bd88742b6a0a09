"""What the LLM memorizer accepts back: the reply's checks and the memory section it becomes.

The validator phrases each problem beyond the JSON schema (ids not in the clip, placeholders and zero
times copied from the prompt's shape, prose under kind ``equivalence``, a face paired with a voice it is
never seen speaking with, no one named) as the correction the model is sent for repair;
:func:`memory_from_reply` turns the accepted reply into memory lines (entities extracted, clip-relative
times fixed, equivalences reconciled). Separate from building the request: these read only the reply and
the record's ids and spans.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from m3cli.schemas.records import ClipRecord, MemoryItem, MemorySection
from m3cli.stages.configs.memorize import MemorizeConfig
from m3cli.stages.core import memory_prompts as prompts
from m3cli.stages.core.entity_ids import EQUIVALENCE_RE, entities_in, name_fact
from m3cli.stages.memorize.offline import _merge_spans, _overlap, _speaking, _t


def _speaking_spans(record: ClipRecord) -> tuple[dict[str, list], dict[str, list]]:
    faces: dict[str, list] = {}
    for t in record.faces.tracks if record.faces else []:
        faces.setdefault(t.face_id, []).extend(t.spans)
    return {k: _merge_spans(v, gap=0.0) for k, v in faces.items()}, _speaking(record)


def _placeholder(text: str) -> bool:
    t = " ".join(str(text).split())
    return t in prompts.PLACEHOLDERS or bool(re.fullmatch(r"\.{2,}|…+|<[^<>]{0,60}>|\{[^{}]{0,60}\}", t))


def make_validator(
    faces: list[str], voices: list[str], config: MemorizeConfig, record: ClipRecord | None = None
) -> Callable[[Any], list[str]]:
    """Problems with a reply beyond its JSON schema, each phrased as the correction the model needs.

    Ids that are not in this clip; placeholders and zero times copied from the prompt's shape; prose
    under kind ``equivalence``; an equivalence whose face is never visible while that voice speaks;
    episodic memory that names no one although people were perceived.
    """
    allowed = set(faces) | set(voices)
    listed = ", ".join(faces + voices) or "none"
    face_spans, voice_spans = _speaking_spans(record) if record is not None else ({}, {})

    def validate(obj: Any) -> list[str]:
        problems: list[str] = []
        named = False
        for section in ("episodic", "semantic"):
            for i, item in enumerate(obj.get(section) or []):
                text = item.get("text", "")
                if _placeholder(text):
                    problems.append(
                        f"{section}[{i}] is the placeholder {text.strip()!r} copied from the shape; write "
                        "what happens in this clip"
                    )
                    continue
                ids = entities_in(text)
                named = named or (section == "episodic" and bool(ids))
                bad = [e for e in ids if e not in allowed]
                if bad:
                    problems.append(
                        f"{section}[{i}] mentions {', '.join(bad)}, not in this clip (allowed ids: {listed})"
                    )
                if item.get("start") == 0 and item.get("end") == 0:
                    problems.append(
                        f"{section}[{i}] has start 0 and end 0 (copied from the shape?); give the real "
                        f"times within {_t(record.clip.start) if record else 'the clip'}-"
                        f"{_t(record.clip.end) if record else ''} s or leave start and end out"
                    )
                m = EQUIVALENCE_RE.match(text)
                if m and not config.equivalence:
                    problems.append(f"{section}[{i}] is an equivalence line, which was not asked for")
                if item.get("kind") == "equivalence" and not m:
                    problems.append(
                        f'{section}[{i}] has kind "equivalence" but its text is not exactly '
                        '"Equivalence: <face_x>, <voice_y>"; give prose another kind'
                    )
        pairs: list[tuple[int | str, Any]] = [(i, p) for i, p in enumerate(obj.get("equivalences") or [])]
        pairs += [
            (f"semantic[{i}]", (m.group(1), m.group(2)))
            for i, item in enumerate(obj.get("semantic") or [])
            if (m := EQUIVALENCE_RE.match(item.get("text", "")))
        ]
        for at, pair in pairs:
            face, voice = pair
            where = f"equivalences[{at}]" if isinstance(at, int) else at
            if face not in faces or voice not in voices:
                problems.append(
                    f"{where} must pair a face of this clip ({', '.join(faces) or 'none'}) "
                    f"with a voice of this clip ({', '.join(voices) or 'none'}); got {list(pair)}"
                )
            elif record is not None and not _overlap(face_spans.get(face, []), voice_spans.get(voice, [])):
                problems.append(
                    f"{where} pairs {face} with {voice}, but {face} is never visible while {voice} speaks "
                    "in this clip; list only a face seen speaking with that voice"
                )
        if allowed and obj.get("episodic") and not named:
            problems.append(f"no episodic line names anyone by id; refer to people as {listed}")
        return problems[:10]

    return validate


def _as_agent_lines(validate: Callable[[Any], list[str]]) -> Callable[[Any], list[str]]:
    """m3's validator applied to M3-Agent's lists of sentences (``--prompt-style m3-agent``)."""
    return lambda obj: validate(prompts.from_agent_reply(obj))


def _fix_time(t: Any, start: float, end: float) -> float | None:
    """Absolute time, accepting clip-relative answers; None when the value is outside the clip."""
    if not isinstance(t, (int, float)):
        return None
    t = float(t)
    if start - 1.0 <= t <= end + 1.0:
        return min(max(t, start), end)
    if 0.0 <= t <= end - start + 1.0:
        return min(start + t, end)
    return None


def memory_from_reply(obj: dict, record: ClipRecord, config: MemorizeConfig, model: str) -> MemorySection:
    """The validated JSON reply as a memory section (entities extracted, equivalences reconciled)."""
    start, end = record.clip.start, record.clip.end

    def items(section: str, default_kind: str) -> list[MemoryItem]:
        out = []
        for raw in obj.get(section) or []:
            text = " ".join(str(raw["text"]).split())
            if not text:
                continue
            kind = raw.get("kind") or default_kind
            if EQUIVALENCE_RE.match(text):
                kind = "equivalence"
            item = MemoryItem(text=text, kind=kind, entities=entities_in(text))
            s, e = _fix_time(raw.get("start"), start, end), _fix_time(raw.get("end"), start, end)
            if s is not None:
                item.start = s
                item.end = e if e is not None and e >= s else s
            fact = name_fact(text) if section == "semantic" else None
            if fact:
                item.name = fact[1]
            out.append(item)
        return out

    episodic = items("episodic", "event")
    semantic = items("semantic", "knowledge") if config.semantic else []
    pairs: list[tuple[str, str]] = []
    if config.semantic and config.equivalence:
        for item in semantic:
            m = EQUIVALENCE_RE.match(item.text)
            if m:
                pairs.append((m.group(1), m.group(2)))
        for face, voice in obj.get("equivalences") or []:
            if (face, voice) not in pairs:
                pairs.append((face, voice))
                semantic.append(
                    MemoryItem(
                        text=f"Equivalence: {face}, {voice}", kind="equivalence", entities=[face, voice]
                    )
                )
    else:
        semantic = [i for i in semantic if i.kind != "equivalence"]
    return MemorySection(
        source="llm",
        model=model,
        prompt_version=config.prompt_version,
        episodic=episodic,
        semantic=semantic,
        equivalences=pairs,
        fallback=False,
    )
