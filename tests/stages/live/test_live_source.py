"""The live recorder's errors are one line the user can act on (real files, no network)."""

from __future__ import annotations

import threading

from conftest import DATA


def test_a_source_of_sound_alone_is_spooled_with_its_sound_in_a_codec_mpeg_ts_carries(tmp_path):
    from m3cli.stages.core import media_probe
    from m3cli.stages.live.source import Recorder

    spool = tmp_path / "spool.ts"
    recorder = Recorder(str(DATA / "jfk.wav"), spool, threading.Event(), connect_timeout=5.0)
    recorder.run()  # in this thread: a file source is copied once
    assert recorder.error is None and recorder.finished.is_set()
    probe = media_probe.probe(spool)  # the WAV's PCM, which MPEG-TS cannot carry, encoded to AAC
    assert not probe.has_video and probe.has_audio
    assert abs(probe.duration - 11.0) < 0.2, probe.duration  # jfk.wav is 11.0 s


def test_a_source_without_sound_or_pictures_is_reported_as_such(tmp_path):
    from m3cli.stages.live.source import Recorder

    subtitles = tmp_path / "talk.srt"
    subtitles.write_text("1\n00:00:00,000 --> 00:00:02,000\nHello\n")
    recorder = Recorder(str(subtitles), tmp_path / "spool.ts", threading.Event(), connect_timeout=2.0)
    recorder.run()
    assert recorder.error is not None and "neither a video nor an audio stream" in recorder.error, (
        recorder.error
    )


def test_a_wav_header_finished_by_its_writer_is_the_same_recording(tmp_path):
    from m3cli.stages.live.source import head_digest, settled_head

    head = (DATA / "jfk.wav").read_bytes()[:4096]
    data_at = head.index(b"data")
    growing = bytearray(head)  # as a recorder leaves it while it writes: sizes not filled in yet
    growing[4:8] = growing[data_at + 4 : data_at + 8] = b"\xff\xff\xff\xff"
    assert head_digest(bytes(growing)) == head_digest(head) and settled_head(bytes(growing)) != bytes(growing)
    other = bytearray(head)
    other[24:28] = (8000).to_bytes(4, "little")  # another sample rate: another recording
    assert head_digest(bytes(other)) != head_digest(head)
    ts = bytes(range(256)) * 4  # not a WAV: compared as it is
    assert settled_head(ts) == ts
