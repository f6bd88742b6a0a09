"""Hostile or odd input is one line, never a traceback or a hang: config files, option values, records."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from conftest import DATA, FIXTURE, HAMILTON, SHARED_MEDIA, run_m3


@pytest.mark.parametrize(
    "content,says",
    [
        (b"a = " + b"[" * 50_000 + b"]" * 50_000, "nested too deeply"),
        (b"a = " + b"{b=" * 3000 + b"1" + b"}" * 3000, "nested too deeply"),
        (b'x = "\xff\xfe"\n', "not UTF-8"),
        (b"\xef\xbb\xbf[llm]\nmodel = 1\x00\n", "not valid TOML"),
    ],
)
@pytest.mark.slow
def test_a_hostile_config_file_is_one_line(tmp_path, content, says):
    path = tmp_path / "m3.toml"
    path.write_bytes(content)
    for args in (("config", "show"), ("segment", FIXTURE)):
        proc = run_m3("--config", path, *args)
        [line] = proc.stderr.decode().strip().splitlines()
        assert proc.returncode == 1 and line.startswith("m3: error: ") and says in line


def test_config_path_says_when_the_file_is_absent(tmp_path):
    env = {"XDG_CONFIG_HOME": str(tmp_path), "HOME": str(tmp_path)}
    proc = run_m3("config", "path", env=env)
    where = proc.stdout.decode().strip()
    assert (
        proc.returncode == 0 and where.startswith(str(tmp_path)) and "does not exist" in proc.stderr.decode()
    )
    (tmp_path / "m3").mkdir(exist_ok=True)

    Path(where).parent.mkdir(parents=True, exist_ok=True)
    Path(where).write_text("[llm]\n")
    proc = run_m3("config", "path", env=env)
    assert proc.stdout.decode().strip() == where and proc.stderr == b""


@pytest.mark.parametrize(
    "args,says",
    [
        (("faces", "--fps", "1e9"), "--fps must be at most 120"),
        (("faces", "--fps", "inf"), "--fps must be"),
        (("faces", "--fps", "nan"), "--fps must be"),
    ],
)
@pytest.mark.slow
def test_unbounded_options_are_refused_at_once(tmp_path, cache_dir, args, says):
    clips = run_m3("segment", HAMILTON, check=True).stdout
    started = time.monotonic()
    proc = run_m3(*args, input=clips)
    assert time.monotonic() - started < 60
    [line] = proc.stderr.decode().strip().splitlines()
    assert proc.returncode == 1 and says in line


@pytest.mark.parametrize(
    "args,says",
    [
        (("run", HAMILTON, "-o", "mem.lance", "--set", "faces.fps=1e9"), "at most 120"),
        (("segment", "--clip-seconds", "1e-9", FIXTURE), "--clip-seconds must be within"),
        (("segment", "--clip-seconds", "1e12", FIXTURE), "--clip-seconds must be within"),
        (("run", HAMILTON, "-o", "mem.lance", "--set", "segment.clip_seconds=0.001"), "within 0.5..86400"),
    ],
)
@pytest.mark.slow
def test_option_bounds_hold_through_every_way_of_setting_them(tmp_path, cache_dir, args, says):
    started = time.monotonic()
    proc = run_m3(*args, cwd=tmp_path, env={"HF_HUB_OFFLINE": "1", "M3_LLM_BASE_URL": ""})
    assert time.monotonic() - started < 60
    lines = proc.stderr.decode().strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1 and says in lines[0], lines
    assert not (tmp_path / "mem.lance").exists()


def test_frame_sampling_beyond_the_bound_is_refused_in_the_library_too():
    from m3cli.stages.core import media_frames
    from m3cli.stages.core.errors import InputError

    with pytest.raises(InputError, match="frame rate"):
        media_frames.decode_frames(HAMILTON, 0.0, 1.0, fps=1e9)
    frames = media_frames.decode_frames(HAMILTON, 2.0, 3.0, fps=120)  # the bound: every frame of 29.97 fps
    assert len(frames) in (29, 30)
    assert len(media_frames.decode_frames(HAMILTON, 2.0, 4.0, fps=5)) == 10


def _clips(path, seconds: str = "5") -> list[dict]:
    import orjson

    out = run_m3("segment", "--clip-seconds", seconds, path, check=True).stdout
    return [orjson.loads(line) for line in out.splitlines()]


@pytest.mark.parametrize("end", [3000.0, 60.0, 12.5])
@pytest.mark.slow
def test_validate_checks_clip_bounds_against_the_file_itself(cache_dir, end):
    import orjson

    recs = _clips(HAMILTON)  # a 10-s video in two clips
    recs[-1]["clip"]["end"] = end
    for r in recs:  # self-consistent records: only the file shows the lie
        r["video"]["duration"] = end
    proc = run_m3("validate", input=b"".join(orjson.dumps(r) + b"\n" for r in recs))
    [line] = proc.stderr.decode().strip().splitlines()
    assert proc.returncode == 1 and "the file lasts 10.020 s" in line
    genuine = b"".join(orjson.dumps(r) + b"\n" for r in _clips(HAMILTON))
    proc = run_m3("validate", input=genuine)
    assert proc.returncode == 0 and proc.stderr.decode().startswith("ok: 2 clip records from 1 video ")


def test_validate_without_the_file_says_it_did_not_check(tmp_path, cache_dir):
    import shutil

    import orjson

    moved = tmp_path / "talk.mp4"
    shutil.copyfile(HAMILTON, moved)
    recs = _clips(moved)
    moved.unlink()
    proc = run_m3("validate", input=b"".join(orjson.dumps(r) + b"\n" for r in recs))
    assert proc.returncode == 0 and "1 video file not found, so not checked" in proc.stderr.decode()


SHARED = SHARED_MEDIA / "video"


@pytest.mark.skipif(not SHARED.is_dir(), reason="the shared media folder is not on this machine")
@pytest.mark.parametrize("name", ["grid_4people_turns", "latentsync_2people_turns"])
def test_eval_link_reads_the_shared_truth_files(name):
    """The shared ``*.truth.json`` (turns per panel or side) mean what the hand-written truth of
    tests/data/link (face spans, regions and an RTTM) says about the same video."""
    from m3cli.stages.eval.link import read_truth

    shared = read_truth(SHARED / f"{name}.truth.json")
    written = read_truth(DATA / "link" / f"{name}.json")
    assert set(shared) == set(written)
    for who, person in written.items():
        flat = [x for span in sorted(shared[who].speech) for x in span]
        assert flat == pytest.approx([x for span in sorted(person.speech) for x in span], abs=0.01)
        assert shared[who].face[0][2] == person.face[0][2]  # the same panel of the frame
        for t in (0.5, 9.0, 17.5):
            x0, y0, x1, y1 = person.face[0][2]
            assert shared[who].shows(t, (x0 + x1) / 2, (y0 + y1) / 2)


def test_eval_link_cli_accepts_a_turns_truth_file(tmp_path):
    import orjson

    truth = tmp_path / "t.truth.json"
    truth.write_bytes(
        orjson.dumps({"A": "left", "turns": [{"speaker": "A", "side": "middle", "start_s": 0, "end_s": 1}]})
    )
    records = tmp_path / "r.jsonl"
    records.write_bytes(run_m3("segment", HAMILTON, check=True).stdout)
    proc = run_m3("eval", "link", HAMILTON, "--truth", truth, "--records", records)
    [line] = proc.stderr.decode().strip().splitlines()
    assert proc.returncode == 1 and "unknown panel or side 'middle'" in line


def _current_speaker_exports():
    """The store files this machine's CAM++ and segmentation-3.0 weights export to (a store may also
    hold exports of other weights or torch versions, under other names)."""
    from m3cli.stages.backends.diarizer import segmentation
    from m3cli.stages.backends.onnx import export as onnx_export
    from m3cli.stages.backends.speaker import campplus as speaker_campplus

    paths = (
        onnx_export.export_path(speaker_campplus._export_spec(speaker_campplus.bundled_weights(), 192)),
        onnx_export.export_path(segmentation._export_spec(segmentation.bundled_checkpoint())),
    )
    if not all(p.is_file() for p in paths):
        pytest.skip("the speaker networks were not exported on this machine yet")
    return paths


def test_another_networks_export_under_the_segmentation_name_is_one_line(tmp_path, monkeypatch):
    """A valid ONNX of CAM++ copied over the segmentation-3.0 export in the model store."""
    import shutil

    from m3cli.stages.backends.diarizer import segmentation
    from m3cli.stages.backends.onnx import export as onnx_export
    from m3cli.stages.core.errors import M3Error

    campplus, segment = _current_speaker_exports()
    monkeypatch.setenv("M3_MODEL_STORE", str(tmp_path))
    shutil.copyfile(campplus, tmp_path / segment.name)
    onnx_export._SESSIONS.__init__()  # this process opened none of them from this store
    with pytest.raises(M3Error, match="not a segmentation-3.0 export") as caught:
        segmentation.SegmentationModel()
    assert "\n" not in str(caught.value)
    (tmp_path / segment.name).unlink()
    shutil.copyfile(segment, tmp_path / segment.name)  # the right file: it loads
    onnx_export._SESSIONS.__init__()
    assert segmentation.SegmentationModel().frame_step > 0


def test_another_networks_export_under_the_campplus_name_is_one_line(tmp_path, monkeypatch):
    """A valid ONNX of segmentation-3.0 copied over the CAM++ export in the model store: the same
    check (the session's inputs and outputs against the export's) as for segmentation."""
    import shutil

    import numpy as np

    from m3cli.stages.backends.onnx import export as onnx_export
    from m3cli.stages.backends.speaker import campplus as speaker_campplus
    from m3cli.stages.core.errors import M3Error

    campplus, segment = _current_speaker_exports()
    monkeypatch.setenv("M3_MODEL_STORE", str(tmp_path))
    shutil.copyfile(segment, tmp_path / campplus.name)
    onnx_export._SESSIONS.__init__()  # this process opened none of them from this store
    with pytest.raises(M3Error, match="not a campplus export") as caught:
        speaker_campplus.CamppModel()
    assert "\n" not in str(caught.value) and str(tmp_path) in str(caught.value)
    (tmp_path / campplus.name).unlink()
    shutil.copyfile(campplus, tmp_path / campplus.name)  # the right file: it loads and embeds
    onnx_export._SESSIONS.__init__()
    audio = np.random.default_rng(0).standard_normal(16000 * 2).astype(np.float32) * 0.1
    assert speaker_campplus.CamppModel().embed(audio, [(0.0, 2.0)]).shape == (1, 192)


_PEAK_LAUNCHER = """import os, subprocess, sys
child = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(child.pid, 0)
open(sys.argv[1], "w").write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
"""


@pytest.mark.parametrize("where", ["utterance", "memory line", "both"])
@pytest.mark.slow
def test_a_huge_text_field_is_refused_without_gigabytes(tmp_path, cache_dir, where):
    """A 50 MB utterance (and the memory line quoting it) used to cost abstract and index ~7 GB of RSS;
    now the record is refused as it is read, in one line, well under a gigabyte."""
    import subprocess
    import sys

    import orjson

    from support.index_pipeline import pipeline

    big = "word " * 10_000_000  # 50 MB
    recs = [r.to_json() for r in pipeline(2)]
    if where in ("utterance", "both"):
        recs[0]["utterances"][0]["text"] = big
    if where in ("memory line", "both"):
        recs[0]["memory"]["episodic"][0]["text"] = f'<voice_1> says: "{big}"'
    path = tmp_path / "big.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    for args in (("abstract", path), ("index", "-o", tmp_path / "m.lance", path)):
        # The command's own peak, read by a small launcher that starts it and waits for it: a process
        # started straight from this test inherits the test process's high-water mark across exec (the
        # suite's in-process models put it at 2.3 GB), so neither RUSAGE_CHILDREN nor its own wait4 tells.
        peak_file = tmp_path / "peak"
        with open(tmp_path / "stderr", "w+b") as err:
            child = subprocess.run(
                [sys.executable, "-c", _PEAK_LAUNCHER, str(peak_file), sys.executable, "-m", "m3cli"]
                + [str(a) for a in args],
                stdout=subprocess.DEVNULL,
                stderr=err,
                timeout=300,
            )
            err.seek(0)
            stderr = err.read()
        usage_kb = int(peak_file.read_text())
        peak_mb = usage_kb / 1024
        [line] = stderr.decode().strip().splitlines()
        assert child.returncode == 1 and "at most 100000 characters" in line and f"{path}:1:" in line
        assert peak_mb < 1500, peak_mb
    # a long but plausible utterance (20 000 characters) still goes through
    recs = [r.to_json() for r in pipeline(2)]
    recs[0]["utterances"][0]["text"] = "word " * 4000
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    assert run_m3("abstract", path).returncode == 0
