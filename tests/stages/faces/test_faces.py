"""`m3 faces` on real media: the fixture's two people, the Hamilton clip, caching, and bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import av
import jsonschema
import numpy as np
import pytest

from conftest import DATA, ROOT
from m3cli.schemas.records import ClipRecord
from m3cli.stages.backends.face import make_face_model
from m3cli.stages.backends.face.dlib import DlibFaceModel
from m3cli.stages.core.cache import Cache
from m3cli.stages.core.common import RunContext
from m3cli.stages.core.errors import M3Error
from m3cli.stages.faces.cluster import cluster_embeddings
from m3cli.stages.faces.detect import Counters
from m3cli.stages.faces.stage import FacesConfig, image_faces, load_image, run_faces
from m3cli.stages.faces.tracks import spans
from m3cli.stages.segment import SegmentConfig, segment_video

FIXTURE = DATA / "fixture.mp4"
HAMILTON = DATA / "short_hamilton_clip.mp4"
SCHEMA = json.loads((ROOT / "schemas" / "clip.v1.json").read_text())


class CountingDlib(DlibFaceModel):
    """The real dlib backend, counting how many frame batches it was asked to detect."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.calls = 0

    def detect_frames(self, images):
        self.calls += 1
        return super().detect_frames(images)


def m3(*args: str, cache: Path, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "M3_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "m3cli", *args],
        input=stdin,
        capture_output=True,
        env=env,
        cwd=ROOT,
        timeout=600,
    )


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("faces-cache")


@pytest.fixture(scope="module")
def fixture_run(cache_dir):
    """The fixture through the stage once (detections cached for the other tests)."""
    cache = Cache(cache_dir)
    records = segment_video(FIXTURE, SegmentConfig(), cache)
    model = CountingDlib()
    counters = Counters()
    out = run_faces(records, model, FacesConfig(recluster=True), RunContext(cache=cache), counters)
    return records, out, model, counters


def _truth_person(t: float) -> str | None:
    turns = json.loads((DATA / "fixture.truth.json").read_text())["turns"]
    return next((turn["person"] for turn in turns if turn["start"] <= t < turn["end"]), None)


@pytest.mark.slow
def test_fixture_two_people_two_ids(fixture_run):
    _, out, model, counters = fixture_run
    assert counters.computed == 2 and model.calls == 2
    ids_by_person: dict[str, set[str]] = {}
    seen_turns = set()
    turns = json.loads((DATA / "fixture.truth.json").read_text())["turns"]
    for record in out:
        for track in record.faces.tracks:
            for t, *_ in track.boxes:
                person = _truth_person(t)
                assert person is not None, f"face detected at {t} s, inside a blank gap"
                ids_by_person.setdefault(person, set()).add(track.face_id)
                seen_turns.add(next(i for i, turn in enumerate(turns) if turn["start"] <= t < turn["end"]))
    assert ids_by_person == {"obama": {"<face_1>"}, "biden": {"<face_2>"}}
    assert seen_turns == set(range(len(turns))), "every photo turn has detections"
    # numbered by first appearance: Obama is on screen first
    first = out[0].faces.tracks[0]
    assert first.face_id == "<face_1>" and first.spans[0][0] == pytest.approx(0.6, abs=0.21)


@pytest.mark.slow
def test_fixture_record_fields(fixture_run):
    _, out, _, _ = fixture_run
    for record in out:
        data = record.to_json()
        jsonschema.validate(data, SCHEMA)
        faces = data["faces"]
        assert faces["backend"] == "dlib" and faces["fps"] == 5.0 and faces["model"].startswith("dlib")
        kept = sum(t["detections"] for t in faces["tracks"])
        assert faces["frames"] > 0 and faces["detections"] == kept + faces["dropped"]
        assert faces["recluster"] == {"<face_1>": "cluster_1", "<face_2>": "cluster_2"}
        arrays = np.load(faces["embeddings"])
        assert sorted(arrays.files) == sorted(t["face_id"][1:-1] for t in faces["tracks"])
        for name in arrays.files:
            assert np.linalg.norm(arrays[name]) == pytest.approx(1.0, abs=1e-4)
        for track in faces["tracks"]:
            assert Path(track["crop"]).read_bytes()[:2] == b"\xff\xd8"  # a JPEG
            assert 0 < track["quality"] <= 1
            assert len(track["boxes"]) == track["detections"]
            assert all(b == round(b, 1) for box in track["boxes"] for b in box[1:])
    # the second clip's ids were matched against the bank, not created
    assert all(t.match is not None and t.match > 0.4 for t in out[1].faces.tracks)
    assert all(t.match is None for t in out[0].faces.tracks)
    # embeddings of the two ids are far apart in dlib's metric
    a = np.load(out[0].faces.embeddings)
    assert float(a["face_1"] @ a["face_2"]) < 0.95


@pytest.mark.slow
def test_threshold_change_replays_from_cache(fixture_run, cache_dir):
    records, out, _, _ = fixture_run
    cache = Cache(cache_dir)
    model = CountingDlib()
    counters = Counters()
    again = run_faces(records, model, FacesConfig(recluster=True), RunContext(cache=cache), counters)
    assert model.calls == 0 and counters.cache_hits == 2
    assert [r.to_json() for r in again] == [r.to_json() for r in out]
    strict = run_faces(
        records,
        model,
        FacesConfig(threshold=0.3, min_sharpness=0.5, max_snapshots=3),
        RunContext(cache=cache),
        counters,
    )
    assert model.calls == 0 and counters.cache_hits == 4
    assert model._nets is None, "no weights were even loaded"
    # a stricter threshold splits identities (the detections themselves are unchanged)
    ids = {t.face_id for r in strict for t in r.faces.tracks}
    assert len(ids) >= 2
    assert sum(r.faces.detections for r in strict) == sum(r.faces.detections for r in out)


@pytest.mark.slow
def test_cli_rerun_is_byte_identical(fixture_run, cache_dir, tmp_path):
    records, _, _, _ = fixture_run
    clips = b"".join(json.dumps(r.to_json()).encode() + b"\n" for r in records)
    first = m3("faces", "-", cache=cache_dir, stdin=clips)
    assert first.returncode == 0, first.stderr
    out_file = tmp_path / "faces.jsonl"
    second = m3("faces", "-o", str(out_file), "-", cache=cache_dir, stdin=clips)
    assert second.returncode == 0, second.stderr
    assert out_file.read_bytes() == first.stdout
    lines = [json.loads(line) for line in first.stdout.splitlines()]
    assert [ClipRecord.model_validate(x).faces.tracks[0].face_id for x in lines] == ["<face_1>", "<face_1>"]


@pytest.mark.slow
def test_hamilton_has_a_face(tmp_path):
    cache = Cache(tmp_path)
    out = run_faces(
        segment_video(HAMILTON, SegmentConfig(), cache),
        DlibFaceModel(),
        FacesConfig(),
        RunContext(cache=cache),
    )
    tracks = out[0].faces.tracks
    assert len(tracks) >= 1 and tracks[0].face_id == "<face_1>"
    assert tracks[0].detections >= 10  # Lin-Manuel Miranda speaks through most of the clip
    jsonschema.validate(out[0].to_json(), SCHEMA)


@pytest.mark.slow
def test_clip_without_faces_and_undecodable_clip(tmp_path):
    video = tmp_path / "black.mp4"
    with av.open(str(video), "w") as container:
        stream = container.add_stream("mpeg4", rate=10)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        for _ in range(20):
            frame = av.VideoFrame.from_ndarray(np.zeros((48, 64, 3), np.uint8), format="rgb24")
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    cache = Cache(tmp_path / "cache")
    records = segment_video(video, SegmentConfig(), cache)
    out = run_faces(records, DlibFaceModel(), FacesConfig(), RunContext(cache=cache))
    assert out[0].faces.frames == 10 and out[0].faces.detections == 0 and out[0].faces.tracks == []
    assert out[0].faces.embeddings is None and not out[0].errors
    # a clip whose frames cannot be decoded is flagged, not silently empty
    ghost = records[0].model_copy(deep=True)
    ghost.clip.index, ghost.clip.start, ghost.clip.end = 5, 100.0, 130.0
    flagged = run_faces([ghost], DlibFaceModel(), FacesConfig(), RunContext(cache=cache))[0]
    assert flagged.faces.frames == 0 and "could be decoded" in flagged.errors[0].message


@pytest.mark.slow
def test_grayscale_tiny_and_blank_images():
    model = DlibFaceModel()
    grey = np.asarray(load_image(DATA / "fixture_src" / "obama.jpg").mean(axis=2).astype(np.uint8))
    faces, keep, _ = image_faces(np.repeat(grey[:, :, None], 3, axis=2), model, FacesConfig())
    assert int(keep.sum()) == 1
    assert model.detect(grey)  # a 2-d grey array is accepted as is
    for blank in (np.zeros((8, 8, 3), np.uint8), np.full((360, 640, 3), 128, np.uint8)):
        faces, keep, _ = image_faces(blank, model, FacesConfig())
        assert len(faces) == 0 and keep.shape == (0,)


def test_local_clustering_small_sets_and_separation():
    rng = np.random.default_rng(0)
    a, b = rng.normal(0, 1, 128), rng.normal(0, 1, 128)
    a, b = a / np.linalg.norm(a), b / np.linalg.norm(b)
    assert cluster_embeddings(np.zeros((0, 128)), 0.6).tolist() == []
    assert cluster_embeddings(a[None], 0.6).tolist() == [0]
    assert cluster_embeddings(np.stack([a, b]), 0.6).tolist() == [0, 1]
    many = np.concatenate([a + rng.normal(0, 0.01, (20, 128)), b + rng.normal(0, 0.01, (15, 128))])
    labels = cluster_embeddings(many, 0.6)
    assert labels[:20].tolist() == [0] * 20 and labels[20:].tolist() == [1] * 15
    assert spans([1.0, 1.2, 1.4, 3.0], 0.2, 10.0) == [(1.0, 1.6), (3.0, 3.2)]


@pytest.mark.slow
def test_bad_inputs_give_clear_errors(fixture_run, tmp_path):
    records, _, _, _ = fixture_run
    moved = records[0].to_json()
    moved["video"]["path"] = str(tmp_path / "gone" / "fixture.mp4")
    res = m3("faces", cache=tmp_path / "fresh", stdin=json.dumps(moved).encode() + b"\n")
    err = res.stderr.decode()
    assert res.returncode == 1 and "video file not found" in err and "gone/fixture.mp4" in err
    assert err.startswith("m3: error:") and "Traceback" not in err and res.stdout == b""
    clip = json.dumps(records[0].to_json()).encode() + b"\n"
    for args, needle in [
        (["--backend", "openface"], "unknown face backend 'openface'; valid: dlib, insightface"),
        (["--model-dir", str(tmp_path / "nope")], "dlib face model files missing"),
        (["--detector", "yolo"], "unknown dlib detector 'yolo'"),
        (["--fps", "0"], "--fps must be a positive number"),
        (
            ["--backend", "insightface", "--model-dir", str(tmp_path / "no_pack")],
            "insightface model pack not found",
        ),
    ]:
        res = m3("faces", *args, cache=tmp_path / "fresh", stdin=clip)
        assert res.returncode == 1, (args, res.stderr)
        assert needle in res.stderr.decode() and "Traceback" not in res.stderr.decode(), res.stderr
    with pytest.raises(M3Error, match="valid: dlib, insightface"):
        make_face_model("nope")
    with pytest.raises(M3Error, match="not a readable image"):
        load_image(DATA / "fixture.truth.json")


# ------------------------------------------------------------------------------------- insightface
def _standin_pack(folder: Path) -> Path:
    """Random-weight stand-ins shaped like buffalo_l's SCRFD (9 outputs) and ArcFace (112x112 -> 512).

    The detector fires where the image is bright (score = sigmoid of pooled brightness at stride 32),
    so a white square on black is "a face"; this checks plumbing through the real insightface code,
    not accuracy.
    """
    from onnx import TensorProto, checker, helper, numpy_helper, save

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    inits, nodes, outputs = [], [], {"score": [], "bbox": [], "kps": []}
    width = {"score": 1, "bbox": 4, "kps": 10}
    template = np.array([[-0.5, -0.4], [0.5, -0.4], [0, 0], [-0.4, 0.5], [0.4, 0.5]], np.float32).reshape(-1)
    for s in (8, 16, 32):
        nodes.append(
            helper.make_node("AveragePool", ["input.1"], [f"pool{s}"], kernel_shape=[s, s], strides=[s, s])
        )
        for kind, ch in (("score", 2), ("bbox", 8), ("kps", 20)):
            w = np.zeros((ch, 3, 1, 1), np.float32)
            b = np.zeros(ch, np.float32)
            if kind == "score":
                w[:], b[:] = (5.0, -5.0) if s == 32 else (0.0, -20.0)
            elif kind == "bbox":
                b[:] = 1.5
            else:
                b[:] = np.concatenate([template, template])
                w[:] = rng.normal(0, 1e-3, w.shape)
            inits += [
                numpy_helper.from_array(w, f"w_{kind}{s}"),
                numpy_helper.from_array(b, f"b_{kind}{s}"),
                numpy_helper.from_array(np.array([-1, width[kind]], np.int64), f"shape_{kind}{s}"),
            ]
            op = {"score": "Sigmoid", "bbox": "Softplus", "kps": "Identity"}[kind]
            nodes += [
                helper.make_node("Conv", [f"pool{s}", f"w_{kind}{s}", f"b_{kind}{s}"], [f"c_{kind}{s}"]),
                helper.make_node("Transpose", [f"c_{kind}{s}"], [f"t_{kind}{s}"], perm=[0, 2, 3, 1]),
                helper.make_node("Reshape", [f"t_{kind}{s}", f"shape_{kind}{s}"], [f"r_{kind}{s}"]),
                helper.make_node(op, [f"r_{kind}{s}"], [f"{kind}_{s}"]),
            ]
            outputs[kind].append(
                helper.make_tensor_value_info(f"{kind}_{s}", TensorProto.FLOAT, [f"n{s}", width[kind]])
            )
    graph = helper.make_graph(
        nodes,
        "scrfd",
        [helper.make_tensor_value_info("input.1", TensorProto.FLOAT, [1, 3, "?", "?"])],
        outputs["score"] + outputs["bbox"] + outputs["kps"],
        inits,
    )
    det = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    det.ir_version = 8
    checker.check_model(det)
    save(det, str(folder / "det_standin.onnx"))
    w = rng.normal(0, 1, (3 * 16 * 16, 512)).astype(np.float32)
    graph = helper.make_graph(
        [
            helper.make_node("AveragePool", ["input.1"], ["p"], kernel_shape=[7, 7], strides=[7, 7]),
            helper.make_node("Reshape", ["p", "s"], ["f"]),
            helper.make_node("MatMul", ["f", "W"], ["683"]),
        ],
        "arcface",
        [helper.make_tensor_value_info("input.1", TensorProto.FLOAT, [1, 3, 112, 112])],
        [helper.make_tensor_value_info("683", TensorProto.FLOAT, [1, 512])],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(np.array([1, -1], np.int64), "s")],
    )
    rec = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    rec.ir_version = 8
    checker.check_model(rec)
    save(rec, str(folder / "rec_standin.onnx"))
    return folder


def test_insightface_adapter_runs_the_real_library(tmp_path):
    pytest.importorskip("insightface", reason="insightface is not installed (pip install 'm3[insightface]')")
    pytest.importorskip("onnx", reason="the stand-in models are built with the onnx package")
    pack = _standin_pack(tmp_path / "pack")
    model = make_face_model("insightface", model_dir=str(pack), det_size=320, device="cuda")
    assert model.metric == "cosine" and model.threshold == 0.3 and model.model == "pack"
    assert model.providers()[-1] == "CPUExecutionProvider"
    image = np.zeros((360, 640, 3), np.uint8)
    image[64:256, 192:384] = 255
    dets = model.detect(image)
    assert dets, "the stand-in detector fires on the bright square"
    for d in dets:
        assert d.embedding.shape == (512,) and abs(float(np.linalg.norm(d.embedding)) - 1) < 1e-4
        assert d.landmarks.shape == (3, 2) and d.landmarks[0, 0] <= d.landmarks[1, 0]
        assert 0.5 <= d.score <= 1
    assert model.detect(np.zeros((360, 640, 3), np.uint8)) == []
    # and through the stage's own judgement of one image
    faces, keep, q = image_faces(image, model, FacesConfig(backend="insightface", min_sharpness=0.0))
    assert len(faces) == len(dets) and faces.embeddings.shape == (len(dets), 512)
    assert np.all((q >= 0) & (q <= 1))
    with pytest.raises(M3Error, match="no face recognition"):
        (tmp_path / "det_only").mkdir()
        (tmp_path / "det_only" / "det.onnx").write_bytes((pack / "det_standin.onnx").read_bytes())
        make_face_model("insightface", model_dir=str(tmp_path / "det_only")).detect(image)
