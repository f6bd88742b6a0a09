"""DER and WER scoring: hand-computed cases (checked against pyannote.metrics when it was available:
identical to 1e-15 on 400 random hypotheses and on the pipeline's own outputs), RTTM/UEM parsing."""

from __future__ import annotations

import json

import pytest

from conftest import DATA
from m3cli.stages.core.errors import InputError
from m3cli.stages.eval.audio import (
    diarization_error,
    merge_regions,
    normalize_text,
    overlap_agreement,
    overlap_regions,
    read_rttm,
    read_uem,
    subtract_regions,
    untranscribed,
    word_error,
    write_rttm,
)

REF = [(0.0, 10.0, "A"), (10.0, 20.0, "B")]


def test_perfect_hypothesis_with_other_labels_scores_zero():
    d = diarization_error(REF, [(0.0, 10.0, "x"), (10.0, 20.0, "y")], collar=0.0)
    assert d.der == 0.0 and d.mapping == {"x": "A", "y": "B"}


def test_confusion_without_collar():
    # hyp x holds A's 10 s and 2 s of B; y holds 8 s of B -> x->A, y->B, 2 s confused of 20 s
    d = diarization_error(REF, [(0.0, 12.0, "x"), (12.0, 20.0, "y")], collar=0.0)
    assert d.confusion == pytest.approx(2.0) and d.missed == 0 and d.false_alarm == 0
    assert d.der == pytest.approx(0.1)


def test_collar_removes_time_around_reference_boundaries():
    # boundaries 0, 10, 20 with +-0.25 s: scored = [0.25, 9.75] + [10.25, 19.75] = 19 s;
    # confusion now only on [10.25, 12] = 1.75 s
    d = diarization_error(REF, [(0.0, 12.0, "x"), (12.0, 20.0, "y")], collar=0.25)
    assert d.total == pytest.approx(19.0)
    assert d.confusion == pytest.approx(1.75)
    assert d.der == pytest.approx(1.75 / 19.0)


def test_missed_false_alarm_and_overlap():
    ref = [(0.0, 10.0, "A"), (5.0, 10.0, "B")]  # 5 s of overlap: 15 s of reference speech
    d = diarization_error(ref, [(0.0, 10.0, "x"), (12.0, 13.0, "x")], collar=0.0)
    assert d.total == pytest.approx(15.0)
    assert d.missed == pytest.approx(5.0)  # only one hyp speaker during the overlap
    assert d.false_alarm == pytest.approx(1.0)  # [12, 13] has no reference speech (UEM = extent)
    assert d.der == pytest.approx(6.0 / 15.0)
    assert diarization_error(ref, [], collar=0.0).der == pytest.approx(1.0)


def test_overlapping_hypothesis_turns_score_the_second_speaker():
    ref = [(0.0, 10.0, "A"), (5.0, 10.0, "B")]
    hyp = [(0.0, 10.0, "x"), (6.0, 10.0, "y")]  # overlap found from 6 s, not 5 s
    d = diarization_error(ref, hyp, collar=0.0)
    assert d.missed == pytest.approx(1.0) and d.confusion == 0 and d.false_alarm == 0
    assert overlap_regions(ref) == [(5.0, 10.0)]
    assert overlap_agreement(ref, hyp) == {"reference": 5.0, "hypothesis": 4.0, "both": 4.0}
    assert overlap_agreement(ref, hyp, uem=[(0.0, 7.0)]) == {"reference": 2.0, "hypothesis": 1.0, "both": 1.0}


def test_uem_limits_scoring():
    d = diarization_error(REF, [(0.0, 12.0, "x"), (12.0, 20.0, "y")], uem=[(0.0, 10.0)], collar=0.0)
    assert d.der == 0.0 and d.total == pytest.approx(10.0)


def test_one_speaker_cannot_take_two_reference_labels():
    d = diarization_error(REF, [(0.0, 20.0, "x")], collar=0.0)
    assert d.confusion == pytest.approx(10.0) and d.der == pytest.approx(0.5)


def test_region_helpers():
    assert merge_regions([(3, 4), (0, 1), (0.5, 2)]) == [(0, 2), (3, 4)]
    assert subtract_regions([(0, 10)], [(2, 3), (9, 12)]) == [(0, 2), (3, 9)]


def test_read_rttm_and_uem_from_the_dev_set():
    turns = read_rttm(DATA / "debug.development.rttm")
    assert sorted(turns) == ["dev00", "dev01"]
    assert turns["dev00"][0] == pytest.approx((1.44, 13.312, "MEE009"))
    assert {s for _, _, s in turns["dev01"]} == {"MEE009", "MEE012"}
    assert read_uem(DATA / "debug.development.uem") == {"dev00": [(0.0, 30.0)], "dev01": [(0.0, 30.0)]}
    text = write_rttm("dev00", turns["dev00"])
    assert text.splitlines()[0].split()[:5] == ["SPEAKER", "dev00", "1", "1.440", "11.872"]


def test_bad_rttm_names_the_line(tmp_path):
    bad = tmp_path / "bad.rttm"
    bad.write_text("SPEAKER f 1 0.0 1.0 <NA> <NA> A <NA> <NA>\nSPEAKER f 1 zero 1.0 <NA> <NA> A <NA> <NA>\n")
    with pytest.raises(InputError, match="bad.rttm:2"):
        read_rttm(bad)
    with pytest.raises(InputError, match="no such file"):
        read_uem(tmp_path / "missing.uem")


def test_untranscribed_counts_turn_speech_no_utterance_covers():
    turns = [(0.0, 4.0, "a"), (5.0, 8.0, "b")]
    utts = [(0.5, 3.0, "a"), (5.0, 8.0, "b")]
    assert untranscribed(turns, utts) == pytest.approx(1.5)
    # only reference speech counts (a false-alarm turn loses nothing), and only inside the UEM
    assert untranscribed(turns, utts, reference=[(0.0, 3.5, "x")]) == pytest.approx(1.0)
    assert untranscribed(turns, utts, reference=[(0.0, 3.5, "x")], uem=[(3.2, 9.0)]) == pytest.approx(0.3)


def test_wer_normalises_case_and_punctuation():
    assert normalize_text("And so, my fellow Americans: ask NOT!") == "and so my fellow americans ask not"
    assert normalize_text("don't 'quote'") == "don't quote"
    assert word_error("Hello, World!", "hello world").wer == 0.0
    w = word_error("ask not what your country can do", "ask what your county can do for")
    assert (w.substitutions, w.deletions, w.insertions, w.reference_words) == (1, 1, 1, 7)
    assert w.wer == pytest.approx(3 / 7)
    assert word_error("some words here", "").wer == 1.0
    with pytest.raises(InputError):
        word_error("...", "x")


@pytest.mark.slow
def test_eval_commands_print_tables_and_json(cache_dir):
    from conftest import run_m3

    proc = run_m3("eval", "asr", DATA / "jfk.wav", "--ref", DATA / "jfk.ref.txt", check=True)
    table = proc.stdout.decode()
    assert table.splitlines()[0].split()[:2] == ["file", "WER"] and "jfk.wav" in table
    data = json.loads(
        run_m3("eval", "asr", DATA / "jfk.wav", "--ref", DATA / "jfk.ref.txt", "--json", check=True).stdout
    )
    assert data["wer"] == 0.0 and data["reference_words"] == 22
    assert data["untranscribed"] == 0.0  # every second of jfk's one turn is in an utterance
    # --asr-model DIR: a CTranslate2 Whisper directory (here the bundled one, named explicitly)
    from m3cli.stages.backends.asr.faster_whisper import bundled_model_dir

    jfk = (DATA / "jfk.wav", "--ref", DATA / "jfk.ref.txt")
    own = run_m3("eval", "asr", *jfk, "--asr-model", bundled_model_dir(), "--json")
    assert own.returncode == 0, own.stderr.decode()
    assert json.loads(own.stdout)["hypothesis"] == data["hypothesis"]
    bad = run_m3("eval", "asr", *jfk, "--asr-model", DATA)
    assert bad.returncode != 0 and "not a CTranslate2 Whisper model directory" in bad.stderr.decode()
    proc = run_m3(
        "eval", "diarization", DATA / "fixture.mp4", "--rttm", DATA / "fixture.rttm", "--json", check=True
    )
    res = json.loads(proc.stdout)
    fixture = res["files"][0]
    assert fixture["uri"] == "fixture" and fixture["turns"]["hyp_speakers"] == 2
    assert fixture["turns"]["der"] < 0.10 and res["overall_der"]["utterances"] < 0.15
    assert fixture["utterances"]["der"] <= fixture["turns"]["der"] + 0.05
    assert 0.0 <= fixture["untranscribed"] <= 1.0 and res["untranscribed"]["ALL"] == fixture["untranscribed"]
    bad = run_m3("eval", "diarization", DATA / "jfk.wav", "--rttm", DATA / "fixture.rttm")
    assert bad.returncode == 1 and "no SPEAKER lines for file id 'jfk'" in bad.stderr.decode()


def test_dev_manifest_lists_groups_and_skips_missing_local_media(tmp_path):
    from m3cli.stages.eval.audio import read_manifest, speakers_heard

    items, skipped = read_manifest(DATA / "diarization_dev.manifest", media_root=tmp_path / "absent")
    groups = {i.uri: i.group for i in items}
    assert groups["dev00"] == "ami-dev" and groups["speakers8"] == "libri"
    assert not any(u.startswith("trn") for u in groups) and any("trn00.wav" in s for s in skipped)
    dev00 = next(i for i in items if i.uri == "dev00")
    assert dev00.uem and speakers_heard(dev00.ref) == 2
    assert speakers_heard(next(i for i in items if i.uri == "speakers8").ref) == 8
    bad = tmp_path / "bad.manifest"
    bad.write_text("ami dev00.wav\n")
    with pytest.raises(InputError, match="group media rttm"):
        read_manifest(bad)


@pytest.mark.slow
def test_eval_diarization_prints_files_groups_and_pooled_rows(cache_dir, tmp_path):
    from conftest import run_m3

    manifest = tmp_path / "dev.manifest"
    manifest.write_text(
        f"ami {DATA / 'dev00.wav'} {DATA / 'debug.development.rttm'} {DATA / 'debug.development.uem'}\n"
        f"synthetic {DATA / 'fixture.mp4'} {DATA / 'fixture.rttm'}\n"
        "local {media}/absent.wav {media}/absent.rttm\n"
    )
    args = ("eval", "diarization", "--manifest", manifest, "--media-root", tmp_path, "--turns-only")
    table = run_m3(*args, check=True).stdout.decode()
    lines = table.splitlines()
    assert lines[0].split()[:4] == ["file", "group", "from", "DER"]
    assert any(x.startswith("[ami]") for x in lines) and any(x.startswith("[synthetic]") for x in lines)
    assert any(x.startswith("ALL") and "2 files" in x for x in lines)
    assert any(x.startswith("skipped: {media}/absent.wav") for x in lines)
    data = json.loads(run_m3(*args, "--json", check=True).stdout)
    assert [f["uri"] for f in data["files"]] == ["dev00", "fixture"]
    assert {f["uri"]: f["turns"]["hyp_speakers"] for f in data["files"]} == {"dev00": 2, "fixture": 2}
    pooled = data["groups"]["ALL"]["turns"]
    assert pooled["files"] == 2 and pooled["der"] < 0.10  # dev00 4.8 %, fixture 3.9 %
    assert data["groups"]["ami"]["turns"]["overlap_reference"] > 1.0  # dev00: 1.4 s of overlap
