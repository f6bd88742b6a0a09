"""Retrieval-only answers on real memories, our QA set, and every benchmark's question format.

One memory is built by `m3 run` (offline) from six real test videos; questions are asked through the
real CLI. Truth comes from the videos (truth.json / RTTM / transcripts), see tests/data/qa/README.md.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from conftest import DATA, run_m3
from m3cli.stages.ask.choice import letter_in, parse_options
from m3cli.stages.ask.facts import parse_line, speaking_turns
from m3cli.stages.ask.nodes import Node
from m3cli.stages.ask.route import classify
from m3cli.stages.ask.wording import quoted
from m3cli.stages.eval import formats

QA = DATA / "qa"
VIDEOS = [
    DATA / "fixture.mp4",
    DATA / "link" / "grid_4people_turns.mp4",
    DATA / "link" / "latentsync_2people_turns.mp4",
    DATA / "libri5.mp4",
    DATA / "speakers3.mp4",
    DATA / "speakers6.mp4",
]
NO_LLM = {"M3_LLM_BASE_URL": "", "M3_LLM_MODEL": ""}
IDS = re.compile(r"<character_\d+>")


# ----------------------------------------------------------------------------------------- no memory needed


def _node(text: str, t0: float, t1: float, chars: list[str], kind: str = "episodic") -> Node:
    return Node(
        id=text[:20], video="v", clip=0, kind=kind, text=text, characters=chars, entities=chars,
        t_start=t0, t_end=t1,
    )  # fmt: skip


def test_line_formats_old_and_new():
    speech = parse_line(_node('<character_2> says: "So, this was it"', 4.3, 9.9, ["<character_2>"]))
    assert (speech.kind, speech.who, speech.quote) == ("speech", ["<character_2>"], "So, this was it")
    assert quoted(speech) == '"So, this was it"'
    second = parse_line(_node('<character_1> says (in Portuguese): "Cheguei"', 0.3, 3.7, ["<character_1>"]))
    assert (second.kind, second.quote, quoted(second)) == ("speech", "Cheguei", '(in Portuguese) "Cheguei"')
    turn = parse_line(_node("<voice_2> speaks, not transcribed, 0:00–0:04", 0.0, 4.0, ["<voice_2>"]))
    assert (turn.kind, turn.who) == ("turn", ["<voice_2>"])
    both = parse_line(_node("<a> and <b> both speak between 0.8 and 17.3 s", 0.8, 17.3, ["<a>", "<b>"]))
    assert both.kind == "both"  # pairwise co-occurrence: never a speaking time
    many = "<character_1> is visible from 0.6 to 5.8 s and from 13.6 to 21.8 s"
    vis = parse_line(_node(many, 0.6, 21.8, ["<character_1>"]))
    assert vis.kind == "visible" and vis.spans == [(0.6, 5.8), (13.6, 21.8)]
    collapsed = parse_line(_node("<a>, <b> and <c> are visible", 0.0, 5.0, ["<a>", "<b>", "<c>"]))
    assert collapsed.kind == "visible" and collapsed.who == ["<a>", "<b>", "<c>"]
    # with turn lines, turns come from them and the speech inside is attached
    turns = speaking_turns([turn, parse_line(_node('<voice_2> says: "hi"', 1.0, 2.0, ["<voice_2>"]))])
    assert [(t.person, t.start, t.end, len(t.lines)) for t in turns] == [("<voice_2>", 0.0, 4.0, 2)]


def test_line_formats_of_the_offline_memory():
    """Speaking spans are the turns; the words and the untranscribed stretches inside are cited at their
    own times; sight lines carry their clock; the per-clip 'present' line is no speaking time."""
    lines = [
        parse_line(_node(t, a, b, ["<c1>"]))
        for t, a, b in [
            ("<c1> speaks from 0.8 to 2.4 s and from 15.8 to 17.4 s", 0.8, 17.4),
            ('<c1> says: "bin blue"', 0.9, 2.3),
            ("<c1> speaks, not transcribed, from 15.8 to 17.4 s", 15.8, 17.4),
        ]
    ]
    assert lines[0].kind == "speaking" and lines[0].spans == [(0.8, 2.4), (15.8, 17.4)]
    turns = speaking_turns(lines)
    assert [(t.start, t.end, [ln.kind for ln in t.lines]) for t in turns] == [
        (0.8, 2.4, ["speech"]),
        (15.8, 17.4, ["turn"]),
    ]
    assert parse_line(_node("0:20\u20130:23 on screen: 'THE PEACH'", 20, 23, [])).kind == "sight"
    assert parse_line(_node("0:05 seen: laptop, desk", 5, 6, [])).kind == "sight"
    present = "2 faces are seen in this clip: <a> (from 0.0 to 5.0 s) and <b> (from 1.0 to 4.0 s)"
    assert parse_line(_node(present, 0, 5, ["<a>", "<b>"])).kind == "present"


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("Who said they did not think Mr. Hale had done right?", "who_said"),
        ("What did <character_1> say?", "what_said"),
        ("When did <character_2> speak?", "when"),
        ("When is the second speaker visible?", "when"),
        ("How many people are in the video?", "count_people"),
        ("How many times does the first speaker speak?", "count_times"),
        ("Who spoke first?", "order"),
        ("Who spoke twice?", "who_times"),
        ("What was said at 15 seconds?", "at_time"),
        ("Who is visible while <character_1> speaks?", "cross"),
        ("What is shown on screen?", "seen"),
        ("What is seen at 25 seconds?", "seen"),
        ("Who is visible at 25 seconds?", "seen"),
        ("Who is speaking at 8 seconds?", "at_time"),
        ("When is the title shown?", "when"),
        ("How many times is Disneyland said?", "count_said"),
        ("How many times does the second speaker say the word city?", "count_said"),
        ("How many times does the second speaker say something?", "count_times"),
    ],
)
def test_question_forms(question, kind):
    assert classify(question).kind == kind


def test_options_and_letters():
    assert parse_options(["A. 2", "(B) 3", "C) 4"]) == ["2", "3", "4"]
    assert parse_options(["Alice|Bob"]) == ["Alice", "Bob"]
    assert [letter_in(a, 4) for a in ("B", "(C) Bob", "The answer is D.", "E", "")] == [
        "B",
        "C",
        "D",
        None,
        None,
    ]


def test_every_format_reads_its_sample():
    """Each benchmark's sample (hand-written over our videos) loads: options, one letter, categories."""
    counts = {}
    for fmt, name in [
        ("videomme", "videomme.json"),
        ("lvbench", "lvbench.jsonl"),
        ("hippovlog", "hippovlog.json"),
        ("egolifeqa", "egolifeqa.json"),
    ]:
        items = formats.load(QA / name, fmt)
        assert all(len(it.options) >= 2 and it.answer in "ABCDE"[: len(it.options)] for it in items)
        counts[fmt] = {t for it in items for t in it.types}
    assert {"audio", "visual", "audio-visual", "semantic"} == counts["hippovlog"]
    assert formats.load(QA / "lvbench.jsonl", "lvbench")[0].options == ["4", "5", "6", "8"]
    assert formats.load(QA / "egolifeqa.json", "egolifeqa")[0].query_time == 25.0
    ours = formats.load(QA / "ours.json", "m3bench")
    types = {t for it in ours for t in it.types}
    assert len(ours) >= 60 and len({it.video_name for it in ours}) >= 6
    assert {"who-said", "what-said", "when", "counting", "order", "cross-modal", "seen"} <= types


# ----------------------------------------------------------------------------------------- one real memory


@pytest.fixture(scope="module")
def memory(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("qa_set")
    env = {**NO_LLM, "M3_CACHE": os.environ.get("M3_CACHE") or str(root / "cache")}
    out = root / "qa.lance"
    run_m3("-q", "run", *VIDEOS, "-o", out, "--no-llm", env=env, check=True)
    return out


def ask(memory: Path, question: str, *args: str) -> dict:
    proc = run_m3("ask", memory, question, *args, env=NO_LLM)
    assert proc.returncode == 0, proc.stderr.decode()
    return json.loads(proc.stdout)


def assert_cites_own_lines(rec: dict) -> None:
    """Every person the answer names has a cited line of their own; each citation is the line's own
    time and its video's file name."""
    named = set(IDS.findall(rec["answer"]))
    cited_people = {c["id"] for e in rec["evidence"] for c in e["characters"]}
    assert named <= cited_people, (rec["answer"], rec["evidence"])
    for e in rec["evidence"]:
        assert f"{e['file']}, {e['start']:.1f}-{e['end']:.1f} s" in rec["answer"], (rec["answer"], e)


@pytest.mark.slow
def test_issue_examples_answer(memory):
    two, grid = "latentsync_2people_turns.mp4", "grid_4people_turns.mp4"
    rec = ask(memory, "What did <character_1> say?", "--video", two)
    assert set(IDS.findall(rec["answer"])) == {"<character_1>"} and "says" in rec["answer"]
    assert '(in Portuguese) "' in rec["answer"]  # his turn read again by the multilingual model
    assert_cites_own_lines(rec)
    rec = ask(memory, "When did <character_2> speak?", "--video", grid)
    assert set(IDS.findall(rec["answer"])) == {"<character_2>"}  # alone: no pairwise "both speak" line
    assert rec["evidence"] and all(e["end"] - e["start"] < 5 for e in rec["evidence"])
    assert_cites_own_lines(rec)
    rec = ask(memory, "How many people are in the video?", "--video", two)
    assert rec["answer"].startswith("There are 2 people")
    for q in ("Who spoke first?", "Who spoke twice?", "What was said at 15 seconds?"):
        rec = ask(memory, q, "--video", grid if "spoke" in q else two)
        assert rec["evidence"] and IDS.search(rec["answer"]), rec["answer"]
        assert_cites_own_lines(rec)
    rec = ask(memory, "Who talked about Disneyland?")  # six videos in the memory, no --video
    assert "Disneyland" in rec["answer"] and two in rec["answer"]
    assert all(e["file"] == two and e["end"] - e["start"] < 10 for e in rec["evidence"])  # lines, not clips
    assert_cites_own_lines(rec)


@pytest.mark.slow
def test_threshold_has_one_meaning(memory):
    rec = ask(memory, "What colour is the car parked outside?", "--video", "fixture.mp4")
    assert rec["answer"].startswith("No line in memory supports an answer") and rec["evidence"] == []
    stated = float(re.search(r"the nearest \(cosine (-?[0-9.]+)\)", rec["answer"]).group(1))
    shown = max(r["cosine"] for r in rec["trajectory"][0]["results"])
    assert stated == pytest.approx(shown, abs=0.006) and shown < 0.5  # the cosine the message speaks of


@pytest.mark.slow
def test_video_by_file_name_or_refused(memory):
    by_name = ask(memory, "Who spoke first?", "--video", "speakers3.mp4")
    assert "speakers3.mp4" in by_name["answer"]
    proc = run_m3("ask", memory, "Who spoke first?", "--video", "nope.mp4", env=NO_LLM)
    assert (
        proc.returncode == 1
        and b"unknown video id 'nope.mp4'" in proc.stderr
        and b"speakers3.mp4" in proc.stderr
    )


@pytest.mark.slow
def test_options_answer_with_one_letter(memory):
    rec = ask(
        memory,
        "How many people are in the video?",
        "--video",
        "grid_4people_turns.mp4",
        "--options",
        "2|3|4|6",
    )
    assert rec["answer"] == "C" and rec["choice"] == "C" and rec["answer_text"].startswith("There are 4")


def eval_json(memory: Path, name: str, *args: str) -> dict:
    proc = run_m3("eval", "qa", QA / name, "--memory", memory, "--no-llm", "--json", *args, env=NO_LLM)
    assert proc.returncode == 0, proc.stderr.decode()
    return json.loads(proc.stdout)


@pytest.mark.slow
def test_our_qa_set_retrieval_only(memory):
    """Measured 65/69 (94.2%) from a fresh cache (45/62 before turns came from the memory's speaking
    spans; docs/howto/benchmarks.md, "Our QA set", says what each of the 4 misses is); the bar is the
    issue's target, 85%. Every type is reported."""
    rows = {r["type"]: r for r in eval_json(memory, "ours.json")["rows"]}
    assert rows["ALL"]["n"] == 69 and rows["ALL"]["failed"] == 0
    assert rows["ALL"]["accuracy"] >= 0.85, rows
    assert {"who-said", "what-said", "when", "counting", "order", "cross-modal", "seen"} <= set(rows)
    assert rows["ALL"]["latency_p95"] >= rows["ALL"]["latency_p50"] > 0


@pytest.mark.slow
@pytest.mark.parametrize(
    ("fmt", "name", "least"),
    [("videomme", "videomme.json", 5), ("lvbench", "lvbench.jsonl", 3), ("hippovlog", "hippovlog.json", 3),
     ("egolifeqa", "egolifeqa.json", 3)],
)  # fmt: skip
def test_multiple_choice_formats(memory, fmt, name, least):
    summary = eval_json(memory, name, "--format", fmt)
    overall = summary["rows"][0]
    assert overall["type"] == "ALL" and overall["correct"] >= least, summary["rows"]
    assert all(0 <= r["ci95"][0] <= r["accuracy"] <= r["ci95"][1] <= 1 for r in summary["rows"])


@pytest.mark.slow
def test_first_questions_a_user_asks(memory):
    """Issue 36's examples on a two-person video: everyone in it, every speaker, each one's language,
    "the woman" (the memory records no looks: cannot tell, candidates listed), "the man on the left"
    (from the face position lines), no text on screen (cited with the keyframes read), a time outside."""
    two = ("--video", "latentsync_2people_turns.mp4")
    for q in ("Who is in the video?", "Who are the people in this video?"):
        rec = ask(memory, q, *two)
        assert rec["answer"].startswith("2 people") and set(IDS.findall(rec["answer"])) == {
            "<character_1>",
            "<character_2>",
        }
    rec = ask(memory, "Who speaks?", *two)
    assert rec["answer"].startswith("2 people speak") and len(set(IDS.findall(rec["answer"]))) == 2
    rec = ask(memory, "What language does the first speaker speak?", *two)
    assert "Portuguese" in rec["answer"] and rec["evidence"]
    rec = ask(memory, "What did the woman say?", *two)
    assert (
        rec["answer"].startswith('The memory cannot tell who "the woman" is')
        and "Candidates:" in rec["answer"]
    )
    rec = ask(memory, "Who is the reciter?", *two)  # a role no line names: cannot tell, never a crash
    assert (
        rec["answer"].startswith('The memory cannot tell who "the reciter" is')
        and "Candidates:" in rec["answer"]
    )
    rec = ask(memory, "What did the man on the left say?", *two)
    assert "(in Portuguese)" in rec["answer"]  # demo2, the Portuguese speaker, sits on the left
    rec = ask(memory, "When does the man on the left speak?", *two)  # the description is not a topic
    assert rec["answer"].startswith("<character_1> speaks from 0.3 to 3.7 s and from 10.0 to 13.9 s")
    rec = ask(memory, "What text was on screen?", *two)
    assert rec["answer"].startswith("No text is on screen: ") and "keyframes read" in rec["answer"]
    assert rec["evidence"]
    rec = ask(memory, "What was said at 90 seconds?", *two)
    assert rec["answer"].startswith("The memory does not cover 90 s")
    rec = ask(memory, "What is this video about?", *two)
    assert rec["evidence"] and not rec["answer"].startswith("No line in memory")


def _without_times(record: dict) -> dict:
    """An answer record less what the clock decides (latency, each step's seconds)."""
    out = {k: v for k, v in record.items() if k != "latency_s"}
    out["trajectory"] = [{k: v for k, v in step.items() if k != "seconds"} for step in record["trajectory"]]
    return out


@pytest.mark.slow
def test_one_run_of_many_questions_answers_each_as_if_asked_alone(memory):
    """One `m3 ask` run keeps each scope's lines parsed between its questions (facts.ParsedLines): every
    question of our QA set, asked in one run in order and then in reverse, gets the record (answer,
    citations, evidence and the cosines of its trajectory) it gets from a run of its own."""
    from m3cli.stages.ask.loop import Asker
    from m3cli.stages.ask.memory import LanceMemory
    from m3cli.stages.ask.questions import Question
    from m3cli.stages.backends.embed import make_embedder

    embedder = make_embedder("local")
    qa = json.loads((QA / "ours.json").read_text())
    asked = [(q["question"], Path(v["video_path"]).name) for v in qa.values() for q in v["qa_list"]]
    asked += [("Who speaks first?", None), ("How many people are there?", None)]  # the whole memory

    def question(i: int) -> Question:  # a new one each time: the asker resolves its video in place
        return Question(asked[i][0], video=asked[i][1])

    run = Asker(LanceMemory.open(memory), embedder)
    order = [*range(len(asked)), *reversed(range(len(asked)))]
    together = [run.ask(question(i)) for i in order]
    alone = [Asker(LanceMemory.open(memory), embedder).ask(question(i)) for i in range(len(asked))]
    assert len({r["answer"] for r in alone}) > 20 and not any(r["error"] for r in alone)
    expected = [_without_times(r) for r in alone]
    assert [_without_times(r) for r in together[: len(asked)]] == expected
    assert [_without_times(r) for r in reversed(together[len(asked) :])] == expected
