"""Silero VAD on onnxruntime and numpy: the silero-vad package's model and decisions, without torch.

Why not ``import silero_vad``: the package's ``__init__`` imports ``utils_vad``, which imports torch
(about 1.2 s per process), only to wrap numpy arrays that go straight back into onnxruntime. The
speaker stages are meant to run without torch on CPU, so this module reads the package's bundled
``silero_vad.onnx`` by path (the package is never imported) and reimplements the two pieces m3 uses:

* :class:`SileroOnnx` — what ``silero_vad.utils_vad.OnnxWrapper`` computes at 16 kHz: 512-sample
  windows, each preceded by the previous window's last 64 samples (zeros at first), the recurrent state
  carried from window to window and reset for every new audio, the last window zero-padded (through
  the package's block-of-windows model where it ships one: the same numbers, bit for bit);
* :func:`timestamps_from_probs` — ``get_speech_timestamps_from_probs``'s state machine, line for line,
  so the spans are the same sample indices the package returns (tests/backends/test_vad_silero.py
  compares them with the package on real recordings).
"""

from __future__ import annotations

import importlib.util
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from m3cli.stages.core.errors import M3Error

RATE = 16000
WINDOW = 512  # samples the 16 kHz model scores at a time (32 ms)
CONTEXT = 64  # trailing samples of the previous window fed in front of each window
STATE_SHAPE = (2, 1, 128)
MODEL_FILE = "silero_vad.onnx"
SEQUENCE_FILE = "silero_vad_16k_sequence.onnx"  # the same network over a block of windows per call
SEQUENCE_BLOCK = 1024  # windows per call (~33 s of audio)
PACKAGE = "silero_vad"


def bundled_model_path() -> Path:
    """``silero_vad/data/silero_vad.onnx`` inside the installed package, found without importing it (or in
    $M3_MODEL_DIR), checked against m3's pinned SHA-256, as is the sequence model beside it."""
    from m3cli.stages.backends import models

    path = models.resolved("silero-vad", MODEL_FILE, _packaged_model_path)
    models.resolved("silero-vad", SEQUENCE_FILE, lambda: path.with_name(SEQUENCE_FILE))
    return path


def _packaged_model_path() -> Path:
    spec = importlib.util.find_spec(PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        path = Path(location) / "data" / MODEL_FILE
        if path.is_file():
            return path
    where = f" (looked in {', '.join(str(Path(x) / 'data') for x in locations)})" if locations else ""
    raise M3Error(
        f"the silero VAD model {MODEL_FILE} was not found{where}: `pip install silero-vad`, "
        "or choose another VAD (--vad faster-whisper or --vad none)"
    )


def package_version() -> str:
    """The installed silero-vad version, read from its metadata (what ``silero_vad.__version__`` holds)."""
    try:
        return metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:
        return "?"


class SileroOnnx:
    """Per-window speech probabilities from silero's ONNX model, computed as its own wrapper does.

    Where the package also ships ``silero_vad_16k_sequence.onnx`` (the same network taking a block of
    windows per call, recent releases), blocks of ``SEQUENCE_BLOCK`` windows go through it: the
    probabilities are bit-identical to the window-by-window loop at any block size (tests compare both
    with the package), at half the CPU and with one call per ~33 s of audio instead of 31 per second,
    each of which gave up and took back the interpreter lock. ``sequence=False`` keeps the loop.
    """

    def __init__(self, path: Path | None = None, sequence: bool = True) -> None:
        self.path = path or bundled_model_path()
        block_model = self.path.with_name(SEQUENCE_FILE)
        self._sequence = _session(block_model) if sequence and block_model.is_file() else None
        self._session = None if self._sequence is not None else _session(self.path)
        self._rate = np.array(RATE, dtype=np.int64)

    def probabilities(self, audio: np.ndarray) -> np.ndarray:
        """One float32 speech probability per 512-sample window of 16 kHz mono ``audio``."""
        audio = np.ascontiguousarray(audio, dtype=np.float32).reshape(-1)
        n_windows = -(-len(audio) // WINDOW)
        padded = np.zeros(n_windows * WINDOW, dtype=np.float32)
        padded[: len(audio)] = audio
        frames = padded.reshape(n_windows, WINDOW)
        if self._sequence is not None:
            return self._by_blocks(self._sequence, frames)
        assert self._session is not None  # built whenever the block model is not
        state = np.zeros(STATE_SHAPE, dtype=np.float32)
        model_input = np.zeros((1, CONTEXT + WINDOW), dtype=np.float32)  # context, then the window
        probs = np.empty(n_windows, dtype=np.float32)
        run = self._session.run
        for i, frame in enumerate(frames):
            model_input[0, CONTEXT:] = frame
            out, state = run(None, {"input": model_input, "state": state, "sr": self._rate})
            probs[i] = out[0, 0]
            model_input[0, :CONTEXT] = frame[-CONTEXT:]
        return probs

    def _by_blocks(self, sequence: Any, frames: np.ndarray) -> np.ndarray:
        rows = np.zeros((len(frames), CONTEXT + WINDOW), dtype=np.float32)
        rows[:, CONTEXT:] = frames
        rows[1:, :CONTEXT] = frames[:-1, -CONTEXT:]
        h = np.zeros((1, 1, STATE_SHAPE[2]), dtype=np.float32)
        c = np.zeros_like(h)
        probs = np.empty(len(frames), dtype=np.float32)
        for start in range(0, len(frames), SEQUENCE_BLOCK):
            out, h, c = sequence.run(None, {"input": rows[start : start + SEQUENCE_BLOCK], "h": h, "c": c})
            probs[start : start + len(out)] = out
        return probs


def _session(path: Path) -> Any:
    import onnxruntime as ort

    from m3cli.stages.core.threads import onnx_session_options

    try:
        return ort.InferenceSession(str(path), onnx_session_options(ort), providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own exception types for unreadable models
        raise M3Error(f"{path}: cannot load the silero VAD model: {exc}") from None


def timestamps_from_probs(
    probs: np.ndarray | list[float],
    audio_length_samples: int,
    threshold: float = 0.5,
    min_speech_duration_ms: int = 250,
    max_speech_duration_s: float = float("inf"),
    min_silence_duration_ms: int = 100,
    speech_pad_ms: int = 30,
    neg_threshold: float | None = None,
    min_silence_at_max_speech: int = 98,
    use_max_poss_sil_at_max_speech: bool = True,
) -> list[dict[str, int]]:
    """Speech spans as ``{"start", "end"}`` sample indices, decided exactly as silero-vad 6's
    ``get_speech_timestamps_from_probs`` decides them at 16 kHz (same parameters, same defaults)."""
    min_speech_samples = RATE * min_speech_duration_ms / 1000
    speech_pad_samples = RATE * speech_pad_ms / 1000
    max_speech_samples = RATE * max_speech_duration_s - WINDOW - 2 * speech_pad_samples
    min_silence_samples = RATE * min_silence_duration_ms / 1000
    min_silence_samples_at_max_speech = RATE * min_silence_at_max_speech / 1000
    if neg_threshold is None:
        neg_threshold = max(threshold - 0.15, 0.01)

    triggered = False
    speeches: list[dict[str, Any]] = []
    current: dict[str, Any] = {}
    temp_end = 0  # where a silence began inside speech (tolerated until it lasts min_silence)
    prev_end = next_start = 0  # cut candidates for the max-speech rule
    possible_ends: list[tuple[int, int]] = []

    # float32 probabilities compared as Python floats, as the package's ``.item()`` values are
    for i, prob in enumerate(np.asarray(probs, dtype=np.float32).tolist()):
        cur_sample = WINDOW * i

        if prob >= threshold and temp_end:  # speech returns after a silence: remember that silence
            silence = cur_sample - temp_end
            if silence > min_silence_samples_at_max_speech:
                possible_ends.append((temp_end, silence))
            temp_end = 0
            if next_start < prev_end:
                next_start = cur_sample

        if prob >= threshold and not triggered:
            triggered = True
            current["start"] = cur_sample
            continue

        if triggered and cur_sample - current["start"] > max_speech_samples:
            if use_max_poss_sil_at_max_speech and possible_ends:
                prev_end, duration = max(possible_ends, key=lambda end: end[1])  # the longest silence
                current["end"] = prev_end
                speeches.append(current)
                current = {}
                next_start = prev_end + duration
                if next_start < prev_end + cur_sample:
                    current["start"] = next_start
                else:
                    triggered = False
                prev_end = next_start = temp_end = 0
                possible_ends = []
            elif prev_end:
                current["end"] = prev_end
                speeches.append(current)
                current = {}
                if next_start < prev_end:
                    triggered = False
                else:
                    current["start"] = next_start
                prev_end = next_start = temp_end = 0
                possible_ends = []
            else:
                current["end"] = cur_sample
                speeches.append(current)
                current = {}
                prev_end = next_start = temp_end = 0
                triggered = False
                possible_ends = []
                continue

        if prob < neg_threshold and triggered:
            if not temp_end:
                temp_end = cur_sample
            silence_now = cur_sample - temp_end
            if not use_max_poss_sil_at_max_speech and silence_now > min_silence_samples_at_max_speech:
                prev_end = temp_end
            if silence_now < min_silence_samples:
                continue
            current["end"] = temp_end
            if current["end"] - current["start"] > min_speech_samples:
                speeches.append(current)
            current = {}
            prev_end = next_start = temp_end = 0
            triggered = False
            possible_ends = []
            continue

    if current and audio_length_samples - current["start"] > min_speech_samples:
        current["end"] = audio_length_samples
        speeches.append(current)

    for i, speech in enumerate(speeches):  # pad each span, sharing short gaps between neighbours
        if i == 0:
            speech["start"] = int(max(0, speech["start"] - speech_pad_samples))
        if i != len(speeches) - 1:
            gap = speeches[i + 1]["start"] - speech["end"]
            if gap < 2 * speech_pad_samples:
                speech["end"] += int(gap // 2)
                speeches[i + 1]["start"] = int(max(0, speeches[i + 1]["start"] - gap // 2))
            else:
                speech["end"] = int(min(audio_length_samples, speech["end"] + speech_pad_samples))
                speeches[i + 1]["start"] = int(max(0, speeches[i + 1]["start"] - speech_pad_samples))
        else:
            speech["end"] = int(min(audio_length_samples, speech["end"] + speech_pad_samples))
    return speeches


def speech_timestamps(model: SileroOnnx, audio: np.ndarray, **decision: Any) -> list[dict[str, int]]:
    """``silero_vad.get_speech_timestamps(audio, model, sampling_rate=16000, **decision)`` without torch:
    speech spans of 16 kHz mono ``audio`` as sample indices."""
    return timestamps_from_probs(model.probabilities(audio), len(audio), **decision)
