"""`m3 memorize`: the offline memorizer's honest lines, and the LLM path against a real loopback server
(frames and crops sent, unknown ids repaired, faults retried, then a flagged offline fallback)."""

from __future__ import annotations

import json

import orjson
import pytest
from memory_helpers import clip

from m3cli.schemas.records import Turn
from m3cli.stages.core.cache import Cache
from m3cli.stages.core.memory_prompts import PROMPT_VERSION
from m3cli.stages.memorize.offline import names_said, offline_memory
from m3cli.stages.memorize.stage import MemorizeConfig, memorize_records
from m3cli.stream import parse_record
from support.fake_openai import FakeOpenAI, Fault
from support.fixture_talk import GOOD, client_for, talk


def texts(memory, section="episodic"):
    return [i.text for i in getattr(memory, section)]


# ------------------------------------------------------------------------------------ offline


def test_offline_memory_states_only_what_perception_established():
    mem = offline_memory(talk())
    assert mem.source == "offline" and mem.fallback is False and mem.equivalences == []
    ep = texts(mem)
    assert '<voice_1> says: "Good morning, my name is Barack and I like coffee."' in ep
    assert 'An unidentified voice says: "Mm-hm."' in ep
    assert "<face_1> is visible from 0.6 to 5.7 s and from 13.6 to 21.7 s" in ep
    # who is seen: one line for the clip, with each face's own times, never one per pair
    assert (
        "2 faces are seen in this clip: <face_1> (from 0.6 to 5.7 s and from 13.6 to 21.7 s) and "
        "<face_2> (from 5.0 to 5.7 s and from 6.3 to 13.0 s)"
    ) in ep
    assert not any("together" in t or "both speak" in t for t in ep)
    # without diarization turns, each voice's speaking spans come from its utterances
    assert "<voice_1> speaks from 0.6 to 5.7 s" in ep and "<voice_2> speaks from 6.3 to 13.0 s" in ep
    assert not any(i.kind in ("untranscribed", "overlap") for i in mem.episodic)
    speech = next(i for i in mem.episodic if i.kind == "speech")
    assert (speech.start, speech.end, speech.entities) == (0.6, 5.7, ["<voice_1>"])
    # the only semantic lines are names people said about themselves
    assert texts(mem, "semantic") == ["The name of <voice_1> is Barack", "The name of <voice_2> is Joe"]
    assert all(i.name for i in mem.semantic)
    # no likes/dislikes or other inference from "I like coffee"
    assert not any("coffee" in t for t in texts(mem, "semantic"))
    assert offline_memory(talk()) == mem  # deterministic


def turn(start, end, voice, overlap=False):
    return {
        "start": start,
        "end": end,
        "speaker_local": f"S{voice}",
        "speaker": f"<voice_{voice}>",
        "overlap": overlap,
    }


def test_turns_give_speaking_spans_and_turns_without_words_are_memory():
    """A turn no utterance covers is a line of its own; who speaks when comes from the turns."""
    rec = clip(
        0,
        {"<face_1>": [(0.0, 30.0)]},
        [("<voice_2>", 6.3, 9.9, "So, this was the first time."), ("<voice_1>", 10.0, 13.0, "Both of us.")],
        turns=[
            turn(0.3, 3.7, 1),  # heard, never transcribed
            turn(3.9, 10.0, 2),  # transcribed from 6.3 only: 2.4 s without words
            turn(10.0, 13.4, 1),  # the 0.4 s after the last word is padding, not lost speech
            turn(20.0, 21.0, 2),  # short, but no word at all
        ],
    )
    mem = offline_memory(rec)
    lost = [(i.text, i.start, i.end, i.entities) for i in mem.episodic if i.kind == "untranscribed"]
    assert lost == [
        ("<voice_1> speaks, not transcribed, from 0.3 to 3.7 s", 0.3, 3.7, ["<voice_1>"]),
        ("<voice_2> speaks, not transcribed, from 3.9 to 6.3 s", 3.9, 6.3, ["<voice_2>"]),
        ("<voice_2> speaks, not transcribed, from 20.0 to 21.0 s", 20.0, 21.0, ["<voice_2>"]),
    ]
    speaking = {i.entities[0]: (i.text, i.start, i.end) for i in mem.episodic if i.kind == "speaking"}
    assert speaking == {
        "<voice_1>": ("<voice_1> speaks from 0.3 to 3.7 s and from 10.0 to 13.4 s", 0.3, 13.4),
        "<voice_2>": ("<voice_2> speaks from 3.9 to 10.0 s and from 20.0 to 21.0 s", 3.9, 21.0),
    }
    # turns that only touch are not talking over each other; one face: no clip line of who is seen
    assert not any(i.kind in ("overlap", "present") for i in mem.episodic)


def test_overlapping_speech_is_said_only_where_turns_overlap():
    rec = clip(
        0,
        None,
        [("<voice_1>", 0.5, 4.0, "I was saying"), ("<voice_2>", 3.5, 6.0, "No, listen")],
        turns=[turn(0.5, 4.0, 1, True), turn(3.5, 6.0, 2, True), turn(7.0, 9.0, 3)],
    )
    [line] = [i for i in offline_memory(rec).episodic if i.kind == "overlap"]
    assert line.text == "<voice_1> and <voice_2> speak at the same time from 3.5 to 4.0 s"
    assert (line.start, line.end, line.entities) == (3.5, 4.0, ["<voice_1>", "<voice_2>"])


@pytest.mark.parametrize(
    "text,expected",
    [
        ("Hi, my name is Anna Smith.", [("self", "Anna Smith")]),
        ("I'm sorry, I am Tom.", [("self", "Tom")]),
        ("Thank you, Joe.", [("vocative", "Joe")]),
        (
            "We met President Obama and Dr. Jill Biden",
            [("mention", "President Obama"), ("mention", "Dr. Jill")],
        ),
        ("I'm going home, I'm happy", []),
        ("call me Ishmael", [("self", "Ishmael")]),
    ],
)
def test_names_said_patterns(text, expected):
    assert names_said(text) == expected


def test_memorize_cli_offline_default(m3, tmp_path, cache_dir):
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"".join(orjson.dumps(r.to_json()) + b"\n" for r in (talk(0), talk(1))))
    proc = m3("memorize", src, env={"M3_LLM_BASE_URL": "", "M3_LLM_MODEL": ""})
    assert proc.returncode == 0, proc.stderr.decode()
    records = [parse_record(json.loads(line)) for line in proc.stdout.splitlines()]
    assert [r.clip.index for r in records] == [0, 1]
    assert all(r.memory.source == "offline" for r in records)
    assert records[1].memory.episodic[0].start == 30.6


def test_memorize_requires_perception(m3, tmp_path, cache_dir):
    bare = clip(0).to_json()
    del bare["faces"], bare["utterances"]
    src = tmp_path / "in.jsonl"
    src.write_bytes(orjson.dumps(bare) + b"\n")
    proc = m3("memorize", src)
    assert proc.returncode == 1 and b"m3 faces" in proc.stderr and b"Traceback" not in proc.stderr


# ------------------------------------------------------------------------------------ LLM


@pytest.fixture
def server():
    with FakeOpenAI() as fake:
        yield fake


def test_llm_memory_sends_frames_crops_dialogue_and_caches(server, tmp_path):
    server.script(json.dumps(GOOD))
    cache = Cache(tmp_path / "cache")
    from m3cli.stages.core.common import RunContext

    record = talk(cache=cache)
    config = MemorizeConfig(frames=3, jobs=1)
    [out] = memorize_records([record], config, client_for(server), RunContext(cache=cache))
    mem = out.memory
    assert mem.source == "llm" and mem.model == "fake-vlm" and mem.prompt_version == PROMPT_VERSION
    assert mem.equivalences == [("<face_1>", "<voice_1>"), ("<face_2>", "<voice_2>")]
    assert "Equivalence: <face_2>, <voice_2>" in texts(mem, "semantic")
    assert mem.episodic[1].entities == ["<voice_2>", "<voice_1>"]
    assert next(i for i in mem.semantic if i.kind == "attribute").name == "Barack"
    body = server.chat_requests[0]
    parts = body["messages"][1]["content"]
    images = [p for p in parts if p["type"] == "image_url"]
    assert len(images) == 3 + 1  # three frames of the real fixture video + the one crop we have
    joined = " ".join(p.get("text", "") for p in parts)
    assert '[0.6-5.7 s] <voice_1>: "Good morning, my name is Barack and I like coffee."' in joined
    assert "<face_2> (visible" in joined and "no crop available" in joined
    # cached: a rerun asks nothing
    [again] = memorize_records([record], config, client_for(server), RunContext(cache=cache))
    assert len(server.chat_requests) == 1 and again.memory == mem


def test_llm_memory_gets_who_speaks_when_from_the_turns(server):
    """The model reads only the transcript; the turns it never saw still give speaking spans and the
    speech no utterance holds, as in offline memory."""
    server.script(json.dumps(GOOD))
    record = talk(length=24.9)
    record.turns = [Turn(**turn(0.6, 5.7, 1)), Turn(**turn(6.3, 13.0, 2)), Turn(**turn(14.0, 16.0, 1))]
    [out] = memorize_records([record], MemorizeConfig(frames=0, jobs=1), client_for(server))
    mem = out.memory
    assert mem.source == "llm" and [i.text for i in mem.episodic[:2]] == [i["text"] for i in GOOD["episodic"]]
    assert [(i.kind, i.text, i.start, i.end) for i in mem.episodic[2:]] == [
        ("untranscribed", "<voice_1> speaks, not transcribed, from 14.0 to 16.0 s", 14.0, 16.0),
        ("speaking", "<voice_1> speaks from 0.6 to 5.7 s and from 14.0 to 16.0 s", 0.6, 16.0),
        ("speaking", "<voice_2> speaks from 6.3 to 13.0 s", 6.3, 13.0),
    ]


def test_unknown_ids_are_sent_back_for_repair(server):
    bad = {**GOOD, "episodic": [{"text": "<face_9> waves at <voice_1>"}]}
    server.script(json.dumps(bad), json.dumps(GOOD))
    [out] = memorize_records([talk()], MemorizeConfig(frames=0, jobs=1), client_for(server))
    assert out.memory.source == "llm" and not out.errors
    repair = server.chat_requests[1]["messages"][-1]["content"]
    assert "<face_9>" in repair and "not in this clip" in repair


@pytest.mark.parametrize(
    "faults",
    [
        [Fault.status(429, retry_after=0.01), Fault.status(500)],
        [Fault.malformed_body()],
        [Fault.truncated_json(json.dumps(GOOD))],
        ["", "not json at all"],
    ],
)
def test_transient_faults_are_retried(server, faults):
    server.script(*faults, json.dumps(GOOD))
    [out] = memorize_records([talk()], MemorizeConfig(frames=0, jobs=1), client_for(server))
    assert out.memory.source == "llm" and out.memory.fallback is False and not out.errors


def test_timeout_then_success(server):
    server.script(Fault.slow(1.0, then=json.dumps(GOOD)), json.dumps(GOOD))
    [out] = memorize_records([talk()], MemorizeConfig(frames=0, jobs=1), client_for(server, timeout=0.3))
    assert out.memory.source == "llm"


@pytest.mark.parametrize(
    "script",
    [
        [Fault.status(503)] * 3,
        ['{"episodic": []}'] * 3,  # empty memory, three times
        [json.dumps({**GOOD, "equivalences": [["<face_7>", "<voice_1>"]]})] * 3,  # ids that do not exist
    ],
)
def test_persistent_failure_falls_back_per_clip(server, script):
    # clip 0 gets the faulty replies; clip 1 then gets a good answer: nothing is lost
    server.script(*script, json.dumps({**GOOD, "equivalences": []}))
    out = memorize_records([talk(0), talk(1)], MemorizeConfig(frames=0, jobs=1), client_for(server))
    first, second = (r.memory for r in out)
    assert first.source == "offline" and first.fallback is True
    assert texts(first) == texts(offline_memory(talk(0)))
    [err] = out[0].errors
    assert err.stage == "memorize" and err.error == "llm_fallback" and "fake-vlm" in err.message
    assert second.source == "llm" and not out[1].errors


def test_ablations_shrink_prompt_and_output(server):
    server.script(json.dumps({"episodic": GOOD["episodic"]}))
    [out] = memorize_records([talk()], MemorizeConfig(frames=0, semantic=False, jobs=1), client_for(server))
    prompt = json.dumps(server.chat_requests[0])
    assert "Semantic memory" not in prompt and out.memory.semantic == [] and out.memory.equivalences == []
    server.script(json.dumps({"episodic": GOOD["episodic"], "semantic": GOOD["semantic"][1:]}))
    [out] = memorize_records(
        [talk()], MemorizeConfig(frames=0, equivalence=False, jobs=1), client_for(server)
    )
    prompt = json.dumps(server.chat_requests[1])
    assert "Equivalence identification" not in prompt
    assert out.memory.equivalences == [] and all(i.kind != "equivalence" for i in out.memory.semantic)


@pytest.mark.slow
def test_memorize_cli_with_llm_flags(m3, tmp_path, cache_dir, server):
    server.responder = lambda body: json.dumps({**GOOD, "equivalences": []})
    src = tmp_path / "in.jsonl"
    record = talk()
    record.faces.tracks[0].crop = None  # a crop outside the cache is refused (test_record_paths)
    src.write_bytes(orjson.dumps(record.to_json()) + b"\n")
    proc = m3("memorize", "--llm-base-url", server.url, "--llm-model", "fake-vlm", "--frames", "0", src)
    assert proc.returncode == 0, proc.stderr.decode()
    record = parse_record(json.loads(proc.stdout))
    assert record.memory.source == "llm" and record.memory.equivalences == [("<face_1>", "<voice_1>")]
