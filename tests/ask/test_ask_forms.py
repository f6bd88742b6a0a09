"""Question forms beyond our own set (issue 36): routing, stated declines, the memory lines absence and
place rest on, and the M3-Bench coverage table. Fast: no model, no memory on disk."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import DATA, ROOT
from m3cli.schemas.records import ClipRecord
from m3cli.stages.ask.facts import parse_line
from m3cli.stages.ask.nodes import Node
from m3cli.stages.ask.route import ROUTES, classify, route
from m3cli.stages.eval import formats
from m3cli.stages.memorize.offline import absence_lines, offline_memory, position_lines

# the M3-Bench annotations (../shared/media/m3bench beside the checkout, or $M3BENCH_DIR)
M3BENCH = Path(os.environ.get("M3BENCH_DIR") or ROOT.parent / "shared" / "media" / "m3bench")


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("Who is in the video?", "who_in"),
        ("Who are the people in this video?", "who_in"),
        ("Who appears in the video?", "who_in"),
        ("Who speaks?", "who_speaks"),
        ("Who is talking in this clip?", "who_speaks"),
        ("What is this video about?", "summary"),
        ("Summarize the video.", "summary"),
        ("What text was on screen?", "text"),
        ("Is there any text on screen at 10 seconds?", "text"),
        ("What is the title of the film shown on screen?", "text"),
        ("How many people are in the video?", "count_people"),
        ("What was said?", "said_all"),
        ("What is said in the video?", "said_all"),
        ("What language does the first speaker speak?", "language"),
        ("Who speaks Spanish?", "language"),
        ("What languages are spoken in the video?", "language"),
        ("How long does the second speaker speak?", "duration"),
        ("How long is the man on screen?", "duration"),
        ("Who does the first speaker talk to?", "with_whom"),
        ("Who is the pianist?", "who_is"),
        ("Who is <character_2>?", "about"),
        ("Tell me about <person_3>", "about"),
        ("Who was <voice_1>?", "about"),
        ("What did the woman say?", "what_said"),
        ("What advice does the vlogger give to learners?", "quote"),
        # the older forms keep their questions
        ("Who spoke first?", "order"),
        ("Who is visible at 25 seconds?", "seen"),
        ("When is the title shown?", "when"),
        ("How many times is Disneyland said?", "count_said"),
    ],
)
def test_routes(question, kind):
    assert route(question).kind == kind


@pytest.mark.parametrize(
    ("question", "reason"),
    [
        ("What colour is the car parked outside?", "look like"),
        ("What is the relationship between Ben and Lily?", "relationships"),
        ("Does Kaci enjoy body piercings?", "traits"),
        ("Where should the robot put the file?", "where objects are"),
        ("How many servings of pasta did the blogger have?", "counting objects"),
        ("Why was Grace angry with Luna?", "reasons"),
    ],
)
def test_stated_declines(question, reason):
    """Forms the memory's structure cannot answer are declined with the reason, not misrouted: "how
    many servings" is no count of people, "who won" no who-said question."""
    form = route(question)
    assert form.kind == "decline" and reason in form.detail, form


def test_older_forms_unchanged_on_every_question_file():
    """Every question of our own sets is routed as before the new forms (ours, Video-MME, LVBench,
    HippoVlog, EgoLifeQA samples)."""
    for name, fmt in [
        ("ours.json", "m3bench"),
        ("videomme.json", "videomme"),
        ("lvbench.jsonl", "lvbench"),
        ("hippovlog.json", "hippovlog"),
        ("egolifeqa.json", "egolifeqa"),
    ]:
        for it in formats.load(DATA / "qa" / name, fmt):
            assert route(it.question).kind == classify(it.question).kind, (name, it.question)
    assert ROUTES[-1].__name__ == "quote_form"  # one ordered list; other forms go in before it


def _node(text: str, t0: float, t1: float, who: list[str]) -> Node:
    return Node(id=text[:24], video="v", clip=0, kind="episodic", text=text, characters=who, entities=who,
                t_start=t0, t_end=t1)  # fmt: skip


def test_line_formats_of_languages_absence_and_place():
    said = parse_line(
        _node('<c1> says (in German): "Nach dem Damm" (English: "After the dam")', 0, 4, ["<c1>"])
    )
    assert (said.kind, said.quote, said.english, said.language) == (
        "speech",
        "Nach dem Damm",
        "After the dam",
        "German",
    )
    heard = parse_line(_node("<c2> speaks Spanish, not transcribed, from 20.7 to 31.0 s", 20.7, 31, ["<c2>"]))
    assert (heard.kind, heard.language) == ("turn", "Spanish")
    plain = parse_line(_node('<c1> says: "hello"', 0, 1, ["<c1>"]))
    assert (plain.language, plain.note) == ("", "")  # English lines stay plain
    for text in (
        "no face is seen in this clip, from 0.0 to 9.6 s (48 frames looked at)",
        "nothing is said in this clip, from 0.0 to 9.6 s",
        "no text is on screen in this clip, from 0.0 to 9.6 s (2 keyframes read, at 0.0, 5.0 s)",
        "the clip has no sound, from 0.0 to 9.6 s",
    ):
        assert parse_line(_node(text, 0, 9.6, [])).kind == "absent", text
    place = "<c1> is seen on the left of the picture, its face 21% of the picture's height, from 0.0 to 5.0 s"
    assert parse_line(_node(place, 0, 5, ["<c1>"])).kind == "position"


def _record(**sections) -> ClipRecord:
    base = {
        "schema": "m3.clip/1",
        "video": {"id": "0123456789abcdef", "path": "x.mp4", "duration": 10.0, "width": 800, "height": 400},
        "clip": {"index": 0, "start": 0.0, "end": 10.0, "has_audio": True, "width": 800, "height": 400},
    }
    return ClipRecord.model_validate({**base, **sections})


def test_absence_lines_only_where_a_stage_ran():
    """A stage that ran and found nothing writes its absence line; a stage that did not run writes none."""
    ran = _record(
        faces={"backend": "dlib", "tracks": [], "frames": 50},
        utterances=[],
        turns=[],
        sight={"backend": "rapidocr", "keyframes": [{"t": 0.0}, {"t": 5.0}], "text": [], "tags": []},
    )
    texts = [m.text for m in absence_lines(ran)]
    assert texts == [
        "no face is seen in this clip, from 0.0 to 10.0 s (50 frames looked at)",
        "no text is on screen in this clip, from 0.0 to 10.0 s (2 keyframes read, at 0.0, 5.0 s)",
        "nothing is said in this clip, from 0.0 to 10.0 s",
    ]
    assert absence_lines(_record()) == []  # nothing ran: nothing is claimed
    mute = _record(faces={"backend": "dlib", "tracks": []})
    mute.clip.has_audio = False
    assert [m.text for m in absence_lines(mute)][-1] == "the clip has no sound, from 0.0 to 10.0 s"
    assert any(m.kind == "absent" for m in offline_memory(ran).episodic)


def test_position_lines_from_face_boxes():
    track = {"face_id": "<face_1>", "detections": 2, "spans": [[1.0, 4.0]],
             "boxes": [[1.0, 40, 100, 140, 200], [2.0, 50, 100, 150, 200]]}  # fmt: skip
    right = {**track, "face_id": "<face_2>", "boxes": [[1.0, 600, 0, 760, 200]]}
    lines = position_lines(_record(faces={"backend": "dlib", "tracks": [track, right]}))
    assert [m.text for m in lines] == [
        "<face_1> is seen on the left of the picture, its face 25% of the picture's height, from 1.0 to 4.0 s",  # noqa: E501
        "<face_2> is seen on the right of the picture, its face 50% of the picture's height, from 1.0 to 4.0 s",  # noqa: E501
    ]


@pytest.mark.skipif(not (M3BENCH / "robot.json").exists(), reason="M3-Bench annotations not present")
def test_m3bench_coverage_table():
    """Every M3-Bench question lands in exactly one column; counting objects is never routed as a count
    of people; the table's shares are the ones docs/answers.md shows."""
    # bench/ is a folder of scripts beside the package, not installed: load the one script by its path
    import importlib.util

    path = ROOT / "bench" / "bench_questions.py"
    spec = importlib.util.spec_from_file_location("bench_questions", path)
    assert spec and spec.loader
    bench_questions = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench_questions)
    load, outcome, table = bench_questions.load, bench_questions.outcome, bench_questions.table

    rows = load(M3BENCH)
    assert len(rows) == 4490
    res = table(rows)
    assert sum(res["types"]["ALL"].values()) == 4490
    for _, q, _ in rows:
        what, form = outcome(q)
        if form == "count_people":
            assert "how many" in q.lower()
    assert outcome("How many servings of Italian pasta did the blogger have?")[0] == "declined"
    doc = (ROOT / "docs" / "answers.md").read_text("utf-8")
    c = res["types"]["ALL"]
    assert f"| ALL | 4490 | {c['routed']} (" in doc, "docs/answers.md: rerun python -m bench.bench_questions"
    json.dumps({k: dict(v) for k, v in res["types"].items()})
