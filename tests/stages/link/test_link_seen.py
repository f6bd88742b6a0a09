"""`m3 link --method seen`: evidence in seconds from who is seen speaking, cut at shot changes."""

from __future__ import annotations

from memory_helpers import clip

from m3cli.stages.link.stage import LinkConfig, clip_votes, cut_activity, link_records, mouth_motion

SEEN = LinkConfig()
STEP = 0.2


def talking(start: float, end: float, moving: bool) -> list[list[float]]:
    """Mouth readings every 0.2 s: alternating open/closed lips when ``moving``, else a still mouth."""
    n = round((end - start) / STEP)
    return [[round(start + i * STEP, 3), (0.25 if i % 2 else 0.05) if moving else 0.05] for i in range(n)]


def scene(faces: dict[str, list[tuple[float, float, bool]]], says, shots=(), **extra):
    """Clip 0 (0-30 s) with faces seen in (start, end, lips moving) stretches and utterances ``says``."""
    record = clip(0, {f: [(a, b) for a, b, _ in parts] for f, parts in faces.items()}, says, **extra)
    record.faces.fps = 5.0
    record.faces.shots = list(shots)
    for track in record.faces.tracks:
        track.mouth = [m for a, b, moving in faces[track.face_id] for m in talking(a, b, moving)]
    return record


def weights(votes):
    out: dict[tuple[str, str], float] = {}
    for v in votes:
        out[(v.face, v.voice)] = round(out.get((v.face, v.voice), 0.0) + v.weight, 3)
    return out


def test_mouth_motion_is_the_spread_of_the_opening_within_a_shot():
    samples = [(0.0, 0.05), (0.2, 0.25), (0.4, 0.05), (0.6, 0.05), (0.8, 0.05)]
    assert mouth_motion(samples, [0.0, 10.0], 0.2)[:2] == [0.2, 0.2]
    assert mouth_motion(samples, [0.0, 10.0], 0.2)[-1] == 0.0
    # a cut between two samples: the jump across it is not lip motion
    assert mouth_motion([(0.0, 0.05), (0.2, 0.25)], [0.0, 0.1, 10.0], 0.4) == [0.0, 0.0]


def test_the_face_moving_its_lips_gets_the_voice_seconds_when_two_faces_are_on_screen():
    # both on screen all the time (meta-clips can never vote here); A talks 0-5 s, B 5-10 s
    r = scene(
        {
            "<face_1>": [(0.0, 5.0, True), (5.0, 10.0, False)],
            "<face_2>": [(0.0, 5.0, False), (5.0, 10.0, True)],
        },
        [("<voice_1>", 0.0, 5.0, "a"), ("<voice_2>", 5.0, 10.0, "b")],
    )
    w = weights(clip_votes(r, SEEN))
    assert w[("<face_1>", "<voice_1>")] >= 4.5 and w[("<face_2>", "<voice_2>")] >= 4.5
    assert w.get(("<face_1>", "<voice_2>"), 0.0) <= 0.4 and w.get(("<face_2>", "<voice_1>"), 0.0) <= 0.4
    assert clip_votes(r, LinkConfig(method="meta")) == []
    chars = link_records([r], SEEN)[-1].characters
    assert chars["<face_1>"] == chars["<voice_1>"] != chars["<face_2>"] == chars["<voice_2>"]


def test_a_person_seen_speaking_alone_for_4_s_is_linked_but_not_by_meta_clips():
    r = scene({"<face_1>": [(0.0, 4.0, True)]}, [("<voice_1>", 0.0, 4.0, "four seconds")])
    assert link_records([r], SEEN)[-1].plain("link")["edges"] == [
        {"face": "<face_1>", "voice": "<voice_1>", "weight": 4.0}
    ]
    meta = link_records([r], LinkConfig(method="meta"))[-1]  # one window = weight 1 = noise
    assert meta.characters["<face_1>"] != meta.characters["<voice_1>"]


def test_still_faces_fall_back_to_one_face_one_voice_seconds():
    # a photo on screen (lips never move) while one voice reads: the lone face gets the time
    r = scene({"<face_1>": [(0.0, 3.0, False)]}, [("<voice_1>", 0.5, 3.0, "x")])
    assert weights(clip_votes(r, SEEN)) == {("<face_1>", "<voice_1>"): 2.5}
    # two still faces: nobody can be told apart, no evidence
    still = {"<face_1>": [(0.0, 3.0, False)], "<face_2>": [(0.0, 3.0, False)]}
    r2 = scene(still, [("<voice_1>", 0.5, 3.0, "x")])
    assert clip_votes(r2, SEEN) == []


def test_an_utterance_running_past_a_shot_change_does_not_reach_the_next_shot():
    # voice_1's ASR segment ends 0.8 s after the cut at 5 s, where face_2 starts talking
    says = [("<voice_1>", 0.5, 5.8, "a"), ("<voice_2>", 5.8, 10.0, "b")]
    r = scene({"<face_1>": [(0.0, 5.0, True)], "<face_2>": [(5.0, 10.0, True)]}, says, shots=[5.0])
    assert cut_activity(r, SEEN.min_piece) == [("<voice_1>", 0.5, 5.0), ("<voice_2>", 5.8, 10.0)]
    w = weights(clip_votes(r, SEEN))
    assert ("<face_2>", "<voice_1>") not in w
    assert {(v.face, v.start, v.end) for v in clip_votes(r, SEEN)} == {
        ("<face_1>", 0.0, 5.0),
        ("<face_2>", 5.0, 30.0),
    }
    # without the recorded cut the spill counts for face_2
    r.faces.shots = []
    assert weights(clip_votes(r, SEEN))[("<face_2>", "<voice_1>")] > 0.5


def test_speaker_turns_are_preferred_to_utterances_and_kept_whole_at_cuts():
    turns = [{"start": 0.0, "end": 5.6, "speaker_local": "S0", "speaker": "<voice_7>", "overlap": False}]
    r = scene(
        {"<face_1>": [(0.0, 5.0, True)], "<face_2>": [(5.0, 10.0, True)]},
        [("<voice_1>", 0.0, 10.0, "one utterance across speakers")],
        shots=[5.0],
        turns=turns,
    )
    assert cut_activity(r, SEEN.min_piece) == [("<voice_7>", 0.0, 5.0), ("<voice_7>", 5.0, 5.6)]
    assert {v.voice for v in clip_votes(r, SEEN)} == {"<voice_7>"}


def test_llm_equivalences_still_vote_and_votes_replay_from_records():
    memory = {
        "source": "llm",
        "model": "m",
        "episodic": [{"text": "x"}],
        "semantic": [],
        "equivalences": [["<face_2>", "<voice_2>"]],
    }
    r0 = scene({"<face_1>": [(0.0, 3.0, True)]}, [("<voice_1>", 0.0, 3.0, "a")])
    r1 = clip(1, {}, [], memory=memory)
    out = link_records([r0, r1], LinkConfig(min_weight=1.0))
    assert out[-1].characters["<face_2>"] == out[-1].characters["<voice_2>"]
    assert {v["source"] for v in out[0].plain("link")["votes"]} == {"seen"}
    stripped = [r.model_copy(deep=True) for r in out]
    for r in stripped:
        r.faces.tracks = []
    assert link_records(stripped, LinkConfig(min_weight=1.0))[-1].characters == out[-1].characters
    assert link_records(stripped, LinkConfig(method="meta"))[-1].characters != out[-1].characters
