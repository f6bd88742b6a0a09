"""A voice heard in English in one clip is not asked its language again in the recording's later clips
(stages/diarize/carried.py); another voice, or another language, still is."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from conftest import DATA
from m3cli.stages.configs.segment import SegmentConfig
from m3cli.stages.core.checkpoint import Arrays
from m3cli.stages.diarize.carried import CARRY_COSINE, MAX_VOICES, SpokenVoices
from m3cli.stages.diarize.language_id import Heard
from m3cli.stages.diarize.stage import DiarizeConfig, Pipeline, clip_result
from m3cli.stages.segment import segment_video


def _unit(*xs: float) -> np.ndarray:
    v = np.zeros(192, np.float32)
    v[: len(xs)] = xs
    return v / np.linalg.norm(v)


ENGLISH = Heard("en", 0.97, 6.0, p_english=0.97)


def test_only_an_english_answer_asked_in_this_recording_is_carried_and_only_to_a_like_voice():
    known = SpokenVoices()
    known.learn(_unit(1, 0), Heard("pt", 0.99, 6.0, p_english=0.001))  # another language: never carried
    known.learn(_unit(0, 0, 1), Heard("en", 0.42, 6.0, p_english=0.42))  # not sure of English
    known.learn(_unit(0, 0, 0, 1), Heard("en", 0.95, 6.0, 0.95, carried=True))  # itself carried
    assert known.digest() == "" and known.recall(_unit(1, 0)) is None
    known.learn(_unit(1, 0), ENGLISH)
    close = _unit(1, np.tan(np.arccos(CARRY_COSINE)) * 0.99)  # cosine just over the bar
    far = _unit(1, np.tan(np.arccos(CARRY_COSINE)) * 1.01)  # just under it
    assert known.recall(close) == Heard("en", 0.97, 6.0, 0.97, carried=True)
    assert known.recall(far) is None


def test_the_memory_is_bounded_and_its_digest_and_checkpoint_follow_what_it_holds():
    known = SpokenVoices()
    digests = set()
    for i in range(MAX_VOICES + 5):
        known.learn(_unit(*([0] * i), 1), ENGLISH)
        digests.add(known.digest())
    assert len(known.vectors) == MAX_VOICES and len(digests) == MAX_VOICES  # full: nothing more learnt
    arrays = Arrays()
    doc = known.dump(arrays)
    back = SpokenVoices.load(doc, arrays)
    assert back.digest() == known.digest() and back.answers == known.answers


def _recording(tmp_path, *parts):
    """The sound of ``parts`` one after the other, as one 16-kHz WAV cut into m3's clips."""
    out = tmp_path / "recording.wav"
    inputs = [arg for part in parts for arg in ("-i", str(part))]
    chain = "".join(f"[{i}:a]aresample=16000,pan=mono|c0=c0[a{i}];" for i in range(len(parts)))
    chain += "".join(f"[a{i}]" for i in range(len(parts))) + f"concat=n={len(parts)}:v=0:a=1[all]"
    command = ["ffmpeg", "-nostdin", "-v", "error", "-y", *inputs, "-filter_complex", chain, "-map", "[all]"]
    subprocess.run([*command, str(out)], check=True)
    return segment_video(out, SegmentConfig(), None)


def _said(result):
    return [(u["speaker_local"], u["text"], u["language"]) for u in result.utterances]


@pytest.mark.slow
def test_the_speakers_of_a_meeting_are_asked_once_and_say_the_same(tmp_path):
    """Two AMI excerpts of one meeting (the same two men, CC BY 4.0) as one recording of two 30-s clips:
    the second clip's speakers take the first clip's English answers without being asked, and every
    word, speaker and language is what asking them again gives."""
    records = _recording(tmp_path, DATA / "dev00.wav", DATA / "dev01.wav")
    assert len(records) == 2
    pipe = Pipeline(DiarizeConfig())
    known = SpokenVoices()
    first = clip_result(records[0], pipe, None, known)
    for voice, heard in first.heard_voices():
        known.learn(voice, heard)
    assert known.answers and {h.language for h in known.answers} == {"en"}
    later = clip_result(records[1], pipe, None, known)
    asked = clip_result(records[1], pipe, None, SpokenVoices())
    assert [carried for *_, carried, _ in later.voices] == [True] * len(asked.voices)
    assert not any(carried for *_, carried, _ in asked.voices)
    assert _said(later) == _said(asked) and later.utterances


@pytest.mark.slow
def test_a_portuguese_speaker_after_english_ones_is_asked_and_read_in_portuguese(tmp_path):
    """An AMI excerpt then FLEURS Portuguese (tests/data/languages/pt_2.wav, CC BY 4.0): the Portuguese
    voice is like none of the English ones, so it is asked, heard in Portuguese and read in it."""
    records = _recording(tmp_path, DATA / "dev00.wav", DATA / "languages" / "pt_2.wav")
    assert len(records) == 2
    pipe = Pipeline(DiarizeConfig())
    known = SpokenVoices()
    for voice, heard in clip_result(records[0], pipe, None, known).heard_voices():
        known.learn(voice, heard)
    assert known.answers
    result = clip_result(records[1], pipe, None, known)
    assert result.voices and not any(carried for *_, carried, _ in result.voices)
    assert result.utterances and {u["language"] for u in result.utterances} == {"pt"}
