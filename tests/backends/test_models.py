"""`m3 models`: the catalogue is true of the installed wheels, a changed byte is caught with one line that
names the file and both digests, and exported models load from M3_MODEL_DIR with the same results."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import orjson
import pytest

from conftest import DATA, run_m3


def _no_model_dir(env: dict | None = None) -> dict:
    return {**(env or {}), "M3_MODEL_DIR": ""}


def test_check_passes_on_the_installed_weights():
    proc = run_m3("models", "check", env=_no_model_dir())
    assert proc.returncode == 0, proc.stderr.decode()
    lines = proc.stdout.decode().splitlines()
    assert lines and all(line.startswith("ok\t") for line in lines)
    checked = {tuple(line.split("\t")[1:3]) for line in lines}
    from m3cli.stages.backends import models

    defaults = {(m.id, f.name) for m in models.CATALOGUE if m.default for f in m.files}
    assert defaults <= checked  # every default model's every pinned file was hashed
    assert "match their pinned SHA-256" in proc.stderr.decode()


def test_list_names_package_upstream_licence_size_and_digest():
    proc = run_m3("models", "list", "--json", env=_no_model_dir(), check=True)
    rows = [orjson.loads(line) for line in proc.stdout.splitlines()]
    by_id = {r["id"]: r for r in rows}
    for name in ("whisper-tiny.en", "campplus", "segmentation-3.0", "all-MiniLM-L6-v2", "silero-vad"):
        row = by_id[name]
        assert row["use"] == "default" and row["installed"] and row["package"] and row["licence"]
        assert row["size"] == sum(f["size"] for f in row["files"]) > 0
        assert all(len(f["sha256"]) == 64 for f in row["files"])
    assert by_id["insightface-buffalo_l"]["files"] == []  # listed, but m3 ships and vouches for nothing
    text = run_m3("models", env=_no_model_dir(), check=True).stdout.decode()
    assert "campplus_cn_en_common.pt" in text and by_id["campplus"]["files"][0]["sha256"] in text


def _copy_with_flipped_byte(source: Path, dest: Path, offset: int) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    data = bytearray(source.read_bytes())
    data[offset] ^= 0x01
    dest.write_bytes(bytes(data))


def test_one_flipped_byte_fails_check_and_loading_with_both_digests(tmp_path):
    from m3cli.stages.backends import models
    from m3cli.stages.backends.speaker.campplus import bundled_weights

    real = bundled_weights()
    pinned = models.model("campplus").files[0]
    copy = tmp_path / "models" / "campplus" / pinned.name
    _copy_with_flipped_byte(real, copy, offset=len(real.read_bytes()) // 2)
    env = {"M3_MODEL_DIR": str(tmp_path / "models"), "M3_MODEL_STORE": str(tmp_path / "store")}

    proc = run_m3("models", "check", "--model", "campplus", env=env)
    assert proc.returncode == 1
    [failed] = proc.stdout.decode().splitlines()
    assert failed.startswith("FAILED\tcampplus\tcampplus_cn_en_common.pt")
    assert f"expected SHA-256 {pinned.sha256}" in failed and str(copy) in failed
    import hashlib

    found = hashlib.sha256(copy.read_bytes()).hexdigest()
    assert f"found SHA-256 {found}" in failed and found != pinned.sha256
    [error] = proc.stderr.decode().strip().splitlines()
    assert error.startswith("m3: error: models check: 1 of 1 files differ")

    # loading the model refuses the file the same way: one line, the file, both digests
    code = textwrap.dedent(
        """
        from m3cli.stages.backends.speaker.campplus import CamppModel
        from m3cli.stages.core.errors import M3Error
        try:
            CamppModel()
        except M3Error as exc:
            print(exc)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, **env}, timeout=300
    )
    [line] = done.stdout.strip().splitlines()
    assert str(copy) in line and pinned.sha256 in line and found in line, done.stderr


def test_a_changed_installed_file_is_caught_although_its_digest_was_remembered(tmp_path, monkeypatch):
    """The remembered digest is keyed by the file's identity: rewriting the file (new mtime) hashes it
    again, so a verified-once file that changes later is still caught."""
    from m3cli.stages.backends import models
    from m3cli.stages.backends.asr.vad_silero import bundled_model_path
    from m3cli.stages.core import model_store
    from m3cli.stages.core.errors import M3Error

    monkeypatch.setenv("M3_MODEL_STORE", str(tmp_path / "store"))
    monkeypatch.setenv("M3_MODEL_DIR", "")
    m = models.model("silero-vad")
    real = bundled_model_path()
    target = tmp_path / "models" / "silero-vad"
    target.mkdir(parents=True)
    for f in m.files:
        shutil.copyfile(real.with_name(f.name), target / f.name)
        os.utime(target / f.name, (1_600_000_000, 1_600_000_000))  # copied some time ago
    monkeypatch.setenv("M3_MODEL_DIR", str(tmp_path / "models"))
    assert bundled_model_path() == target / "silero_vad.onnx"  # verified and remembered
    assert model_store.remembered_digest(target / "silero_vad.onnx") == m.files[0].sha256
    _copy_with_flipped_byte(real, target / "silero_vad.onnx", offset=100)
    with pytest.raises(M3Error, match="is not the pinned one: expected SHA-256 1a153a22") as caught:
        bundled_model_path()
    assert "\n" not in str(caught.value)


def test_missing_model_in_model_dir_names_the_directory(tmp_path):
    env = {"M3_MODEL_DIR": str(tmp_path / "empty"), "M3_MODEL_STORE": str(tmp_path / "store")}
    proc = run_m3("models", "check", "-m", "silero-vad", env=env)
    assert proc.returncode == 1
    out = proc.stdout.decode()
    assert "is missing (M3_MODEL_DIR=" in out and "m3 models export DIR" in out


@pytest.mark.slow
def test_export_then_model_dir_gives_the_same_results(tmp_path):
    """Export two models, check them there, and run the VAD and CAM++ from the copies: the same
    speech regions and embeddings as from the installed packages."""
    out = tmp_path / "offline-models"
    proc = run_m3("models", "export", out, "-m", "silero-vad", "-m", "campplus", env=_no_model_dir())
    assert proc.returncode == 0, proc.stderr.decode()
    assert "M3_MODEL_DIR=" in proc.stderr.decode().splitlines()[-1]
    manifest = orjson.loads((out / "m3-models.json").read_bytes())
    assert [m["id"] for m in manifest["models"]] == ["silero-vad", "campplus"]
    assert sorted(p.name for p in (out / "campplus").iterdir()) == ["campplus_cn_en_common.pt"]

    env = {"M3_MODEL_DIR": str(out), "M3_MODEL_STORE": str(tmp_path / "store")}
    proc = run_m3("models", "check", "-m", "silero-vad", "-m", "campplus", env=env)
    assert proc.returncode == 0 and proc.stdout.decode().count("ok\t") == 3, proc.stdout.decode()

    code = textwrap.dedent(
        f"""
        import orjson
        from pathlib import Path
        from m3cli.stages.backends.speaker.campplus import CamppModel, bundled_weights
        from m3cli.stages.backends.asr.vad_silero import SileroOnnx, bundled_model_path, speech_timestamps
        from m3cli.stages.core.audio_file import read_audio_file
        _, audio = read_audio_file(Path({str(DATA / "speakers3.mp4")!r}))
        vad = speech_timestamps(SileroOnnx(), audio)
        emb = CamppModel().embed(audio, [(1.0, 3.0)])[0]
        print(orjson.dumps({{"weights": [str(bundled_weights()), str(bundled_model_path())],
                             "vad": vad, "emb": [round(float(x), 5) for x in emb]}}).decode())
        """
    )

    def run(extra: dict) -> dict:
        done = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            env={**os.environ, **extra},
            timeout=300,
            check=True,
        )
        return orjson.loads(done.stdout.strip().splitlines()[-1])

    offline = run(env)
    installed = run({"M3_MODEL_DIR": "", "M3_MODEL_STORE": str(tmp_path / "store")})
    assert all(w.startswith(str(out)) for w in offline["weights"])
    assert not any(w.startswith(str(out)) for w in installed["weights"])
    assert offline["vad"] == installed["vad"] and len(offline["vad"]) >= 2
    assert offline["emb"] == installed["emb"]
