"""Fold checkpoints (stages/core/checkpoint.py): a restart of `m3 watch` resumes the folds from the
checkpoint its memory's last commit wrote, and replays the committed clips only when the checkpoint is
missing, stale, damaged or of another format, saying so in one line.

Real media throughout: tests/data/fixture.mp4 (50 s, two people) through the real pipeline, and real
`m3 watch` processes on an MPEG-TS remux of it that grows while they run.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from conftest import FIXTURE, run_m3
from m3cli.stages.core import checkpoint
from support.memory_rows import memory_view

CLIP = "10"


def _pipeline(until: str = "abstract", **stage_options):
    from m3cli.stages.core.cache import open_cache
    from m3cli.stages.core.common import RunContext
    from m3cli.stages.core.config import load_settings
    from m3cli.stages.pipeline import Models, pipeline_config, roundtrip
    from m3cli.stages.segment import segment_video

    settings = load_settings(flags={}, config_path=None)
    config = pipeline_config({"segment": {"clip_seconds": 10}, **stage_options}, until=until, offline=True)
    models = Models(config, settings)
    ctx = RunContext(cache=open_cache(settings.cache_dir, settings.cache_max_size), device=settings.device)
    return models, ctx, roundtrip(segment_video(FIXTURE, config.segment, ctx.cache))


def _dump(records) -> list[bytes]:
    return [orjson.dumps(r.to_json(), option=orjson.OPT_SERIALIZE_NUMPY) for r in records]


@pytest.mark.slow
def test_folds_resumed_from_a_checkpoint_continue_exactly_as_one_pass(cache_dir):
    """The folds after clips 0-1, saved to bytes and read back in a new ``Folds``, give clips 2-4
    exactly as one pass over all five clips does; the bytes are deterministic and read back to the
    same bytes."""
    from m3cli.stages.pipeline import Folds, process_records

    models, ctx, records = _pipeline()
    assert len(records) == 5
    vid = records[0].video.id
    whole = process_records(records, models, ctx)

    folds = Folds()
    head = process_records(records[:2], models, ctx, folds=folds)
    saved = folds.checkpoint(vid, [0, 1], models)
    assert saved.blob == folds.checkpoint(vid, [0, 1], models).blob  # deterministic
    assert b"pickle" not in saved.blob and saved.blob.startswith(checkpoint.MAGIC)
    doc, arrays = checkpoint.decode(saved.blob)
    assert set(doc["folds"]) == {"diarize", "voices", "faces", "link", "abstract"}
    assert doc["folds"]["faces"]["bank"]["nodes"] and doc["folds"]["voices"]["voices"]
    assert {lang for lang, *_ in doc["folds"]["diarize"]["answers"]} == {"en"}  # voices heard in English
    loaded = checkpoint.Loaded(doc["folds"], arrays, doc["clips"])
    resumed = Folds.resume(vid, loaded, models, ctx)
    assert resumed.checkpoint(vid, [0, 1], models).blob == saved.blob  # read back: the same bytes
    tail = process_records(records[2:], models, ctx, folds=resumed)
    assert _dump(head + tail) == _dump(whole)
    # the resumed folds carried identities: without them clip 2 numbers its people afresh
    assert any(r.characters for r in tail)
    assert _dump(process_records(records[2:3], models, ctx)) != _dump(whole[2:3])


@pytest.mark.slow
def test_faces_recluster_folds_are_not_checkpointed(cache_dir):
    """With faces.recluster the fold keeps every clip's detections (it grows with the video): no
    checkpoint is made, and the watcher replays instead."""
    from m3cli.stages.core.checkpoint import NotCheckpointable
    from m3cli.stages.pipeline import Folds, process_records

    models, ctx, records = _pipeline(until="faces", faces={"recluster": True})
    folds = Folds()
    process_records(records[:1], models, ctx, folds=folds)
    with pytest.raises(NotCheckpointable, match="recluster"):
        folds.checkpoint(records[0].video.id, [0], models)


# ------------------------------------------------------------------------------ real `m3 watch` restarts
def _watch(*args: str | os.PathLike, env: dict) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "m3cli", "watch", *map(os.fsdecode, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )


def _status(path: Path) -> dict:
    try:
        return orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}


def _grow(camera: Path, full: bytes, fraction: float) -> None:
    """The camera's file holds the first ``fraction`` of the recording (whole 188-byte TS packets)."""
    size = min(len(full), int(len(full) * fraction) // 188 * 188)
    with open(camera, "ab") as fh:
        fh.write(full[camera.stat().st_size if camera.exists() else 0 : size])


def _watch_until(camera: Path, memory: Path, state: Path, clips: int, env: dict) -> str:
    """`m3 watch` following the growing file until ``clips`` are committed, then SIGTERM (the way a
    service manager stops it); its stderr."""
    status = state.parent / f"{state.name}.status.json"
    proc = _watch(camera, "-o", memory, "--clip-seconds", CLIP, "--no-llm", "--idle", "300",
                  "--state", state, "--status", status, env=env)  # fmt: skip
    try:
        deadline = time.monotonic() + 400
        while _status(status).get("clips_committed", 0) < clips:
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read().decode()
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    return err.decode()


def _finish(camera: Path, memory: Path, state: Path, env: dict) -> tuple[subprocess.CompletedProcess, dict]:
    """`m3 watch --until-eof` on the whole recording, continuing ``memory``; the process and its status."""
    status = state.parent / f"{state.name}.final.json"
    proc = subprocess.run(
        [sys.executable, "-m", "m3cli", "watch", os.fspath(camera), "-o", os.fspath(memory), "--clip-seconds",
         CLIP, "--no-llm", "--until-eof", "--state", os.fspath(state), "--status", os.fspath(status)],
        capture_output=True, env=env, timeout=600,
    )  # fmt: skip
    return proc, _status(status)


def _manifest(memory: Path) -> dict:
    return orjson.loads((memory / "m3.manifest.json").read_bytes())


def _set_manifest(memory: Path, doc: dict) -> None:
    (memory / "m3.manifest.json").write_bytes(orjson.dumps(doc, option=orjson.OPT_SORT_KEYS))


@pytest.fixture(scope="module")
def restarts(tmp_path_factory) -> dict:
    """A 30-s recording watched while it grows: the memory and watch state after clip 0 (``one``), after
    clip 1 (``two``, the second process resumed from ``one``'s checkpoint) and the whole recording."""
    root = tmp_path_factory.mktemp("restarts")
    env = {**os.environ, "M3_CACHE": os.fspath(root / "cache")}
    full_ts = root / "full.ts"
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-t", "30", "-i", os.fspath(FIXTURE), "-c", "copy",
                    "-f", "mpegts", os.fspath(full_ts)], check=True)  # fmt: skip
    full = full_ts.read_bytes()
    live = root / "live"
    live.mkdir()
    camera, memory, state = live / "camera.ts", live / "m.lance", live / "state"
    _grow(camera, full, 0.45)  # ~13.5 s: clip 0 is complete, clip 1 is not
    first = _watch_until(camera, memory, state, 1, env)
    shutil.copytree(live, root / "one", ignore=shutil.ignore_patterns("*.status.json"))
    _grow(camera, full, 0.8)  # ~24 s: clip 1 is complete
    second = _watch_until(camera, memory, state, 2, env)
    shutil.copytree(live, root / "two", ignore=shutil.ignore_patterns("*.status.json"))
    _grow(camera, full, 1.0)
    for folder in ("one", "two"):  # the copies follow the whole recording too
        shutil.copyfile(camera, root / folder / "camera.ts")
    return {"root": root, "env": env, "full": full, "first": first, "second": second}


def _copy(restarts: dict, name: str, tmp_path: Path) -> tuple[Path, Path, Path]:
    """A copy of the watch folder ``name`` (its memory, state and the whole recording) to restart."""
    shutil.copytree(restarts["root"] / name, tmp_path / name)
    folder = tmp_path / name
    # the state names the spool by its absolute path: the copy follows its own file
    st = orjson.loads((folder / "state" / "state.json").read_bytes())
    st["spool"] = os.fspath(folder / "camera.ts")
    (folder / "state" / "state.json").write_bytes(orjson.dumps(st))
    return folder / "camera.ts", folder / "m.lance", folder / "state"


def _checkpoint_lines(stderr: bytes) -> list[str]:
    """The lines about the checkpoint (not the ones that merely name a file under this test's folder)."""
    return [line for line in stderr.decode().splitlines() if "checkpoint of " in line]


@pytest.fixture(scope="module")
def resumed(restarts, tmp_path_factory) -> dict:
    """The watch restarted on the whole recording after clip 1, from a valid checkpoint."""
    camera, memory, state = _copy(restarts, "two", tmp_path_factory.mktemp("resumed"))
    before = _manifest(memory)
    proc, status = _finish(camera, memory, state, restarts["env"])
    return {"camera": camera, "memory": memory, "proc": proc, "status": status, "before": before}


@pytest.mark.slow
def test_restart_with_a_valid_checkpoint_replays_nothing_and_equals_m3_run(restarts, resumed, tmp_path):
    assert "checkpoint of " not in restarts["first"]  # a new stream has nothing to resume
    assert "checkpoint of " not in restarts["second"]  # resumed from clip 0's checkpoint without a word
    memory, proc, status = resumed["memory"], resumed["proc"], resumed["status"]
    entry = resumed["before"]["checkpoints"]
    (stream,) = entry
    assert entry[stream]["clips"] == 2 and entry[stream]["format"] == checkpoint.FORMAT

    assert proc.returncode == 0, proc.stderr.decode()
    assert _checkpoint_lines(proc.stderr) == []
    new = status["last_round"]["clips"]  # the clips after the checkpoint, and none replayed
    assert new[0] == 2 and status["last_round"]["replayed"] == 0
    assert status["clips_committed"] == 2 + len(new)
    after = _manifest(memory)["checkpoints"][stream]
    assert after["clips"] == 2 + len(new) and after["file"] != entry[stream]["file"]
    assert [p.name for p in (memory / "checkpoints").iterdir()] == [Path(after["file"]).name]

    whole = tmp_path / "run.lance"
    env = restarts["env"]
    run = run_m3("run", resumed["camera"], "-o", whole, "--clip-seconds", CLIP, "--no-llm", env=env)
    assert run.returncode == 0, run.stderr.decode()
    assert memory_view(memory) == memory_view(whole)  # same clips, same identities, same lines


def _break(kind: str, memory: Path, restarts: dict) -> None:
    doc = _manifest(memory)
    (stream,) = doc["checkpoints"]
    entry = doc["checkpoints"][stream]
    path = memory / entry["file"]
    if kind == "missing":
        del doc["checkpoints"]
        _set_manifest(memory, doc)
    elif kind == "file gone":
        path.unlink()
    elif kind == "stale":  # clip 0's checkpoint, committed before clip 1 was: a real earlier one
        older = restarts["root"] / "one" / "m.lance"
        old_entry = _manifest(older)["checkpoints"][stream]
        shutil.copyfile(older / old_entry["file"], memory / old_entry["file"])
        doc["checkpoints"][stream] = old_entry
        _set_manifest(memory, doc)
    elif kind == "edited bytes":
        blob = bytearray(path.read_bytes())
        blob[len(blob) // 2] ^= 0xFF
        path.write_bytes(bytes(blob))
    elif kind == "edited and re-signed":  # a digest that matches bytes that are not a checkpoint
        import hashlib

        blob = path.read_bytes()[:-100]
        path.write_bytes(blob)
        entry["sha256"] = hashlib.sha256(blob).hexdigest()
        _set_manifest(memory, doc)
    elif kind == "format":
        entry["format"] = 999
        _set_manifest(memory, doc)
    else:
        raise AssertionError(kind)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("kind", "says"),
    [
        ("missing", "no checkpoint of {stream} in the memory; rebuilding from 2 committed clips"),
        ("file gone", "is missing); rebuilding from 2 committed clips"),
        ("stale", "(stale: it covers 1 clip (0-0), the memory holds 2 clips (0-1)); rebuilding from 2"),
        ("edited bytes", "is damaged (its digest is not the manifest's)); rebuilding from 2 committed"),
        ("edited and re-signed", "is damaged (truncated)); rebuilding from 2 committed clips"),
        ("format", f"(fold format 999, this m3 reads {checkpoint.FORMAT}); rebuilding from 2 committed"),
    ],
)
def test_a_checkpoint_that_does_not_match_is_replayed_with_one_line(restarts, resumed, tmp_path, kind, says):
    camera, memory, state = _copy(restarts, "two", tmp_path)
    (stream,) = _manifest(memory)["checkpoints"]
    _break(kind, memory, restarts)
    proc, status = _finish(camera, memory, state, restarts["env"])
    err = proc.stderr.decode()
    assert proc.returncode == 0 and "Traceback" not in err, err
    (line,) = _checkpoint_lines(proc.stderr)
    assert line.startswith("m3 watch: ") and says.format(stream=stream) in line, line
    assert status["last_round"]["clips"][0] == 2 and status["last_round"]["replayed"] == 2
    # the replay's memory and new checkpoint are the resumed restart's, byte for byte
    valid = resumed["memory"]
    assert memory_view(memory) == memory_view(valid)
    mine, theirs = _manifest(memory)["checkpoints"][stream], _manifest(valid)["checkpoints"][stream]
    assert mine == theirs and (memory / mine["file"]).read_bytes() == (valid / theirs["file"]).read_bytes()


# ------------------------------------------------------------------------------ the file and its checks
def _committed_checkpoint(memory: Path, clips: list[int], settings: str = "s") -> dict:
    """A memory folder whose manifest names a checkpoint of stream ``v`` (written as an index run does)."""
    import numpy as np

    from m3cli.stages.core import checkpoint
    from m3cli.stages.core.memory_manifest import read_manifest, write_manifest

    arrays = checkpoint.Arrays()
    folds = {"voices": {"voices": [["<voice_1>", arrays.add(np.eye(2, 4, dtype=np.float32))]]}}
    saved = checkpoint.make("v", clips, settings, folds, arrays)
    memory.mkdir(exist_ok=True)
    listed = checkpoint.commit_entries(memory, {"v"}, saved)
    write_manifest(memory, read_manifest(memory) or {"clips": 1}, listed)
    checkpoint.remove_unnamed(memory, listed)
    return listed["checkpoints"]["v"]


def test_checkpoint_file_round_trip_and_every_mismatch_is_named(tmp_path):
    import numpy as np

    from m3cli.stages.core import checkpoint
    from m3cli.stages.core.memory_manifest import write_manifest

    memory = tmp_path / "m.lance"
    old = _committed_checkpoint(memory, [0])
    entry = _committed_checkpoint(memory, [0, 1])
    assert [p.name for p in (memory / "checkpoints").iterdir()] == [Path(entry["file"]).name]  # old gone
    assert old["file"] != entry["file"]
    loaded = checkpoint.load(memory, "v", {0, 1}, "s")
    assert isinstance(loaded, checkpoint.Loaded) and loaded.clips == [0, 1]
    ((name, ref),) = loaded.folds["voices"]["voices"]
    assert name == "<voice_1>" and np.array_equal(loaded.arrays.get(ref), np.eye(2, 4, dtype=np.float32))

    def same(a, b) -> bool:
        return a.folds == b.folds and a.clips == b.clips and len(a.arrays.items) == len(b.arrays.items)

    assert same(checkpoint.load(str(memory), "v", {0, 1}, "s"), loaded)  # a path given as text
    # a writer that knows nothing of checkpoints (a people edit) keeps them
    write_manifest(memory, {"clips": 2})
    assert same(checkpoint.load(memory, "v", {0, 1}, "s"), loaded)

    assert checkpoint.load(memory, "w", {0}, "s") == "missing"
    assert checkpoint.load(memory, "v", {0, 1}, "other") == "it was made with other settings"
    assert checkpoint.load(memory, "v", {0, 1, 2}, "s") == (
        "stale: it covers 2 clips (0-1), the memory holds 3 clips (0-2)"
    )
    blob = (memory / entry["file"]).read_bytes()
    (memory / entry["file"]).write_bytes(blob[:-1] + bytes([blob[-1] ^ 1]))
    assert "is damaged (its digest is not the manifest's)" in checkpoint.load(memory, "v", {0, 1}, "s")
    (memory / entry["file"]).unlink()
    assert checkpoint.load(memory, "v", {0, 1}, "s").endswith("is missing")
    # the container refuses what is not one whole checkpoint, with ValueError only
    for bad in (b"", b"m3.folds\n", blob[:40], b"PK\x03\x04" + blob, blob[:-3]):
        with pytest.raises(ValueError):
            checkpoint.decode(bad)
    with pytest.raises(TypeError):
        checkpoint.Arrays().add(np.array([object()]))
    # an index run writing the stream's clips without a checkpoint drops the entry
    listed = checkpoint.commit_entries(memory, {"v"}, None)
    assert listed == {"checkpoints": {}}
