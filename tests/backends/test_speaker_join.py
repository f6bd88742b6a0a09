"""Joining over-split local speakers by the pooled CAM++ rule (stages/backends/speaker/join.py), on real
speech: speakers3.mp4's three LibriSpeech/LatentSync voices, each cut into two clusters on purpose."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import DATA
from m3cli.stages.backends.speaker import windows_over
from m3cli.stages.backends.speaker.join import JOIN_COSINE, join_clusters, pooled_spans, split_within
from m3cli.stages.eval.audio import read_rttm


@pytest.mark.slow
def test_split_clusters_of_three_voices_join_back_to_three():
    from m3cli.stages.backends.speaker.campplus import CamppModel
    from m3cli.stages.core.audio_file import read_audio_file

    _, audio = read_audio_file(DATA / "speakers3.mp4")
    ref = read_rttm(DATA / "speakers3.rttm")["speakers3"]
    speakers = sorted({t[2] for t in ref})
    wins, truth = [], []
    for k, spk in enumerate(speakers):
        w = windows_over([(s, e) for s, e, who in ref if who == spk], 2.0, 1.0)
        wins += w
        truth += [k] * len(w)
    truth = np.asarray(truth)
    # over-split: every speaker's first and second half of windows are two clusters (6 in all)
    split = np.zeros(len(wins), dtype=np.int64)
    for k in range(len(speakers)):
        idx = np.flatnonzero(truth == k)
        split[idx[: len(idx) // 2]] = 2 * k
        split[idx[len(idx) // 2 :]] = 2 * k + 1
    model = CamppModel()
    emb = model.embed(audio, wins)
    joined = join_clusters(audio, wins, split, model, JOIN_COSINE, emb)
    assert len(np.unique(joined)) == len(speakers) == 3
    # one cluster per voice: the joined labels equal the truth up to renaming
    assert all(len(np.unique(joined[truth == k])) == 1 for k in range(3))
    assert len({int(joined[truth == k][0]) for k in range(3)}) == 3
    # a threshold above every same-voice cosine joins nothing
    assert len(np.unique(join_clusters(audio, wins, split, model, 0.99, emb))) == 6


def test_pooled_spans_take_the_most_typical_windows_up_to_the_limit():
    wins = [(0.0, 2.0), (1.0, 3.0), (10.0, 12.0), (20.0, 22.0)]
    emb = np.asarray([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.8, 0.6]])
    labels = np.zeros(4, dtype=np.int64)
    assert pooled_spans(wins, labels, 0) == [(0.0, 3.0), (10.0, 12.0), (20.0, 22.0)]
    # the mean is (0.7, 0.4): window 3 is most like it (0.80), then window 0 (0.70): 4 s, enough
    assert pooled_spans(wins, labels, 0, emb, seconds=4.0) == [(0.0, 2.0), (20.0, 22.0)]
    assert pooled_spans(wins, labels, 0, emb, seconds=5.0) == [(0.0, 3.0), (20.0, 22.0)]


def _speakers3_windows():
    from m3cli.stages.core.audio_file import read_audio_file

    _, audio = read_audio_file(DATA / "speakers3.mp4")
    ref = read_rttm(DATA / "speakers3.rttm")["speakers3"]
    wins, truth = [], []
    for k, spk in enumerate(sorted({t[2] for t in ref})):
        w = windows_over([(s, e) for s, e, who in ref if who == spk], 2.0, 1.0)
        wins += w
        truth += [k] * len(w)
    return audio, wins, np.asarray(truth)


def _linkage(emb: np.ndarray, apart: np.ndarray | None) -> np.ndarray:
    from m3cli.stages.backends.diarizer.overlap import _few_windows

    return _few_windows(emb, 0.5, None, apart)


@pytest.mark.slow
def test_split_within_finds_the_people_one_cluster_holds():
    """Three voices given as one cluster (what an eigengap over too few windows per person returns) come
    out as three, one per voice."""
    from m3cli.stages.backends.speaker.campplus import CamppModel

    audio, wins, truth = _speakers3_windows()
    model = CamppModel()
    emb = model.embed(audio, wins)
    weights = np.ones(len(wins))
    one = np.zeros(len(wins), dtype=np.int64)
    out = split_within(audio, wins, one, model, emb, weights, _linkage, None, 2.0)
    assert len(np.unique(out)) == 3
    assert all(len(np.unique(out[truth == k])) == 1 for k in range(3))


def test_split_within_never_joins_pieces_of_two_clusters():
    """One voice cut across two clusters stays in two: only pieces of one cluster are joined again,
    whatever their pooled cosine (the clustering kept the two apart with the whole clip's evidence)."""
    from m3cli.stages.backends.speaker.campplus import CamppModel

    audio, wins, truth = _speakers3_windows()
    model = CamppModel()
    emb = model.embed(audio, wins)
    weights = np.ones(len(wins))
    labels = truth.copy()
    first = np.flatnonzero(truth == 0)
    labels[first[: len(first) // 2]] = 3  # voice 0's first half is a cluster of its own
    out = split_within(audio, wins, labels, model, emb, weights, _linkage, None, 2.0)
    assert len(np.unique(out)) == 4
    assert out[first[0]] != out[first[-1]]
    # a cut above every same-voice cosine: nothing is joined back, so pieces stay split
    assert (
        len(np.unique(split_within(audio, wins, labels, model, emb, weights, _linkage, None, 2.0, 0.99))) >= 4
    )


@pytest.mark.slow
def test_split_within_keeps_sample_wavs_two_speakers_apart_and_whole():
    """pyannote's sample.wav: two speakers whose pooled voices score up to 0.66 (over the 0.60 join), so
    a join across clusters merged them. Split within, the eigengap's two clusters stay two, and the
    pieces one speaker's cluster is split into are joined back (without the rejoin: three speakers)."""
    from dataclasses import replace

    from conftest import SHARED_MEDIA
    from m3cli.stages.backends.asr import make_vad
    from m3cli.stages.backends.diarizer.overlap import OverlapConfig, OverlapDiarizer
    from m3cli.stages.core.audio_file import read_audio_file
    from m3cli.stages.eval.audio import diarization_error

    media = SHARED_MEDIA / "diarization" / "sample.wav"
    if not media.is_file():
        pytest.skip(f"{media} is not here (shared media)")
    audio = read_audio_file(media)[1]
    speech = make_vad("silero").speech(audio)
    ref = read_rttm(media.with_suffix(".rttm"))["sample"]
    diarizer = OverlapDiarizer()
    assert diarizer.config.split_within == JOIN_COSINE
    turns = diarizer.turns(audio, None, None, speech=speech)
    assert len({t.speaker for t in turns}) == 2
    assert diarization_error(ref, [(t.start, t.end, t.speaker) for t in turns]).der <= 0.05
    diarizer.config = replace(OverlapConfig(), split_within=1.01)  # split, never joined back
    assert len({t.speaker for t in diarizer.turns(audio, None, None, speech=speech)}) == 3
