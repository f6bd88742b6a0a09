"""A video's memory lines sorted into what the page draws: clip transcripts, timeline spans and cards.

Timeline spans come from the memory lines themselves: ``speaking`` lines ("<voice_1> speaks from 0.8 to
2.4 s and from ...", the diarization turns, so speech the ASR could not read still counts) give who spoke
when; in clips without them (memories written before they existed, or by an LLM memorizer) ``speech``
and ``untranscribed`` lines do. ``appearance`` lines ("<face_1> is visible from 0.8 to 1.6 s and from
...") give who was on screen when.
Memories written by an LLM memorizer may lack those kinds; then a character is drawn as present over the
whole of every clip its faces and voices occur in (the entities table's ``clips``).

One job: reading meaning out of lines already read. It is separate from :mod:`.gather`, which decides
which rows to read (per-video queries, caps, the page's line budget), so each can be read alone.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

from m3cli.stages.core.entity_ids import name_fact
from m3cli.stages.report.records import Character, Clip, Join, Line, NameFact, ReportLimits, Utterance

SPAN_RE = re.compile(r"from (\d+(?:\.\d+)?) to (\d+(?:\.\d+)?) s")
SPEECH_RE = re.compile(r'says(?: \([^)]*\))?: "(.*)"\s*$', re.S)
#: Lines that stand in the clip's transcript: what was said, and turns heard but not transcribed.
TRANSCRIPT_KINDS = ("speech", "untranscribed")
#: Lines that put two or more people in one place (the offline memorizer's clip line, overlapping
#: speech; "cooccurrence" in memories written before those).
TOGETHER_KINDS = ("present", "overlap", "cooccurrence")

KIND_ORDER = {"clip": 0, "episodic": 1, "semantic": 2, "character": 3, "relationship": 4, "conflict": 5}


def entity_order(eid: str) -> tuple[str, int]:
    m = re.match(r"<(\w+?)_(\d+)>", eid)
    return (m.group(1), int(m.group(2))) if m else (eid, 0)


def fill_clips(
    clips: dict[int, Clip], lines: list[Line], mapping: dict[str, str], limits: ReportLimits
) -> None:
    per_clip: dict[int, list[Line]] = defaultdict(list)
    for x in lines:
        if x.clip in clips:
            per_clip[x.clip].append(x)
    for idx, xs in per_clip.items():
        clip = clips[idx]
        xs.sort(key=lambda x: (KIND_ORDER.get(x.kind, 9), x.t_start if x.t_start is not None else 0.0, x.id))
        clip.lines_total = len(xs)
        clip.lines = xs[: limits.max_lines_per_clip]
        for x in xs:
            if x.subkind not in TRANSCRIPT_KINDS:
                continue
            m = SPEECH_RE.search(x.raw_text)
            text = (m.group(1) if m else x.raw_text) if x.subkind == "speech" else "(speaks, not transcribed)"
            speaker = x.entities[0] if x.entities else None
            clip.utterances.append(
                Utterance(
                    speaker=speaker,
                    character=mapping.get(speaker, speaker) if speaker else None,
                    start=float(x.t_start if x.t_start is not None else clip.start),
                    end=float(x.t_end if x.t_end is not None else clip.end),
                    text=text,
                    node=x.id,
                )
            )
        clip.utterances.sort(key=lambda u: (u.start, u.end))


def _merge(spans: list[tuple[float, float]], limit: int) -> list[tuple[float, float]]:
    """Sorted, overlapping spans merged; beyond ``limit`` spans, gaps are closed smallest first."""
    spans = sorted((float(s), float(max(s, e))) for s, e in spans)
    out: list[list[float]] = []
    for s, e in spans:
        if out and s <= out[-1][1] + 1e-6:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    if len(out) > limit and out:
        total = out[-1][1] - out[0][0]
        gap = total / max(limit, 1)
        merged: list[list[float]] = []
        for s, e in out:
            if merged and s - merged[-1][1] <= gap:
                merged[-1][1] = max(merged[-1][1], e)
            else:
                merged.append([s, e])
        out = merged
    return [(s, e) for s, e in out]


def fill_cards(
    vid: str,
    characters: list[Character],
    mapping: dict[str, str],
    lines: list[Line],
    card_lines: list[Line],
    semantic: list[Line],
    clips: dict[int, Clip],
    limits: ReportLimits,
    video_path: str | None,
    edges: list[dict],
) -> None:
    by_id = {c.id: c for c in characters}
    visible: dict[str, list] = defaultdict(list)
    speaking: dict[str, list] = defaultdict(list)
    best_voice: dict[str, tuple[float, float, float]] = {}
    together: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    turns_known = {x.clip for x in lines if x.subkind == "speaking"}
    for x in lines:
        if x.subkind == "appearance" and x.entities:
            who = mapping.get(x.entities[0], x.entities[0])
            spans = [(float(a), float(b)) for a, b in SPAN_RE.findall(x.raw_text)]
            if not spans and x.t_start is not None:
                spans = [(x.t_start, x.t_end if x.t_end is not None else x.t_start)]
            visible[who] += spans
        elif x.subkind == "speaking" and x.entities:
            who = mapping.get(x.entities[0], x.entities[0])
            speaking[who] += [(float(a), float(b)) for a, b in SPAN_RE.findall(x.raw_text)]
        elif x.subkind == "untranscribed" and x.entities and x.t_start is not None:
            if x.clip not in turns_known:
                who = mapping.get(x.entities[0], x.entities[0])
                speaking[who].append((float(x.t_start), float(x.t_end if x.t_end is not None else x.t_start)))
        elif x.subkind == "speech" and x.entities and x.t_start is not None:
            who = mapping.get(x.entities[0], x.entities[0])
            s, e = float(x.t_start), float(x.t_end if x.t_end is not None else x.t_start)
            if x.clip not in turns_known:
                speaking[who].append((s, e))
            # the voice sample: the character's longest utterance (the earliest of equals), cut to
            # voice_seconds: long enough to recognise a voice, short enough to keep the page small
            score = -min(e - s, limits.voice_seconds)
            if who not in best_voice or score < best_voice[who][0]:
                best_voice[who] = (score, s, min(e, s + limits.voice_seconds))
        elif x.subkind in TOGETHER_KINDS and len(x.entities) >= 2:
            pair = {mapping.get(e, e) for e in x.entities}
            for a in pair:
                for b in pair - {a}:
                    together[a][b] += 1.0
    for c in characters:
        c.together = {k: v for k, v in together.get(c.id, {}).items() if k in by_id}
        c.visible = _merge(visible.get(c.id, []), limits.max_spans)
        c.speaking = _merge(speaking.get(c.id, []), limits.max_spans)
        if not c.visible and not c.speaking:
            c.present = _merge(
                [(clips[k].start, clips[k].end) for k in c.clips if k in clips], limits.max_spans
            )
    samples = 0
    for c in characters:
        if c.id not in best_voice:
            c.voice_note = "no voice sample: no speech of theirs in the clips shown" if c.voices else ""
        elif not video_path:
            c.voice_note = "no voice sample: the memory does not name its video file"
        elif samples >= limits.max_voice_samples:
            c.voice_note = f"no voice sample: the page holds at most {limits.max_voice_samples} per video"
        else:
            _, s, e = best_voice[c.id]
            c.voice_sample = (Path(video_path), s, e)
            samples += 1
    # names, where each was learned
    for x in sorted(semantic, key=lambda x: (x.clip, x.id)):
        fact = name_fact(x.raw_text)
        if fact:
            named = by_id.get(mapping.get(fact[0], fact[0]))
            if named and all(n.name != fact[1] or n.clip != x.clip for n in named.names):
                named.names.append(NameFact(fact[1], x.clip, x.t_start, x.id, x.text))
    # attributes (semantic lines and character summaries) and relationships
    facts: dict[str, list[Line]] = defaultdict(list)
    relations: dict[str, list[Line]] = defaultdict(list)
    for x in card_lines + semantic:
        if x.superseded and x.kind != "semantic":
            continue
        if name_fact(x.raw_text) or x.subkind == "equivalence" or x.raw_text.startswith("Equivalence:"):
            continue  # names have their own list, equivalences the joins table
        owners = {mapping.get(e, e) for e in x.entities} | set(x.characters)
        for owner in owners:
            if owner not in by_id:
                continue
            if x.kind == "relationship" or (x.kind == "semantic" and len(owners) > 1):
                relations[owner].append(x)
            elif x.kind in ("character", "semantic"):
                facts[owner].append(x)
    for c in characters:
        fs = sorted(facts.get(c.id, []), key=lambda x: (x.kind != "character", -x.weight, x.clip, x.id))
        c.facts_total = len(fs)
        c.facts = fs[: limits.max_facts]
        c.relations = sorted(relations.get(c.id, []), key=lambda x: (-x.weight, x.clip, x.id))[
            : limits.max_facts
        ]
    # face <-> voice joins with their link weight
    members = {m: c for c in characters for m in c.members}
    prefix = f"{vid}:"
    for r in sorted(edges, key=lambda r: (r["src"], r["dst"])):
        face, voice = r["src"].removeprefix(prefix), r["dst"].removeprefix(prefix)
        joined = members.get(face) or members.get(voice)
        if joined is not None:
            joined.joins.append(Join(face, voice, float(r["weight"] or 0.0)))
    for c in characters:
        c.joins.sort(key=lambda j: (-j.weight, entity_order(j.face), entity_order(j.voice)))
