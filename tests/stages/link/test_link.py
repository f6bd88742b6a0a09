"""`m3 link`: seen-speaking and meta-clip votes, boundaries, Algorithm 2, numbering, the replayed fold."""

from __future__ import annotations

import json

import orjson
from memory_helpers import clip

from m3cli.stages.link.stage import LinkConfig, LinkState, Vote, clip_votes, link_records
from m3cli.stream import parse_record

META = LinkConfig(method="meta")  # M3-Agent's meta-clips, Algorithm 2 (weight-1 edges dropped)


def llm_memory(*pairs):
    return {
        "source": "llm",
        "model": "m",
        "episodic": [{"text": "something happens"}],
        "semantic": [],
        "equivalences": [list(p) for p in pairs],
    }


def monologues(index: int, face: str, voice: str, n: int = 3):
    """A clip in which ``face`` is alone on screen while ``voice`` talks, ``n`` windows long."""
    o = 30.0 * index
    return clip(index, {face: [(o, o + 5.0 * n)]}, [(voice, o + 0.2, o + 5.0 * n - 0.2, "words")])


def test_meta_votes_need_exactly_one_face_and_one_voice():
    r = clip(
        0,
        {"<face_1>": [(0.0, 10.0)], "<face_2>": [(10.0, 20.0), (25.0, 30.0)]},
        [
            ("<voice_1>", 0.5, 9.5, "a"),
            ("<voice_2>", 10.5, 19.8, "b"),
            ("<voice_2>", 20.5, 24.5, "c"),
            ("<voice_2>", 25.0, 29.0, "d"),
            (None, 26.0, 28.0, "overlap by someone unknown"),
        ],
    )
    votes = clip_votes(r, META)
    pairs = [(v.face, v.voice, v.start, v.end) for v in votes]
    # 0-10 s: two windows face_1/voice_1; 10-20 s: two windows face_2/voice_2; 20-25 s: voice but no face;
    # 25-30 s: face_2 with voice_2 plus an unattributed voice -> no vote
    assert pairs == [
        ("<face_1>", "<voice_1>", 0.0, 5.0),
        ("<face_1>", "<voice_1>", 5.0, 10.0),
        ("<face_2>", "<voice_2>", 10.0, 15.0),
        ("<face_2>", "<voice_2>", 15.0, 20.0),
    ]


def test_windows_follow_face_changes_not_a_fixed_grid():
    # turns of 5.1 s and 6.7 s (the fixture's rhythm): a fixed 5-s grid would straddle the turns
    r = clip(
        0,
        {"<face_1>": [(0.6, 5.7)], "<face_2>": [(6.3, 13.0)]},
        [("<voice_1>", 0.6, 5.7, "a"), ("<voice_2>", 6.3, 13.0, "b")],
    )
    votes = clip_votes(r, META)
    assert sorted({(v.face, v.voice) for v in votes}) == [
        ("<face_1>", "<voice_1>"),
        ("<face_2>", "<voice_2>"),
    ]
    assert sum(v.face == "<face_2>" for v in votes) == 2


def test_algorithm2_drops_weight_one_edges_and_weak_shares():
    state = LinkState(LinkConfig(method="meta", p=0.6))
    seen = {
        "<face_1>": (0, 0.0),
        "<voice_1>": (0, 0.1),
        "<voice_2>": (0, 0.2),
        "<face_2>": (0, 0.3),
        "<voice_3>": (0, 0.4),
    }
    state.add(
        [Vote("<face_1>", "<voice_1>", "meta", 1)] * 3
        + [Vote("<face_1>", "<voice_2>", "meta", 1)] * 2
        + [Vote("<face_2>", "<voice_3>", "meta", 1)],
        seen,
    )
    # face_1: voice_1 has 3 of 5 votes = 0.6 >= p; face_2-voice_3 has weight 1 -> noise
    assert state.kept_edges() == [("<face_1>", "<voice_1>", 3.0)]
    state2 = LinkState(LinkConfig(method="meta", p=0.7))
    state2.add(
        [Vote("<face_1>", "<voice_1>", "meta", 1)] * 3 + [Vote("<face_1>", "<voice_2>", "meta", 1)] * 2, seen
    )
    assert state2.kept_edges() == []  # 0.6 < 0.7
    chars = state.characters()
    assert chars["<face_1>"] == chars["<voice_1>"] == "<character_1>"
    assert chars["<voice_2>"] == "<character_2>" and chars["<face_2>"] == "<character_3>"
    assert chars["<voice_3>"] == "<character_4>"


def test_voice_keeps_only_its_heaviest_face():
    state = LinkState(META)
    seen = {"<face_1>": (0, 0.0), "<face_2>": (0, 1.0), "<voice_1>": (0, 0.5)}
    state.add(
        [Vote("<face_1>", "<voice_1>", "meta", 1)] * 2 + [Vote("<face_2>", "<voice_1>", "meta", 1)] * 4, seen
    )
    assert state.kept_edges() == [("<face_2>", "<voice_1>", 4.0)]
    chars = state.characters()
    assert chars["<face_2>"] == chars["<voice_1>"] != chars["<face_1>"]


def test_later_majority_overrides_an_early_wrong_link():
    # clip 0: the LLM twice wrongly pairs face_1 with voice_2 (and face_1 is alone while voice_2 talks once)
    early = clip(
        0,
        {"<face_1>": [(0.0, 4.0)]},
        [("<voice_2>", 0.5, 3.5, "hello")],
        memory=llm_memory(("<face_1>", "<voice_2>")),
    )
    early2 = clip(
        1,
        {"<face_1>": [(30.0, 31.0)], "<face_2>": [(31.0, 32.0)]},
        [],
        memory=llm_memory(("<face_1>", "<voice_2>")),
    )
    later = [monologues(2, "<face_1>", "<voice_1>", 2), monologues(3, "<face_1>", "<voice_1>", 2)]
    out = link_records([early, early2, *later], META)
    after = [r.characters for r in out]
    assert after[1]["<face_1>"] == after[1]["<voice_2>"]  # the early mistake is in force for a while
    final = after[-1]
    assert final["<face_1>"] == final["<voice_1>"] != final["<voice_2>"]
    assert out[-1].plain("link")["edges"] == [{"face": "<face_1>", "voice": "<voice_1>", "weight": 4.0}]
    weights = {(w["face"], w["voice"]): w for w in out[-1].plain("link")["weights"]}
    assert weights[("<face_1>", "<voice_2>")]["sources"] == {"llm": 2.0, "meta": 1.0}


def test_every_seen_id_gets_a_character_numbered_by_first_appearance():
    r0 = clip(0, {"<face_3>": [(2.0, 9.0)]}, [("<voice_5>", 0.5, 1.5, "hi")])
    r1 = clip(1, {"<face_1>": [(31.0, 33.0)]}, [])
    out = link_records([r1, r0], META)  # input order does not matter
    assert out[0].characters == {"<voice_5>": "<character_1>", "<face_3>": "<character_2>"}
    assert out[1].characters == {
        "<voice_5>": "<character_1>",
        "<face_3>": "<character_2>",
        "<face_1>": "<character_3>",
    }


def test_fold_is_replayed_from_recorded_votes_when_clips_are_appended():
    clips = [
        monologues(0, "<face_1>", "<voice_1>"),
        monologues(1, "<face_2>", "<voice_2>"),
        monologues(2, "<face_1>", "<voice_1>"),
        monologues(3, "<face_2>", "<voice_2>", 1),
    ]
    full = link_records(clips, META)
    first = link_records(clips[:2], META)
    appended = link_records(first + clips[2:], META)
    assert [r.to_json() for r in appended] == [r.to_json() for r in full]
    # votes of the first run are reused, not recomputed: erase the perception they came from
    stripped = [r.model_copy(deep=True) for r in first]
    for r in stripped:
        r.faces.tracks = []
    replayed = link_records(stripped + clips[2:], META)
    assert replayed[-1].characters == full[-1].characters
    assert link_records(stripped + clips[2:], META, reuse=False)[-1].characters != full[-1].characters
    # changing p only replays the fold; votes recorded with other window settings are recomputed
    shorter = LinkConfig(method="meta", window=2.0)
    assert link_records(first + clips[2:], shorter)[-1].link.votes != full[-1].link.votes


def test_fallback_memories_do_not_vote():
    mem = llm_memory(("<face_1>", "<voice_1>"))
    mem["fallback"] = True
    r = clip(0, {"<face_1>": [(0.0, 1.0)]}, [], memory=mem)
    assert clip_votes(r, META) == []


def test_link_cli(m3, tmp_path, cache_dir):
    src = tmp_path / "in.jsonl"
    clips = [monologues(0, "<face_1>", "<voice_1>"), monologues(1, "<face_2>", "<voice_2>")]
    src.write_bytes(b"".join(orjson.dumps(r.to_json()) + b"\n" for r in clips))
    proc = m3("link", "--method", "meta", "--p", "0.5", src)
    assert proc.returncode == 0, proc.stderr.decode()
    out = [parse_record(json.loads(line)) for line in proc.stdout.splitlines()]
    assert out[-1].characters == {
        "<face_1>": "<character_1>",
        "<voice_1>": "<character_1>",
        "<face_2>": "<character_2>",
        "<voice_2>": "<character_2>",
    }
    bad = m3("link", "--p", "0", src)
    assert bad.returncode == 1 and b"--p must be in (0, 1]" in bad.stderr
