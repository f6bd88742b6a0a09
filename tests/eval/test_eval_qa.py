"""`m3 eval qa` on a tiny M3-Bench-format set: the real CLI, a real memory from the real index stage, the
loopback server playing both the agent and the judge."""

from __future__ import annotations

import json
import re

import pytest

from conftest import run_m3
from m3cli.stages.eval import qa as qa_eval
from support.ask_memory import V, fake_env, write_clips
from support.fake_openai import FakeOpenAI

ANNOTATIONS = {
    "demo_talk": {
        "video_path": "data/videos/robot/demo_talk.mp4",
        "qa_list": [
            {
                "question": "Who likes coffee?",
                "answer": "Alice.",
                "question_id": "demo_talk_Q01",
                "reasoning": "Alice says she loves coffee.",
                "timestamp": "01:10",
                "type": ["Person Understanding"],
                "before_clip": 2,
            },
            {
                "question": "What is Bob's job?",
                "answer": "Chef",
                "question_id": "demo_talk_Q02",
                "reasoning": "Bob says he works as a chef.",
                "timestamp": "00:50",
                "type": ["Person Understanding", "Cross-Modal Reasoning"],
                "before_clip": 1,
            },
            {
                "question": "What colour is the sofa?",
                "answer": "Green",
                "question_id": "demo_talk_Q03",
                "reasoning": "Seen in clip 0.",
                "timestamp": "00:20",
                "type": ["Multi-Detail Reasoning"],
                "before_clip": 0,
            },
        ],
    },
    "other_video": {
        "video_path": "data/videos/robot/other_video.mp4",
        "qa_list": [
            {
                "question": "Who left?",
                "answer": "Nobody",
                "question_id": "other_Q01",
                "type": ["Multi-Hop Reasoning"],
                "before_clip": 3,
            }
        ],
    },
}


def agent_and_judge(body: dict) -> str:
    """Control turns answer from what they were shown; judge turns look for the ground truth in the answer."""
    text = body["messages"][-1]["content"]
    if isinstance(text, str) and text.startswith("You are provided with a question, a ground truth answer"):
        truth = re.findall(r"ground_truth_answer: (.*)", text)[-1].strip(" .").lower()
        agent = re.findall(r"agent_answer: (.*)", text)[-1].lower()
        return "Yes" if truth in agent else "No."
    convo = json.dumps(body["messages"])
    question = body["messages"][1]["content"]
    if "coffee" in question:
        return "[Answer] Alice" if "I love coffee" in convo else "[Search] who loves coffee"
    if "job" in question:
        return "[Answer] He is a chef." if "a chef" in convo else "[Search] Bob work"
    return "I cannot tell.\n[Answer] I do not know"


@pytest.fixture(scope="module")
def server():
    with FakeOpenAI() as s:
        s.responder = agent_and_judge
        yield s


@pytest.fixture
def setup(server, tmp_path, cache_dir):
    env = fake_env(server)
    run_m3("index", "-o", tmp_path / "mem.lance", write_clips(tmp_path / "clips.jsonl"), env=env, check=True)
    ann = tmp_path / "robot_tiny.json"
    ann.write_text(json.dumps(ANNOTATIONS))
    server.requests.clear()
    return env, tmp_path, ann


def judge_calls(server: FakeOpenAI) -> int:
    return sum(1 for b in server.chat_requests if b["messages"][-1]["content"].startswith("You are provided"))


@pytest.mark.slow
def test_eval_qa_scores_and_resumes(server, setup):
    env, tmp, ann = setup
    out = tmp / "qa.jsonl"
    proc = run_m3(
        "eval",
        "qa",
        ann,
        "--memory",
        tmp / "mem.lance",
        "--map",
        f"demo_talk={V}",
        "-o",
        out,
        "--limit",
        "2",
        env=env,
        check=True,
    )
    report = proc.stdout.decode()
    assert "| ALL | 2 | 2 | 100.0% | 34.2-100.0% | 0 |" in report
    assert "| Cross-Modal Reasoning | 1 | 1 | 100.0% | 20.7-100.0% |" in report
    assert "| rounds | tokens | latency p50 / p95 / mean s |" in report
    assert judge_calls(server) == 2
    recs = [json.loads(line) for line in out.read_bytes().splitlines()]
    assert [r["eval"]["question_id"] for r in recs] == ["demo_talk_Q01", "demo_talk_Q02"]
    assert recs[0]["answer"] == "Alice" and recs[0]["rounds"] == 2 and recs[0]["eval"]["correct"] is True
    assert recs[0]["before_clip"] == 2 and recs[1]["before_clip"] == 1 and recs[0]["video"] == V

    server.requests.clear()
    proc = run_m3(
        "eval",
        "qa",
        ann,
        "--memory",
        tmp / "mem.lance",
        "--map",
        f"demo_talk={V}",
        "-o",
        out,
        "--resume",
        env=env,
        check=True,
    )
    report = proc.stdout.decode()
    # only the two new questions ran: Q03 (answered wrongly) and other_Q01 (no memory for that video)
    assert judge_calls(server) == 1
    assert "| ALL | 4 | 2 | 50.0% | 15.0-85.0% | 1 |" in report
    assert "| Multi-Hop Reasoning | 1 | 0 | 0.0% | 0.0-79.3% | 1 |" in report
    recs = [json.loads(line) for line in out.read_bytes().splitlines()]
    by_id = {r["eval"]["question_id"]: r for r in recs}
    assert len(recs) == len(by_id) == 4
    assert by_id["demo_talk_Q03"]["eval"]["verdict"] == "No"
    assert "no memory for video 'other_video'" in by_id["other_Q01"]["error"]

    # judgements are cached: re-scoring the same answers costs no judge call
    server.requests.clear()
    proc = run_m3(
        "eval",
        "qa",
        ann,
        "--memory",
        tmp / "mem.lance",
        "--map",
        f"demo_talk={V}",
        "--types",
        "Person Understanding",
        "--json",
        env=env,
        check=True,
    )
    summary = json.loads(proc.stdout)
    assert judge_calls(server) == 0
    assert summary["rows"][0] == {**summary["rows"][0], "type": "ALL", "n": 2, "correct": 2, "accuracy": 1.0}


@pytest.mark.slow
def test_eval_qa_ablation_flags_and_retrieval_only_agent(server, setup):
    env, tmp, ann = setup
    out = tmp / "qa_ablation.jsonl"
    run_m3(
        "eval",
        "qa",
        ann,
        "--memory",
        tmp / "mem.lance",
        "--map",
        f"demo_talk={V}",
        "-o",
        out,
        "--no-llm",
        "--limit",
        "2",
        "--kinds",
        "-semantic",
        "--k",
        "3",
        "--tools",
        "paper",
        env=env,
        check=True,
    )
    recs = [json.loads(line) for line in out.read_bytes().splitlines()]
    assert all(r["mode"] == "retrieval-only" for r in recs)
    assert recs[0]["config"]["k"] == 3 and "semantic" not in recs[0]["config"]["kinds"]
    assert recs[0]["config"]["tools"] == ["search", "search_clip"]
    assert recs[0]["eval"]["correct"] is True  # "Best evidence ...: Alice: ... I love coffee" implies "Alice"
    assert all(r["kind"] != "semantic" for rec in recs for s in rec["trajectory"] for r in s["results"])


@pytest.mark.slow
def test_eval_qa_bad_inputs(server, setup):
    env, tmp, ann = setup
    bad = tmp / "bad.json"
    bad.write_text('{"v": {"qa_list": [{"question": "x"}]}}')
    proc = run_m3("eval", "qa", bad, "--memory", tmp / "mem.lance", env=env)
    assert proc.returncode == 1 and b"needs string 'question' and 'answer'" in proc.stderr
    proc = run_m3("eval", "qa", ann, "--memory", tmp / "mem.lance", "--map", "demo_talk", env=env)
    assert proc.returncode == 1 and b"expected NAME=VIDEO_ID" in proc.stderr
    proc = run_m3("eval", "qa", ann, "--memory", tmp / "mem.lance", "--resume", env=env)
    assert proc.returncode == 1 and b"--resume needs --output" in proc.stderr
    no_judge = {**env, "M3_LLM_BASE_URL": "", "M3_LLM_MODEL": ""}
    proc = run_m3("eval", "qa", ann, "--memory", tmp / "mem.lance", env=no_judge)
    assert proc.returncode == 0 and b"scored offline" in proc.stdout  # no judge: offline scoring


def test_wilson_and_verdicts():
    assert qa_eval.wilson(0, 0) == (0.0, 1.0)
    lo, hi = qa_eval.wilson(2, 3)
    assert round(lo, 3) == 0.208 and round(hi, 3) == 0.939
    lo, hi = qa_eval.wilson(10, 10)
    assert round(lo, 3) == 0.722 and hi == 1.0
    assert [
        qa_eval.parse_verdict(t)
        for t in ["Yes", "no.", "**Yes**", "Answer: No", "<think>yes?</think>No", "yes or no", "maybe"]
    ] == ["Yes", "No", "Yes", "No", "No", None, None]


def test_real_m3bench_annotations_load():
    """The shipped M3-Bench files parse (local-only media; skipped where they are absent)."""
    from conftest import SHARED_MEDIA

    robot = SHARED_MEDIA / "m3bench" / "robot.json"
    if not robot.exists():
        pytest.skip("M3-Bench annotations not available here")
    items = qa_eval.load_annotations(robot)
    assert len(items) == 1276 and all(it.before_clip is not None for it in items)
    assert items[0].question_id == "living_room_06_Q01" and items[0].types == ["Cross-Modal Reasoning"]
