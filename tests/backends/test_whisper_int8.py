"""The int8 copies of the float16 Whisper models m3 installs: read exactly as CTranslate2's own
quantisation at load reads (the same words, word probabilities and language probabilities on real
speech), written in CTranslate2's layout byte for byte, and made again when the store's copy is damaged."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import DATA

SPANISH = DATA / "languages" / "es_2.wav"  # FLEURS read speech (tests/data/languages/README.md)


def _audio(path: Path):
    from m3cli.stages.core.audio_file import read_audio_file

    return read_audio_file(path)[1]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("model", "recording", "language"),
    [(None, DATA / "jfk.wav", "en"), ("base", SPANISH, "es"), ("base", DATA / "jfk.wav", None)],
)
def test_the_copy_reads_as_ctranslate2s_own_quantisation(model, recording, language) -> None:
    """``int8_float32`` is the same arithmetic as ``int8`` on the CPU, but it is loaded from the
    float16 file and quantised by CTranslate2: the reference the copy must equal to the last digit."""
    from m3cli.stages.backends.asr.faster_whisper import FasterWhisperAsr

    audio = _audio(recording)
    copied = FasterWhisperAsr(model)
    reference = FasterWhisperAsr(model, compute_type="int8_float32")
    got, want = copied.transcribe(audio, language), reference.transcribe(audio, language)
    assert got.segments and got.segments[0].words
    assert got == want  # texts, times and every word's probability
    assert copied.language_of(audio) == reference.language_of(audio)


def test_a_model_bin_is_written_back_byte_for_byte() -> None:
    from m3cli.stages.backends.asr import int8_copy
    from m3cli.stages.backends.asr.faster_whisper import resolve_model

    original = (Path(resolve_model(None).path) / "model.bin").read_bytes()
    parsed = int8_copy.read_model_bin(original)
    assert parsed.spec == "WhisperSpec" and len(parsed.variables) > 100
    assert int8_copy.write_model_bin(parsed) == original

    copy = int8_copy.quantized(parsed)
    kinds = {v.name: v.dtype for v in copy.variables}
    assert kinds["decoder/embeddings/weight"] == "int8"
    assert kinds["decoder/embeddings/weight_scale"] == "float32"
    assert kinds["encoder/conv1/weight"] == "float16"  # CTranslate2 keeps the convolutions at load
    with pytest.raises(int8_copy.NotCopyable, match="int8 already"):
        int8_copy.quantized(copy)
    with pytest.raises(int8_copy.NotCopyable, match="ends early|cut short"):
        int8_copy.read_model_bin(original[: len(original) // 2])


@pytest.mark.slow
def test_a_damaged_copy_is_made_again(tmp_path, monkeypatch) -> None:
    from m3cli.stages.backends.asr import int8_copy
    from m3cli.stages.backends.asr.faster_whisper import FasterWhisperAsr, resolve_model

    monkeypatch.setenv("M3_MODEL_STORE", str(tmp_path / "store"))
    source = resolve_model(None)
    path = int8_copy.copy_path(source)
    assert not path.exists()
    want = FasterWhisperAsr().transcribe(_audio(DATA / "jfk.wav"), "en")
    made = path.read_bytes()
    assert (
        path.name.startswith("whisper-tiny.en-int8-")
        and len(made) < 0.6 * (Path(source.path) / "model.bin").stat().st_size
    )

    path.write_bytes(made[: len(made) // 3])  # a copy cut short (a full disk, a killed copy)
    assert FasterWhisperAsr().transcribe(_audio(DATA / "jfk.wav"), "en") == want
    assert path.read_bytes() == made
