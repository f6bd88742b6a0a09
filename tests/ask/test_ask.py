"""`m3 ask`: the control loop over a real memory written by the real index stage, driven by the loopback
OpenAI-compatible server (tests/support/fake_openai.py), plus retrieval-only answers and bad input."""

from __future__ import annotations

import json

import pytest

from conftest import run_m3
from m3cli.stages.ask import prompts as P
from m3cli.stages.ask.actions import ToolError, parse_action
from m3cli.stages.ask.loop import Asker, parse_kinds
from m3cli.stages.ask.memory import LanceMemory
from m3cli.stages.ask.questions import Question, load_questions, read_questions
from m3cli.stages.ask.text import parse_time, stem
from m3cli.stages.ask.tools import parse_tools
from m3cli.stages.backends.embed import make_embedder
from m3cli.stages.backends.llm import LlmClient
from m3cli.stages.core.errors import InputError
from support import ask_memory
from support.ask_memory import CLIP_S, V, check_answer, fake_env, make_asker, write_clips
from support.fake_openai import FakeOpenAI, Fault

ask_server, memory_path, fresh = ask_memory.ask_server, ask_memory.memory_path, ask_memory.fresh  # fixtures


def chat_bodies(server: FakeOpenAI) -> list[dict]:
    return server.chat_requests


# ----------------------------------------------------------------------------------------- parsing


def test_parse_action_forms():
    a = parse_action("I need the person who likes coffee.\n[Search] who loves coffee")
    assert (a.tool, a.content, a.reasoning) == (
        "search",
        "who loves coffee",
        "I need the person who likes coffee.",
    )
    a = parse_action("<think>hmm, Alice said so</think>\nAction: [Answer]\nContent: Alice likes coffee.")
    assert (a.tool, a.content, a.reasoning) == ("answer", "Alice likes coffee.", "hmm, Alice said so")
    a = parse_action("Reasoning first.\n**[SearchClip]** what happened after breakfast")
    assert (a.tool, a.content) == ("search_clip", "what happened after breakfast")
    a = parse_action("First I thought [Search] x.\n[Answer] Bob,\nthe chef.")
    assert (a.tool, a.content) == ("answer", "Bob,\nthe chef.")
    assert parse_action("[ReadFile] /etc/passwd").tool is None
    with pytest.raises(ToolError, match="no action"):
        parse_action("I think the answer is Alice.")


def test_small_parsers():
    assert parse_time("75") == 75 and parse_time("01:15") == 75 and parse_time("1:00:05") == 3605
    with pytest.raises(ValueError):
        parse_time("1:75")
    assert stem("likes") == stem("like") == stem("liked") == stem("liking")
    assert parse_tools("paper") == ("search", "search_clip")
    assert parse_tools("all") == P.ALL_TOOLS
    with pytest.raises(InputError, match="unknown tool"):
        parse_tools("search,shell")
    assert parse_kinds("-semantic") == (frozenset(set(P_KINDS) - {"semantic"}), False)
    assert parse_kinds("episodic,-equivalences") == (frozenset({"episodic"}), True)
    with pytest.raises(InputError, match="unknown kind"):
        parse_kinds("dreams")
    qs = read_questions(
        [
            b'{"question": "Who?", "id": "q1"}',
            b"{oops",
            b'{"question": 3}',
            b"",
            b'{"question": "When?", "before_clip": -1}',
        ],
        "q.jsonl",
    )
    assert isinstance(qs[0], Question) and qs[0].id == "q1"
    errors = [q["error"] for q in qs[1:]]
    assert errors[0].startswith("q.jsonl:2: not valid JSON: ")
    assert errors[1:] == [
        "q.jsonl:3: 'question' must be a non-empty string",
        "q.jsonl:5: 'before_clip' must be an integer >= 0",
    ]


def test_load_questions_one_or_a_batch_with_the_flags_as_defaults(tmp_path):
    (one,) = load_questions("Who?", None, None, video="v.mp4", before_clip=2, options=["Alice|Bob"])
    assert (one.question, one.video, one.before_clip, one.options) == ("Who?", "v.mp4", 2, ["Alice", "Bob"])
    batch = tmp_path / "q.jsonl"
    batch.write_text('{"question": "Who?", "video": "w.mp4"}\n{"question": "When?", "before_clip": 0}\n')
    with open(batch, "rb") as stdin:
        for path, source in ((str(batch), None), ("-", stdin)):
            first, second = load_questions(None, path, source, video="v.mp4", before_clip=3)
            assert (first.video, first.before_clip) == ("w.mp4", 3)
            assert (second.video, second.before_clip) == ("v.mp4", 0)
    with pytest.raises(InputError, match="either a question or --questions"):
        load_questions("Who?", str(batch), None)
    with pytest.raises(InputError, match="at least two options"):
        load_questions("Who?", None, None, options=["Alice"])
    with pytest.raises(InputError, match="no question"):
        load_questions(None, None, None)
    with pytest.raises(InputError, match="cannot read questions"):
        load_questions(None, str(tmp_path / "missing.jsonl"), None)


P_KINDS = ("episodic", "semantic", "character", "relationship", "clip", "global", "conflict")


# ----------------------------------------------------------------------------------------- the loop


def test_full_loop_search_then_answer(fresh, memory_path):
    fresh.script(
        "I must find who talked about coffee.\n[Search] who loves coffee",
        "The memory says Alice loves coffee.\n[Answer] Alice",
    )
    rec = make_asker(fresh, memory_path).ask(Question("Who likes coffee?"))
    check_answer(rec)
    assert rec["error"] is None and rec["mode"] == "llm"
    assert rec["answer"] == "Alice" and rec["rounds"] == 2
    first, second = rec["trajectory"]
    assert (first["tool"], first["query"], first["error"]) == ("search", "who loves coffee", None)
    assert first["reasoning"] == "I must find who talked about coffee."
    assert any("I love coffee" in r["text"] for r in first["results"])
    assert second["tool"] == "answer"
    # the results reached the model as a data block in the second request
    bodies = chat_bodies(fresh)
    assert len(bodies) == 2
    last_user = bodies[1]["messages"][-1]["content"]
    assert (
        '<memory id="' in last_user and "I love coffee" in last_user and P.LAST_ROUND_PROMPT not in last_user
    )
    assert rec["tokens"]["prompt"] > 0 and rec["tokens"]["completion"] > 0
    top = rec["evidence"][0]
    assert top["clip"] == 2 and "I love coffee" in top["quote"] and top["video"] == V
    assert {"id": "<character_1>", "name": "Alice"} in top["characters"]
    assert 2 * CLIP_S <= top["start"] <= top["end"] <= 3 * CLIP_S


def test_last_round_must_answer(fresh, memory_path):
    fresh.script(
        "[Search] coffee",
        "[Search] green tea",
        "Still unsure.\n[Search] breakfast drinks",
        "[Answer] Alice, probably",
    )
    rec = make_asker(fresh, memory_path, rounds=3).ask(Question("Who likes coffee?"))
    bodies = chat_bodies(fresh)
    assert len(bodies) == 4  # 3 rounds + one forced answer turn
    user_msgs = [b["messages"][-1]["content"] for b in bodies]
    assert P.LAST_ROUND_PROMPT not in user_msgs[0] and P.LAST_ROUND_PROMPT not in user_msgs[1]
    assert P.LAST_ROUND_PROMPT in user_msgs[2]  # before the last round
    assert user_msgs[3] == P.FORCE_ANSWER_PROMPT
    assert rec["rounds"] == 3 and rec["answer"] == "Alice, probably" and rec["error"] is None
    assert "last round must be [Answer]" in rec["trajectory"][2]["error"]
    assert rec["trajectory"][3]["forced"] is True
    check_answer(rec)


def test_single_round_and_unanswered(fresh, memory_path):
    fresh.script("[Search] coffee", "[Search] again")
    rec = make_asker(fresh, memory_path, rounds=1).ask(Question("Who likes coffee?"))
    assert P.LAST_ROUND_PROMPT in chat_bodies(fresh)[0]["messages"][-1]["content"]
    assert rec["answer"] is None and "no [Answer] after 1 round " in rec["error"]
    check_answer(rec)


def test_search_clip_expand_character_window_count(fresh, memory_path):
    fresh.script(
        "[SearchClip] name Alice coffee",
        f"[Expand] {V}:2:e0",
        '{"keep": ["c1"]}',
        "[SearchClip] Alice Bob",
        "[Character] Alice",
        "[Window] clip 1: chef",
        "[Count] says",
        "[Answer] Alice",
    )
    rec = make_asker(fresh, memory_path, rounds=8).ask(Question("Who likes coffee?"))
    assert rec["error"] is None and rec["answer"] == "Alice"
    steps = rec["trajectory"]
    assert [s["tool"] for s in steps] == [
        "search_clip",
        "expand",
        "search_clip",
        "character",
        "window",
        "count",
        "answer",
    ]
    assert all(s["error"] is None for s in steps)
    clips1 = {r["clip"] for r in steps[0]["results"]}
    clips2 = {r["clip"] for r in steps[2]["results"]}
    assert clips1 == {0, 2} and clips2 == {1}  # k = 2 clips, best first, never repeated
    bodies = chat_bodies(fresh)
    # expansion (PyraVid): linked line 1:e0 reached from 2:e0 by a `similar` link, kept by the pruning call
    prune = bodies[2]["messages"]
    assert prune[0]["content"] == P.PRUNE_PROMPT and "Candidates:" in prune[1]["content"]
    assert [r["id"] for r in steps[1]["results"]] == [f"{V}:1:e0"]
    assert "faces: <face_1>; voices: <voice_1>" in bodies[5]["messages"][-1]["content"]
    assert "Alice = <character_1>" in bodies[5]["messages"][-1]["content"]
    assert {r["clip"] for r in steps[4]["results"]} == {1} and "chef" in steps[4]["results"][0]["text"]
    assert "occurrence(s) in 3 clip(s)" in bodies[7]["messages"][-1]["content"]


def test_before_clip_scope(fresh, memory_path):
    fresh.script("[Search] coffee", "[Window] clip 2", "[Answer] unknown")
    rec = make_asker(fresh, memory_path).ask(Question("Who likes coffee?", video=V, before_clip=1))
    assert rec["error"] is None
    assert all(r["clip"] <= 1 for s in rec["trajectory"] for r in s["results"])
    assert "after the question's time" in rec["trajectory"][1]["error"]


def test_rewatch_sends_frames(fresh, memory_path, cache_dir):
    fresh.script(
        "[Rewatch] clip 0: who is on screen?", "A portrait photo of a man in a suit.", "[Answer] A man"
    )
    asker = make_asker(fresh, memory_path)
    from m3cli.stages.core.cache import Cache

    asker.cache = Cache(cache_dir)
    rec = asker.ask(Question("Who is shown first?"))
    assert rec["error"] is None and rec["trajectory"][0]["tool"] == "rewatch"
    media_req = chat_bodies(fresh)[1]["messages"][0]["content"]
    images = [p for p in media_req if p["type"] == "image_url"]
    assert 1 <= len(images) <= 8 and images[0]["image_url"]["url"].startswith("data:image/jpeg;base64,")
    assert "portrait photo" in rec["trajectory"][0]["observation"]
    assert "portrait photo" in chat_bodies(fresh)[2]["messages"][-1]["content"]


@pytest.mark.slow
def test_llm_faults_are_bounded(fresh, memory_path):
    fresh.script(Fault.status(429, retry_after=0.01), "[Answer] Alice")
    rec = make_asker(fresh, memory_path).ask(Question("Who likes coffee?"))
    assert rec["answer"] == "Alice" and rec["error"] is None
    fresh.script(Fault.status(500), Fault.status(503))
    rec = make_asker(fresh, memory_path).ask(Question("Who likes coffee?"))
    assert rec["answer"] is None and "failed after 2 attempts" in rec["error"] and "HTTP 503" in rec["error"]
    fresh.script("I have no idea what format to use.", "[Answer] Alice")
    rec = make_asker(fresh, memory_path).ask(Question("Who likes coffee?"))
    assert rec["answer"] == "Alice" and "no action line" in rec["trajectory"][0]["error"]
    fresh.script(Fault.slow(2.0, "[Answer] late"), Fault.slow(2.0, "[Answer] late"))
    asker = make_asker(fresh, memory_path)
    asker.llm = LlmClient(fresh.url, "fake-model", max_retries=1, backoff=0.01, timeout=0.3)
    rec = asker.ask(Question("Who likes coffee?"))
    assert rec["answer"] is None and "timeout" in rec["error"]


def test_unknown_video_and_bad_before_clip(fresh, memory_path):
    asker = make_asker(fresh, memory_path, llm=False)
    rec = asker.ask(Question("Who likes coffee?", video="ffffffffffffffff"))
    assert (
        rec["answer"] is None and "unknown video id 'ffffffffffffffff'" in rec["error"] and V in rec["error"]
    )
    assert "empty question" in asker.ask(Question("  "))["error"]
    assert not chat_bodies(fresh)


def test_embedder_mismatch_is_refused(ask_server, memory_path):
    other = make_embedder("openai", base_url=ask_server.url, model="another-embed")
    with pytest.raises(InputError, match="indexed with text embedder 'fake-embed'"):
        Asker(LanceMemory.open(memory_path), other)


# ----------------------------------------------------------------------------------------- retrieval only


def test_retrieval_only_coffee(fresh, memory_path):
    rec = make_asker(fresh, memory_path, llm=False).ask(Question("Who likes coffee?"))
    check_answer(rec)
    assert rec["mode"] == "retrieval-only" and rec["error"] is None
    # one sentence: the person, the words, the line's own time and its video's file name
    assert rec["answer"].startswith('Alice says "I love coffee, I drink it every morning." (')
    assert rec["answer"].endswith(" s).") and rec["evidence"][0]["file"] in rec["answer"]
    assert (
        rec["evidence"][0]["clip"] == 2
        and {"id": "<character_1>", "name": "Alice"} in rec["evidence"][0]["characters"]
    )
    assert not chat_bodies(fresh)  # no LLM was called


@pytest.mark.slow
def test_cli_retrieval_only_coffee_with_minilm(tmp_path, cache_dir):
    """The whole path a user takes: real `m3 index` with the bundled MiniLM, then `m3 ask` with no LLM."""
    env = {"M3_LLM_BASE_URL": "", "M3_LLM_MODEL": "", "HF_HUB_OFFLINE": "1"}
    clips = write_clips(tmp_path / "clips.jsonl")
    run_m3("index", "-o", tmp_path / "mem.lance", clips, env=env, check=True)
    proc = run_m3("ask", tmp_path / "mem.lance", "Who likes coffee?", env=env, check=True)
    rec = json.loads(proc.stdout)
    assert rec["mode"] == "retrieval-only" and "Alice" in rec["answer"] and "I love coffee" in rec["answer"]
    assert rec["evidence"][0]["quote"].endswith('says: "I love coffee, I drink it every morning."')
    proc = run_m3(
        "ask", tmp_path / "mem.lance", "What is Bob's job?", "--format", "text", env=env, check=True
    )
    assert "chef" in proc.stdout.decode().splitlines()[1]


# ----------------------------------------------------------------------------------------- CLI


@pytest.mark.slow
def test_cli_single_and_batch(ask_server, tmp_path, cache_dir):
    env = fake_env(ask_server, llm=False)
    clips = write_clips(tmp_path / "clips.jsonl")
    run_m3("index", "-o", tmp_path / "mem.lance", clips, env=env, check=True)
    proc = run_m3("ask", tmp_path / "mem.lance", "Who likes coffee?", "--format", "text", env=env, check=True)
    text = proc.stdout.decode()
    assert text.startswith('Q: Who likes coffee?\nA (retrieval only, no LLM): Alice says "I love coffee')
    assert "Alice" in text and "I love coffee" in text
    batch = b"\n".join(
        [
            b'{"id": "q1", "question": "Who likes coffee?"}',
            b"{broken",
            b'{"id": "q3", "question": "Who is the chef?", "video": "ffffffffffffffff"}',
            b'{"id": "q4", "question": "Who is the chef?", "before_clip": 0}',
        ]
    )
    proc = run_m3("ask", tmp_path / "mem.lance", input=batch, env=env)
    assert proc.returncode == 1  # some questions failed, and the batch went on
    recs = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [r["id"] for r in recs] == ["q1", None, "q3", "q4"]
    assert recs[0]["error"] is None and "Alice" in recs[0]["answer"]
    assert recs[1]["error"].startswith("<stdin>:2: not valid JSON: ")
    assert "unknown video id" in recs[2]["error"]
    assert recs[3]["error"] is None and all(e["clip"] == 0 for e in recs[3]["evidence"])
    for r in recs:
        check_answer(r)


@pytest.mark.slow
def test_cli_llm_loop(ask_server, tmp_path, cache_dir):
    env = fake_env(ask_server)
    clips = write_clips(tmp_path / "clips.jsonl")
    run_m3("index", "-o", tmp_path / "mem.lance", clips, env=env, check=True)
    ask_server.requests.clear()
    ask_server.script("[Search] chef", "[Answer] Bob")
    proc = run_m3(
        "ask", tmp_path / "mem.lance", "Who cooks?", "--rounds", "3", "--tools", "search", env=env, check=True
    )
    rec = json.loads(proc.stdout)
    assert rec["answer"] == "Bob" and rec["config"]["tools"] == ["search"] and rec["config"]["rounds"] == 3
    system = ask_server.chat_requests[0]["messages"][0]["content"]
    assert "[Search]" in system and "[SearchClip]" not in system and "[Rewatch]" not in system


@pytest.mark.slow
def test_cli_bad_memory(ask_server, tmp_path):
    env = fake_env(ask_server, llm=False)
    proc = run_m3("ask", tmp_path / "nope.lance", "Who?", env=env)
    assert (
        proc.returncode == 1 and b"no such memory dataset" in proc.stderr and b"Traceback" not in proc.stderr
    )
    broken = tmp_path / "broken.lance"
    (broken / "nodes.lance").mkdir(parents=True)
    (broken / "nodes.lance" / "garbage").write_bytes(b"\x00" * 10)
    proc = run_m3("ask", broken, "Who?", env=env)
    assert proc.returncode == 1 and proc.stderr.startswith(b"m3: error: ") and b"Traceback" not in proc.stderr
    proc = run_m3("ask", tmp_path / "nope.lance", "Who?", "--kinds", "dreams", env=env)
    assert proc.returncode == 1 and b"unknown kind 'dreams'" in proc.stderr


# ----------------------------------------------------------------------------------------- multiple choice


def test_options_llm_reads_letter_and_offline_picks_supported(fresh, memory_path):
    fresh.script("[Search] coffee", "Alice loves coffee, option B.\n[Answer] (B) Alice")
    q = Question("Who likes coffee?", options=["Bob", "Alice", "Carol"])
    rec = make_asker(fresh, memory_path).ask(q)
    check_answer(rec)
    assert rec["choice"] == "B" and rec["options"] == ["Bob", "Alice", "Carol"]
    asked = fresh.chat_requests[0]["messages"][1]["content"]
    assert "A. Bob\nB. Alice\nC. Carol" in asked and "letter" in asked  # the model saw the options
    offline = make_asker(fresh, memory_path, llm=False).ask(
        Question("Who likes coffee?", options=["Bob", "Alice"])
    )
    check_answer(offline)
    assert offline["answer"] == "B" and offline["answer_text"].startswith("Alice says")
    assert offline["choice_support"][1] > offline["choice_support"][0]
