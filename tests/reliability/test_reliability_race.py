"""A video replaced while a stage reads it never gets another file's results under its id.

A thread renames a fresh copy of one of two real videos over the input path every millisecond or so
(``os.replace``, the way a sync tool or a download manager swaps a finished file in) while segment and
the audio read diarize uses run on that path with a shared cache. Every record and every cache entry
must then describe the file whose content id it carries: a run may fail with one line, never mix.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import FIXTURE, HAMILTON
from m3cli.stages.core import media, media_audio, media_probe
from m3cli.stages.core.cache import Cache
from m3cli.stages.core.errors import InputError
from m3cli.stages.segment import SegmentConfig, segment_video


class Swapper(threading.Thread):
    """Rename fresh copies of ``a`` and ``b`` over ``target`` in turn until stopped."""

    def __init__(self, a: Path, b: Path, target: Path) -> None:
        super().__init__(daemon=True)
        self.sources = (a.read_bytes(), b.read_bytes())
        self.target, self.stop = target, threading.Event()
        self.swaps = 0

    def run(self) -> None:
        tmp = self.target.with_name(".swap")
        while not self.stop.is_set():
            tmp.write_bytes(self.sources[self.swaps % 2])
            os.replace(tmp, self.target)
            self.swaps += 1
            time.sleep(0.0005)


@pytest.fixture
def two_videos(tmp_path: Path) -> tuple[Path, Path, dict[str, Path]]:
    a, b = tmp_path / "a.mp4", tmp_path / "b.mp4"
    a.write_bytes(HAMILTON.read_bytes())
    b.write_bytes(FIXTURE.read_bytes())
    ids = {media.content_id(a): a, media.content_id(b): b}
    return a, b, ids


def _reset_process_memory() -> None:
    media._KNOWN_IDS.clear()
    media._DURATIONS.clear()


def test_segment_under_renames_never_caches_another_files_plan(tmp_path, two_videos):
    a, b, ids = two_videos
    genuine = {vid: media_probe.probe(p).duration for vid, p in ids.items()}
    target = tmp_path / "in.mp4"
    os.link(a, target)
    cache = Cache(tmp_path / "cache")
    swapper = Swapper(a, b, target)
    swapper.start()
    outcomes = {"ok": 0, "refused": 0}
    try:
        deadline = time.monotonic() + 30
        for i in range(400):
            if i >= 40 and (outcomes["ok"] >= 3 or time.monotonic() > deadline):
                break
            _reset_process_memory()
            try:
                records = segment_video(target, SegmentConfig(clip_seconds=5), cache)
            except InputError as exc:
                assert "\n" not in str(exc), exc
                outcomes["refused"] += 1
                continue
            outcomes["ok"] += 1
            vid = records[0].video.id
            assert vid in genuine
            assert records[0].video.duration == pytest.approx(genuine[vid], abs=1e-3)
            assert records[0].video.size_bytes == ids[vid].stat().st_size
    finally:
        swapper.stop.set()
        swapper.join()
    assert swapper.swaps > 40 and outcomes["ok"] > 0
    # what the shared cache now serves to a genuine run is each file's own plan
    for vid, path in ids.items():
        _reset_process_memory()
        records = segment_video(path, SegmentConfig(clip_seconds=5), cache)
        assert records[0].video.id == vid
        assert records[-1].clip.end == pytest.approx(genuine[vid], abs=1e-3)


def test_clip_audio_under_renames_is_the_audio_of_the_recorded_id(tmp_path, two_videos):
    """source_path + clip_audio is how diarize (and voices, memorize) read a clip's audio."""
    a, b, ids = two_videos
    target = tmp_path / "in.mp4"
    os.link(a, target)
    records = segment_video(target, SegmentConfig(clip_seconds=5))
    video = records[0].video
    want = media_audio._decode_audio(a, 0.0, 5.0, media_audio.AUDIO_RATE)
    other = media_audio._decode_audio(b, 0.0, 5.0, media_audio.AUDIO_RATE)
    assert not np.allclose(want[: len(other)], other[: len(want)])
    cache = Cache(tmp_path / "cache")
    swapper = Swapper(b, a, target)
    swapper.start()
    served = 0
    try:
        deadline = time.monotonic() + 30  # enough tries, however loaded the machine, to be served some
        for i in range(400):
            if i >= 30 and (served >= 3 or time.monotonic() > deadline):
                break
            _reset_process_memory()
            try:
                path = media.source_path(video, cache)
                got = media_audio.clip_audio(path, video.id, 0, 0.0, 5.0, cache=cache if i % 2 else None)
            except InputError as exc:
                assert "\n" not in str(exc)
                continue
            served += 1
            np.testing.assert_array_equal(got, want)
    finally:
        swapper.stop.set()
        swapper.join()
    assert served > 0
    _reset_process_memory()
    cached = media_audio.clip_audio(a, video.id, 0, 0.0, 5.0, cache=cache)
    np.testing.assert_array_equal(cached, want)


def test_edit_in_place_after_hashing_is_refused(tmp_path):
    """Same inode, bytes rewritten after the id was made: the pinned read notices the change."""
    path = tmp_path / "v.mp4"
    path.write_bytes(HAMILTON.read_bytes())
    vid, pinned = media.pin(path)
    with path.open("r+b") as fh:
        fh.write(FIXTURE.read_bytes()[:4096])
    with pytest.raises(InputError, match="changed while it was being read"):
        media_audio._decode_audio(pinned, 0.0, 1.0, media_audio.AUDIO_RATE)
    assert media.display_name(pinned) == media.display_name(path)
