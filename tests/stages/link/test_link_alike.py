"""Joining by sound: a voice the diarizer split off a person joins that person's face when its own top
face is theirs and it sounds like their voice (``voices.alike``); Algorithm 2 alone makes it a second,
faceless person.

Real media: the Portuguese kitchen man of l1_woman_kitchen.mp4 (LatentSync demo 2), whom the diarizer
hears as two speakers (CAM++ cosine 0.58 between them), comes out as one character. The other side, a
faceless voice that must not join a person it sounds like, is tested on the GRID clip in
test_seen_speaking.py (it shares that module's perceived records).
"""

from __future__ import annotations

import orjson
import pytest
from test_seen_speaking import read

from conftest import DATA, run_m3
from m3cli.stages.link.stage import LinkConfig, LinkFold, LinkState, Vote

SEEN = LinkConfig()
FIRST = {"<face_1>": (0, 0.0), "<voice_1>": (0, 0.0), "<face_2>": (0, 5.0), "<voice_2>": (0, 4.5)}
FIRST |= {"<voice_3>": (0, 9.9)}


def kitchen(alike=()) -> LinkState:
    """The seen-speaking weights m3 link measured on l1_woman_kitchen.mp4: the man's face is seen
    speaking both of his voices, and slightly more the second one."""
    state = LinkState(SEEN)
    votes = [
        Vote("<face_1>", "<voice_1>", "seen", 4.471),
        Vote("<face_2>", "<voice_3>", "seen", 3.121),
        Vote("<face_2>", "<voice_2>", "seen", 2.598),
        Vote("<face_1>", "<voice_2>", "seen", 0.506),
    ]
    state.add(votes, dict(FIRST), alike)
    return state


def test_a_voice_that_sounds_like_its_faces_voice_joins_that_face():
    state = kitchen([("<voice_3>", "<voice_2>", 0.5791)])
    chars = state.characters()
    assert chars["<face_2>"] == chars["<voice_2>"] == chars["<voice_3>"] != chars["<face_1>"]
    assert len(set(chars.values())) == 2
    edges = state.snapshot([])["edges"]
    assert {"face": "<face_2>", "voice": "<voice_2>", "weight": 2.598, "sounds_like": "<voice_3>"} | {
        "cosine": 0.5791
    } in edges
    assert {"face": "<face_2>", "voice": "<voice_3>", "weight": 3.121} in edges  # the mutual edge, as it was


def test_without_the_sound_evidence_algorithm_2_keeps_the_voice_apart():
    chars = kitchen().characters()
    assert len(set(chars.values())) == 3
    assert chars["<voice_2>"] not in {chars["<face_1>"], chars["<face_2>"]}
    assert all("sounds_like" not in e for e in kitchen().snapshot([])["edges"])


def test_a_voice_alike_to_another_faces_voice_is_not_joined():
    # voice_2 sounds like voice_1 (the woman's), but its own top face is the man's: no join
    chars = kitchen([("<voice_1>", "<voice_2>", 0.7)]).characters()
    assert len(set(chars.values())) == 3


def test_a_voice_without_a_clear_top_face_is_not_joined():
    state = LinkState(SEEN)
    votes = [
        Vote("<face_1>", "<voice_1>", "seen", 5.0),
        Vote("<face_1>", "<voice_2>", "seen", 2.0),
        Vote("<face_2>", "<voice_2>", "seen", 2.0),  # voice_2 is seen as much with each face: tied
    ]
    state.add(votes, dict(FIRST), [("<voice_1>", "<voice_2>", 0.7)])
    chars = state.characters()
    assert chars["<voice_2>"] not in {chars["<face_1>"], chars["<face_2>"]}


def test_the_alike_pairs_survive_a_checkpoint():
    fold = LinkFold.start(SEEN)
    fold.state.add(
        [Vote("<face_1>", "<voice_1>", "seen", 3.0)], dict(FIRST), [("<voice_3>", "<voice_2>", 0.6)]
    )
    doc = orjson.loads(orjson.dumps(fold.dump()))
    again = LinkFold.load(doc, SEEN)
    assert again.state.alike == {("<voice_2>", "<voice_3>"): 0.6}


@pytest.mark.slow
def test_the_kitchen_man_split_by_the_diarizer_is_one_character(tmp_path):
    video = DATA / "people" / "latentsync" / "l1_woman_kitchen.mp4"
    out = tmp_path / "linked.jsonl"
    run_m3(
        "-q", "run", video, "--until", "link", "-o", out, env={"M3_CACHE": str(tmp_path / "c")}, check=True
    )
    (record,) = read(out)
    alike = [a.voices for a in record.voices.alike or []]
    assert alike, "the diarizer no longer splits the man: this test has lost its case"
    characters = set(record.characters.values())
    assert len(characters) == 2, record.characters  # the woman and the man (truth: 0-5 s, 5-13 s)
    joins = [e for e in record.link.edges if e.sounds_like]
    assert len(joins) == 1 and sorted([joins[0].voice, joins[0].sounds_like]) in [sorted(p) for p in alike]
    # every voice heard, each of its turns, belongs to a character with a face
    faces = {c for eid, c in record.characters.items() if eid.startswith("<face_")}
    assert {record.characters[t.speaker] for t in record.turns if t.speaker} <= faces
