"""``--prompt-style m3-agent``: the formats M3-Agent's released checkpoints were trained with.

memorize asks for plain lists of sentences (episodic, semantic with "Equivalence: <face_x>, <voice_y>"
lines) and maps them onto m3's records with the same checks as m3's own format; ask uses the paper's
[Search]/[Answer] instruction and parses "Action: ... / Content: ..." replies. Through the loopback
server, on the real fixture video and a real index.
"""

from __future__ import annotations

import json

import pytest

from m3cli.stages.ask import prompts as P
from m3cli.stages.ask.loop import AskConfig
from m3cli.stages.ask.questions import Question
from m3cli.stages.core import memory_prompts as MP
from m3cli.stages.core.errors import InputError
from m3cli.stages.memorize.stage import MemorizeConfig, memorize_records
from support import ask_memory
from support.ask_memory import check_answer, fake_env, make_asker
from support.fake_openai import FakeOpenAI
from support.fixture_talk import client_for, talk

AGENT_MEMORY = {
    "episodic": [
        "<face_1> wears a dark suit and stands at a podium",
        "<voice_1> says, 'Good morning, my name is Barack and I like coffee.'",
        "<voice_2> thanks <voice_1> by name",
    ],
    "semantic": [
        "Equivalence: <face_1>, <voice_1>",
        "The name of <voice_1> is Barack",
        "<voice_1> and <voice_2> are friendly colleagues",
        "The setting is a formal press event",
    ],
}


@pytest.fixture
def server():
    with FakeOpenAI() as fake:
        yield fake


def user_text(body: dict) -> str:
    content = body["messages"][1]["content"]
    return "\n".join(p.get("text", "") for p in content) if isinstance(content, list) else content


def test_memorize_m3_agent_style_asks_for_lists_and_records_m3_memory(server):
    server.script(json.dumps(AGENT_MEMORY))
    config = MemorizeConfig(frames=1, jobs=1, prompt_style="m3-agent")
    [out] = memorize_records([talk()], config, client_for(server))
    [body] = server.chat_requests
    text = user_text(body)
    assert '{"episodic": [sentences], "semantic": [sentences]}' in text
    assert '"kind"' not in text and '"equivalences"' not in text and "<seconds>" not in text
    assert 'write "Equivalence: <face_x>, <voice_y>"' in text
    mem = out.memory
    assert mem.source == "llm" and not out.errors and mem.prompt_version == MP.AGENT_PROMPT_VERSION
    n = len(AGENT_MEMORY["episodic"])
    assert [i.text for i in mem.episodic[:n]] == AGENT_MEMORY["episodic"]
    assert all(i.kind == "event" and i.start is None for i in mem.episodic[:n])
    # then who speaks when, from perception (this record has no turns: its utterances), not from the model
    assert [(i.text, i.kind) for i in mem.episodic[n:]] == [
        ("<voice_1> speaks from 0.6 to 5.7 s", "speaking"),
        ("<voice_2> speaks from 6.3 to 13.0 s", "speaking"),
    ]
    assert [(i.text, i.kind) for i in mem.semantic] == [
        ("Equivalence: <face_1>, <voice_1>", "equivalence"),
        ("The name of <voice_1> is Barack", "attribute"),
        ("<voice_1> and <voice_2> are friendly colleagues", "relationship"),
        ("The setting is a formal press event", "knowledge"),
    ]
    assert mem.equivalences == [("<face_1>", "<voice_1>")]
    assert next(i for i in mem.semantic if i.kind == "attribute").name == "Barack"


def test_memorize_m3_agent_style_repairs_foreign_ids_echoes_and_unseen_pairs(server):
    bad = {
        "episodic": ["sentences", "<face_7> enters the room"],
        "semantic": ["Equivalence: <face_1>, <voice_2>"],  # <face_1> is never seen while <voice_2> speaks
    }
    prose_only = {"episodic": ["Someone talks about coffee"], "semantic": []}  # names no one
    server.script(json.dumps(bad), json.dumps(prose_only), json.dumps(AGENT_MEMORY))
    [out] = memorize_records(
        [talk()], MemorizeConfig(frames=0, jobs=1, prompt_style="m3-agent"), client_for(server)
    )
    assert out.memory.source == "llm" and not out.errors
    first, second = (b["messages"][-1]["content"] for b in server.chat_requests[1:])
    assert "placeholder 'sentences'" in first and "<face_7>, not in this clip" in first
    assert "pairs <face_1> with <voice_2>, but <face_1> is never visible while <voice_2> speaks" in first
    assert "no episodic line names anyone by id" in second
    assert out.memory.equivalences == [("<face_1>", "<voice_1>")]


def test_memorize_styles_do_not_share_cache_entries(server, tmp_path):
    from m3cli.stages.core.cache import Cache
    from m3cli.stages.core.common import RunContext

    cache = Cache(tmp_path / "cache")
    m3_reply = {
        "episodic": [{"text": "<face_1> waves", "start": 1.0, "end": 2.0}],
        "semantic": [],
        "equivalences": [],
    }
    server.script(json.dumps(m3_reply), json.dumps(AGENT_MEMORY))
    run = RunContext(cache=cache)
    [a] = memorize_records([talk(cache=cache)], MemorizeConfig(frames=0, jobs=1), client_for(server), run)
    [b] = memorize_records(
        [talk(cache=cache)],
        MemorizeConfig(frames=0, jobs=1, prompt_style="m3-agent"),
        client_for(server),
        run,
    )
    assert len(server.chat_requests) == 2
    assert (a.memory.prompt_version, b.memory.prompt_version) == (MP.PROMPT_VERSION, MP.AGENT_PROMPT_VERSION)
    with pytest.raises(InputError, match="--prompt-style must be one of m3, m3-agent"):
        MemorizeConfig(prompt_style="qwen")


# ------------------------------------------------------------------------------------------------ ask


ask_server, memory_path, fresh = ask_memory.ask_server, ask_memory.memory_path, ask_memory.fresh  # fixtures


def test_ask_m3_agent_style_uses_the_paper_instruction_and_action_content_replies(fresh, memory_path):
    fresh.script(
        "<think>I need to know who drinks coffee.</think>\nAction: [Search]\nContent: Who likes coffee",
        "Action: [Search]\nContent: {content}",
        "Action: [Answer]\nContent: <character_1> likes coffee.",
    )
    asker = make_asker(fresh, memory_path, rounds=5, tools=P.AGENT_TOOLS, prompt_style="m3-agent")
    rec = asker.ask(Question("Who likes coffee?"))
    check_answer(rec)
    assert rec["prompt_version"] == P.AGENT_PROMPT_VERSION and rec["config"]["prompt_style"] == "m3-agent"
    steps = rec["trajectory"]
    assert [(s["tool"], s["error"] is None) for s in steps] == [
        ("search", True),
        (None, False),
        ("answer", True),
    ]
    assert steps[0]["query"] == "Who likes coffee" and steps[0]["results"]
    assert steps[0]["reasoning"] == "I need to know who drinks coffee."
    assert "'{content}' is a placeholder" in steps[1]["error"]  # the paper's slot is still no query
    assert rec["answer"] == "Alice likes coffee."
    first = fresh.chat_requests[0]["messages"]
    system = first[0]["content"]
    assert system.startswith(P.SYSTEM_PROMPT) and "Only [Search] and [Answer] exist" in system
    assert "[SearchClip]" not in system + first[1]["content"]
    assert first[1]["content"].endswith(P.AGENT_INSTRUCTION)
    assert "Action: [Answer] or [Search]\nContent: {content}" in first[1]["content"]
    # retrieved memory still arrives as a delimited data block
    assert '<memory id="' in fresh.chat_requests[1]["messages"][-1]["content"]


def test_ask_m3_agent_style_refuses_tools_it_cannot_name():
    with pytest.raises(InputError, match="m3-agent knows only \\[Search\\] and \\[Answer\\]"):
        AskConfig(tools=P.DEFAULT_TOOLS, prompt_style="m3-agent")
    with pytest.raises(InputError, match="--prompt-style must be one of"):
        AskConfig(prompt_style="agent")


@pytest.mark.slow
def test_ask_cli_prompt_style_defaults_to_search_only(fresh, memory_path, m3):
    fresh.script("Action: [Answer]\nContent: Alice.")
    out = m3("ask", memory_path, "Who likes coffee?", "--prompt-style", "m3-agent", env=fake_env(fresh))
    assert out.returncode == 0, out.stderr.decode()
    rec = json.loads(out.stdout)
    assert rec["config"]["tools"] == ["search"] and rec["prompt_version"] == P.AGENT_PROMPT_VERSION
    assert rec["answer"] == "Alice."
    bad = m3("ask", memory_path, "q?", "--prompt-style", "m3-agent", "--tools", "all", env=fake_env(fresh))
    assert bad.returncode != 0 and b"m3-agent knows only [Search] and [Answer]" in bad.stderr
