"""Paths inside records are not trusted: a stage reads only files in the cache (or the record's own
video); any other path is one `m3: error:` line naming the record and the field. Real CLI, a real
segmented video, a real JPEG crop, a real loopback LLM server."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import orjson
import pytest

from conftest import DATA, FIXTURE, run_m3
from support.fake_openai import FakeOpenAI

OBAMA = DATA / "fixture_src" / "obama.jpg"
GOOD = {
    "episodic": [{"text": "<face_1> smiles at the camera"}],
    "semantic": [],
    "equivalences": [],
}


@pytest.fixture(scope="module")
def server():
    with FakeOpenAI() as s:
        yield s


@pytest.fixture(scope="module")
def segmented(tmp_path_factory) -> dict:
    proc = run_m3("segment", FIXTURE, env={"M3_CACHE": str(tmp_path_factory.mktemp("seg"))}, check=True)
    return json.loads(proc.stdout.splitlines()[0])


def _record(segmented: dict, crop: str | None, **faces) -> bytes:
    rec = json.loads(json.dumps(segmented))
    rec["faces"] = {
        "backend": "dlib",
        "tracks": [{"face_id": "<face_1>", "detections": 3, "spans": [[0.6, 5.7]], "quality": 0.9}],
        **faces,
    }
    if crop is not None:
        rec["faces"]["tracks"][0]["crop"] = crop
    rec["utterances"] = [{"start": 1.0, "end": 2.0, "text": "hello", "speaker": "<voice_1>"}]
    return orjson.dumps(rec) + b"\n"


def _in_cache(cache_dir: Path, name: str, data: bytes) -> Path:
    path = cache_dir / "v1" / "faces" / "ff844541d09f88be" / "000000-test" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def _memorize(server: FakeOpenAI, record: bytes):
    server.requests.clear()
    server.responder = lambda body: json.dumps(GOOD)
    env = {"M3_LLM_BASE_URL": server.url, "M3_LLM_MODEL": "fake-vlm", "M3_LLM_MAX_RETRIES": "0"}
    return run_m3("memorize", "--frames", "0", input=record, env=env)


def _images_sent(server: FakeOpenAI) -> int:
    return sum(
        1
        for body in server.chat_requests
        for m in body["messages"]
        if isinstance(m["content"], list)
        for part in m["content"]
        if part["type"] == "image_url"
    )


@pytest.mark.slow
def test_a_crop_in_the_cache_is_sent(server, segmented, cache_dir):
    crop = _in_cache(cache_dir, "crop.jpg", OBAMA.read_bytes())
    proc = _memorize(server, _record(segmented, str(crop)))
    assert proc.returncode == 0, proc.stderr.decode()
    assert _images_sent(server) == 1


@pytest.mark.parametrize("where", ["outside", "symlink", "dotdot"])
@pytest.mark.slow
def test_a_crop_outside_the_cache_is_refused(server, segmented, cache_dir, tmp_path, where):
    outside = tmp_path / "private.jpg"
    shutil.copy(OBAMA, outside)
    if where == "outside":
        crop = str(outside)
    elif where == "symlink":  # a link inside the cache that leads out of it
        link = cache_dir / "v1" / "faces" / "link.jpg"
        link.parent.mkdir(parents=True)
        link.symlink_to(outside)
        crop = str(link)
    else:
        cache_dir.mkdir()
        crop = str(cache_dir / ".." / "private.jpg")
    proc = _memorize(server, _record(segmented, crop))
    err = proc.stderr.decode()
    assert proc.returncode == 1 and proc.stdout == b"" and "Traceback" not in err
    assert len(err.splitlines()) == 1
    assert err.startswith("m3: error: clip 0 of video ff844541d09f88be (")
    assert f"faces.tracks[0].crop: {crop!r} is outside the cache" in err
    assert _images_sent(server) == 0  # nothing was read, nothing was sent


@pytest.mark.parametrize("content", [b"not an image at all\n", (DATA / "jfk.wav").read_bytes()[:4096]])
@pytest.mark.slow
def test_a_non_image_crop_is_an_input_error(server, segmented, cache_dir, content):
    crop = _in_cache(cache_dir, "crop.jpg", content)
    proc = _memorize(server, _record(segmented, str(crop)))
    err = proc.stderr.decode()
    assert proc.returncode == 1 and "Traceback" not in err and len(err.splitlines()) == 1
    assert f"faces.tracks[0].crop: {str(crop)!r} is not a JPEG image" in err


@pytest.mark.slow
def test_a_broken_jpeg_in_the_cache_is_an_input_error(server, segmented, cache_dir):
    crop = _in_cache(cache_dir, "crop.jpg", OBAMA.read_bytes()[:200])
    proc = _memorize(server, _record(segmented, str(crop)))
    err = proc.stderr.decode()
    assert proc.returncode == 1 and "Traceback" not in err and len(err.splitlines()) == 1
    assert "faces.tracks[0].crop" in err and "is not a readable JPEG" in err


@pytest.mark.slow
def test_index_reads_embeddings_only_from_the_cache(server, segmented, cache_dir, tmp_path):
    env = {
        "M3_EMBED_BACKEND": "openai",
        "M3_EMBED_BASE_URL": server.url,
        "M3_EMBED_MODEL": "fake-embed",
    }
    outside = tmp_path / "emb.npz"
    np.savez(outside, face_1=np.ones(128, np.float32))
    memory = {"source": "offline", "episodic": [{"text": "<face_1> is visible"}], "semantic": []}

    def stream(**faces) -> bytes:
        rec = json.loads(_record(segmented, None, **faces))
        rec["memory"] = memory
        rec["characters"] = {"<face_1>": "<character_1>"}
        return orjson.dumps(rec) + b"\n"

    proc = run_m3("index", "-o", tmp_path / "bad.lance", input=stream(embeddings=str(outside)), env=env)
    err = proc.stderr.decode()
    assert proc.returncode == 1 and "Traceback" not in err and len(err.splitlines()) == 1
    assert f"faces.embeddings: {str(outside)!r} is outside the cache" in err
    assert not (tmp_path / "bad.lance").exists()

    not_npz = _in_cache(cache_dir, "embeddings.npz", b"\x93NUMPY pickled?")
    proc = run_m3("index", "-o", tmp_path / "bad2.lance", input=stream(embeddings=str(not_npz)), env=env)
    assert proc.returncode == 1 and "faces.embeddings" in proc.stderr.decode()
    assert "is not a .npz archive" in proc.stderr.decode()

    inside = _in_cache(cache_dir, "good.npz", outside.read_bytes())
    proc = run_m3("index", "-o", tmp_path / "good.lance", input=stream(embeddings=str(inside)), env=env)
    assert proc.returncode == 0, proc.stderr.decode()
