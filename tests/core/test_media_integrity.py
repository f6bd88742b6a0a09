"""What the media layer trusts: a record's file must still be its video, every sample lands in a clip,
rotated footage is decoded upright, and clip bounds must describe the video.

The odd inputs are made here from the bundled real media with PyAV (the same FFmpeg muxers that
produce them in the wild): an MPEG-TS whose timestamps start below zero, a phone-style MP4 whose
pixels are stored sideways with a display matrix, and files replaced or edited in place.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import av
import numpy as np
import orjson
import pytest

from conftest import FIXTURE, HAMILTON, run_m3
from m3cli.stages.core import media, media_audio, media_frames
from m3cli.stages.core.cache import Cache
from m3cli.stages.core.errors import InputError
from m3cli.stages.segment import SegmentConfig, segment_video


def jsonl(records) -> bytes:
    return b"".join(orjson.dumps(r.to_json() if hasattr(r, "to_json") else r) + b"\n" for r in records)


def negative_start_ts(src: Path, out: Path, shift_s: float = -3.6) -> Path:
    """Remux ``src`` into MPEG-TS with every timestamp moved by ``shift_s`` (no re-encoding)."""
    with (
        av.open(str(src)) as inp,
        av.open(str(out), "w", format="mpegts", options={"avoid_negative_ts": "disabled"}) as dst,
    ):
        streams = {s.index: dst.add_stream_from_template(s) for s in inp.streams}
        for packet in inp.demux():
            if packet.dts is None:
                continue
            offset = int(shift_s / packet.time_base)
            packet.pts += offset
            packet.dts += offset
            packet.stream = streams[packet.stream.index]
            dst.mux(packet)
    return out


def rotated_phone_clip(src: Path, out: Path, seconds: float = 3.0) -> Path:
    """The first ``seconds`` of ``src`` stored sideways (turned 90° counter-clockwise) with a display
    matrix telling players to turn it back, as phones record portrait-held footage."""
    with av.open(str(src)) as inp, av.open(str(out), "w") as dst:
        vs = inp.streams.video[0]
        rate = vs.average_rate
        stream = dst.add_stream("libx264", rate=rate)
        stream.width, stream.height = vs.codec_context.height, vs.codec_context.width
        stream.pix_fmt = "yuv420p"
        stream.set_display_rotation(-90)  # shown turned 90° clockwise, i.e. upright again
        for frame in inp.decode(vs):
            if frame.time >= seconds:
                break
            sideways = np.ascontiguousarray(np.rot90(frame.to_ndarray(format="rgb24"), k=1))
            for packet in stream.encode(av.VideoFrame.from_ndarray(sideways, format="rgb24")):
                dst.mux(packet)
        for packet in stream.encode():
            dst.mux(packet)
    return out


def first_packets(path: Path) -> dict[str, float]:
    """Earliest presentation time of each stream, relative to the container start."""
    with av.open(str(path)) as c:
        origin = (c.start_time or 0) / av.time_base
        first: dict[str, float] = {}
        for p in c.demux():
            if p.pts is not None:
                first[p.stream.type] = min(first.get(p.stream.type, 1e9), float(p.pts * p.time_base) - origin)
        return first


# ------------------------------------------------------------------------- every sample in a clip


def test_clip_zero_starts_at_the_earliest_sample_of_any_stream(tmp_path):
    """Hamilton: audio from 0 s (container time), first frame at 0.844 s; the speech before the first
    frame ("By working...") is in clip 0, and the clips cover every stream to its end."""
    first = first_packets(HAMILTON)
    assert first["audio"] < 0.01 and first["video"] > 0.8  # the property of the file this test is about
    recs = segment_video(HAMILTON, SegmentConfig(clip_seconds=4.0))
    assert recs[0].clip.start == 0.0
    assert all(a.clip.end == b.clip.start for a, b in zip(recs, recs[1:], strict=False))
    with av.open(str(HAMILTON)) as c:
        end = max(float((s.start_time + s.duration) * s.time_base) for s in c.streams) - c.start_time / 1e6
    assert recs[-1].clip.end >= end - 0.05
    audio = media_audio.clip_audio(HAMILTON, recs[0].video.id, 0, recs[0].clip.start, recs[0].clip.end)
    before_first_frame = audio[: int(0.8 * media_audio.AUDIO_RATE)]
    assert np.sqrt(np.mean(before_first_frame**2)) > 0.03  # speech, not silence padding


def test_mpeg_ts_with_negative_start_loses_nothing(tmp_path):
    """A TS starting at -3.6 s: clip 0 holds the same audio and frames as the MP4 it was remuxed from
    (the seek target used to be clamped to timestamp 0, losing 2.75 s of audio and 4 s of frames)."""
    ts = negative_start_ts(HAMILTON, tmp_path / "negative.ts")
    with av.open(str(ts)) as c:
        assert c.start_time / av.time_base < -3.0
    cfg = SegmentConfig(clip_seconds=4.0)
    mp4_clips, ts_clips = segment_video(HAMILTON, cfg), segment_video(ts, cfg)
    assert [r.clip.frames for r in ts_clips] == [r.clip.frames for r in mp4_clips]
    assert [r.clip.start for r in ts_clips] == pytest.approx([r.clip.start for r in mp4_clips], abs=1e-3)
    c0 = ts_clips[0]
    frames = media_frames.sample_frames(ts, c0.video.id, 0, c0.clip.start, c0.clip.end, fps=5.0)
    reference = media_frames.sample_frames(
        HAMILTON, mp4_clips[0].video.id, 0, 0.0, mp4_clips[0].clip.end, fps=5.0
    )
    assert frames.times[0] < 0.9 and len(frames) == len(reference)
    assert np.abs(frames.images[0].astype(int) - reference.images[0].astype(int)).mean() < 3
    audio = media_audio.clip_audio(ts, c0.video.id, 0, c0.clip.start, c0.clip.end)
    ref_audio = media_audio.clip_audio(HAMILTON, mp4_clips[0].video.id, 0, 0.0, mp4_clips[0].clip.end)
    n = min(len(audio), len(ref_audio))
    assert n >= 0.99 * len(ref_audio)
    assert np.corrcoef(audio[:n], ref_audio[:n])[0, 1] > 0.95


# ------------------------------------------------------------------------- rotated footage


def test_a_ts_remux_decodes_every_clip_from_its_start(tmp_path):
    """A plain `ffmpeg -i v.mp4 -c copy -f mpegts` remux (the growing file `m3 watch` reads) starts at
    1.54 s and has no index: a seek lands on a frame that is not a keyframe, sometimes past the clip,
    and pictures were lost until the next keyframe (the 20-s clip's first at 21.66 s, the 40-s clip's
    at 42.06 s). Each 10-s clip now starts where the MP4's does (the video starts 64 ms after the
    audio in both: clip times count from the first sample of any stream)."""
    ts = tmp_path / "fixture.ts"
    subprocess.run(
        ["ffmpeg", "-v", "error", "-i", str(FIXTURE), "-c", "copy", "-f", "mpegts", str(ts)], check=True
    )
    for k in range(5):
        mp4 = list(media_frames.iter_sampled(FIXTURE, 10.0 * k, 10.0 * (k + 1), 1.0))
        got = list(media_frames.iter_sampled(ts, 10.0 * k, 10.0 * (k + 1), 1.0))
        assert len(got) == len(mp4) == 10
        assert abs(got[0][0] - mp4[0][0]) <= 0.1, (k, got[0][0], mp4[0][0])


@pytest.mark.slow
def test_rotated_phone_video_is_decoded_upright_and_its_faces_found(tmp_path):
    from m3cli.stages.backends.face.dlib import DlibFaceModel
    from m3cli.stages.core.common import RunContext
    from m3cli.stages.faces.stage import FacesConfig, run_faces

    clip = rotated_phone_clip(FIXTURE, tmp_path / "portrait.mp4")
    with av.open(str(clip)) as c:
        stored = c.streams.video[0].codec_context
        assert (stored.width, stored.height) == (360, 640)  # the pixels are sideways on disk
    recs = segment_video(clip, SegmentConfig())
    assert (recs[0].video.width, recs[0].video.height) == (640, 360)  # what a player shows
    frames = media_frames.sample_frames(
        clip, recs[0].video.id, 0, recs[0].clip.start, recs[0].clip.end, fps=2.0
    )
    upright = media_frames.sample_frames(FIXTURE, "0" * 16, 0, 0.0, 3.0, fps=2.0)
    assert frames.images[2].shape == upright.images[2].shape == (360, 640, 3)
    assert np.abs(frames.images[2].astype(int) - upright.images[2].astype(int)).mean() < 8
    out = run_faces(recs, DlibFaceModel(), FacesConfig(fps=2.0), RunContext(cache=Cache(tmp_path / "c")))
    assert out[0].faces is not None and len(out[0].faces.tracks) >= 1  # Obama's portrait, 0.6-3 s


# ------------------------------------------------------------------------- the file must be the video


@pytest.fixture
def video_copy(tmp_path) -> tuple[Path, list]:
    path = tmp_path / "talk.mp4"
    shutil.copyfile(HAMILTON, path)
    return path, segment_video(path, SegmentConfig(), Cache(tmp_path / "cache"))


def test_a_replaced_file_is_refused_and_nothing_is_cached_under_its_old_id(tmp_path, video_copy, cache_dir):
    path, recs = video_copy
    shutil.copyfile(FIXTURE, path)  # same path, another video
    proc = run_m3("faces", "--fps", "1", input=jsonl(recs))
    assert proc.returncode == 1 and proc.stdout == b""
    [line] = proc.stderr.decode().strip().splitlines()
    assert line.startswith("m3: error: ") and str(path) in line and "not the video" in line
    stored = list(Path(cache_dir).glob(f"v1/faces*/{recs[0].video.id}/*"))
    assert stored == []


def test_an_in_place_edit_with_size_and_mtime_restored_is_noticed(tmp_path, video_copy):
    path, recs = video_copy
    cache = Cache(tmp_path / "cache")
    # unchanged: accepted (stat stamp only); the path returned reads that very file
    assert os.path.samefile(media.source_path(recs[0].video, cache), path)
    st = path.stat()
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    with path.open("r+b") as fh:  # same inode, same size
        fh.write(data)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (path.stat().st_size, path.stat().st_mtime_ns, path.stat().st_ino) == (
        st.st_size,
        st.st_mtime_ns,
        st.st_ino,
    )
    with pytest.raises(InputError, match="not the video these records were made from"):
        media.source_path(recs[0].video, cache)
    with pytest.raises(InputError, match="not the video"):
        media.source_path(recs[0].video, None)


# ------------------------------------------------------------------------- clip bounds


@pytest.mark.parametrize(
    ("clip", "reason"),
    [
        ({"index": 0, "start": 0.0, "end": 1e12}, "beyond the video's duration"),
        ({"index": 0, "start": 0.0, "end": 400.0}, "beyond the video's duration"),
        ({"index": 0, "start": 8.0, "end": 2.0}, "is after clip.end"),
    ],
)
@pytest.mark.slow
def test_validate_refuses_clip_bounds_outside_the_video(clip, reason):
    rec = {
        "schema": "m3.clip/1",
        "video": {"id": "0b5ff4c55a4cd69f", "path": str(HAMILTON), "duration": 10.02},
        "clip": clip,
    }
    proc = run_m3("validate", input=jsonl([rec]))
    assert proc.returncode == 1 and proc.stdout == b""
    [line] = proc.stderr.decode().strip().splitlines()
    assert line.startswith("m3: error: <stdin>:1: ") and reason in line


def test_a_duration_the_file_does_not_have_is_refused(video_copy, cache_dir):
    """A record may keep its bounds within a forged ``video.duration``: the file's own says otherwise."""
    _path, recs = video_copy
    data = recs[0].to_json()
    data["video"]["duration"] = 5000.0
    data["clip"]["end"] = 4999.0
    proc = run_m3("faces", "--fps", "1", input=jsonl([data]))
    assert proc.returncode == 1 and proc.stdout == b""
    [line] = proc.stderr.decode().strip().splitlines()
    assert line.startswith("m3: error: ") and "lasts 5000 s but the file lasts 10.0" in line
    data["video"]["duration"] = 1e12
    proc = run_m3("validate", input=jsonl([data]))
    assert proc.returncode == 1 and b"not a plausible video length" in proc.stderr


# ------------------------------------------------------------------------- a clip given twice


@pytest.mark.slow
def test_a_clip_given_twice_is_dropped_with_a_warning_in_every_stage(tmp_path, video_copy, cache_dir):
    _path, recs = video_copy
    once = run_m3("link", input=jsonl(recs))
    assert once.returncode == 0
    twice = run_m3("link", input=jsonl(recs + recs))
    assert twice.returncode == 0 and twice.stdout == once.stdout
    assert b"repeats clip 0 of video" in twice.stderr and b"the repeat is ignored" in twice.stderr
    changed = recs[0].to_json()
    changed["clip"]["frames"] = 1
    for stage in ("link", "validate"):
        proc = run_m3(stage, input=jsonl([*recs, changed]))
        assert proc.returncode == 1 and proc.stdout == b""
        [line] = proc.stderr.decode().strip().splitlines()
        assert line.startswith("m3: error: <stdin>:2: clip 0 of video") and "<stdin>:1" in line
