"""`m3 abstract`: evidence-driven triggers, the clip/global pyramid, sparse links, contradictions."""

from __future__ import annotations

import json
import zlib

import numpy as np
import pytest
from memory_helpers import clip

from m3cli.stages.abstract.conflicts import polarity_form
from m3cli.stages.abstract.stage import AbstractConfig, abstract_records
from m3cli.stages.backends.llm import LlmClient
from m3cli.stages.link.stage import LinkConfig, link_records
from m3cli.stages.memorize.stage import MemorizeConfig, memorize_records
from support.fake_openai import FakeOpenAI, Fault


def conversation(n_clips: int = 4):
    """face_1/voice_1 and face_2/voice_2 take turns; each clip gives each of them several lines."""
    out = []
    for i in range(n_clips):
        o = 30.0 * i
        out.append(
            clip(
                i,
                {"<face_1>": [(o, o + 10)], "<face_2>": [(o + 10, o + 20)]},
                [
                    ("<voice_1>", o + 0.5, o + 9.5, f"I am talking about topic {i}."),
                    ("<voice_2>", o + 10.5, o + 19.5, f"I answer about topic {i}."),
                ],
            )
        )
    return link_records(memorize_records(out, MemorizeConfig()), LinkConfig())


def items(records, kind):
    return [(r.clip.index, a) for r in records for a in r.plain("abstractions") if a["kind"] == kind]


def node_ids(records):
    ids = set()
    for r in records:
        for section in ("episodic", "semantic"):
            ids.update(
                f"{r.video.id}:{r.clip.index}:{section[0]}{i}" for i in range(len(getattr(r.memory, section)))
            )
        ids.update(a.id for a in r.abstractions if a.kind == "clip")
    return ids


def test_character_summaries_fire_on_evidence_counts():
    recs = abstract_records(conversation(4), AbstractConfig(tau_char=5, tau_rel=100, embed=False))
    chars = items(recs, "character")
    # each clip adds 4 lines per character (speech, speaking spans, appearance, who is seen in the clip):
    # 4, 8 -> fires, 12, 16 -> fires
    assert [(clip, a["character"]) for clip, a in chars] == [
        (1, "<character_1>"),
        (1, "<character_2>"),
        (3, "<character_1>"),
        (3, "<character_2>"),
    ]
    first, second = chars[0][1], chars[2][1]
    assert first["evidence_count"] == 8 and len(first["evidence"]) == 8
    assert second["evidence_count"] == 16 and len(second["evidence"]) == 8
    assert not set(first["evidence"]) & set(second["evidence"])  # only new evidence the second time
    assert set(first["evidence"]) | set(second["evidence"]) <= node_ids(recs)
    assert first["source"] == "offline" and "speaks 2 times" in first["text"]
    assert '"I am talking about topic' in first["text"]


def test_relationship_summaries_count_interactions():
    recs = abstract_records(conversation(4), AbstractConfig(tau_char=100, tau_rel=4, embed=False))
    rels = items(recs, "relationship")
    # per clip: one line naming both characters + the clip in which both appear = 2 interactions
    assert [clip for clip, _ in rels] == [1, 3]
    rel = rels[0][1]
    assert rel["characters"] == ["<character_1>", "<character_2>"] and rel["evidence_count"] == 4
    assert "0123456789abcdef:0:clip" in rel["evidence"]


def test_clip_and_global_summaries_every_clip():
    recs = abstract_records(conversation(3), AbstractConfig(embed=False))
    clips = items(recs, "clip")
    assert [a["id"] for _, a in clips] == [f"0123456789abcdef:{i}:clip" for i in range(3)]
    assert clips[0][1]["text"].startswith("Clip 0 (0.0-30.0 s): <character_1> speaks 1 time")
    glob = items(recs, "global")
    assert [a["id"] for _, a in glob] == ["0123456789abcdef:global"] * 3
    assert glob[-1][1]["evidence"] == [a["id"] for _, a in clips]
    assert glob[-1][1]["text"].startswith(
        "Video so far: 3 clips, 0.0-90.0 s. People: <character_1> in 3 clips"
    )
    again = abstract_records(conversation(3), AbstractConfig(embed=False))
    assert [r.abstractions for r in again] == [r.abstractions for r in recs]  # deterministic


def test_links_are_sparse_and_point_to_real_nodes():
    recs = abstract_records(conversation(2), AbstractConfig(embed=False))
    links = [a for _, a in items(recs, "link")]
    relations = {a["relation"] for a in links}
    assert relations == {"same_character", "temporal"}
    known = node_ids(recs)
    assert all(a["src"] in known and a["dst"] in known for a in links)
    # clip 1's first episodic line continues the timeline of clip 0
    assert any(
        a["relation"] == "temporal" and a["src"].split(":")[1] == "1" and a["dst"].split(":")[1] == "0"
        for a in links
    )
    n_facts = sum(len(r.memory.episodic) + len(r.memory.semantic) for r in recs)
    assert len(links) <= 3 * n_facts


class TinyEmbedder:
    """Deterministic bag-of-words vectors (the real MiniLM is exercised in test_index)."""

    name = "tiny"
    version = "tiny-1"
    dim = 32

    def embed(self, texts):
        out = np.zeros((len(texts), self.dim), np.float32)
        for i, t in enumerate(texts):
            for w in t.lower().split():
                out[i, zlib.crc32(w.encode()) % self.dim] += 1
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


def test_similar_links_use_the_embedder():
    recs = abstract_records(
        conversation(3), AbstractConfig(embed=True, similar_threshold=0.7), None, TinyEmbedder()
    )
    similar = [a for _, a in items(recs, "link") if a["relation"] == "similar"]
    assert similar and all(a["weight"] >= 0.7 for a in similar)
    assert all(a["src"] > a["dst"] or a["src"].split(":")[1] >= a["dst"].split(":")[1] for a in similar)


SEMANTIC = [
    ("<voice_1> likes coffee", 0),
    ("<voice_1> likes coffee", 1),
    ("<voice_1> does not like coffee", 2),
    ("<face_2> is married", 0),
    ("<face_2> is not married", 3),
]


def claims():
    recs = []
    for i in range(4):
        sem = [{"text": t, "kind": "attribute", "entities": [t.split()[0]]} for t, c in SEMANTIC if c == i]
        mem = {"source": "llm", "episodic": [{"text": "people talk"}], "semantic": sem, "equivalences": []}
        recs.append(
            clip(
                i,
                {"<face_2>": [(30 * i, 30 * i + 1)]},
                [("<voice_1>", 30 * i + 2, 30 * i + 3, "x")],
                memory=mem,
            )
        )
    return link_records(recs, LinkConfig())


def test_offline_contradictions_keep_the_better_supported_statement():
    recs = abstract_records(claims(), AbstractConfig(check=True, embed=False))
    conflicts = items(recs, "conflict")
    assert [c for c, _ in conflicts] == [2, 3]
    coffee, married = conflicts[0][1], conflicts[1][1]
    vid = "0123456789abcdef"
    assert coffee["kept"] == [f"{vid}:0:s0", f"{vid}:1:s0"] and coffee["dropped"] == [f"{vid}:2:s0"]
    assert coffee["weights"] == {"kept": 2, "dropped": 1}
    assert 'kept "<character_2> likes coffee"' in coffee["text"]  # face_2 is seen first
    # a tie goes to the newer statement
    assert married["kept"] == [f"{vid}:3:s0"] and married["dropped"] == [f"{vid}:0:s1"]
    assert not items(abstract_records(claims(), AbstractConfig(embed=False)), "conflict")  # only with --check


@pytest.mark.parametrize(
    "a,b",
    [
        ("<subject> likes coffee", "<subject> dislikes coffee"),
        ("<subject> likes coffee", "<subject> doesn't like coffee"),
        ("<subject> is married", "<subject> isn't married"),
        ("<subject> is married", "<subject> is single"),
        ("<subject> can swim", "<subject> cannot swim"),
        ("<subject> has a dog", "<subject> does not have a dog"),
    ],
)
def test_polarity_forms(a, b):
    pa, pb = polarity_form(a), polarity_form(b)
    assert pa[1] == pb[1] and pa[0] == -pb[0]


def test_polarity_forms_do_not_confuse_different_claims():
    assert polarity_form("<subject> likes tea")[1] != polarity_form("<subject> does not like coffee")[1]


def test_llm_summaries_links_and_fallback():
    with FakeOpenAI() as server:

        def respond(body):
            prompt = body["messages"][-1]["content"]
            if "New facts:" in prompt:
                new = json.loads(prompt.split("New facts: ")[1].split("\nEarlier facts: ")[0])
                return json.dumps(
                    {
                        "links": [
                            {
                                "source": new[1]["node_id"],
                                "target": new[0]["node_id"],
                                "description": "answers",
                                "weight": 0.9,
                            }
                        ]
                    }
                )
            if prompt.startswith("Summarise clip 1"):
                return Fault.status(500)
            return json.dumps({"summary": "A calm exchange between <character_1> and <character_2>."})

        server.responder = respond
        client = LlmClient(server.url, "fake", backoff=0.01, max_retries=1, timeout=5)
        recs = abstract_records(conversation(2), AbstractConfig(embed=False, tau_char=3), client)
    clips = [a for _, a in items(recs, "clip")]
    assert clips[0]["source"] == "llm" and clips[0]["text"].startswith("A calm exchange")
    assert clips[1]["source"] == "offline" and clips[1]["text"].startswith("Clip 1")
    assert [e.what for e in recs[1].errors] == ["clip"] and not recs[0].errors
    causal = [a for _, a in items(recs, "link") if a["relation"] == "causal"]
    assert len(causal) == 2 and causal[0]["description"] == "answers"
    assert items(recs, "character")[0][1]["source"] == "llm"


def test_abstract_cli(m3, tmp_path, cache_dir):
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"".join(json.dumps(r.to_json()).encode() + b"\n" for r in claims()))
    proc = m3("abstract", "--check", "--no-embed", "--no-llm", src)
    assert proc.returncode == 0, proc.stderr.decode()
    kinds = [a["kind"] for line in proc.stdout.splitlines() for a in json.loads(line)["abstractions"]]
    assert kinds.count("conflict") == 2 and kinds.count("clip") == 4
