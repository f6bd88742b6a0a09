"""The torch-free silero VAD (stages/backends/asr/vad_silero.py) against the silero-vad package itself.

The reference is the package's own ``OnnxWrapper`` + ``get_speech_timestamps`` (which need torch; they
are imported here only): the port must give the same per-window probabilities and the same sample
spans on real recordings, so results recorded by the package-driven VAD stay valid.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from conftest import DATA, FIXTURE
from m3cli.stages.backends.asr.faster_whisper import (
    VAD_MIN_SILENCE_MS,
    VAD_MIN_SPEECH_MS,
    VAD_SPEECH_PAD_MS,
    VAD_THRESHOLD,
    SileroVad,
)
from m3cli.stages.backends.asr.vad_silero import (
    RATE,
    SileroOnnx,
    bundled_model_path,
    speech_timestamps,
    timestamps_from_probs,
)
from m3cli.stages.core.audio_file import read_audio_file

torch = pytest.importorskip("torch")
silero_vad = pytest.importorskip("silero_vad")
from silero_vad.utils_vad import OnnxWrapper  # noqa: E402  (after the importorskip above)

# what `m3 diarize` passes (SileroVad.speech); the package's defaults for everything else
STAGE = {
    "threshold": VAD_THRESHOLD,
    "min_speech_duration_ms": VAD_MIN_SPEECH_MS,
    "min_silence_duration_ms": VAD_MIN_SILENCE_MS,
    "speech_pad_ms": VAD_SPEECH_PAD_MS,
}


def _audio(path: Path) -> np.ndarray:
    """The whole file as `m3 diarize` reads a file: mono float32 at 16 kHz."""
    return read_audio_file(path)[1]


def _with_long_silences() -> np.ndarray:
    """jfk.wav, 12 s of digital silence, an AMI excerpt, 8 s of silence: real speech, long pauses."""
    gap = np.zeros(12 * RATE, np.float32)
    return np.concatenate([_audio(DATA / "jfk.wav"), gap, _audio(DATA / "dev01.wav"), gap[: 8 * RATE]])


RECORDINGS = {
    "fixture": lambda: _audio(FIXTURE),  # two LibriSpeech readers, 0.6 s gaps
    "ami-dev00": lambda: _audio(DATA / "dev00.wav"),  # meeting speech, overlaps and short pauses
    "grid-turns": lambda: _audio(DATA / "link" / "grid_4people_turns.mp4"),  # short sentences, pauses
    "long-silences": _with_long_silences,
}


@pytest.fixture(scope="module")
def ours() -> SileroOnnx:
    return SileroOnnx()


@pytest.fixture(scope="module")
def window_by_window() -> SileroOnnx:
    return SileroOnnx(sequence=False)


@pytest.fixture(scope="module")
def reference() -> OnnxWrapper:
    return OnnxWrapper(
        str(Path(silero_vad.__file__).parent / "data" / "silero_vad.onnx"), force_onnx_cpu=True
    )


def _reference_probs(reference: OnnxWrapper, audio: np.ndarray) -> np.ndarray:
    """The probabilities get_speech_timestamps computes: each 512-sample window (the last zero-padded)."""
    tensor = torch.from_numpy(np.ascontiguousarray(audio, dtype=np.float32))
    reference.reset_states()
    probs = []
    for start in range(0, len(tensor), 512):
        chunk = torch.nn.functional.pad(tensor[start : start + 512], (0, max(0, start + 512 - len(tensor))))
        probs.append(reference(chunk, RATE).item())
    return np.array(probs, dtype=np.float32)


def _reference_stamps(reference: OnnxWrapper, audio: np.ndarray, **decision) -> list[dict]:
    tensor = torch.from_numpy(np.ascontiguousarray(audio, dtype=np.float32))
    return silero_vad.get_speech_timestamps(tensor, reference, sampling_rate=RATE, **decision)


@pytest.fixture(scope="module", params=sorted(RECORDINGS))
def recording(request) -> tuple[str, np.ndarray]:
    return request.param, RECORDINGS[request.param]()


def test_bundled_model_is_the_package_file():
    assert bundled_model_path() == Path(silero_vad.__file__).parent / "data" / "silero_vad.onnx"


def test_version_is_the_one_cached_results_were_keyed_on():
    """Same spans as the package-driven wrapper, so the same version string (cached results stay valid)."""
    assert SileroVad().version == (
        f"silero-vad {silero_vad.__version__} onnx; th {VAD_THRESHOLD}; "
        f"sil {VAD_MIN_SILENCE_MS}; pad {VAD_SPEECH_PAD_MS}; min {VAD_MIN_SPEECH_MS}"
    )


@pytest.mark.slow
def test_probabilities_equal_the_package_wrapper(recording, ours, window_by_window, reference):
    name, audio = recording
    expected = _reference_probs(reference, audio)
    assert ours._sequence is not None  # the installed package ships the block model: it is what runs
    for model in (ours, window_by_window):
        got = model.probabilities(audio)
        assert got.dtype == np.float32 and len(got) == -(-len(audio) // 512)
        assert np.array_equal(got, expected), f"{name}: max diff {np.abs(got - expected).max()}"


def test_block_model_is_exact_across_block_boundaries(ours, window_by_window, monkeypatch):
    from m3cli.stages.backends.asr import vad_silero

    audio = _audio(DATA / "dev00.wav")[: 16000 * 20]
    expected = window_by_window.probabilities(audio)
    for block in (1, 7, 100):  # the recurrent state carried from one call to the next
        monkeypatch.setattr(vad_silero, "SEQUENCE_BLOCK", block)
        assert np.array_equal(ours.probabilities(audio), expected), block


@pytest.mark.parametrize("decision", [STAGE, {}], ids=["stage-settings", "package-defaults"])
@pytest.mark.slow
def test_spans_equal_get_speech_timestamps(recording, ours, reference, decision):
    name, audio = recording
    expected = _reference_stamps(reference, audio, **decision)
    assert len(expected) >= 3, f"{name}: too little speech to compare"
    assert speech_timestamps(ours, audio, **decision) == expected


def test_long_silences_are_left_out(ours):
    audio = _with_long_silences()
    jfk_end = len(_audio(DATA / "jfk.wav"))
    stamps = speech_timestamps(ours, audio, **STAGE)
    pause = (jfk_end + RATE, jfk_end + 11 * RATE)  # inside the 12 s gap, clear of the padding
    assert not any(s["start"] < pause[1] and s["end"] > pause[0] for s in stamps)
    assert stamps[-1]["end"] < len(audio) - 7 * RATE  # the trailing 8 s of silence is not speech


@pytest.mark.parametrize("n_samples", [300, 511, 512, 7000])
def test_short_inputs_equal_the_package(ours, reference, n_samples):
    audio = _audio(DATA / "jfk.wav")
    start = int(0.5 * RATE)  # inside the first sentence ("And so, my fellow Americans")
    piece = audio[start : start + n_samples].copy()
    assert np.abs(piece).max() > 0.01  # real speech, not silence
    assert np.array_equal(ours.probabilities(piece), _reference_probs(reference, piece))
    for decision in (STAGE, {"min_speech_duration_ms": 0, "speech_pad_ms": 0}):
        assert speech_timestamps(ours, piece, **decision) == _reference_stamps(reference, piece, **decision)
    # 7000 samples (0.44 s) of speech is one span when no minimum length applies
    if n_samples == 7000:
        assert speech_timestamps(ours, piece, min_speech_duration_ms=0, speech_pad_ms=0)


def test_empty_audio_has_no_speech(ours):
    assert speech_timestamps(ours, np.zeros(0, np.float32), **STAGE) == []


@pytest.mark.parametrize("use_longest_silence", [True, False])
@pytest.mark.parametrize("max_speech_s", [2.0, 4.0])
def test_max_speech_cuts_equal_the_package(ours, use_longest_silence, max_speech_s):
    """The rules for speech longer than max_speech_duration_s (unused by m3 today, ported all the same)."""
    from silero_vad.utils_vad import get_speech_timestamps_from_probs

    audio = _audio(FIXTURE)
    probs = ours.probabilities(audio)
    decision = {
        **STAGE,
        "max_speech_duration_s": max_speech_s,
        "use_max_poss_sil_at_max_speech": use_longest_silence,
    }
    expected = get_speech_timestamps_from_probs(
        probs.tolist(), sampling_rate=RATE, audio_length_samples=len(audio), **decision
    )
    assert len(expected) > len(timestamps_from_probs(probs, len(audio), **STAGE))  # the rule did cut
    assert timestamps_from_probs(probs, len(audio), **decision) == expected


def test_silero_vad_speech_runs_without_torch():
    """`m3 diarize`'s default VAD must not load torch (about 1.2 s per process) nor the silero package."""
    code = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        from m3cli.stages.backends.asr import make_vad
        from m3cli.stages.core.audio_file import read_audio_file
        audio = read_audio_file(Path({str(FIXTURE)!r}))[1]
        vad = make_vad("silero")
        spans = vad.speech(audio)
        print(len(spans), vad.version)
        print(sorted(m for m in ("torch", "silero_vad") if m in sys.modules))
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    count, loaded = done.stdout.strip().splitlines()
    assert int(count.split()[0]) >= 3  # the fixture's turns were found
    assert count.split(" ", 1)[1] == SileroVad().version
    assert loaded == "[]"


def test_speech_spans_in_seconds_match_the_package(ours, reference):
    """SileroVad.speech: the package's spans turned into seconds and merged, as before the port."""
    from m3cli.stages.backends.asr.faster_whisper import _to_spans

    audio = _audio(DATA / "dev00.wav")
    assert SileroVad().speech(audio) == _to_spans(_reference_stamps(reference, audio, **STAGE), len(audio))
    assert SileroVad().speech(audio[:511]) == []


def test_missing_model_says_how_to_install(tmp_path):
    """A silero_vad package without its data folder: one actionable error, not a traceback."""
    (tmp_path / "silero_vad").mkdir()
    (tmp_path / "silero_vad" / "__init__.py").write_text("")
    code = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        from m3cli.stages.backends.asr.vad_silero import bundled_model_path
        from m3cli.stages.core.errors import M3Error
        try:
            bundled_model_path()
        except M3Error as exc:
            print(exc)
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "silero_vad.onnx was not found" in done.stdout
    assert "pip install silero-vad" in done.stdout
