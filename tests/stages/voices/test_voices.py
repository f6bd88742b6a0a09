"""`m3 voices` on the fixture (two LibriSpeech readers taking turns) and the voice-bank fold itself."""

from __future__ import annotations

import json
import sys
import types

import numpy as np
import orjson
import pytest

from conftest import DATA, FIXTURE, run_m3
from m3cli.schemas.records import Utterance
from m3cli.stages.core.errors import M3Error
from m3cli.stages.voices import VoiceBank, VoicesConfig, alike_voices, assign_clip


@pytest.fixture(scope="session")
def voiced(tmp_path_factory):
    cache = str(tmp_path_factory.mktemp("m3cache"))
    env = {"M3_CACHE": cache}
    seg = run_m3("segment", FIXTURE, env=env, check=True)
    dia = run_m3("diarize", input=seg.stdout, env=env, check=True)
    out = run_m3("voices", input=dia.stdout, env=env, check=True)
    return env, dia.stdout, out.stdout


def _records(blob: bytes) -> list[dict]:
    return [orjson.loads(line) for line in blob.splitlines()]


def _truth_speaker(u: dict, turns: list[dict]) -> str | None:
    overlap: dict[str, float] = {}
    for t in turns:
        ov = min(u["end"], t["end"]) - max(u["start"], t["start"])
        if ov > 0:
            overlap[t["voice"]] = overlap.get(t["voice"], 0.0) + ov
    return max(overlap, key=overlap.get) if overlap else None


@pytest.mark.slow
def test_fixture_gets_exactly_two_voices_matching_the_truth(voiced):
    _, _, out = voiced
    recs = _records(out)
    truth = json.loads((DATA / "fixture.truth.json").read_text())["turns"]
    by_truth: dict[str, set[str]] = {}
    for rec in recs:
        v = rec["voices"]
        assert v["backend"] == "campplus" and v["min_seconds"] == 1.0
        assert v["assigned"] + v["unassigned"] == len(rec["utterances"])
        for u in rec["utterances"]:
            assert u["speaker"] is not None, u
            by_truth.setdefault(_truth_speaker(u, truth), set()).add(u["speaker"])
        for t in rec["turns"]:  # turns carry the same voices as the utterances of their speaker
            assert t["speaker"] is not None and not t["overlap"], t
            assert {u["speaker"] for u in rec["utterances"] if u["speaker_local"] == t["speaker_local"]} <= {
                t["speaker"]
            }
    assert set(by_truth) == {"1688", "2033"}
    assert all(len(ids) == 1 for ids in by_truth.values()), by_truth
    assert by_truth["1688"] != by_truth["2033"]
    assert by_truth["1688"] == {"<voice_1>"}  # numbered by first appearance: 1688 speaks first
    ids = {u["speaker"] for r in recs for u in r["utterances"]}
    assert ids == {"<voice_1>", "<voice_2>"}


@pytest.mark.slow
def test_voice_embeddings_npz_holds_one_unit_vector_per_voice(voiced):
    _, _, out = voiced
    for rec in _records(out):
        with np.load(rec["voices"]["embeddings"]) as npz:
            assert sorted(npz.files) == sorted(i.strip("<>") for i in rec["voices"]["ids"])
            for name in npz.files:
                assert npz[name].shape == (192,)
                assert np.linalg.norm(npz[name]) == pytest.approx(1.0, abs=1e-5)
    # the two voices' means differ clearly; the same voice across clips agrees
    recs = _records(out)
    a0, a1 = (np.load(r["voices"]["embeddings"]) for r in recs)
    assert float(a0["voice_1"] @ a1["voice_1"]) > 0.8
    assert float(a0["voice_1"] @ a0["voice_2"]) < 0.6


@pytest.mark.slow
def test_rerun_is_byte_identical_and_threshold_change_only_replays(voiced, monkeypatch):
    env, dia, out = voiced
    assert run_m3("voices", input=dia, env=env, check=True).stdout == out
    # with the embedding model made unloadable, a new threshold must still work (cache replay only)
    from m3cli.stages import voices as stage
    from m3cli.stages.core.cache import Cache
    from m3cli.stages.core.common import RunContext
    from m3cli.stream import parse_record

    def unloadable(*args, **kwargs):
        raise AssertionError("the speaker model was loaded although every embedding is cached")

    monkeypatch.setattr(stage, "make_speaker_model", unloadable)
    records = [parse_record(orjson.loads(line)) for line in dia.splitlines()]
    ctx = RunContext(cache=Cache(env["M3_CACHE"]))
    again = stage.voices_records(records, VoicesConfig(), ctx)
    assert b"".join(orjson.dumps(r.to_json()) + b"\n" for r in again) == out
    strict = stage.voices_records(records, VoicesConfig(threshold=0.99), ctx)
    assert {r.voices.threshold for r in strict} == {0.99}
    assert len({u.speaker for r in strict for u in r.utterances} - {None}) > 2  # 0.99 splits voices


@pytest.mark.slow
def test_voices_needs_diarized_records(tmp_path, cache_dir):
    seg = run_m3("segment", FIXTURE, check=True)
    proc = run_m3("voices", input=seg.stdout)
    assert proc.returncode == 1 and "run `m3 diarize`" in proc.stderr.decode()
    assert b"Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--backend", "ecapa"], "unknown speaker-embedding backend 'ecapa'"),
        (["--threshold", "1.5"], "--threshold"),
        (["--backend", "pyannote"], "--speaker-model DIR"),
    ],
)
@pytest.mark.slow
def test_bad_voice_flags(flags, message, cache_dir, tmp_path):
    rec = orjson.loads(run_m3("segment", FIXTURE, check=True).stdout.splitlines()[0])
    rec["utterances"] = [{"start": 1.0, "end": 4.0, "text": "hi", "speaker_local": "S0"}]
    proc = run_m3("voices", *flags, input=orjson.dumps(rec) + b"\n")
    err = proc.stderr.decode()
    assert proc.returncode == 1 and message in err and "Traceback" not in err, err


def _utt(start: float, end: float, local: str | None) -> Utterance:
    return Utterance(start=start, end=end, text="x", speaker_local=local)


def _unit(*xs: float) -> np.ndarray:
    v = np.asarray(xs, np.float32)
    return v / np.linalg.norm(v)


def test_bank_groups_by_local_speaker_and_inherits_for_short_utterances():
    bank = VoiceBank(threshold=0.8, max_snapshots=3)
    a, b = _unit(1, 0, 0), _unit(0, 1, 0)
    utts = [_utt(0, 3, "S0"), _utt(3, 4, "S0"), _utt(4, 7, "S1"), _utt(7, 7.5, "S2"), _utt(8, 11, "S0")]
    long_idx = [0, 2, 4]
    res = assign_clip(utts, long_idx, np.stack([a, b, _unit(1, 0.1, 0)]), bank)
    assert res.ids == ["<voice_1>", "<voice_1>", "<voice_2>", None, "<voice_1>"]
    assert res.scores[1] is None and res.scores[3] is None and res.scores[0] > 0.99
    assert sorted(res.means) == ["<voice_1>", "<voice_2>"]
    # next clip: the same two voices come back under new local labels, in the other order
    res2 = assign_clip([_utt(20, 23, "S0"), _utt(24, 27, "S1")], [0, 1], np.stack([b, a]), bank)
    assert res2.ids == ["<voice_2>", "<voice_1>"]
    assert len(bank.snapshots["<voice_1>"]) == 3  # bounded: oldest dropped


def test_bank_fallback_moves_an_utterance_the_diarizer_merged_wrongly():
    bank = VoiceBank(threshold=0.8, max_snapshots=20)
    a, b = _unit(1, 0, 0), _unit(0, 1, 0)
    assign_clip([_utt(0, 3, "S0"), _utt(3, 6, "S1")], [0, 1], np.stack([a, b]), bank)
    # the diarizer put three a-like utterances and one b-like utterance under one label
    utts = [_utt(10, 13, "S0"), _utt(13, 16, "S0"), _utt(16, 19, "S0"), _utt(19, 22, "S0")]
    res = assign_clip(utts, [0, 1, 2, 3], np.stack([a, _unit(1, 0.05, 0), a, b]), bank)
    assert res.ids == ["<voice_1>", "<voice_1>", "<voice_1>", "<voice_2>"]
    # with a threshold nothing reaches, every local speaker founds a new voice
    strict = VoiceBank(threshold=1.01, max_snapshots=20)
    assert assign_clip([_utt(0, 3, "S0")], [0], np.stack([a]), strict).ids == ["<voice_1>"]
    assert assign_clip([_utt(0, 3, "S0")], [0], np.stack([a]), strict).ids == ["<voice_2>"]


def test_alike_voices_sound_alike_and_are_never_heard_at_once():
    """Pairs at or above the bank's bar that never overlap in time; an overlap (two people talking at
    once) or a cosine under the bar leaves a pair out."""
    v1, v2, v3 = _unit(1, 0, 0), _unit(0.8, 0.6, 0), _unit(0.6, 0.8, 0)  # v1·v2 0.8, v1·v3 0.6, v2·v3 0.96
    means = {"<voice_1>": v1, "<voice_2>": v2, "<voice_3>": v3}
    heard = [Utterance(start=0, end=4, text="", speaker="<voice_1>")]
    heard += [Utterance(start=4, end=8, text="", speaker="<voice_2>")]
    heard += [Utterance(start=7.5, end=10, text="", speaker="<voice_3>")]  # over voice_2's end
    pairs = alike_voices(heard, means, 0.7)
    assert [(p.voices, p.cosine) for p in pairs] == [(["<voice_1>", "<voice_2>"], 0.8)]
    looser = alike_voices(heard, means, 0.5)
    assert [p.voices for p in looser] == [["<voice_1>", "<voice_2>"], ["<voice_1>", "<voice_3>"]]
    assert alike_voices(heard, means, 0.99) is None


def test_config_validation():
    with pytest.raises(M3Error, match="unknown speaker-embedding backend"):
        VoicesConfig(backend="x")
    assert VoicesConfig().cosine == 0.5 and VoicesConfig(threshold=0.6).cosine == 0.6
    assert VoicesConfig(backend="resemblyzer").cosine == 0.75


@pytest.mark.slow
def test_resemblyzer_backend_matches_the_resemblyzer_package(monkeypatch):
    """Our re-implementation must give resemblyzer's own embeddings (its package import needs a
    webrtcvad stub here: webrtcvad imports pkg_resources, which this environment lacks)."""
    import soundfile as sf

    from m3cli.stages.backends.speaker.resemblyzer import ResemblyzerModel

    monkeypatch.setitem(sys.modules, "webrtcvad", types.ModuleType("webrtcvad"))
    for name in [m for m in sys.modules if m.startswith("resemblyzer")]:
        monkeypatch.delitem(sys.modules, name)
    from resemblyzer import VoiceEncoder, normalize_volume

    wav = sf.read(DATA / "fixture_src" / "1688-142285-0003.flac", dtype="float32")[0]
    theirs = VoiceEncoder("cpu", verbose=False).embed_utterance(
        normalize_volume(wav, -30, increase_only=True)
    )
    ours = ResemblyzerModel().embed(wav, [(0.0, len(wav) / 16000)])[0]
    assert float(ours @ theirs) > 0.999


def _voices_of_readers(video, rttm, env) -> dict[str, set[str]]:
    """Each reference reader's voice ids through `m3 segment`'s 30-s clips: the voices of the turns it
    fills at least half of."""
    seg = run_m3("segment", video, env=env, check=True)
    dia = run_m3("diarize", input=seg.stdout, env=env, check=True)
    out = run_m3("voices", input=dia.stdout, env=env, check=True)
    return _readers_in(_records(out.stdout), rttm)


def _readers_in(records: list[dict], rttm) -> dict[str, set[str]]:
    """Each reader of ``rttm``: the voice ids of the turns in ``records`` it covers half of or more."""
    from m3cli.stages.eval.audio import read_rttm

    ref = next(iter(read_rttm(rttm).values()))
    people: dict[str, set[str]] = {spk: set() for _, _, spk in ref}
    for record in records:
        for t in record["turns"]:
            cover = {w: 0.0 for w in people}
            for s, e, who in ref:
                cover[who] += max(0.0, min(e, t["end"]) - max(s, t["start"]))
            who = max(cover, key=cover.__getitem__)
            if t.get("speaker") and cover[who] >= 0.5 * (t["end"] - t["start"]):
                people[who].add(t["speaker"])
    return people


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, order",
    [
        ("speakers6", ["1688", "1998", "ls_man", "2033", "367", "533"]),
        ("speakers8", ["1688", "ls_woman", "1998", "2033", "ls_man", "367", "ls_young_man", "533"]),
    ],
)
def test_every_reader_keeps_one_voice_of_their_own_through_clips(name, order, tmp_path):
    """speakers6/8 run through two clips; in the second (5 and 17 s) each person speaks once for 2.5 s,
    which the eigengap read as one or two people (speakers8: 5 of 8 readers with one voice, 3 voice ids
    shared). Each clip's clusters are now split within and joined back by pooled speech, and the voice
    bank joins the clips: one voice per reader, numbered in the order they first speak."""
    people = _voices_of_readers(DATA / f"{name}.mp4", DATA / f"{name}.rttm", {"M3_CACHE": str(tmp_path)})
    assert {who: sorted(ids) for who, ids in people.items()} == {
        who: [f"<voice_{k}>"] for k, who in enumerate(order, start=1)
    }


def test_recluster_joins_across_clips_never_within_one_and_numbers_by_first_appearance():
    """Average linkage over the whole video: a voice the online fold split across clips is joined, two
    local speakers of one clip stay apart however alike, and ids follow first appearance."""
    from m3cli.stages.voices import recluster_video

    a, a2, b, c = _unit(1, 0, 0), _unit(0.9, 0.3, 0), _unit(0, 1, 0), _unit(0.8, 0, 0.6)
    clips = ["c0", "c0", "c1", "c1", "c2"]
    vecs = np.stack([b, a, a2, c, b])
    # c0: b then a (never joined, whatever the threshold); c1: a2 joins a; c (0.8 to a) joins them too at
    # 0.5 but must stay apart from a2 (same clip); c2: b again joins the first b
    assert recluster_video(clips, vecs, 0.5) == [0, 1, 1, 2, 0]
    assert recluster_video(clips, vecs, 0.99) == [0, 1, 2, 3, 0]
    assert recluster_video(["c0", "c0"], np.stack([a, a]), 0.0) == [0, 1]
    assert recluster_video([], np.zeros((0, 3)), 0.5) == []


def test_recluster_has_no_place_where_clips_come_one_call_at_a_time():
    from m3cli.schemas.records import ClipRecord
    from m3cli.stages.voices import voices_records

    record = ClipRecord.model_validate(
        {
            "schema": "m3.clip/1",
            "video": {"id": "0123456789abcdef", "path": str(FIXTURE), "duration": 1.0},
            "clip": {"index": 0, "start": 0.0, "end": 1.0},
            "utterances": [],
        }
    )
    with pytest.raises(M3Error, match="m3 watch"):
        voices_records([record], VoicesConfig(recluster=True), banks={})


@pytest.mark.slow
def test_recluster_keeps_each_reader_one_voice_and_run_equals_the_pipe(tmp_path):
    """speakers8 through 30-s clips with the whole-video pass: each of the eight readers keeps one voice
    of their own, numbered in the order they first speak, and `m3 run --set voices.recluster=true` writes
    the same voices as `m3 segment | m3 diarize | m3 voices --recluster`."""
    from support.strict_records import undeclared_fields

    env = {"M3_CACHE": str(tmp_path)}
    video = DATA / "speakers8.mp4"
    seg = run_m3("segment", video, env=env, check=True)
    dia = run_m3("diarize", input=seg.stdout, env=env, check=True)
    piped = _records(run_m3("voices", "--recluster", input=dia.stdout, env=env, check=True).stdout)
    run = ("run", video, "--until", "voices", "--set", "voices.recluster=true")
    ran = _records(run_m3(*run, env=env, check=True).stdout)
    assert all(r["voices"].get("recluster") is True for r in piped)
    assert [undeclared_fields(r) for r in piped] == [[] for _ in piped]
    people = _readers_in(piped, DATA / "speakers8.rttm")
    order = ["1688", "ls_woman", "1998", "2033", "ls_man", "367", "ls_young_man", "533"]
    assert {who: sorted(ids) for who, ids in people.items()} == {
        who: [f"<voice_{k}>"] for k, who in enumerate(order, start=1)
    }
    assert [r["voices"] for r in ran] == [r["voices"] for r in piped]
    assert [r["utterances"] for r in ran] == [r["utterances"] for r in piped]
    assert [r["turns"] for r in ran] == [r["turns"] for r in piped]
