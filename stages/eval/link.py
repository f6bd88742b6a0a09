"""Scoring `m3 link` against ground truth: is every person's face and voice one character, alone?

Truth file (JSON), times in seconds of the video::

    {
      "video": "latentsync_2people_turns.mp4",
      "rttm": "latentsync_2people_turns.rttm",          # who speaks when (path relative to this file)
      "people": {
        "A": {"face": [[0.0, 20.0]], "region": [0.0, 0.0, 0.5, 1.0]},
        "B": {"face": [[0.0, 20.0]], "region": [0.5, 0.0, 1.0, 1.0]}
      }
    }

``face`` lists when the person's face is on screen; ``region`` (optional, fractions of the frame:
x0, y0, x1, y1) says where, for people on screen together; a span may carry its own region as
``[start, end, x0, y0, x1, y1]`` (a wide shot, then a close-up). RTTM speaker names are the people's names.

Each face id of the records goes to the person whose face it shows for most of its detections
(a detection counts for a person when its time is in their ``face`` spans and its box centre in
their ``region``); each voice id to the person whose RTTM speech it overlaps most. Ids that match no
one (an unannotated extra, a voice of silence) are listed as unmatched and left out. Then, over the
people with both a face and a voice in the truth:

* ``joined``: the person has exactly one face id and one voice id, both in one character, and that
  character holds no other person's ids: the target for every person;
* ``false_joins``: pairs of different people whose ids share a character;
* ``splits``: extra characters a person's ids are spread over (0 when all in one);
* ``purity``: per character, the share of its ids' matched seconds that belong to its main person,
  averaged weighted by seconds (1.0 when no character mixes people).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

import orjson

from m3cli.schemas.records import ClipRecord, Utterance
from m3cli.stages.core.entity_ids import FACE, VOICE, kind_of, voice_id
from m3cli.stages.core.errors import InputError
from m3cli.stages.eval.audio import read_rttm

Span = tuple[float, float]


Region = tuple[float, float, float, float]


@dataclass
class Person:
    name: str
    face: list[tuple[float, float, Region | None]] = field(default_factory=list)
    speech: list[Span] = field(default_factory=list)

    def shows(self, t: float, x: float, y: float) -> bool:
        """Whether a face centred at (x, y) (frame fractions) at time ``t`` is this person's."""
        return any(a <= t < b and _inside(region, x, y) for a, b, region in self.face)


def _region(values: Any) -> Region:
    x0, y0, x1, y1 = (float(x) for x in values)
    return (x0, y0, x1, y1)


def _face_spans(spec: dict[str, Any]) -> list[tuple[float, float, Region | None]]:
    default = _region(spec["region"]) if spec.get("region") else None
    out = []
    for span in spec.get("face", []):
        own = _region(span[2:6]) if len(span) == 6 else default
        out.append((float(span[0]), float(span[1]), own))
    return out


def read_truth(path: Path) -> dict[str, Person]:
    """The people of a truth file, with their speech from its RTTM; one clear error when malformed."""
    try:
        data = orjson.loads(path.read_bytes())
        if isinstance(data, dict) and "people" not in data and isinstance(data.get("turns"), list):
            return _turns_truth(data)
        people = {
            str(name): Person(name=str(name), face=_face_spans(spec)) for name, spec in data["people"].items()
        }
        rttm = path.parent / data["rttm"] if data.get("rttm") else None
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise InputError(
            f"{path}: expected JSON with people: {{NAME: {{face: [[start, end], ...], region: "
            f"[x0, y0, x1, y1]}}}} and rttm: FILE ({exc})"
        ) from None
    if rttm is not None:
        if not rttm.is_file():
            raise InputError(f"{path}: its rttm {rttm} does not exist")
        for turns in read_rttm(rttm).values():
            for start, end, speaker in turns:
                if speaker not in people:
                    raise InputError(f"{rttm}: speaker {speaker!r} is not one of the people in {path}")
                people[speaker].speech.append((start, end))
    return people


#: Where a named panel or side of the frame is, as (x0, y0, x1, y1) fractions.
_PLACES: dict[str, Region] = {
    "top-left": (0.0, 0.0, 0.5, 0.5),
    "top-right": (0.5, 0.0, 1.0, 0.5),
    "bottom-left": (0.0, 0.5, 0.5, 1.0),
    "bottom-right": (0.5, 0.5, 1.0, 1.0),
    "left": (0.0, 0.0, 0.5, 1.0),
    "right": (0.5, 0.0, 1.0, 1.0),
}
_ALWAYS = 1e9  # a face on screen for the whole video (its panel is always shown)


def _turns_truth(data: dict[str, Any]) -> dict[str, Person]:
    """People of a truth file in the shared media's turn format (``*.truth.json``): everyone is on
    screen in their own panel or side the whole time, and speaks in the listed turns. Two shapes:
    ``panels: {"0": "top-left", ...}`` with turns' ``panel``/``speech_start_s``/``speech_end_s``, or
    one key per speaker with turns' ``speaker``/``side``/``start_s``/``end_s``."""
    people: dict[str, Person] = {}
    panels = data.get("panels")
    for turn in data["turns"]:
        if isinstance(panels, dict):
            place = str(panels[str(turn["panel"])])
            name, start, end = place.replace("-", "_"), turn["speech_start_s"], turn["speech_end_s"]
        else:
            name, place, start, end = str(turn["speaker"]), str(turn["side"]), turn["start_s"], turn["end_s"]
        if place not in _PLACES:
            raise ValueError(f"unknown panel or side {place!r} (known: {', '.join(_PLACES)})")
        person = people.setdefault(name, Person(name=name, face=[(0.0, _ALWAYS, _PLACES[place])]))
        person.speech.append((float(start), float(end)))
    if not people:
        raise ValueError("no turns")
    return people


def _overlap(spans: list[Span], s: float, e: float) -> float:
    return sum(max(0.0, min(b, e) - max(a, s)) for a, b in spans)


def _inside(region: tuple[float, float, float, float] | None, x: float, y: float) -> bool:
    return region is None or (region[0] <= x < region[2] and region[1] <= y < region[3])


def voice_stretches(record: ClipRecord) -> list[tuple[str, float, float]]:
    """Attributed speech of a record: speaker turns with voice ids when present, else utterances."""
    from m3cli.stages.link.stage import voice_activity

    return voice_activity(record)[0]


def id_seconds(records: list[ClipRecord], people: dict[str, Person]) -> dict[str, dict[str, float]]:
    """Per face/voice id, the seconds it shares with each person (faces: per detection, one frame step)."""
    seconds: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for record in records:
        faces = record.faces
        width = record.clip.width or record.video.width or 0
        height = record.clip.height or record.video.height or 0
        step = 1.0 / (faces.fps or 5.0) if faces else 0.0
        for track in faces.tracks if faces else []:
            seconds[track.face_id]  # noqa: B018 - every face id is listed, matched or not
            for t, x0, y0, x1, y1 in track.boxes or []:
                cx = (x0 + x1) / 2 / width if width else 0.5
                cy = (y0 + y1) / 2 / height if height else 0.5
                for person in people.values():
                    if person.shows(t, cx, cy):
                        seconds[track.face_id][person.name] += step
        for voice, s, e in voice_stretches(record):
            seconds[voice]  # noqa: B018
            for person in people.values():
                seconds[voice][person.name] += _overlap(person.speech, s, e)
    return {k: dict(v) for k, v in seconds.items()}


def score_link(records: list[ClipRecord], people: dict[str, Person]) -> dict[str, Any]:
    """The link report of one video's records against its truth."""
    seconds = id_seconds(records, people)
    characters: dict[str, str] = {}
    for record in records:
        characters.update(record.characters or {})
    owner = {
        i: max(s.items(), key=lambda kv: (kv[1], kv[0]))[0] for i, s in seconds.items() if any(s.values())
    }
    unmatched = sorted(i for i in seconds if i not in owner)
    char_of = {i: characters.get(i, i) for i in owner}  # an unlinked id is its own character
    linkable = [p for p in people.values() if p.face and p.speech]
    per_person: dict[str, Any] = {}
    for person in people.values():
        faces = sorted(i for i, who in owner.items() if who == person.name and kind_of(i) == FACE)
        voices = sorted(i for i, who in owner.items() if who == person.name and kind_of(i) == VOICE)
        chars = sorted({char_of[i] for i in faces + voices})
        alone = all(owner[i] == person.name for i, c in char_of.items() if c in chars)
        per_person[person.name] = {
            "faces": faces,
            "voices": voices,
            "characters": chars,
            "joined": len(faces) == 1 and len(voices) == 1 and len(chars) == 1 and alone,
        }
    members: dict[str, set[str]] = defaultdict(set)
    for i, c in char_of.items():
        members[c].add(owner[i])
    false_joins = sum(len(list(combinations(sorted(m), 2))) for m in members.values())
    splits = sum(max(0, len(per_person[p.name]["characters"]) - 1) for p in people.values())
    total = weighted = 0.0
    for c in members:
        by_person: dict[str, float] = defaultdict(float)
        for i in (i for i in char_of if char_of[i] == c):
            for name, sec in seconds[i].items():
                by_person[name] += sec
        total += sum(by_person.values())
        weighted += max(by_person.values(), default=0.0)
    joined = sum(1 for p in linkable if per_person[p.name]["joined"])
    return {
        "people": len(linkable),
        "joined": joined,
        "joined_share": round(joined / len(linkable), 4) if linkable else None,
        "false_joins": false_joins,
        "splits": splits,
        "purity": round(weighted / total, 4) if total else None,
        "per_person": per_person,
        "unmatched": unmatched,
        "characters": len(members),
    }


def oracle_voices(records: list[ClipRecord], people: dict[str, Person]) -> list[ClipRecord]:
    """The records with their speech replaced by the truth's (``<voice_N>`` per person, in name order).

    Scores the link stage alone: a join or split that remains is the linker's, not the diarizer's.
    """
    ids = {p.name: voice_id(k) for k, p in enumerate(sorted(people.values(), key=lambda p: p.name), 1)}
    out = []
    for record in records:
        start, end = record.clip.start, record.clip.end
        turns: list[dict[str, Any]] = [
            {"start": max(a, start), "end": min(b, end), "speaker": ids[p.name]}
            for p in people.values()
            for a, b in p.speech
            if min(b, end) > max(a, start)
        ]
        turns.sort(key=lambda t: (t["start"], t["speaker"]))
        new = record.model_copy(deep=True)
        new.turns = turns  # type: ignore[assignment]  # no speaker_local to give; link reads dicts too (_field)
        new.utterances = [
            Utterance(start=t["start"], end=t["end"], text="", speaker=t["speaker"]) for t in turns
        ]
        new.characters = None
        new.link = None
        out.append(new)
    return out


def perceive(video: Path, until: str, settings: Any, ctx: Any) -> list[ClipRecord]:
    """A video's records through the pipeline up to ``until`` (in process, models loaded once)."""
    from m3cli.stages.pipeline import Models, pipeline_config, process_video

    models = Models(pipeline_config({}, until=until, offline=True), settings)
    return list(process_video(video, models, ctx))


def evaluate_link(
    video: Path,
    truth: Path,
    config: Any,
    settings: Any,
    ctx: Any,
    records: list[ClipRecord] | None = None,
    oracle: bool = False,
) -> dict[str, Any]:
    """The report of ``m3 eval link``: perceive (or take) the video's records, link them, score them."""
    from m3cli.stages.link.stage import link_records

    people = read_truth(truth)
    if records is None:
        records = perceive(video, "faces", settings, ctx)
    if not records:
        raise InputError(f"{video}: no clip records to score")
    if oracle:
        records = oracle_voices(records, people)
    linked = link_records(records, config, reuse=False)
    report = score_link(linked, people)
    report["source"] = str(video)
    report["method"] = config.method
    report["oracle_voices"] = oracle
    last = linked[-1].link
    report["edges"] = [e.model_dump(mode="json", exclude_none=True) for e in last.edges] if last else []
    return report
