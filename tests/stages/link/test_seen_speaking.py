"""The seen-speaking fold at the start of `m3 link`: a voice two faces are seen speaking in is split.

Real media: both people of latentsync_2people_turns and the four panels of grid_4people_turns forced
into one voice by `m3 diarize --speakers 1` come back as one voice each, matching the truth's turns,
and each face is joined to its own voice; the default run (voices already right) is left unchanged.
"""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import orjson
import pytest
from test_link_seen import scene

from conftest import DATA, run_m3
from m3cli.schemas.records import ClipRecord
from m3cli.stages.eval.audio import diarization_error, read_rttm
from m3cli.stages.link.stage import LinkConfig, link_records

LINK = DATA / "link"
VIDEOS = ["latentsync_2people_turns", "grid_4people_turns"]
PEOPLE = {"latentsync_2people_turns": 2, "grid_4people_turns": 4}


def turns_of(records: list[ClipRecord]) -> list[tuple[float, float, str]]:
    return [(t.start, t.end, t.speaker) for r in records for t in r.turns or [] if t.speaker]


def voice_ids(records: list[ClipRecord]) -> set[str]:
    return {s for _, _, s in turns_of(records)}


def score(name: str, records: list[ClipRecord]) -> dict:
    """DER of the voice-labelled turns against the truth (collar 0.25 s) and the voice count."""
    ref = read_rttm(LINK / f"{name}.rttm")[name]
    res = diarization_error(ref, turns_of(records))
    return {
        "voices": len(voice_ids(records)),
        "der": round(res.der, 3),
        "confusion": round(res.confusion / res.total, 3),
    }


def read(path: Path) -> list[ClipRecord]:
    return [ClipRecord.model_validate_json(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict[str, str]:
    """One cache for the module's runs."""
    return {**os.environ, "M3_CACHE": str(tmp_path_factory.mktemp("seen_speaking_cache"))}


@pytest.fixture(scope="module")
def perceived(tmp_path_factory, env) -> dict[tuple[str, str], Path]:
    """Each video through segment..faces, forced into one voice and by default: (name, run) -> file."""
    root = tmp_path_factory.mktemp("seen_speaking")
    out = {}
    for name in VIDEOS:
        video = LINK / f"{name}.mp4"
        data = run_m3("-q", "segment", video, env=env, check=True).stdout
        for stage in (("diarize", "--speakers", "1"), ("voices",), ("faces",)):
            data = run_m3("-q", *stage, input=data, env=env, check=True).stdout
        out[(name, "forced")] = root / f"{name}.forced.jsonl"
        out[(name, "forced")].write_bytes(data)
        out[(name, "default")] = root / f"{name}.default.jsonl"
        run_m3("-q", "run", video, "--until", "faces", "-o", out[(name, "default")], env=env, check=True)
    return out


def m3_link(path: Path) -> list[ClipRecord]:
    proc = run_m3("-q", "link", path)
    assert proc.returncode == 0, proc.stderr.decode()
    return [ClipRecord.model_validate_json(line) for line in proc.stdout.decode().splitlines()]


@pytest.mark.parametrize("name", VIDEOS)
@pytest.mark.slow
def test_one_voice_forced_on_every_person_is_split_into_one_voice_each(perceived, name):
    records = read(perceived[(name, "forced")])
    before = score(name, link_records(records, LinkConfig(split_voices=False)))
    assert before["voices"] == 1  # the merge really happened
    linked = m3_link(perceived[(name, "forced")])
    after = score(name, linked)
    assert after["voices"] == PEOPLE[name], (before, after)
    assert after["confusion"] <= 0.05 and after["der"] < before["der"] - 0.3, (before, after)
    splits = linked[-1].plain("link")["voice_splits"]
    assert len(splits) == PEOPLE[name] - 1 and all(s["seconds"] >= 1.0 for s in splits)
    assert {s["voice"] for s in splits} == {"<voice_1>"}
    # every utterance's voice is one a turn also carries, and every voice is listed in the record
    for r in linked:
        assert {u.speaker for u in r.utterances if u.speaker} <= set(r.voices.ids)
    # each face is joined to its own voice: the whole `m3 eval link` on these records
    proc = run_m3(
        "-q", "eval", "link", LINK / f"{name}.mp4", "--truth", LINK / f"{name}.json",
        "--records", perceived[(name, "forced")], "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()
    report = json.loads(proc.stdout)
    assert report["joined"] == report["people"] == PEOPLE[name], report["per_person"]
    assert report["false_joins"] == 0 and report["splits"] == 0


@pytest.mark.parametrize("name", VIDEOS)
@pytest.mark.slow
def test_voices_already_apart_are_left_as_they_were(perceived, name):
    records = read(perceived[(name, "default")])
    plain = link_records(records, LinkConfig(split_voices=False))
    linked = m3_link(perceived[(name, "default")])
    assert turns_of(linked) == turns_of(plain)
    assert [u.speaker for r in linked for u in r.utterances] == [
        u.speaker for r in plain for u in r.utterances
    ]
    assert linked[-1].plain("link").get("voice_splits") is None
    assert score(name, linked)["voices"] == PEOPLE[name]


@pytest.mark.slow
def test_m3_run_gives_the_pipes_split(perceived, env, tmp_path):
    name = "latentsync_2people_turns"
    run = tmp_path / "run.jsonl"
    video = LINK / f"{name}.mp4"
    run_m3("-q", "run", video, "--speakers", "1", "--until", "link", "-o", run, env=env, check=True)
    memorized = run_m3("-q", "memorize", perceived[(name, "forced")], env=env, check=True).stdout
    piped = run_m3("-q", "link", input=memorized, env=env, check=True).stdout.decode().splitlines()
    whole, pipe = read(run), [ClipRecord.model_validate_json(line) for line in piped]
    assert [r.plain("link") for r in whole] == [r.plain("link") for r in pipe]
    assert turns_of(whole) == turns_of(pipe) and [r.characters for r in whole] == [r.characters for r in pipe]
    assert whole[-1].plain("link")["voice_splits"][0]["voice"] == "<voice_1>"


# ------------------------------------------------------------------------ the rules, on small scenes

BOTH = {
    "<face_1>": [(0.0, 4.0, True), (4.0, 12.0, False)],
    "<face_2>": [(0.0, 4.0, False), (4.0, 12.0, True)],
}


def speakers(record: ClipRecord) -> list[tuple[float, str]]:
    return [(u.start, u.speaker) for u in record.utterances]


def test_two_faces_seen_together_each_speaking_alone_split_the_voice():
    r = scene(BOTH, [("<voice_1>", 0.0, 4.0, "a"), ("<voice_1>", 4.0, 12.0, "b")])
    out = link_records([r], LinkConfig())[0]
    assert speakers(out) == [(0.0, "<voice_2>"), (4.0, "<voice_1>")]  # face_2 has more seconds: it keeps
    (split,) = out.plain("link")["voice_splits"]
    assert split["voice"] == "<voice_1>" and split["into"] == "<voice_2>" and split["face"] == "<face_1>"
    assert out.characters["<face_1>"] == out.characters["<voice_2>"] != out.characters["<voice_1>"]
    assert out.characters["<face_2>"] == out.characters["<voice_1>"]
    assert link_records([r], LinkConfig(split_voices=False))[0].utterances == r.utterances


def test_a_still_or_unseen_speaker_costs_nothing():
    faces = {"<face_1>": [(0.0, 5.0, True), (5.0, 10.0, False)], "<face_2>": [(0.0, 10.0, False)]}
    r = scene(faces, [("<voice_1>", 0.0, 5.0, "a"), ("<voice_1>", 5.0, 10.0, "b")])
    out = link_records([r], LinkConfig())[0]
    assert speakers(out) == speakers(r) and out.plain("link").get("voice_splits") is None


def test_two_face_ids_never_on_screen_together_never_split_a_voice():
    # one person shown twice under two face ids (beside a still third face): not two people
    faces = {
        "<face_1>": [(0.0, 5.0, True)],
        "<face_2>": [(5.0, 10.0, True)],
        "<face_3>": [(0.0, 10.0, False)],
    }
    r = scene(faces, [("<voice_1>", 0.0, 5.0, "a"), ("<voice_1>", 5.0, 10.0, "b")])
    assert speakers(link_records([r], LinkConfig())[0]) == speakers(r)


def test_a_listeners_stray_lip_motion_in_another_voice_does_not_split_it():
    faces = {
        "<face_1>": [(0.0, 10.0, True), (10.0, 11.6, True), (11.6, 20.0, False)],
        "<face_2>": [(0.0, 10.0, False), (10.0, 11.6, False), (11.6, 20.0, True)],
    }
    r = scene(faces, [("<voice_1>", 0.0, 10.0, "a"), ("<voice_2>", 10.0, 20.0, "b")])
    out = link_records([r], LinkConfig())[0]
    assert speakers(out) == speakers(r) and out.plain("link").get("voice_splits") is None


def test_a_split_is_kept_in_later_clips_and_a_colliding_bank_id_is_renamed():
    first = scene(BOTH, [("<voice_1>", 0.0, 4.0, "a"), ("<voice_1>", 4.0, 12.0, "b")])
    later = scene(
        {"<face_1>": [(30.0, 35.0, True), (35.0, 40.0, False)], "<face_2>": [(30.0, 35.0, False)]},
        [("<voice_1>", 30.0, 35.0, "c"), ("<voice_2>", 36.0, 40.0, "a new voice from the bank")],
        memory={"source": "offline", "episodic": [{"text": "<voice_2> greets <face_1>."}], "semantic": []},
    )
    later.clip.index, later.clip.start, later.clip.end = 1, 30.0, 60.0
    out = link_records([first, later], LinkConfig())
    assert speakers(out[1]) == [(30.0, "<voice_2>"), (36.0, "<voice_3>")]
    assert out[1].plain("link")["voice_moved"] == {"<voice_2>": 5.0}
    assert out[1].memory.episodic[0].text == "<voice_3> greets <face_1>."


@pytest.mark.slow
def test_a_voice_whose_face_is_gone_is_not_joined_by_sound_to_someone_else(perceived, tmp_path):
    """Each of the four GRID speakers taken off screen in turn (their face track removed), with every
    pair of voices declared alike: the voice left without its face stays a person of its own. Here the
    others' lips are still while it speaks, so it gathers no sight evidence for another face, and sound
    alone never joins (the rule's other guards are the unit tests of test_link_alike.py)."""
    lines = perceived[("grid_4people_turns", "default")].read_text().splitlines()
    records = [orjson.loads(line) for line in lines if line.strip()]
    for record in records:
        voices = record["voices"]["ids"]
        record["voices"]["alike"] = [
            {"voices": list(p), "cosine": 0.9} for p in itertools.combinations(voices, 2)
        ]
    full = m3_link(_write(tmp_path / "all.jsonl", records))
    person = full[-1].characters
    assert len(set(person.values())) == 4
    for k in range(1, 5):
        face = f"<face_{k}>"
        voice = next(v for v, c in person.items() if c == person[face] and v.startswith("<voice_"))
        hidden = [
            r | {"faces": r["faces"] | {"tracks": [t for t in r["faces"]["tracks"] if t["face_id"] != face]}}
            for r in records
        ]
        chars = m3_link(_write(tmp_path / f"without_{k}.jsonl", hidden))[-1].characters
        others = {c for eid, c in chars.items() if eid != voice}
        assert chars[voice] not in others, (face, chars)


def _write(path, records):
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return path
