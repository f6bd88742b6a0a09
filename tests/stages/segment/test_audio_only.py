"""Recordings without pictures (a call, a meeting, a podcast) are first-class input: `m3 segment` cuts
them into clips by time, faces and sight pass their clips through with ``pictures: false``, and the
memory says the recording has no pictures, so answers speak of voices only.

Real speech only: tests/data/jfk.wav (public domain) and tests/data/languages/es_2.wav (FLEURS,
CC BY 4.0), written to the formats a user has (FLAC, Ogg Vorbis, MP3, AAC in M4A, Opus).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from conftest import DATA, run_m3

JFK = DATA / "jfk.wav"
SPANISH = DATA / "languages" / "es_2.wav"
SPANISH_TEXT = (DATA / "languages" / "es_2.txt").read_text().split()


def records(proc) -> list[dict]:
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def talk(path: Path) -> Path:
    """jfk.wav (English, 11.0 s), 1 s of silence, es_2.wav (Spanish, 10.26 s): 22.26 s, two voices."""
    import soundfile as sf

    english, rate = sf.read(JFK, dtype="float32")
    spanish, rate_es = sf.read(SPANISH, dtype="float32")
    assert rate == rate_es == 16000
    sf.write(path, np.concatenate([english, np.zeros(rate, np.float32), spanish]), rate)
    return path


def encode(source: Path, path: Path, codec: str) -> Path:
    """``source`` re-encoded with PyAV (AAC in .m4a, Opus in .opus): containers libsndfile cannot write."""
    import av
    import soundfile as sf

    audio, rate = sf.read(source, dtype="float32")
    out_rate = 48000 if codec == "libopus" else rate
    with av.open(str(path), "w") as container:
        stream = container.add_stream(codec, rate=out_rate)
        stream.layout = "mono"
        frame = av.AudioFrame.from_ndarray(audio[None, :], format="flt", layout="mono")
        frame.sample_rate = rate
        resampler = av.AudioResampler(format=stream.codec_context.format.name, layout="mono", rate=out_rate)
        for piece in resampler.resample(frame) + resampler.resample(None):
            container.mux(stream.encode(piece))
        container.mux(stream.encode(None))
    return path


@pytest.mark.parametrize("suffix", [".wav", ".flac", ".ogg", ".mp3", ".m4a", ".opus"])
@pytest.mark.slow
def test_an_audio_file_is_cut_into_clips_by_time(cache_dir, tmp_path, suffix):
    wav = talk(tmp_path / "talk.wav")
    if suffix in (".m4a", ".opus"):
        path = encode(wav, tmp_path / f"talk{suffix}", "aac" if suffix == ".m4a" else "libopus")
    elif suffix != ".wav":
        import soundfile as sf

        audio, rate = sf.read(wav, dtype="float32")
        path = tmp_path / f"talk{suffix}"
        sf.write(path, audio, rate)
    else:
        path = wav
    clips = records(run_m3("segment", path, "--clip-seconds", "10", check=True))
    assert [c["clip"]["index"] for c in clips] == [0, 1, 2]
    video = clips[0]["video"]
    assert video["has_video"] is False and video["has_audio"] is True and "fps" not in video
    assert video["duration"] == pytest.approx(22.26, abs=0.08)  # codecs pad their last frame
    starts = [c["clip"]["start"] for c in clips]
    assert starts[0] == pytest.approx(0.0, abs=0.03) and starts[1:] == [10.0, 20.0]
    assert [c["clip"]["end"] for c in clips[:2]] == [10.0, 20.0]
    assert clips[-1]["clip"]["end"] == video["duration"]
    for c in clips:
        assert c["clip"]["frames"] == 0 and c["clip"]["has_video"] is False


def test_the_last_packets_rounding_is_no_clip_of_its_own(cache_dir):
    """dev00.wav lasts 30.000063 s by its packets: one 30-s clip, not a second one of 63 microseconds."""
    (clip,) = records(run_m3("segment", DATA / "dev00.wav", check=True))
    assert clip["clip"]["start"] == 0.0 and clip["clip"]["end"] == pytest.approx(30.0, abs=1e-3)


def _wav_with_codec(path: Path, tag: int) -> Path:
    """A WAV whose header names codec ``tag`` and whose data is 3 s of real speech as 16-bit PCM."""
    import soundfile as sf

    speech, _ = sf.read(JFK, dtype="int16", frames=48000)
    data = speech.astype("<i2").tobytes()
    fmt = struct.pack("<HHIIHH", tag, 1, 16000, 32000, 2, 16)
    body = (
        b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(data)) + data
    )
    path.write_bytes(b"RIFF" + struct.pack("<I", len(body)) + body)
    return path


def _broken(tmp_path: Path, case: str) -> tuple[Path, str]:
    if case == "unknown codec":  # format tag 0x7777: no FFmpeg decoder
        return _wav_with_codec(tmp_path / "call.wav", 0x7777), "cannot decode"
    if case == "mp3 that is not":  # the header says MP3, the data is PCM: nothing decodes
        return _wav_with_codec(tmp_path / "call.wav", 0x0055), "no decodable sound"
    if case == "truncated flac":
        import soundfile as sf

        audio, rate = sf.read(JFK, dtype="float32")
        whole = tmp_path / "whole.flac"
        sf.write(whole, audio, rate)
        cut = tmp_path / "call.flac"
        cut.write_bytes(whole.read_bytes()[:3000])
        return cut, "call.flac"
    subtitles = tmp_path / "call.srt"  # FFmpeg opens it: a subtitle stream, no pictures, no sound
    subtitles.write_text("1\n00:00:00,000 --> 00:00:01,500\nhello\n")
    return subtitles, "neither a video nor an audio stream"


@pytest.mark.parametrize("case", ["unknown codec", "mp3 that is not", "truncated flac", "subtitles"])
@pytest.mark.slow
def test_a_broken_audio_file_is_one_error_line(cache_dir, tmp_path, case):
    path, reason = _broken(tmp_path, case)
    proc = run_m3("segment", path)
    assert proc.returncode == 1 and proc.stdout == b""
    err = proc.stderr.decode().strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("m3: error: ") and path.name in err[0] and reason in err[0], err


@pytest.mark.slow
def test_faces_pass_a_clip_without_pictures_through_and_the_memory_says_so(cache_dir, tmp_path):
    """No frame is decoded, no face invented: ``faces.pictures`` is false, and the offline memory's
    one absence line says the recording has no pictures (not "no face is seen", which would claim
    someone looked)."""
    clips = run_m3("segment", talk(tmp_path / "talk.flac"), "--clip-seconds", "10", check=True).stdout
    faced = run_m3("faces", input=clips, check=True).stdout
    memory = records(run_m3("memorize", "--no-llm", input=faced, check=True))
    assert len(memory) == 3
    for r in memory:
        assert r["faces"]["pictures"] is False and r["faces"]["tracks"] == [] and r["faces"]["frames"] == 0
        lines = [m["text"] for m in r["memory"]["episodic"]]
        s, e = r["clip"]["start"], r["clip"]["end"]
        assert lines == [
            f"the recording has no pictures (sound only): nobody can be seen, from {s:.1f} to {e:.1f} s"
        ]
        assert r["memory"]["inputs"] == []


@pytest.mark.slow
def test_an_audio_recording_makes_a_memory_of_voices(cache_dir, tmp_path):
    """`m3 run` on 22 s of FLAC (an English reader, then a Spanish one): each voice's words in its own
    language, faces and sight say "no pictures", and the offline answers speak of voices only."""
    path = talk(tmp_path / "talk.flac")
    perceived = records(run_m3("run", path, "--until", "link", "--no-llm", check=True))
    (clip,) = perceived
    assert clip["faces"]["pictures"] is False and clip["sight"]["pictures"] is False
    assert clip["sight"]["keyframes"] == []
    by_voice: dict[str, list[dict]] = {}
    for u in clip["utterances"]:
        by_voice.setdefault(u["speaker"], []).append(u)
    assert len(by_voice) == 2, clip["utterances"]
    english, spanish = sorted(by_voice.values(), key=lambda us: us[0]["start"])
    said_en = " ".join(u["text"] for u in english).lower()
    assert {u["language"] for u in english} == {"en"} and max(u["end"] for u in english) < 12.0
    assert "ask not what your country can do for you" in said_en
    assert {u["language"] for u in spanish} == {"es"} and min(u["start"] for u in spanish) > 12.0
    said_es = " ".join(u["text"] for u in spanish).lower()
    assert sum(w in said_es for w in SPANISH_TEXT) >= 0.8 * len(SPANISH_TEXT)
    lines = [m["text"] for m in clip["memory"]["episodic"]]
    assert any(t.startswith(f'{english[0]["speaker"]} says: "') for t in lines)
    assert any(t.startswith(f'{spanish[0]["speaker"]} says (in Spanish): "') for t in lines)
    assert any(t.startswith("the recording has no pictures") for t in lines)
    assert not any("no face is seen" in t for t in lines)

    memory = tmp_path / "mem.lance"
    run_m3("run", path, "-o", memory, "--no-llm", check=True)

    def ask(question: str) -> str:
        return json.loads(run_m3("ask", memory, question, check=True).stdout)["answer"]

    who = ask("Who is in the video?")
    assert who.startswith("2 people:") and "only heard" in who and "seen from" not in who
    assert ask("Who is seen?").startswith("Nobody is seen: the recording has no pictures")
    assert "Spanish" in ask("What language does the second speaker speak?")

    page = tmp_path / "report.html"
    run_m3("report", memory, "-o", page, check=True)
    html = page.read_text()
    assert "the recording has no pictures" in html and "<img" not in html
