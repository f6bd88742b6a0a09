"""The step ``m3 index`` runs when videos are added: their characters joined to the memory's people.

It runs inside the index run, after the ``entities`` rows are written and before the manifest commit,
so the people of a memory always match its videos (one run, all or nothing). Videos are matched one
after another in the order they were given (``m3 batch`` and ``m3 watch`` add them as they finish);
an appearance already in the table keeps its person (re-indexing, appending clips and user edits
never move anyone), so only new characters are matched.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from m3cli.schemas.records import ClipRecord, Turn, Utterance
from m3cli.stages.core.entity_ids import parse_id
from m3cli.stages.core.sql import sql_list
from m3cli.stages.people.match import Appearance, KnownPeople, Thresholds, assign_video, unit
from m3cli.stages.people.store import (
    EDITS,
    EDITS_SCHEMA,
    PEOPLE,
    PEOPLE_SCHEMA,
    Edits,
    merge_spans,
    person_id,
    person_number,
)

log = logging.getLogger(__name__)


def _char_order(character: str) -> tuple[int, str]:
    parsed = parse_id(character)
    return (parsed[1] if parsed else 10**9, character)


def appearance_spans(clips: Sequence[ClipRecord], mapping: dict[str, str]) -> dict[str, list[list[float]]]:
    """Character -> seconds of the video in which it is seen (face tracks) or heard (turns, utterances)."""
    spans: dict[str, list[list[float]]] = defaultdict(list)
    for r in clips:
        for t in r.faces.tracks if r.faces else []:
            c = mapping.get(t.face_id, t.face_id)
            spans[c] += [[float(s), float(e)] for s, e in t.spans]
        heard: list[Utterance | Turn] = [*(r.utterances or []), *(r.turns or [])]
        for u in heard:
            if u.speaker:
                spans[mapping.get(u.speaker, u.speaker)].append([float(u.start), float(u.end)])
    return {c: merge_spans(s) for c, s in spans.items()}


def appearances_of(vid: str, entities: list[dict]) -> list[tuple[Appearance, dict]]:
    """The video's characters (or its unlinked faces and voices) with their mean face and voice."""
    by_entity = {r["entity"]: r for r in entities}
    chars = [r for r in entities if r["kind"] == "character"]
    linked = {m for r in chars for m in (r["members"] or [])}
    for r in entities:  # a face or voice no character holds (no link stage): its own appearance
        if r["kind"] != "character" and r["entity"] not in linked and r["character"] in (None, r["entity"]):
            chars.append({**r, "kind": "character", "members": [r["entity"]], "character": r["entity"]})
    out = []
    for c in sorted(chars, key=lambda r: _char_order(r["entity"])):
        app = Appearance(key=f"{vid}:{c['entity']}", video=vid, character=c["entity"])
        for kind in ("face", "voice"):
            vecs, weights, model = [], [], None
            for m in sorted(c["members"] or []):
                e = by_entity.get(m) if m != c["entity"] else c
                if e is None or e["kind"] != kind or not e["embedding"]:
                    continue
                vecs.append(np.asarray(e["embedding"], np.float32))
                weights.append(max(1, len(e["clips"] or [])))
                model = e["embedding_model"]
            if vecs and len({v.shape for v in vecs}) == 1:
                vec = unit(np.average(np.vstack(vecs), axis=0, weights=weights))
                setattr(app, kind, vec)
                setattr(app, f"{kind}_model", model)
        out.append((app, c))
    return out


def appearance_of_row(r: dict, person: str | None = None) -> Appearance:
    """The matcher's view of one people-table row (its face and voice as unit vectors, where it has
    them); ``person`` as already assigned, or None for one still to match."""
    return Appearance(
        key=r["id"],
        video=r["video"],
        character=r["character"],
        face=unit(r["face"]) if r["face"] is not None and len(r["face"]) else None,
        face_model=r["face_model"],
        voice=unit(r["voice"]) if r["voice"] is not None and len(r["voice"]) else None,
        voice_model=r["voice_model"],
        person=person,
    )


def load_known(rows: list[dict], thresholds: Thresholds | None = None) -> KnownPeople:
    known = KnownPeople(thresholds)
    for r in sorted(rows, key=lambda r: (r["seq"], _char_order(r["character"]))):
        known.add(appearance_of_row(r, r["person"]))
    return known


#: The columns of the people table the matcher needs (not the spans, clips and evidence).
MATCH_COLUMNS = ["id", "video", "character", "person", "seq", "face", "face_model", "voice", "voice_model"]


def _matrix(table: pa.Table, column: str, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The unit vectors of a list<float32> column at ``rows`` (table row numbers), read from the Arrow
    buffers in bulk, and which of ``rows`` have one (non-null, non-empty; one length per call): a
    Python float per element (``to_pylist``) and a Python step per row are what made reading a
    memory of a thousand appearances cost more than matching against it."""
    col = table.column(column).combine_chunks()
    offsets = col.offsets.to_numpy()[: len(col) + 1]
    values = col.values.to_numpy(zero_copy_only=False).astype(np.float32, copy=False)
    valid = col.is_valid().to_numpy(zero_copy_only=False)
    lengths = np.diff(offsets)
    keep = rows[valid[rows] & (lengths[rows] > 0)]
    if not len(keep):
        return np.zeros((0, 0), np.float32), keep
    dim = int(lengths[keep[0]])
    keep = keep[lengths[keep] == dim]
    # each kept row is ``dim`` values from its offset: rows of a sliding window over the values (a row
    # copy each), not an index per element (three times slower at 10,000 rows)
    m = np.lib.stride_tricks.sliding_window_view(values, dim)[offsets[keep]]
    norms = np.linalg.norm(m, axis=1)
    ok = norms > 0
    return (m[ok] / norms[ok][:, None]).astype(np.float32), keep[ok]


def known_of_table(table: pa.Table, thresholds: Thresholds | None = None) -> KnownPeople:
    """:func:`load_known` from the people table's :data:`MATCH_COLUMNS` as Arrow: the same people and
    banks in the same order, each bank's matrix built in one step (per model, as the matcher keeps
    them) instead of one appearance at a time. The order (by ``seq``, then character number) and each
    row's person and model are worked out on dictionary codes: a Python step per row cost more than
    the matching at 10,000 appearances."""
    from m3cli.stages.people.match import _Bank

    known = KnownPeople(thresholds)
    if not table.num_rows:
        return known

    def codes(column: str) -> tuple[np.ndarray, list[Any]]:
        encoded = table.column(column).combine_chunks().dictionary_encode()
        return encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False), encoded.dictionary.to_pylist()

    seq = table.column("seq").combine_chunks().fill_null(0).to_numpy(zero_copy_only=False)
    char_code, characters = codes("character")
    char_rank = np.empty(len(characters), np.int64)  # each distinct character's place in character order
    char_rank[sorted(range(len(characters)), key=lambda k: _char_order(characters[k]))] = np.arange(
        len(characters)
    )
    order = np.lexsort((char_rank[char_code], seq))  # stable: ties keep the table's order
    person_code, persons = codes("person")
    video_code, videos = codes("video")
    pid_of_code = np.full(len(persons), -1, np.int64)
    in_order = person_code[order]
    _, first = np.unique(in_order, return_index=True)
    for code in in_order[np.sort(first)]:  # people in order of their first appearance
        pid_of_code[code] = known._pid(persons[code])
    for p_code, v_code in set(zip(in_order.tolist(), video_code[order].tolist(), strict=True)):
        known.seen_in(persons[p_code], videos[v_code])
    ids = table.column("id").to_pylist()
    for column, banks in (("face", known.faces), ("voice", known.voices)):
        model_code, models = codes(f"{column}_model")
        names = [m or "" for m in models] + [""]  # code -1 (null) reads as the last entry
        named = np.asarray(names, dtype=object)[model_code[order]]
        for model in dict.fromkeys(named.tolist()):
            m, keep = _matrix(table, column, order[named == model])
            if len(keep):
                banks.setdefault(model, _Bank()).extend(
                    m, pid_of_code[person_code[keep]], [ids[int(i)] for i in keep]
                )
    return known


def add_people(
    indexer: Any, groups: Sequence[Sequence[ClipRecord]], stats: Any, thresholds: Thresholds | None = None
) -> int:
    """Match the characters of the videos just indexed to the memory's people; write the ``people``
    rows that are new or changed. ``indexer`` is the running :class:`~m3cli.stages.index.stage.Indexer`
    (its writer and tables, its one-commit-per-table ``_write``). Returns the rows written."""
    edits = Edits.of(indexer._existing(EDITS, None))
    if PEOPLE in indexer.tables:  # the matcher's columns only, as arrays; whole rows only of these videos
        table = indexer.writer.dataset(PEOPLE).to_table(columns=MATCH_COLUMNS)
        vids = sorted({clips[0].video.id for clips in groups if clips})
        existing = indexer._existing(PEOPLE, f"video IN ({sql_list(vids)})") if vids else []
    else:
        table = pa.Table.from_pylist([], schema=PEOPLE_SCHEMA).select(MATCH_COLUMNS)
        existing = []
    known = known_of_table(table, thresholds)
    stored = {r["id"]: r for r in existing}
    persons = table.column("person").to_pylist()
    highest = max([person_number(p) for p in persons] + [edits.highest()])
    counter = [highest]

    def new_person() -> str:
        counter[0] += 1
        return person_id(counter[0])

    seq = max([q for q in table.column("seq").to_pylist() if q is not None] + [0])
    rows: list[dict] = []
    for clips in groups:
        vid = clips[0].video.id
        entities = indexer._existing("entities", f"video = '{vid}'")
        if not entities:
            continue
        mapping = dict(clips[-1].characters or {})
        spans = appearance_spans(clips, mapping)
        path = clips[0].video.path
        recorded = getattr(clips[0].video, "recorded", None)
        seq += 1
        apps = appearances_of(vid, entities)
        fresh = [app for app, _ in apps if app.key not in stored]
        matches = assign_video(known, fresh, new_person)
        for app, char in apps:
            old = stored.get(app.key)
            old_spans = (old or {}).get("spans") or []
            row = {
                "id": app.key,
                "video": vid,
                "character": app.character,
                "person": old["person"] if old else next(a.person for a in fresh if a.key == app.key),
                "path": (old or {}).get("path") or path,
                "recorded": recorded if recorded is not None else (old or {}).get("recorded"),
                "seq": old["seq"] if old else seq,
                "how": old["how"] if old else _how(matches.get(app.key)),
                "evidence": old["evidence"] if old else _evidence(matches.get(app.key), char),
                "spans": merge_spans([*old_spans, *spans.get(app.character, [])]),
                "clips": sorted(char.get("clips") or []),
                "name": char.get("name"),
                "face": app.face.tolist() if app.face is not None else [],
                "face_model": app.face_model,
                "voice": app.voice.tolist() if app.voice is not None else [],
                "voice_model": app.voice_model,
            }
            if old is None or not _same(old, row):
                rows.append(row)
    written = indexer._write(PEOPLE, PEOPLE_SCHEMA, rows, stats) if rows else 0
    for name, schema in ((PEOPLE, PEOPLE_SCHEMA), (EDITS, EDITS_SCHEMA)):
        if name not in indexer.tables:
            indexer.writer.create(name, schema.empty_table(), schema)
            indexer.tables.add(name)
            stats.tables_committed.append(name)
    if written:
        log.info("people: %d appearance(s) written, %d people known", written, len(known.ids))
    return written


def _how(m: Any) -> str:
    return "new" if m is None else m.by


def _evidence(m: Any, char: dict) -> str:
    ev: dict[str, Any] = {"clips": sorted(char.get("clips") or [])}
    if m is not None:
        ev.update(m.evidence())
    return json.dumps(ev, sort_keys=True)


def _same(old: dict, new: dict) -> bool:
    for k, v in new.items():
        o = old.get(k)
        if k in ("face", "voice"):
            if len(o or []) != len(v or []) or (v and o is not None and not np.allclose(o, v, atol=1e-5)):
                return False
        elif k == "spans":
            if [list(map(float, s)) for s in (o or [])] != [list(map(float, s)) for s in (v or [])]:
                return False
        elif (o if o not in ([], None) else None) != (v if v not in ([], None) else None):
            return False
    return True
