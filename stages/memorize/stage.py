"""`m3 memorize`: per clip, episodic and semantic memory that refers to people only by their ids.

Two memorizers share one output shape (``memory`` section of the record):

* **LLM** (any OpenAI-compatible multimodal chat server): sampled frames, labelled face crops and the
  labelled, timed utterances go in; M3-Agent's episodic lines and five semantic categories come out as
  JSON. Replies that mention ids absent from the clip are sent back for repair; server faults are retried
  by the client. When all of that fails, the clip falls back to the offline memorizer with
  ``fallback: true`` and an ``errors`` entry, so one bad clip never loses the others.
* **Offline** (the default when no LLM is configured): states only what perception established — who
  says what and when (quoted, each utterance at its own time), which speaker turns no utterance holds
  ("<voice_2> speaks, not transcribed, from 0.3 to 3.7 s"; "speaks Portuguese, not transcribed" where
  the turn's language was detected; an utterance a second reading read in another language says so:
  ``says (in Portuguese): "..."``), when each voice speaks (its diarization
  turns), where turns of two voices overlap, when each face is visible, who is seen in the clip (one line,
  not one per pair), and names people say out loud (see :data:`SELF_NAME`, :data:`VOCATIVE`,
  :data:`TITLED`) — and labels itself ``source: offline``. One function per line kind.

What goes to the model depends on what the server accepts (learned from its refusals, see
:mod:`m3cli.stages.backends.llm.capabilities`, or set with ``images``/``audio``): frames and crops to
vision models, the clip's audio (16 kHz WAV, at most ``max_audio_s``) to omni models as M3-Agent's
memorization model (Qwen2.5-Omni) expects. ``memory.inputs`` records what the memory was written from.
What people said goes in as a data block (:func:`memory_prompts.dialogue_block`): a crafted utterance
cannot add dialogue lines. Replies that copy the prompt's shape (placeholder text, zero times), put
prose under kind ``equivalence``, pair a face with a voice it is never seen speaking with, or name no
one at all are sent back for repair like replies with unknown ids.

LLM answers are cached per clip under a digest of the exact request (frames, crops, utterances, prompt
version) and the model name, so a rerun is free and byte-identical.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

import numpy as np
import orjson

from m3cli.schemas.records import ClipRecord, MemoryInput, MemoryItem, MemorySection, Problem, Turn, Utterance
from m3cli.stages.configs.memorize import MemorizeConfig
from m3cli.stages.core import memory_prompts as prompts
from m3cli.stages.core.cache import Cache, CacheKey
from m3cli.stages.core.common import RunContext
from m3cli.stages.core.entity_ids import (
    EQUIVALENCE_RE,
    NAME,
    NOT_NAMES,
    VOICE,
    entities_in,
    is_id,
    name_fact,
    sorted_ids,
)
from m3cli.stages.core.errors import InputError, M3Error
from m3cli.stages.core.languages import language_name
from m3cli.stages.core.redact import mask_credentials

log = logging.getLogger(__name__)

STAGE = "memorize"
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


def clip_ids(record: ClipRecord) -> tuple[list[str], list[str]]:
    """(face ids, voice ids) perceived in the clip, sorted by number."""
    faces = {t.face_id for t in (record.faces.tracks if record.faces else [])}
    voices = {u.speaker for u in (record.utterances or []) if u.speaker}
    if record.voices and record.voices.ids:
        voices.update(v for v in record.voices.ids if is_id(v, VOICE))
    return sorted_ids(faces), sorted_ids(voices)


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


# ============================================================================== LLM memorizer


def _frame_parts(record: ClipRecord, config: MemorizeConfig, cache: Cache | None) -> list[dict]:
    from m3cli.stages.backends.llm.media import image_part
    from m3cli.stages.core import media, media_frames, media_probe

    if config.frames == 0 or media_probe.pictureless(record):  # an audio-only recording has no frames
        return []
    from m3cli.stages.sight import keyframe_parts  # the sight stage's keyframes, where it ran

    keyframes = keyframe_parts(record, config.frames, config.max_side, config.jpeg_quality, cache)
    if keyframes:
        return keyframes
    duration = max(record.clip.end - record.clip.start, 1e-3)
    path = media.source_path(record.video, cache)
    frames = media_frames.sample_frames(
        path,
        record.video.id,
        record.clip.index,
        record.clip.start,
        record.clip.end,
        fps=max(config.frames / duration, 0.02),
        max_side=config.max_side,
        cache=cache,
    )
    if len(frames) == 0:
        return []
    picks = np.unique(np.linspace(0, len(frames) - 1, min(config.frames, len(frames))).round().astype(int))
    parts: list[dict] = [{"type": "text", "text": "Frames, in time order:"}]
    for i in picks:
        parts.append({"type": "text", "text": f"t={frames.times[i]:.1f} s"})
        parts.append(image_part(media_frames.encode_jpeg(frames.images[i], quality=config.jpeg_quality)))
    return parts


def _crop_parts(
    record: ClipRecord, config: MemorizeConfig, cache: Cache | None, images: bool = True
) -> list[dict]:
    from m3cli.stages.backends.llm.media import image_part
    from m3cli.stages.core import media_frames
    from m3cli.stages.core.record_paths import JPEG, cache_file, record_name

    tracks = sorted(record.faces.tracks if record.faces else [], key=lambda t: t.face_id)
    if not tracks:
        return []
    parts: list[dict] = [{"type": "text", "text": "Faces (one crop per face id):"}]
    position = {id(t): i for i, t in enumerate(record.faces.tracks if record.faces else [])}
    for t in tracks:
        spans = ", ".join(f"{_t(s)}-{_t(e)}" for s, e in _merge_spans(t.spans))
        data = None
        field = f"faces.tracks[{position[id(t)]}].crop"
        path = cache_file(record, field, t.crop, cache, JPEG)  # never a file outside the cache
        if t.crop and path is None and cache is not None:
            log.warning(
                "clip %d: crop %s of %s is missing; sending the id without a picture",
                record.clip.index,
                t.crop,
                t.face_id,
            )
        if path is not None and images:
            try:
                data = path.read_bytes()
                img = media_frames.decode_jpeg(data)
            except Exception as exc:  # noqa: BLE001 - PIL raises many kinds for a broken image
                raise InputError(
                    f"{record_name(record)}: {field}: {t.crop!r} is not a readable JPEG: {exc}"
                ) from None
        if data is not None:
            if max(img.shape[:2]) > config.max_side:
                from PIL import Image

                pil = Image.fromarray(img)
                pil.thumbnail((config.max_side, config.max_side))
                data = media_frames.encode_jpeg(np.asarray(pil), quality=config.jpeg_quality)
            parts.append({"type": "text", "text": f"{t.face_id} (visible {spans} s):"})
            parts.append(image_part(data))
        else:
            why = "no crop available" if images else "picture not sent"
            parts.append({"type": "text", "text": f"{t.face_id} (visible {spans} s): {why}"})
    return parts


def _audio_parts(record: ClipRecord, config: MemorizeConfig, cache: Cache | None) -> list[dict]:
    """The clip's audio as one ``input_audio`` part (16 kHz mono WAV, at most ``max_audio_s``)."""
    from m3cli.stages.backends.llm.media import audio_part, wav_bytes
    from m3cli.stages.core import media, media_audio

    if record.video.has_audio is False or record.clip.has_audio is False:
        return []
    start = record.clip.start
    end = min(record.clip.end, start + config.max_audio_s)
    try:
        audio = media_audio.clip_audio(
            media.source_path(record.video), record.video.id, record.clip.index, start, end, cache=cache
        )
    except (OSError, M3Error) as exc:
        log.warning("clip %d: audio not sent to the model: %s", record.clip.index, exc)
        return []
    if audio.size == 0:
        return []
    return [
        {"type": "text", "text": f"Audio of the clip ({_t(start)}-{_t(end)} s, 16 kHz mono):"},
        audio_part(wav_bytes(audio, media_audio.AUDIO_RATE)),
    ]


def _dialogue_text(record: ClipRecord) -> str:
    utterances = sorted(record.utterances or [], key=lambda u: (u.start, u.end))
    tag = prompts.prompt_data.nonce(record.video.id, str(record.clip.index), "dialogue")
    return prompts.dialogue_block(tag, [(u.start, u.end, u.speaker, u.text.strip()) for u in utterances])


def _wants(client: Any, capability: str, override: bool | None) -> bool:
    if override is not None:
        return override
    return bool(client is not None and client.accepts(capability))


def build_request(
    record: ClipRecord, config: MemorizeConfig, cache: Cache | None, client: Any = None
) -> tuple[list[dict], list[MemoryInput]]:
    """The chat messages for one clip and the inputs they carry (frames, crops, faces, dialogue, audio)."""
    faces, voices = clip_ids(record)
    images = _wants(client, "images", config.images) if client is not None else config.images is not False
    content: list[dict] = [
        {
            "type": "text",
            "text": prompts.memorize_header(
                record.clip.index, record.clip.start, record.clip.end, faces, voices
            ),
        }
    ]
    inputs: list[MemoryInput] = []
    frames = _frame_parts(record, config, cache) if images else []
    if frames:
        inputs.append("frames")
    crops = _crop_parts(record, config, cache, images)
    if any(p["type"] == "image_url" for p in crops):
        inputs.append("crops")
    if crops:
        inputs.append("faces")
    audio = _audio_parts(record, config, cache) if _wants(client, "audio", config.audio) else []
    if audio:
        inputs.append("audio")
    if record.utterances:
        inputs.append("dialogue")
    content += frames + crops + audio
    content.append({"type": "text", "text": _dialogue_text(record)})
    from m3cli.stages.sight import prompt_block  # on-screen text and tags, where m3 sight ran

    if (seen := prompt_block(record)) is not None:
        content.append({"type": "text", "text": seen})
    content.append({"type": "text", "text": config.instructions()})
    messages: list[dict] = [
        {"role": "system", "content": prompts.MEMORIZE_SYSTEM},
        {"role": "user", "content": content},
    ]
    return messages, inputs


def build_messages(
    record: ClipRecord, config: MemorizeConfig, cache: Cache | None, client: Any = None
) -> list[dict]:
    return build_request(record, config, cache, client)[0]


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


def _request_key(record: ClipRecord, config: MemorizeConfig, client: Any, messages: list[dict]) -> CacheKey:
    digest = hashlib.sha256(orjson.dumps(messages, option=orjson.OPT_SORT_KEYS)).hexdigest()[:32]
    return CacheKey.of(
        record.video.id,
        record.clip.index,
        STAGE,
        {**config.key(), "inputs": digest},
        f"{client.base_url}|{client.model}",
    )


def _sent(inputs: list[MemoryInput], dropped: Iterable[str]) -> list[MemoryInput]:
    """The inputs that reached the model, once the client left out what the server refused."""
    gone = set(dropped)
    lost = ({"frames", "crops"} if "images" in gone else set()) | ({"audio"} if "audio" in gone else set())
    return [i for i in inputs if i not in lost]


def llm_memory(record: ClipRecord, client: Any, config: MemorizeConfig, cache: Cache | None) -> MemorySection:
    """Ask the LLM (or the cache) for this clip's memory; raises LlmError when the server cannot deliver.

    A request that does not fit the model's context is sent again with half the frames (down to none,
    then without audio) before giving up.
    """
    from dataclasses import replace

    from m3cli.stages.backends.llm import LlmContextError

    faces, voices = clip_ids(record)
    while True:
        messages, inputs = build_request(record, config, cache, client)
        key = _request_key(record, config, client, messages)
        cached = cache.get_json(key, "reply.json") if cache is not None else None
        if isinstance(cached, dict) and isinstance(cached.get("obj"), dict):
            memory = memory_from_reply(cached["obj"], record, config, cached.get("model") or client.model)
            memory.inputs = cached.get("inputs") or inputs
            return memory
        validate = make_validator(faces, voices, config, record)
        if config.prompt_style == "m3-agent":  # lists of sentences, checked as the m3 lines they become
            schema = prompts.agent_memorize_schema(config.semantic)
            validator = _as_agent_lines(validate)
        else:
            schema = prompts.memorize_schema(config.semantic, config.equivalence)
            validator = validate
        try:
            obj, reply = client.chat_json(
                messages, schema, repairs=config.repairs, validator=validator, task="memorize"
            )
        except LlmContextError:
            if config.frames > 0 and "frames" in inputs:
                config = replace(config, frames=config.frames // 2)
            elif "audio" in inputs:
                config = replace(config, audio=False)
            else:
                raise
            log.warning("clip %d: request too long for the model; retrying with less", record.clip.index)
            continue
        break
    if config.prompt_style == "m3-agent":
        obj = prompts.from_agent_reply(obj)
    inputs = _sent(inputs, reply.dropped)
    log.info(
        "clip %d: memorized by %s in %.1fs (%d+%d tokens, %d attempts; from %s)",
        record.clip.index,
        reply.model,
        reply.latency_s,
        reply.prompt_tokens,
        reply.completion_tokens,
        reply.attempts,
        ", ".join(inputs) or "nothing",
    )
    if cache is not None:
        if reply.dropped:  # what a rerun will send now that the refusal is known
            key = _request_key(record, config, client, build_request(record, config, cache, client)[0])
        cache.put_json(
            key,
            "reply.json",
            {
                "obj": obj,
                "model": reply.model,
                "inputs": inputs,
                "prompt_tokens": reply.prompt_tokens,
                "completion_tokens": reply.completion_tokens,
            },
        )
    memory = memory_from_reply(obj, record, config, reply.model)
    memory.inputs = inputs
    return memory


def _ablate(memory: MemorySection, config: MemorizeConfig) -> MemorySection:
    if not config.semantic:
        memory.semantic = []
        memory.equivalences = []
    if not config.equivalence:
        memory.semantic = [i for i in memory.semantic if i.kind != "equivalence"]
        memory.equivalences = []
    return memory


def memorize_clip(
    record: ClipRecord, config: MemorizeConfig, client: Any = None, cache: Cache | None = None
) -> ClipRecord:
    """Add ``memory`` (and an ``errors`` entry on LLM fallback) to one record."""
    from m3cli.stages.backends.llm import LlmError

    out = record.model_copy(deep=True)
    if client is None:
        out.memory = _ablate(offline_memory(record), config)
        return out
    try:
        out.memory = llm_memory(record, client, config, cache)
        # what perception found that the memory must hold whoever writes the rest: the turns, the
        # on-screen text and what is seen (an LLM paraphrases or drops them), and the absences
        out.memory.episodic += turn_lines(record) + sight_lines(record) + absence_lines(record)
    except LlmError as exc:
        log.warning(
            "clip %d of %s: LLM memorization failed, using the offline memorizer: %s",
            record.clip.index,
            record.video.path,
            exc,
        )
        memory = _ablate(offline_memory(record), config)
        memory.fallback = True
        memory.model = client.model
        out.memory = memory
        out.errors = [
            *(out.errors or []),
            Problem(
                stage=STAGE,
                error="llm_fallback",
                status=getattr(exc, "status", None),
                message=mask_credentials(str(exc)),
            ),
        ]
    return out


def memorize_records(
    records: list[ClipRecord], config: MemorizeConfig, client: Any = None, ctx: RunContext | None = None
) -> list[ClipRecord]:
    """Memorize every clip, in input order; LLM calls run ``config.jobs`` at a time."""
    ctx = ctx or RunContext()
    if client is not None:  # crops go to the LLM: check every record path before the first call
        from m3cli.stages.core.record_paths import check_record_paths

        check_record_paths(records, ctx.cache)
        client.force(images=config.images, audio=config.audio)
        client.use_cache(ctx.cache)
    for r in records:
        if r.faces is None and r.utterances is None and r.sight is None:
            raise M3Error(
                f"clip {r.clip.index} of {r.video.path} has neither faces nor utterances: run "
                "`m3 faces` and/or `m3 diarize | m3 voices` before `m3 memorize`"
            )
    if client is None or config.jobs <= 1:
        return [
            memorize_clip(r, config, client, ctx.cache)
            for r in ctx.progress(records, desc="memorize", total=len(records))
        ]
    with ThreadPoolExecutor(max_workers=config.jobs) as pool:
        futures = pool.map(lambda r: memorize_clip(r, config, client, ctx.cache), records)
        return list(ctx.progress(futures, desc="memorize", total=len(records)))
