"""What the report shows, read from a memory dataset into plain typed records.

Everything is read through the memory's own tables (``nodes``, ``edges``, ``entities``, ``clips``) with
column projections (never the vectors) and per-video filters, so a huge memory costs only what the page
shows: clips outside the chosen range are not read, and every list has a cap (:class:`ReportLimits`)
whose effect the page states in a note instead of silently dropping rows.

One job: which rows to read, and how many. The records it fills are :mod:`.records`; what the lines
mean for the timeline, transcripts and cards (spans, voices, names, facts) is :mod:`.fill`.
"""

from __future__ import annotations

import base64
import logging
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from m3cli.stages.core.errors import InputError
from m3cli.stages.core.memory_store import MemoryStore
from m3cli.stages.core.redact import mask_credentials
from m3cli.stages.core.sql import sql_list
from m3cli.stages.core.storage import read_file
from m3cli.stages.report.fill import entity_order, fill_cards, fill_clips
from m3cli.stages.report.records import (
    Character,
    Clip,
    Crop,
    Keyframe,
    Line,
    OtherVideo,
    ReportData,
    ReportLimits,
    Video,
)

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
#: Node kinds read for every video whatever clip range is shown: few per video, and cards need them.
CARD_KINDS = ("character", "relationship", "global")

log = logging.getLogger(__name__)


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
    fill_clips(clips, lines, mapping, limits)
    fill_cards(vid, characters, mapping, lines, card_lines, semantic, clips, limits, path, rows["edges"])
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
                    sorted(r.get("members") or [], key=entity_order),
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
    chars.sort(key=lambda c: (c.first_seen if c.first_seen is not None else 1e18, entity_order(c.id)))
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


def gather_people(reader: Any, data: ReportData) -> None:
    """The memory's people (its ``people`` table, the user's edits applied, as `m3 people` lists them)
    into ``data``; a memory without that table (one video, or indexed before people) has none."""
    from m3cli.stages.people.pages import PeopleBook
    from m3cli.stages.people.store import PEOPLE
    from m3cli.stages.people.summary import profiles_of_reader

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
    data.profiles = profiles_of_reader(reader)
