"""The live recorder's errors are one line the user can act on (real files, no network)."""

from __future__ import annotations

import threading

from conftest import DATA


def test_a_source_without_video_is_reported_as_such(tmp_path):
    from m3cli.stages.live.source import Recorder

    recorder = Recorder(str(DATA / "jfk.wav"), tmp_path / "spool", threading.Event(), connect_timeout=5.0)
    recorder.run()  # in this thread: a file source is copied once
    assert recorder.error is not None and "no video stream" in recorder.error, recorder.error
    assert recorder.finished.is_set()
