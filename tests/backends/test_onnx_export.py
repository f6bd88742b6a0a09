"""The speaker networks on onnxruntime: the same outputs as the torch modules on real speech, no torch
import once exported, and a model store that survives damaged files, replaced weights and being unwritable."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from conftest import DATA


@pytest.fixture(scope="module")
def audio() -> np.ndarray:
    from m3cli.stages.core.audio_file import read_audio_file

    _, samples = read_audio_file(DATA / "speakers3.mp4")
    return samples


@pytest.mark.slow
def test_campplus_export_embeds_as_torch_does(audio) -> None:
    from m3cli.stages.backends.speaker.campplus import CamppModel

    exported, reference = CamppModel(), CamppModel(runtime="torch")
    assert "onnxruntime" in exported.version and "torch" in reference.version  # caches never mix them
    assert len(audio) / 16000 > 25.0
    windows = [(float(s), float(s) + 2.0) for s in np.arange(0.0, 22.0, 1.5)] + [(22.0, 22.3), (22.5, 25.2)]
    groups = [windows[:3], windows[5:12], [(0.0, 25.0)]]
    for got, want in (
        (exported.embed(audio, windows), reference.embed(audio, windows)),
        (exported.embed_pooled(audio, groups), reference.embed_pooled(audio, groups)),
    ):
        assert got.shape == want.shape
        assert float(np.max(np.abs(got - want))) < 1e-4
        assert float(np.min(np.sum(got * want, axis=1))) > 0.99999


def test_segmentation_export_gives_the_torch_activity() -> None:
    from m3cli.stages.backends.diarizer.segmentation import SegmentationModel
    from m3cli.stages.core.audio_file import read_audio_file

    _, meeting = read_audio_file(DATA / "dev00.wav")  # an AMI meeting excerpt
    exported, reference = SegmentationModel(), SegmentationModel(runtime="torch")
    got, want = exported.activity(meeting, step=5.0), reference.activity(meeting, step=5.0)
    assert got.active.shape == want.active.shape and got.active.shape[0] >= 4
    assert (got.active.any(axis=1).sum(axis=1) >= 2).any()  # windows where two people speak
    assert float(np.mean(got.active == want.active)) > 0.9999
    assert (got.frame_step, got.frame_duration) == (want.frame_step, want.frame_duration)


@pytest.mark.slow
def test_exported_networks_run_without_importing_torch(audio) -> None:
    from m3cli.stages.backends.diarizer.segmentation import SegmentationModel
    from m3cli.stages.backends.speaker.campplus import CamppModel

    CamppModel(), SegmentationModel()  # the exports exist in the store from here on
    script = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        from m3cli.stages.backends.diarizer.segmentation import SegmentationModel
        from m3cli.stages.backends.speaker.campplus import CamppModel
        from m3cli.stages.core.audio_file import read_audio_file
        _, audio = read_audio_file(Path({str(DATA / "speakers3.mp4")!r}))
        print(CamppModel().embed(audio, [(1.0, 3.0)]).shape)
        print(SegmentationModel().activity(audio, 5.0).active.shape)
        print(sorted(m for m in ("torch", "asteroid_filterbanks") if m in sys.modules))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, env=os.environ
    )
    lines = out.stdout.strip().splitlines()
    assert lines[0].startswith("(1, 192)")
    assert lines[-1] == "[]", out.stdout


def _weights_copy(tmp_path: Path) -> Path:
    from m3cli.stages.backends.speaker.campplus import bundled_weights

    copy = tmp_path / "weights" / "campplus.pt"
    copy.parent.mkdir()
    copy.write_bytes(bundled_weights().read_bytes())
    return copy


def _embed_in_new_process(weights: Path) -> np.ndarray:
    """One CAM++ embedding from a fresh process (sessions are shared within a process)."""
    script = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        from m3cli.stages.backends.speaker.campplus import CamppModel
        from m3cli.stages.core.audio_file import read_audio_file
        _, audio = read_audio_file(Path({str(DATA / "speakers3.mp4")!r}))
        print(",".join(map(repr, CamppModel(Path({str(weights)!r})).embed(audio, [(1.0, 3.0)])[0].tolist())))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, env=os.environ
    )
    return np.array([float(x) for x in out.stdout.strip().split(",")], np.float32)


@pytest.mark.slow
def test_store_replaces_a_damaged_export_and_keys_on_the_weights(tmp_path, monkeypatch) -> None:
    from m3cli.stages.backends.onnx.export import export_path
    from m3cli.stages.backends.speaker import campplus as speaker_campplus
    from m3cli.stages.backends.speaker.campplus import CamppModel

    monkeypatch.setenv("M3_MODEL_STORE", str(tmp_path / "store"))
    weights = _weights_copy(tmp_path)
    want = _embed_in_new_process(weights)
    path = export_path(speaker_campplus._export_spec(weights, CamppModel.dim))
    assert path.is_file() and path.parent == tmp_path / "store"

    path.write_bytes(path.read_bytes()[:1000])  # a truncated file (disk full, killed copy)
    np.testing.assert_array_equal(_embed_in_new_process(weights), want)
    assert path.stat().st_size > 1_000_000  # exported afresh

    os.utime(weights, ns=(0, 10**18))  # touched or copied elsewhere, same bytes: the same export
    assert export_path(speaker_campplus._export_spec(weights, CamppModel.dim)) == path
    other = tmp_path / "another-install" / "campplus.pt"
    other.parent.mkdir()
    other.write_bytes(weights.read_bytes())
    assert export_path(speaker_campplus._export_spec(other, CamppModel.dim)) == path  # one copy
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF
    weights.write_bytes(bytes(data))  # the weights were replaced: a new export, never the old file
    assert export_path(speaker_campplus._export_spec(weights, CamppModel.dim)) != path


def test_one_session_per_export_in_a_process() -> None:
    from m3cli.stages.backends.diarizer.segmentation import SegmentationModel
    from m3cli.stages.backends.speaker.campplus import CamppModel

    assert CamppModel()._session is CamppModel()._session  # diarize's and voices' CAM++ in `m3 run`
    assert SegmentationModel()._session is not CamppModel()._session


def test_unwritable_store_still_runs_from_memory(tmp_path, monkeypatch, audio, caplog) -> None:
    from m3cli.stages.backends.diarizer.segmentation import SegmentationModel

    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the store should be")
    monkeypatch.setenv("M3_MODEL_STORE", str(blocker / "models"))
    model = SegmentationModel()
    assert model.activity(audio[: 16000 * 10], step=5.0).active.any()
    assert "using it from memory" in caplog.text


def test_runtime_choice_is_checked() -> None:
    from m3cli.stages.backends.diarizer.segmentation import SegmentationModel
    from m3cli.stages.backends.speaker.campplus import CamppModel
    from m3cli.stages.core.errors import M3Error

    with pytest.raises(M3Error, match="unknown runtime 'tensorrt'; valid: onnxruntime, torch"):
        CamppModel(runtime="tensorrt")
    with pytest.raises(M3Error, match="runs on the CPU only, not 'cuda'"):
        SegmentationModel(device="cuda", runtime="onnxruntime")


@pytest.mark.slow
def test_two_threads_export_two_networks_at_once(tmp_path, monkeypatch, audio) -> None:
    """`m3 run` on an empty store: voices (CAM++) and sight (the tagger) export in two threads at once.
    torch's exporter is process-global; unguarded, one of them failed with `GLOBALS.in_onnx_export`."""
    import threading

    from m3cli.stages.backends.onnx import export as onnx_export
    from m3cli.stages.backends.speaker.campplus import CamppModel
    from m3cli.stages.backends.tagger import effnet as tagger_effnet

    monkeypatch.setenv("M3_MODEL_STORE", str(tmp_path / "store"))
    onnx_export._SESSIONS.__init__()  # nothing opened yet in this process from this store
    gate = threading.Barrier(2)
    results: dict[str, object] = {}

    def make(name, build) -> None:
        gate.wait()
        try:
            results[name] = build()
        except BaseException as exc:  # reported below, with the thread's name
            results[name] = exc

    threads = [
        threading.Thread(target=make, args=("campplus", CamppModel)),
        threading.Thread(
            target=make, args=("tagger", lambda: onnx_export.cpu_session(tagger_effnet.export_spec()))
        ),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(isinstance(v, BaseException) for v in results.values()), results
    campplus = results["campplus"]
    assert isinstance(campplus, CamppModel) and campplus.embed(audio, [(1.0, 3.0)]).shape == (1, 192)
    assert sorted(p.name.rsplit("-", 1)[0] for p in (tmp_path / "store").glob("*.onnx")) == [
        "campplus",
        "efficientnet-lite0",
    ]
    onnx_export._SESSIONS.__init__()  # later tests open the default store's sessions again
