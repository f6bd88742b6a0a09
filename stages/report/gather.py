"""What the report shows, read from a memory dataset into plain typed records.

Everything is read through the memory's own tables (``nodes``, ``edges``, ``entities``, ``clips``) with
column projections (never the vectors) and per-video filters, so a huge memory costs only what the page
shows: clips outside the chosen range are not read, and every list has a cap (:class:`ReportLimits`)
whose effect the page states in a note instead of silently dropping rows.

Timeline spans come from the memory lines themselves: ``speaking`` lines ("<voice_1> speaks from 0.8 to
2.4 s and from ...", the diarization turns, so speech the ASR could not read still counts) give who spoke
when; in clips without them (memories written before they existed, or by an LLM memorizer) ``speech``
and ``untranscribed`` lines do. ``appearance`` lines ("<face_1> is visible from 0.8 to 1.6 s and from
...") give who was on screen when.
Memories written by an LLM memorizer may lack those kinds; then a character is drawn as present over the
whole of every clip its faces and voices occur in (the entities table's ``clips``).
"""

from __future__ import annotations

import base64
import logging
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from m3cli.stages.core.entity_ids import FACE, VOICE, kind_of, name_fact
from m3cli.stages.core.errors import InputError
from m3cli.stages.core.memory_store import MemoryStore
from m3cli.stages.core.redact import mask_credentials
from m3cli.stages.core.sql import sql_list
from m3cli.stages.core.storage import read_file
from m3cli.stages.people.pages import Person

NODE_COLUMNS = (
    "id",
    "video",
    "clip",
    "kind",
    "subkind",
    "text",
    "raw_text",
    "entities",
    "characters",
    "weight",
    "t_start",
    "t_end",
    "source",
    "evidence",
    "superseded",
)
CLIP_COLUMNS = ("video", "clip", "start", "end", "path", "summary", "keyframes")
ENTITY_COLUMNS = ("video", "entity", "kind", "character", "name", "members", "clips", "first_seen", "crop")
SPAN_RE = re.compile(r"from (\d+(?:\.\d+)?) to (\d+(?:\.\d+)?) s")
SPEECH_RE = re.compile(r'says(?: \([^)]*\))?: "(.*)"\s*$', re.S)
#: Lines that stand in the clip's transcript: what was said, and turns heard but not transcribed.
TRANSCRIPT_KINDS = ("speech", "untranscribed")
#: Lines that put two or more people in one place (the offline memorizer's clip line, overlapping
#: speech; "cooccurrence" in memories written before those).
TOGETHER_KINDS = ("present", "overlap", "cooccurrence")
#: Node kinds read for every video whatever clip range is shown: few per video, and cards need them.
CARD_KINDS = ("character", "relationship", "global")

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReportLimits:
    """Caps that keep a page of a huge memory loadable; each cap that bites is reported on the page.

    A video's clips are not capped by default: the page renders them in lazy sections (see
    :mod:`.render`), so a 10-hour video is one page; the memory-line budget decides where a page ends
    for memories larger than one file should hold, and the page then says how to write the next one."""

    max_videos: int = 2_000
    max_listed_videos: int = 2_000  # videos named in the list of those not on the page
    max_clips: int | None = None  # per video and page (--max-clips N pages by hand; --clips FROM:TO)
    max_lines_per_clip: int = 120
    max_characters: int = 60  # per video
    max_facts: int = 40  # per character card
    max_semantic_scan: int = 20_000  # semantic lines read per video for the cards
    max_spans: int = 2_000  # timeline spans per character row (nearby spans are merged beyond this)
    max_answers: int = 500
    crops_per_character: int = 4
    keyframes_per_clip: int = 24  # spread over the clip when it has more
    max_page_keyframes: int = 1_500  # keyframe images embedded in one page (about 10 MB)
    voice_seconds: float = 5.0
    max_voice_samples: int = 40  # per video
    max_page_voice_samples: int = 120  # all videos together (~20 kB each)
    max_page_crops: int = 2_000  # face thumbnails embedded in one page, all videos (~3 kB each)
    max_page_lines: int = 150_000  # memory lines on one page, all videos together (~10 MB packed)


@dataclass
class Line:
    """One memory node as the page shows it."""

    id: str
    video: str
    clip: int
    kind: str
    subkind: str
    text: str
    raw_text: str
    entities: list[str]
    characters: list[str]
    weight: float
    t_start: float | None
    t_end: float | None
    source: str
    evidence: list[str]
    superseded: bool


@dataclass
class Utterance:
    speaker: str | None  # perception id (<voice_j>)
    character: str | None
    start: float
    end: float
    text: str
    node: str


@dataclass
class Crop:
    entity: str
    path: Path | None
    data_uri: str | None  # a crop already stored inline as a data: URI


@dataclass
class Keyframe:
    """A keyframe of a clip (``m3 sight``) as the clips table stores it, its image read from the memory."""

    t: float
    start: float
    end: float
    image: Crop  # path checked to lie inside the memory, like a face crop
    text: list[str]
    tags: list[str]


@dataclass
class Clip:
    video: str
    index: int
    start: float
    end: float
    summary: str
    lines: list[Line] = field(default_factory=list)
    utterances: list[Utterance] = field(default_factory=list)
    lines_total: int = 0
    keyframes: list[Keyframe] = field(default_factory=list)
    keyframes_total: int = 0


@dataclass
class NameFact:
    name: str
    clip: int
    t: float | None
    node: str
    text: str


@dataclass
class Join:
    """A face id and a voice id that `m3 link` joined, and the weight of that link."""

    face: str
    voice: str
    weight: float


@dataclass
class Character:
    video: str
    id: str
    name: str | None
    members: list[str]
    clips: list[int]
    first_seen: float | None
    crops: list[Crop] = field(default_factory=list)
    names: list[NameFact] = field(default_factory=list)
    facts: list[Line] = field(default_factory=list)
    relations: list[Line] = field(default_factory=list)
    joins: list[Join] = field(default_factory=list)
    visible: list[tuple[float, float]] = field(default_factory=list)
    speaking: list[tuple[float, float]] = field(default_factory=list)
    present: list[tuple[float, float]] = field(default_factory=list)  # whole clips, when no finer spans
    voice_sample: tuple[Path, float, float] | None = None
    voice_note: str = ""  # why there is no voice sample, when there is none
    together: dict[str, float] = field(default_factory=dict)  # other character -> co-occurrence lines
    facts_total: int = 0

    @property
    def faces(self) -> list[str]:
        return [m for m in self.members if kind_of(m) == FACE]

    @property
    def voices(self) -> list[str]:
        return [m for m in self.members if kind_of(m) == VOICE]

    @property
    def label(self) -> str:
        return f"{self.name} ({self.id})" if self.name else self.id


@dataclass
class Video:
    id: str
    path: str | None
    start: float
    end: float
    clips: list[Clip]
    characters: list[Character]
    clips_total: int
    global_summary: str | None = None


@dataclass
class OtherVideo:
    """A video of the memory that is not on this page."""

    id: str
    path: str | None
    clips: int


@dataclass
class ReportData:
    memory: str
    meta: dict[str, str]
    counts: dict[str, int]
    videos: list[Video]
    videos_total: int
    notes: list[str] = field(default_factory=list)
    answers: list[dict[str, Any]] = field(default_factory=list)
    others: list[OtherVideo] = field(default_factory=list)  # videos not on this page (listed, capped)
    others_total: int = 0
    people: list[Person] = field(default_factory=list)  # the memory's people (stages.people.pages.Person)
    people_rows: list[dict] = field(default_factory=list)  # their appearances (people table rows)
    with_whom: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # person -> others -> paths


# ============================================================================== reading tables


def _columns(table: Any, wanted: tuple[str, ...]) -> list[str]:
    """The wanted columns this table has (memories written by older or newer m3 may differ)."""
    names = set(table.schema.names)
    return [c for c in wanted if c in names]


def _rows(table: Any, where: str, columns: tuple[str, ...], limit: int | None = None) -> list[dict]:
    q = table.search().where(where).select(_columns(table, columns)).limit(limit)
    return q.to_arrow().to_pylist()


def _line(row: dict) -> Line:
    return Line(
        id=row["id"],
        video=row.get("video") or "",
        clip=int(row["clip"]) if row.get("clip") is not None else -1,
        kind=row.get("kind") or "",
        subkind=row.get("subkind") or row.get("kind") or "",
        text=row.get("text") or row.get("raw_text") or "",
        raw_text=row.get("raw_text") or "",
        entities=list(row.get("entities") or []),
        characters=list(row.get("characters") or []),
        weight=float(row["weight"]) if row.get("weight") is not None else 1.0,
        t_start=row.get("t_start"),
        t_end=row.get("t_end"),
        source=row.get("source") or "",
        evidence=list(row.get("evidence") or []),
        superseded=bool(row.get("superseded")),
    )


KIND_ORDER = {"clip": 0, "episodic": 1, "semantic": 2, "character": 3, "relationship": 4, "conflict": 5}


def parse_range(text: str | None) -> tuple[int, int | None]:
    """``FROM:TO`` (clip indexes, inclusive; either side may be empty) -> (first, last or None)."""
    if not text:
        return 0, None
    m = re.fullmatch(r"\s*(\d*)\s*:\s*(\d*)\s*", text)
    if not m or not (m.group(1) or m.group(2)):
        raise InputError(f"--clips {text!r}: expected FROM:TO clip indexes, e.g. 0:99 or 400:")
    first = int(m.group(1) or 0)
    last = int(m.group(2)) if m.group(2) else None
    if last is not None and last < first:
        raise InputError(f"--clips {text!r}: the last clip comes before the first")
    return first, last


# ============================================================================== gathering


def gather(
    store: MemoryStore,
    video: str | None = None,
    clips: tuple[int, int | None] = (0, None),
    limits: ReportLimits | None = None,
) -> ReportData:
    """Everything the page shows for ``video`` (or every video, capped) and the clip range ``clips``."""
    limits = limits or ReportLimits()
    all_videos = store.videos()
    if video is not None and video not in all_videos:
        known = ", ".join(all_videos[:10]) + (" ..." if len(all_videos) > 10 else "")
        raise InputError(f"--video {video}: not in {store.path} (videos: {known or 'none'})")
    chosen = [video] if video else all_videos
    notes: list[str] = []
    counts = {
        name: store.db.open_table(name).count_rows() for name in ("nodes", "edges", "entities", "clips")
    }
    budget = [limits.max_page_lines]
    videos: list[Video] = []
    prefetch = _Prefetch(store, chosen[: limits.max_videos])
    for vid in chosen:
        # a video starts only while a fair share of the line budget is left: no stub of one clip
        if len(videos) >= limits.max_videos or budget[0] < limits.max_page_lines // 20:
            break
        videos.append(_video(store, vid, clips, limits, notes, budget, prefetch))
    others = _other_videos(store, chosen[len(videos) :], limits.max_listed_videos)
    if others:
        notes.insert(
            0,
            f"This memory holds {len(chosen)} videos; {len(videos)} are on this page (a page holds at most "
            f"{limits.max_videos} videos and {limits.max_page_lines:,} memory lines). The others are listed "
            "below; `m3 report MEMORY --video ID` writes the page of one.",
        )
    return ReportData(
        memory=mask_credentials(str(store.path)),  # an s3://KEY:SECRET@ location shows no secret
        meta=dict(store.meta),
        counts=counts,
        videos=videos,
        videos_total=len(all_videos),
        notes=notes,
        others=others,
        others_total=len(chosen) - len(videos),
    )


def _other_videos(store: MemoryStore, ids: list[str], cap: int) -> list[OtherVideo]:
    """The videos left off the page, with their file and clip count, so the page can say how to see them."""
    if not ids:
        return []
    wanted = set(ids[:cap])
    rows = store.clips.search().select(_columns(store.clips, ("video", "path"))).limit(None).to_arrow()
    clips: dict[str, int] = defaultdict(int)
    paths: dict[str, str] = {}
    for vid, path in zip(rows.column("video").to_pylist(), rows.column("path").to_pylist(), strict=True):
        if vid in wanted:
            clips[vid] += 1
            if path:
                paths.setdefault(vid, path)
    return [OtherVideo(v, paths.get(v), clips.get(v, 0)) for v in ids[:cap]]


class _Prefetch:
    """Each table's rows for a batch of videos, read with one query per table and batch.

    A page of many short videos would otherwise cost seven queries per video (a 1,000-video memory:
    7,000 queries, minutes); batches keep the rows held at once bounded by the batch, not the memory."""

    BATCH = 50

    def __init__(self, store: MemoryStore, videos: list[str]) -> None:
        self.store, self.order = store, videos
        self.rows: dict[str, dict[str, list[dict]]] = {}

    def of(self, vid: str) -> dict[str, list[dict]]:
        if vid not in self.rows:
            self.rows.clear()  # the previous batch is done with
            at = self.order.index(vid) if vid in self.order else -1
            batch = self.order[at : at + self.BATCH] if at >= 0 else [vid]
            where = f"video IN ({sql_list(batch)})"
            got: dict[str, dict[str, list[dict]]] = {
                v: {"clips": [], "nodes": [], "entities": [], "edges": []} for v in batch
            }
            s = self.store
            for name, table, cond, columns in (
                ("clips", s.clips, where, CLIP_COLUMNS),
                ("nodes", s.nodes, where, NODE_COLUMNS),
                ("entities", s.entities, where, ENTITY_COLUMNS),
                ("edges", s.edges, f"{where} AND kind = 'equivalence'", ("video", "src", "dst", "weight")),
            ):
                for r in _rows(table, cond, columns):
                    if r.get("video") in got:
                        got[r["video"]][name].append(r)
            self.rows.update(got)
        return self.rows[vid]


def _video(
    store: MemoryStore,
    vid: str,
    clip_range: tuple[int, int | None],
    limits: ReportLimits,
    notes: list[str],
    budget: list[int],
    prefetch: _Prefetch | None = None,
) -> Video:
    """One video's section; ``budget`` is the number of memory lines the page may still show (spent here)."""
    first, last = clip_range
    rows = (prefetch or _Prefetch(store, [vid])).of(vid)
    clip_rows = rows["clips"]
    total = len(clip_rows)
    span_start = min((r["start"] for r in clip_rows), default=0.0)
    span_end = max((r["end"] for r in clip_rows), default=0.0)
    path = next((r["path"] for r in clip_rows if r.get("path")), None)
    shown = sorted(
        (r for r in clip_rows if r["clip"] >= first and (last is None or r["clip"] <= last)),
        key=lambda r: r["clip"],
    )
    if limits.max_clips is not None and len(shown) > limits.max_clips:
        cut = shown[limits.max_clips - 1]["clip"]
        notes.append(
            f"Video {vid}: {len(shown)} clips in range; clips {shown[0]['clip']}–{cut} are shown. "
            f"Use --clips {cut + 1}: for the next page."
        )
        shown = shown[: limits.max_clips]
    elif first or last is not None:
        notes.append(f"Video {vid}: clips {first}–{last if last is not None else 'end'} of {total}.")
    clips = {
        int(r["clip"]): Clip(vid, int(r["clip"]), float(r["start"]), float(r["end"]), r.get("summary") or "")
        for r in shown
    }
    for r in shown:
        _fill_keyframes(store.path, clips[int(r["clip"])], r.get("keyframes") or [], limits)
    nodes = rows["nodes"]
    lines: list[Line] = []
    if clips:
        lo, hi = min(clips), max(clips)
        lines = [_line(r) for r in nodes if r.get("clip") is not None and lo <= r["clip"] <= hi]
        lines = _within_budget(vid, clips, lines, limits, budget, notes)
    card_lines = [_line(r) for r in nodes if r.get("kind") in CARD_KINDS]
    semantic = [_line(r) for r in nodes if r.get("kind") == "semantic"][: limits.max_semantic_scan]
    global_summary = next((x.text for x in card_lines if x.kind == "global"), None)
    mapping, characters = _characters(store, vid, limits, notes, rows["entities"])
    _fill_clips(clips, lines, mapping, limits)
    _fill_cards(vid, characters, mapping, lines, card_lines, semantic, clips, limits, path, rows["edges"])
    return Video(
        id=vid,
        path=path,
        start=float(span_start),
        end=float(span_end),
        clips=[clips[k] for k in sorted(clips)],
        characters=characters,
        clips_total=total,
        global_summary=global_summary,
    )


def _within_budget(
    vid: str,
    clips: dict[int, Clip],
    lines: list[Line],
    limits: ReportLimits,
    budget: list[int],
    notes: list[str],
) -> list[Line]:
    """Drop the clips (from the end) whose lines would overrun the page's line budget; say how to page on."""
    per_clip: dict[int, int] = defaultdict(int)
    for x in lines:
        per_clip[x.clip] += 1
    spent, keep = 0, list[int]()
    for k in sorted(clips):
        cost = min(per_clip.get(k, 0), limits.max_lines_per_clip)
        if keep and spent + cost > budget[0]:
            break
        keep.append(k)
        spent += cost
    budget[0] -= spent
    if len(keep) < len(clips):
        cut = keep[-1]
        notes.append(
            f"Video {vid}: clips {keep[0]}–{cut} are shown ({spent} memory lines, the most one page holds). "
            f"Use --video {vid} --clips {cut + 1}: for the next page."
        )
        for k in set(clips) - set(keep):
            del clips[k]
        return [x for x in lines if x.clip <= cut]
    return lines


def _characters(
    store: MemoryStore, vid: str, limits: ReportLimits, notes: list[str], rows: list[dict]
) -> tuple[dict[str, str], list[Character]]:
    """(perception id -> character, the characters): linked characters, then unlinked faces and voices."""
    mapping: dict[str, str] = {}
    chars: list[Character] = []
    entities = {r["entity"]: r for r in rows if r.get("kind") != "character"}
    for r in rows:
        if r.get("kind") == "character":
            chars.append(
                Character(
                    vid,
                    r["entity"],
                    r.get("name"),
                    sorted(r.get("members") or [], key=_entity_order),
                    sorted(r.get("clips") or []),
                    r.get("first_seen"),
                )
            )
            for m in r.get("members") or []:
                mapping[m] = r["entity"]
    for eid, r in entities.items():
        if eid not in mapping and r.get("character") in (None, eid):
            chars.append(
                Character(vid, eid, r.get("name"), [eid], sorted(r.get("clips") or []), r.get("first_seen"))
            )
            mapping[eid] = eid
        elif eid not in mapping and r.get("character"):
            mapping[eid] = r["character"]
    chars.sort(key=lambda c: (c.first_seen if c.first_seen is not None else 1e18, _entity_order(c.id)))
    if len(chars) > limits.max_characters:
        notes.append(
            f"Video {vid}: {len(chars)} characters; the {limits.max_characters} seen first are shown."
        )
        chars = chars[: limits.max_characters]
    for c in chars:
        for m in c.members[: limits.crops_per_character * 4]:
            crop = (entities.get(m) or {}).get("crop")
            if crop and len(c.crops) < limits.crops_per_character:
                c.crops.append(_crop(store.path, m, crop))
    return mapping, chars


def _entity_order(eid: str) -> tuple[str, int]:
    m = re.match(r"<(\w+?)_(\d+)>", eid)
    return (m.group(1), int(m.group(2))) if m else (eid, 0)


def _crop(memory: str | Path, entity: str, value: str) -> Crop:
    """A crop as the entities table names it: a data: URI, an absolute path, or one relative to the memory
    (read from the object store when the memory is an ``s3://`` URI)."""
    if value.startswith("data:"):
        return Crop(entity, None, value)
    path = Path(value)
    # a memory is untrusted input: its crops are read only from inside it (never an absolute path,
    # never one that climbs out with '..' or through a symlink), else the page shows initials
    if path.is_absolute() or ".." in path.parts or "\\" in value:
        log.warning("crop of %s names %r, outside the memory: not shown", entity, value)
        return Crop(entity, None, None)
    if not isinstance(memory, Path):
        data = read_file(memory, value)
        uri = "data:image/jpeg;base64," + base64.b64encode(data).decode("ascii") if data else None
        return Crop(entity, None, uri)
    root = memory.resolve()
    found = (memory / path).resolve()
    if not found.is_relative_to(root) or not found.is_file():
        if found.exists():
            log.warning("crop of %s names %r, outside the memory: not shown", entity, value)
        return Crop(entity, None, None)
    return Crop(entity, found, None)


def _fill_keyframes(memory: str | Path, clip: Clip, rows: list[dict], limits: ReportLimits) -> None:
    """The clip's stored keyframes (at most ``keyframes_per_clip``, spread evenly over the clip)."""
    clip.keyframes_total = len(rows)
    cap = limits.keyframes_per_clip
    if len(rows) > cap:
        rows = [rows[round(i * (len(rows) - 1) / (cap - 1))] for i in range(cap)] if cap > 1 else rows[:cap]
    for k in rows:
        label = f"keyframe at {float(k.get('t') or 0.0):.1f} s of clip {clip.index}"
        image = _crop(memory, label, k["path"]) if k.get("path") else Crop(label, None, None)
        clip.keyframes.append(
            Keyframe(
                t=float(k.get("t") or 0.0),
                start=float(k["start"] if k.get("start") is not None else k.get("t") or 0.0),
                end=float(k["end"] if k.get("end") is not None else k.get("t") or 0.0),
                image=image,
                text=[str(x) for x in k.get("text") or []],
                tags=[str(x) for x in k.get("tags") or []],
            )
        )


def _fill_clips(
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


def _fill_cards(
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
        c.joins.sort(key=lambda j: (-j.weight, _entity_order(j.face), _entity_order(j.voice)))


def gather_people(reader: Any, data: ReportData) -> None:
    """The memory's people (its ``people`` table, the user's edits applied, as `m3 people` lists them)
    into ``data``; a memory without that table (one video, or indexed before people) has none."""
    from m3cli.stages.people.pages import PeopleBook
    from m3cli.stages.people.store import PEOPLE

    if reader.versions is not None and PEOPLE not in reader.versions:
        return
    try:
        book = PeopleBook.of_reader(reader)
    except (OSError, ValueError) as exc:  # no such table in a memory without a manifest
        log.info("no people table: %s", exc)
        return
    data.people = list(book.people.values())
    data.people_rows = [r for p in data.people for r in p.rows]
    data.with_whom = {p.id: book.with_whom(p) for p in data.people}
