"""Memory-wide people: the matching rule, the scores of `m3 eval people`, and real videos end to end."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from conftest import DATA as TESTS_DATA
from m3cli.stages.eval.people import score
from m3cli.stages.people.match import Appearance, KnownPeople, assign_video
from m3cli.stages.people.store import Edits, merge_spans

DATA = TESTS_DATA / "people"


def _unit(seed: int, dim: int = 128) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=dim).astype(np.float32)
    return v / np.linalg.norm(v)


def _people():
    counter = [0]

    def new() -> str:
        counter[0] += 1
        return f"<person_{counter[0]}>"

    return new


def test_the_people_table_read_as_arrays_gives_the_banks_read_row_by_row():
    """known_of_table (Arrow columns, one step per model) and load_known (one appearance at a time)
    build the same people and banks: rows out of order, two voice models, appearances without a face
    or a voice, a null embedding."""
    import pyarrow as pa

    from m3cli.stages.people.add import MATCH_COLUMNS, known_of_table, load_known
    from m3cli.stages.people.store import PEOPLE_SCHEMA

    rows = []
    for i in range(40):
        seq, char = 1 + (7 * i) % 9, f"<character_{1 + i % 3}>"
        rows.append(
            {
                "id": f"v{seq}:{char}:{i}",
                "video": f"v{seq}",
                "character": char,
                "person": f"<person_{1 + (i * 5) % 11}>",
                "seq": seq,
                "face": [] if i % 4 == 0 else _unit(i).tolist(),
                "face_model": "dlib" if i % 4 else None,
                "voice": None if i % 5 == 0 else _unit(100 + i, 192 if i % 2 else 256).tolist(),
                "voice_model": "campplus" if i % 2 else "resemblyzer",
            }
        )
    table = pa.Table.from_pylist(rows, schema=PEOPLE_SCHEMA).select(MATCH_COLUMNS)
    fast, slow = known_of_table(table), load_known(rows)
    assert fast.ids == slow.ids and fast.videos == slow.videos
    for kind in ("faces", "voices"):
        a, b = getattr(fast, kind), getattr(slow, kind)
        assert sorted(a) == sorted(b)
        for model in a:
            assert a[model].key == b[model].key
            assert np.array_equal(a[model].person, b[model].person)
            assert np.allclose(a[model].matrix(), b[model].matrix())


def test_same_face_joins_other_face_does_not_and_one_person_once_per_video():
    known, new = KnownPeople(), _people()
    a = _unit(1)
    assign_video(known, [Appearance("v1:<character_1>", "v1", "<character_1>", face=a, face_model="m")], new)
    near = a + 0.02 * _unit(2)
    near /= np.linalg.norm(near)
    apps = [
        Appearance("v2:<character_1>", "v2", "<character_1>", face=near, face_model="m"),
        Appearance("v2:<character_2>", "v2", "<character_2>", face=near, face_model="m"),
        Appearance("v2:<character_3>", "v2", "<character_3>", face=_unit(3), face_model="m"),
    ]
    result = assign_video(known, apps, new)
    assert [x.person for x in apps] == ["<person_1>", "<person_2>", "<person_3>"]
    assert result["v2:<character_1>"].by == "face" and result["v2:<character_3>"] is None


def test_faces_of_another_model_are_not_compared():
    known, new = KnownPeople(), _people()
    a = _unit(1)
    assign_video(
        known, [Appearance("v1:<character_1>", "v1", "<character_1>", face=a, face_model="dlib")], new
    )
    b = Appearance("v2:<character_1>", "v2", "<character_1>", face=a, face_model="other")
    assign_video(known, [b], new)
    assert b.person == "<person_2>"


def test_scores_count_false_joins_and_splits():
    truth = {
        "a.mp4": {"recorded": None, "spans": [[0, 5, "x"], [5, 10, "y"]]},
        "b.mp4": {"recorded": None, "spans": [[0, 5, "x"], [5, 10, "y"]]},
    }
    rows = [
        {"video": "A", "path": "/d/a.mp4", "person": "<person_1>", "spans": [[0, 5]]},
        {"video": "A", "path": "/d/a.mp4", "person": "<person_2>", "spans": [[5, 10]]},
        {"video": "B", "path": "/d/b.mp4", "person": "<person_1>", "spans": [[0, 5]]},
        {"video": "B", "path": "/d/b.mp4", "person": "<person_1>", "spans": [[5.5, 10]]},
    ]
    r = score(rows, truth)
    # pairs: (a,x)-(b,x) joined (tp); (a,y)-(b,y) split (fn); (a,x)-(b,y), (b,x)-(b,y) false joins
    assert (r["precision"], r["recall"]) == (pytest.approx(1 / 3, abs=1e-3), 0.5)
    assert r["false_joins"] == 1 and r["splits"] == 1 and r["people"] == 2 and r["true_people"] == 2


def test_edits_replay_names_merges_and_splits():
    e = Edits.of(
        [
            {
                "id": "000001",
                "op": "merge",
                "person": "<person_1>",
                "other": "<person_4>",
                "videos": [],
                "name": None,
            },
            {
                "id": "000002",
                "op": "split",
                "person": "<person_1>",
                "other": "<person_7>",
                "videos": ["v"],
                "name": None,
            },
            {
                "id": "000003",
                "op": "name",
                "person": "<person_1>",
                "other": None,
                "videos": [],
                "name": "Ada",
            },
        ]
    )
    assert e.resolve("<person_4>") == "<person_1>" and e.names["<person_1>"] == "Ada"
    assert frozenset(("<person_1>", "<person_7>")) in e.apart and e.highest() == 7
    assert merge_spans([[3.5, 4], [0, 1], [1.5, 2]]) == [[0.0, 2.0], [3.5, 4.0]]


@pytest.mark.slow
def test_two_photo_videos_share_obama_and_edits_bind(m3, tmp_path, cache_dir):
    mem = tmp_path / "mem.lance"
    for name in ("p1_obama_biden.mp4", "p2_obama_367.mp4"):
        m3("run", DATA / "photos" / name, "--no-llm", "-o", mem, check=True)
    lines = [json.loads(x) for x in m3("people", mem, "--format", "jsonl", check=True).stdout.splitlines()]
    assert len(lines) == 3  # obama (both videos), biden, reader 367
    both = [p for p in lines if len(p["videos"]) == 2]
    assert len(both) == 1 and {Path(v["path"]).name for v in both[0]["videos"]} == {
        "p1_obama_biden.mp4",
        "p2_obama_367.mp4",
    }
    assert set(both[0]) >= {"id", "name", "videos", "first_seen", "last_seen"}
    pid = both[0]["id"]
    m3("people", "name", mem, pid, "Barack", check=True)
    m3("people", "split", mem, pid, "--video", "p2_obama_367.mp4", check=True)
    m3(
        "run", DATA / "photos" / "p2_obama_367.mp4", "--no-llm", "-o", mem, check=True
    )  # re-added: stays split
    again = [json.loads(x) for x in m3("people", mem, "-f", "jsonl", check=True).stdout.splitlines()]
    assert len(again) == 4 and [p["name"] for p in again if p["id"] == pid] == ["Barack"]
    report = json.loads(
        m3("eval", "people", DATA / "photos" / "truth.json", "-m", mem, "--json", check=True).stdout
    )
    assert report["splits"] == 1 and report["false_joins"] == 0


def test_questions_about_people_across_videos_are_recognised():
    from m3cli.stages.ask.across import _COUNT, _RECUR, _WHERE

    assert _COUNT.search("How many different people appear across all the videos?")
    assert _COUNT.search("How many people are there in total?")
    assert not _COUNT.search("How many people speak?")  # each video's own count
    assert _RECUR.search("Who appears in more than one video?")
    assert _RECUR.search("Which people are seen again?")
    assert not _RECUR.search("Who speaks first?")
    assert _WHERE.search("In which videos does <person_2> appear?")
    assert _WHERE.search("On which days does Alice appear?").group("what") == "days"
    assert not _WHERE.search("What did Alice say?")


@pytest.mark.slow
def test_questions_across_the_photo_videos_are_answered_from_the_people(m3, tmp_path, cache_dir):
    """The four photo videos (truth.json): Obama, Biden and reader 367 appear in two videos each,
    readers 1998 and 533 in one; five people in all. Asked as issue 34 asks, offline."""
    mem = tmp_path / "mem.lance"
    m3("batch", DATA / "photos", "--no-llm", "-o", mem, check=True)
    people = [json.loads(x) for x in m3("people", mem, "-f", "jsonl", check=True).stdout.splitlines()]

    def ask(q: str) -> dict:
        return json.loads(m3("ask", mem, q, "--no-llm", check=True).stdout)

    count = ask("How many different people appear across all the videos?")
    assert count["answer"].startswith("5 different people across the 4 videos: ") and count["evidence"]
    recur = ask("Who appears in more than one video?")["answer"]
    twice = [p for p in people if len(p["videos"]) == 2]
    assert len(twice) == 3 and all(f"{p['id']} in 2 videos" in recur for p in twice)
    assert all(p["id"] not in recur for p in people if len(p["videos"]) == 1)
    pid = twice[0]["id"]
    days = sorted(v["recorded"][:10] for v in twice[0]["videos"])
    on = ask(f"On which days does {pid} appear?")["answer"]
    assert on.startswith(f"{pid} appears on 2 days: {days[0]} and {days[1]}")
    files = [Path(v["path"]).name for v in twice[0]["videos"]]
    assert all(f in ask(f"In which videos does {pid} appear?")["answer"] for f in files)
