"""The ask loop against what small real models do (seen with a 0.5B model on llama.cpp): template
placeholders as queries, repeated queries, m3's own error text echoed back, an empty [Answer], answers
with "Answer:" prefixes and <character_k> ids. Each is a failed round with a precise correction or is
cleaned up; the answer's evidence is what the loop retrieved. Through the loopback server."""

from __future__ import annotations

import re

import pytest

from m3cli.schemas.records import AnswerRound
from m3cli.stages.ask import prompts as P
from m3cli.stages.ask.guards import check_query, clean_answer, is_placeholder
from m3cli.stages.ask.questions import Question
from support import ask_memory
from support.ask_memory import check_answer, make_asker

TEMPLATE_SLOT = re.compile(r"\{[A-Za-z_]+\}")


ask_server, memory_path, fresh = ask_memory.ask_server, ask_memory.memory_path, ask_memory.fresh  # fixtures


def sent_texts(server) -> list[str]:
    """What m3 wrote to the model (system and user turns), less the corrections quoting the model."""
    out = []
    for body in server.chat_requests:
        for m in body["messages"]:
            if m["role"] == "assistant":
                continue
            content = m["content"]
            for text in [content] if isinstance(content, str) else [p.get("text", "") for p in content]:
                out += [line for line in text.splitlines() if not line.startswith("Your previous action")]
    return out


def test_placeholder_repeat_echo_and_empty_answer_are_failed_rounds(fresh, memory_path):
    fresh.script(
        "[SearchClip] {content}",
        "I will search.\n[Search] <query>",
        "[Search] Who likes coffee",
        "[Search] who likes   COFFEE",
        "[Search] Your previous action was rejected: query is too long (7428 characters, at most 500)",
        "[Answer]",
        "Action: [Answer]\nContent: Answer: <character_1> likes coffee [n1]",
    )
    asker = make_asker(fresh, memory_path, rounds=8)
    rec = asker.ask(Question("Who likes coffee?"))
    check_answer(rec)
    steps = rec["trajectory"]
    assert [s["error"] is None for s in steps] == [False, False, True, False, False, False, True]
    assert "'{content}' is a placeholder from the instructions" in steps[0]["error"]
    assert "'<query>' is a placeholder" in steps[1]["error"]
    assert "you already ran [Search] 'who likes   COFFEE' in round 3" in steps[3]["error"]
    assert "m3's own message, not a query" in steps[4]["error"]
    assert "[Answer] is empty: write the answer itself" in steps[5]["error"]
    # a failed round runs nothing: only round 3 searched
    assert [len(s["results"]) > 0 for s in steps] == [False, False, True, False, False, False, False]
    # the model is told exactly what went wrong, in the next user message
    follow = fresh.chat_requests[1]["messages"][-1]["content"]
    assert follow.startswith("Your previous action was rejected: '{content}' is a placeholder")
    # the answer: no prefixes, no citation label, the name instead of the id
    assert rec["answer"] == "Alice likes coffee" and rec["error"] is None
    assert rec["answer_raw"] == "Answer: <character_1> likes coffee [n1]"
    n1 = steps[2]["results"][0]
    assert rec["cited"] == [n1["id"]] and rec["evidence"][0]["node_ids"][0] == n1["id"]
    retrieved = {r["id"] for s in steps for r in s["results"]}
    assert {i for e in rec["evidence"] for i in e["node_ids"]} <= retrieved
    # no literal template slot reached the model in any message
    assert not [t for t in sent_texts(fresh) if TEMPLATE_SLOT.search(t)]


def test_forced_answer_is_cleaned_and_unnamed_ids_are_kept(fresh, memory_path):
    fresh.script("[Search] chef", "Answer: <voice_2> is a chef; <face_9> was not seen.")
    rec = make_asker(fresh, memory_path, rounds=1).ask(Question("Who is a chef?"))
    check_answer(rec)
    assert rec["answer"] == "Bob is a chef; <face_9> was not seen." and rec["unnamed"] == ["<face_9>"]
    assert rec["trajectory"][-1]["forced"] is True


def test_every_prompt_is_free_of_template_slots():
    prompts = [P.system_prompt(P.ALL_TOOLS), P.instruction_prompt(P.ALL_TOOLS), P.LAST_ROUND_PROMPT]
    prompts += [P.NO_INSTRUCTION, P.FORCE_ANSWER_PROMPT, P.PRUNE_PROMPT, P.first_user_message("q", "", "i")]
    assert not [p for p in prompts if TEMPLATE_SLOT.search(p)]


@pytest.mark.parametrize(
    "content, expected",
    [("{content}", True), ("<query>", True), ("...", True), ("<name>", True), ("query", True)]
    + [("<character_1>", False), ("Alice", False), ("what does <character_1> drink", False)],
)
def test_placeholders(content, expected):
    assert is_placeholder(content) is expected


def test_check_query_only_flags_exact_repeats_of_successful_rounds():
    history = [
        AnswerRound(
            round=1, reasoning=None, action="Search", tool="search", query="coffee", results=[], error=None
        )
    ]
    assert "already ran" in check_query("Search", "search", "Coffee", history)
    assert check_query("Search", "search", "coffee in the morning", history) is None
    assert check_query("SearchClip", "search_clip", "coffee", history) is None


@pytest.mark.parametrize(
    "raw, answer",
    [
        ("Answer: Alice", "Alice"),
        ("**Final answer:** <character_1>", "Alice"),
        ("[Answer] <character_1> (Alice) likes coffee [n2, n3]", "Alice likes coffee"),
        ('"Bob"', "Bob"),
        ("The answer is <character_7>", "<character_7>"),
    ],
)
def test_clean_answer(raw, answer):
    names = {"<character_1>": "Alice", "<voice_1>": "Alice", "<character_2>": "Bob"}
    assert clean_answer(raw, names).text == answer


def test_an_answer_that_echoes_m3s_own_prompt_is_no_answer(fresh, memory_path):
    """Seen with gemma-3-270m on llama.cpp: the forced turn's reply was m3's own prompt, echoed."""
    echo = (
        "Your previous action was rejected: the reply has no [Answer] action. Reply now with one line: "
        "[Answer] <your best answer, using names, not ids>.<|im_end|> <|im_start|>user"
    )
    fresh.script("I am not sure what to do.", echo)
    rec = make_asker(fresh, memory_path, rounds=1).ask(Question("Who likes coffee?"))
    check_answer(rec)
    assert rec["answer"] is None and rec["error"] == "no [Answer] after 1 round and one forced turn"
    assert rec["trajectory"][-1]["forced"] and "repeats m3's own message" in rec["trajectory"][-1]["error"]
    # inside the loop, an [Answer] carrying m3's text is a failed round, and the next one can answer
    fresh.script("[Answer] " + P.FORCE_ANSWER_PROMPT, "[Answer] Alice")
    rec = make_asker(fresh, memory_path, rounds=3).ask(Question("Who likes coffee?"))
    assert "[Answer] repeats m3's own message" in rec["trajectory"][0]["error"]
    assert rec["answer"] == "Alice" and rec["rounds"] == 2
