"""`m3 ask` reads a memory through its Lance datasets, never through LanceDB (whose import alone cost most of
a cold `m3 ask`), and answers exactly as LanceDB's queries did: the same evidence, citations, scores and
trajectory, whether the nodes are searched in Lance or held in RAM (a small memory, or the one video a
question is about). On a real memory: the real index writer with the bundled MiniLM embeddings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import HAMILTON
from m3cli.stages.ask import memory as ask_memory_module
from m3cli.stages.ask.loop import AskConfig, Asker
from m3cli.stages.ask.memory import LanceMemory
from m3cli.stages.ask.questions import Question
from m3cli.stages.backends.embed import make_embedder
from m3cli.stages.backends.llm import LlmClient
from m3cli.stages.core.errors import InputError
from m3cli.stages.core.media import content_id
from m3cli.stages.core.memory_reader import open_reader
from m3cli.stages.core.memory_store import open_memory
from m3cli.stages.index.stage import index_records
from m3cli.stream import parse_record
from support.ask_memory import V, check_answer, clip_records
from support.fake_openai import FakeOpenAI
from support.import_probe import m3_imports
from support.lancedb_reader import LanceDBReader

V2 = content_id(HAMILTON)
NEVER_IMPORTED = ("lancedb", "lance_namespace", "torch", "sentence_transformers", "pandas", "openai")


def second_video() -> list[dict]:
    """Two clips of another video: a second coffee drinker, so unscoped and scoped answers differ."""
    lines = [
        ['<voice_1> says: "I am Carol. I drink coffee with milk at the office."', "<face_1> waves"],
        ['<voice_2> says: "Dave here, I teach chemistry and I like tea."', "<voice_1> plays the guitar"],
    ]
    return [
        {
            "schema": "m3.clip/1",
            "video": {"id": V2, "path": str(HAMILTON), "duration": 20.0},
            "clip": {"index": i, "start": 10.0 * i, "end": 10.0 * (i + 1)},
            "memory": {
                "source": "offline",
                "episodic": [
                    {"text": t, "start": 10.0 * i + 4 * j, "end": 10.0 * i + 4 * j + 3}
                    for j, t in enumerate(ep)
                ],
                "semantic": [{"text": "The name of <voice_1> is Carol"}] if i == 0 else [],
            },
            "characters": {"<face_1>": "<character_1>", "<voice_1>": "<character_1>"},
        }
        for i, ep in enumerate(lines)
    ]


@pytest.fixture(scope="module")
def minilm():
    return make_embedder("local")


@pytest.fixture(scope="module")
def memory(minilm, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("mem") / "mem.lance"
    index_records([parse_record(r) for r in clip_records() + second_video()], path, minilm)
    return path


@pytest.fixture(scope="module")
def server():
    with FakeOpenAI() as s:
        yield s


QUESTIONS = [
    Question("Who likes coffee?"),
    Question("Who likes coffee?", video=V2),
    Question("What is Bob's job?", video=V, before_clip=1),
    Question("Who plays the guitar?", video=V2, before_clip=0),
]
CONFIGS = [AskConfig(), AskConfig(kinds=frozenset({"episodic"})), AskConfig(raw_ids=True)]
#: one question through every memory tool (the loopback server plays the model)
SCRIPT = (
    "[SearchClip] coffee in the morning",
    f"[Expand] {V}:2:e0",
    '{"keep": ["c1"]}',
    "[Character] Alice",
    "[Window] clip 1: chef",
    "[Count] coffee",
    "[Search] green tea",
    "[Answer] Alice [n1]",
)


def answers(view, minilm, server) -> list[dict]:
    """Every question under every config (retrieval-only), then the scripted tool tour, as records."""
    out = [Asker(view, minilm, None, config).ask(q) for config in CONFIGS for q in QUESTIONS]
    server.script(*SCRIPT)
    llm = LlmClient(server.url, "fake-model", max_retries=0)
    out.append(Asker(view, minilm, llm, AskConfig(rounds=8)).ask(Question("Who likes coffee?", video=V)))
    return out


def comparable(record: dict, scores: bool = True) -> dict:
    """A record less its timings (and, for searches done another way, its rounded scores)."""
    rec = {k: v for k, v in record.items() if k not in ("latency_s", "llm_s")}
    rec["trajectory"] = [{k: v for k, v in s.items() if k != "seconds"} for s in record["trajectory"]]
    if not scores:
        for step in rec["trajectory"]:
            step["results"] = [{k: v for k, v in r.items() if k != "score"} for r in step["results"]]
    return rec


@pytest.fixture(scope="module")
def reference(memory, minilm, server) -> list[dict]:
    """The answers through LanceDB's queries, every search in the database (the path before)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ask_memory_module, "EXACT_MAX_ROWS", 0)
        return answers(LanceMemory(LanceDBReader(memory)), minilm, server)


@pytest.mark.slow
def test_reference_answers_are_real(reference):
    """The reference itself is right (else agreeing with it would prove little)."""
    for rec in reference:
        check_answer(rec)
        assert rec["error"] is None, rec
        if rec["question"] == "Who plays the guitar?":  # said in clip 1, the question stops at clip 0
            assert rec["answer"].startswith("No line in memory supports an answer")
            assert rec["trajectory"][0]["results"]
        else:
            assert rec["evidence"], rec
    first, in_v2 = reference[0], reference[1]
    assert "I love coffee" in first["answer"] and first["evidence"][0]["video"] == V
    assert "coffee with milk" in in_v2["answer"] and {e["video"] for e in in_v2["evidence"]} == {V2}
    tour = reference[-1]
    assert [s["tool"] for s in tour["trajectory"]] == [
        "search_clip",
        "expand",
        "character",
        "window",
        "count",
        "search",
        "answer",
    ]
    assert all(s["error"] is None and (s["results"] or s["tool"] == "answer") for s in tour["trajectory"])


def test_lance_reader_answers_exactly_as_lancedb(reference, memory, minilm, server, monkeypatch):
    monkeypatch.setattr(ask_memory_module, "EXACT_MAX_ROWS", 0)  # every search in Lance, as above
    got = answers(LanceMemory.open(memory), minilm, server)
    assert [comparable(r) for r in got] == [comparable(r) for r in reference]


@pytest.mark.parametrize("held", ["memory", "video"])
@pytest.mark.slow
def test_nodes_held_in_ram_give_the_same_answers(held, reference, memory, minilm, server, monkeypatch):
    """A small memory is searched in RAM; so is the video of a scoped question in a large one (here the
    threshold is lowered so that the whole memory is "large" and each video "small")."""
    if held == "video":
        reader = open_reader(memory)
        per_video = max(reader.count("nodes", f"video = '{v}'") for v in (V, V2))
        assert per_video < reader.count("nodes")
        monkeypatch.setattr(ask_memory_module, "EXACT_MAX_ROWS", per_video)
    view = LanceMemory.open(memory)
    got = answers(view, minilm, server)
    assert (view._exact is not None) == (held == "memory")
    assert set(view._video_exact) == (set() if held == "memory" else {V, V2})
    assert [comparable(r, scores=False) for r in got] == [comparable(r, scores=False) for r in reference]
    for mine, theirs in zip(got, reference, strict=True):  # exact cosine in RAM vs Lance's: rounding only
        for a, b in zip(mine["trajectory"], theirs["trajectory"], strict=True):
            theirs_scores = [r["score"] for r in b["results"]]
            assert [r["score"] for r in a["results"]] == pytest.approx(theirs_scores, abs=2e-4)


@pytest.mark.slow
def test_cli_ask_never_imports_lancedb_and_answers_as_before(reference, memory, cache_dir):
    env = {"M3_LLM_BASE_URL": "", "M3_LLM_MODEL": "", "HF_HUB_OFFLINE": "1"}
    for i, q in enumerate(QUESTIONS[:2]):
        args = ["ask", str(memory), q.question] + (["--video", q.video] if q.video else [])
        proc, imported = m3_imports(args, NEVER_IMPORTED, env=env)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert imported == set(), f"m3 ask imported {sorted(imported)}"
        record = json.loads(proc.stdout)
        before = comparable(reference[i])
        before["memory"] = str(memory)  # the CLI names the memory it was given
        assert comparable(record) == before


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda p: p / "missing.lance", "no such memory dataset"),
        (lambda p: (p / "file.lance").write_text("x") and p / "file.lance", "not a memory dataset"),
        (
            lambda p: (p / "half.lance" / "nodes.lance").mkdir(parents=True) or p / "half.lance",
            "not a complete m3 memory (missing tables: edges, entities, clips, meta)",
        ),
    ],
    ids=["missing", "file", "half"],
)
def test_reader_errors_match_the_store(make, message, tmp_path):
    path = make(tmp_path)
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")) as mine:
        open_reader(path)
    with pytest.raises(InputError) as store:
        open_memory(path)
    assert str(mine.value) == str(store.value)


def test_reader_reads_the_committed_versions(memory, minilm, tmp_path):
    """Rows a later writer added but no manifest names stay invisible, as with LanceDB's tables."""
    import shutil

    import lancedb

    copy = tmp_path / "mem.lance"
    shutil.copytree(memory, copy)
    committed = open_reader(copy).count("nodes")
    table = lancedb.connect(str(copy)).open_table("nodes")
    row = table.search().limit(1).to_arrow()
    table.add(row)  # a write not committed by the manifest
    assert table.count_rows() == committed + 1
    assert open_reader(copy).count("nodes") == committed == LanceDBReader(copy).count("nodes")
