"""The second reading: speech the first ASR left without words, read again by multilingual Whisper base.

The default model, tiny.en, reads English only. A speaker in another language is heard by the diarizer
and given no words (latentsync_2people_turns: person A speaks Brazilian Portuguese; tiny.en leaves his
first turn empty), so the memory says he spoke and not what, or given English words it invented (the
kitchen man through speakers6: "Then said"). With ``--second-reading auto`` (the default; ``off``
never reads twice) and Whisper base installed (a dependency of the package), a speaker the first
reading left partly without words is asked its language, and a speaker of another language is read
again whole by base; only text that passes every guard is kept:

* **who is asked**: per speaker of a clip, the stretches of its turns (overlapping or touching turns of
  one speaker) that no utterance of that speaker touches, less what another speaker's utterance holds
  (the first reading heard words there: talk-over is one mixture to Whisper), must make at least
  ``MIN_SECONDS``. On the dev table this leaves 4 speakers to ask instead of 9 (2 not Portuguese
  instead of 7).
* **the language**: base's language detection (Whisper's language token) on all of that speaker's
  turns in the clip (their first 30 s), not on the unread stretches alone: latentsync A's unread
  stretches came out Portuguese at 0.60 (1.8 s) and Chinese at 0.43 (1.2 s) each, Hebrew at 0.33
  joined, and Portuguese at 0.97 over all his turns. A speaker with under ``MIN_LANGUAGE_SECONDS`` of
  turns in the clip gets no language at all (too short to tell). Only a language other than English
  detected with probability ``LANGUAGE_P`` or more is read: English was already read by the first
  model, and base reads English no better (README).
* **what is read**: all of that speaker's turns in the clip, joined through short pauses, and the
  first reading's utterances of that speaker give way whatever the second keeps: tiny.en's words for
  a language it cannot read are English it made up (speakers6, speakers8, latentsync: every one).
* **the text**: transcribed in that language (not translated: base's translations of latentsync's
  Portuguese were wrong, "I got the zoom-mesh" for "Cheguei e faz um mês"); a Whisper segment is kept
  only where its mean log-probability is at least ``MIN_LOGPROB``, its no-speech probability at most
  ``MAX_NO_SPEECH`` and its compression ratio at most ``MAX_COMPRESSION`` (Whisper's own fallback
  thresholds, here a refusal: the ladder's last try is otherwise kept whatever its measures); the
  first reading's word guards (letters or digits, no unsure tail outside the turns) apply too.
* **what is recorded**: a kept utterance carries ``language`` and ``second_reading: true``; every
  stretch asked records the language heard and its probability (the turns' ``language`` where
  ``LANGUAGE_P`` is met), so a turn not transcribed still says in what language it was spoken.
"""

from __future__ import annotations

import importlib.util
import logging
import time
from collections.abc import Sequence

import numpy as np

from m3cli.stages.backends.asr import RATE, AsrSegment, Span, SpeakerTurn, speaker_stretches, subtract_spans
from m3cli.stages.backends.asr.faster_whisper import (
    COMPRESSION_RATIO_THRESHOLD,
    LOG_PROB_THRESHOLD,
    NO_SPEECH_THRESHOLD,
    FasterWhisperAsr,
)
from m3cli.stages.diarize.language_id import Heard

log = logging.getLogger(__name__)

VERSION = "second-reading/7"  # the rule below; a change must not reuse results read by another
# 2: no language decided on less than MIN_LANGUAGE_SECONDS of a speaker's turns
# 3: one decoding temperature (TEMPERATURES); what another speaker's utterance holds is not read again
# 4: a speaker found to speak another language is read whole; its first-reading utterances give way
# 5: every speaker's language is heard first (stages/diarize/language_id.py); the foreign ones are read
# 6: the no-speech probability refuses only with an unsure text (Whisper's own rule)
MODEL = "base"  # the packaged multilingual model that reads a second time (installed with the package)
MODES = ("auto", "off")
LANGUAGE_P = 0.5  # a language detected with less probability is not read (faster-whisper's own default)
MIN_LOGPROB = LOG_PROB_THRESHOLD  # Whisper's own guards, here a refusal
MAX_NO_SPEECH = NO_SPEECH_THRESHOLD
MAX_COMPRESSION = COMPRESSION_RATIO_THRESHOLD
TEMPERATURES = (0.0,)
"""The second reading decodes once, by beam search, without the first reading's fallback ladder: a
segment that fails the guards above is refused anyway, and the ladder's samples at higher temperatures
are what Whisper invents with. On the 10-minute footage (13 utterances read a second time, all
Portuguese) the text is identical to the ladder's and its transcriptions cost 18% less CPU (7.9 -> 6.5 s)."""
MAX_PAUSE = 1.0  # unread stretches of one speaker this close are read as one (the utterances' MAX_WORD_GAP)
MIN_SECONDS = 0.5  # a speaker whose unread stretches make less than this in a clip is not asked
MIN_LANGUAGE_SECONDS = 2.0
"""A speaker with less than this many seconds of turns in a clip gets no language (and no second
reading): Whisper's language detection is unreliable on short audio (speakers6 through 30-s clips: the
kitchen man's 1.5-s piece, Portuguese, came out German at p >= 0.5). Chosen by measurement on real
speech of known language (README, "too short to tell"; bench/language_by_length.py): pieces of 0.5, 1,
1.5, 2, 3 and 5 s cut from latentsync_2people_turns' Portuguese person A and LibriSpeech readers 1688
and 1998; the shortest length from which no piece on that set got a wrong language at p >= LANGUAGE_P
(at 0.5 and 1 s A came out Spanish, at 1.5 s English). Reported on the others (the kitchen man,
readers 2033, 367, 533, jfk): wrong decisions fall from 7 of 90 pieces under 2 s to 3 of 68 from 2 s,
where they are no longer about length alone (a 5-s piece of reader 2033: Latin at 0.85)."""


def installed() -> bool:
    """Whether the packaged model that reads a second time is installed (without loading it)."""
    from m3cli.stages.backends.asr.models import PACKAGED

    return all(importlib.util.find_spec(module) is not None for module, _ in PACKAGED[MODEL].packages)


def identity() -> str:
    """What a result read twice depends on: the model's files and decoding, and this rule."""
    rule = (
        LANGUAGE_P,
        MIN_LOGPROB,
        MAX_NO_SPEECH,
        MAX_COMPRESSION,
        TEMPERATURES,
        MAX_PAUSE,
        MIN_SECONDS,
        MIN_LANGUAGE_SECONDS,
    )
    return f"{VERSION} {FasterWhisperAsr.identity(MODEL)} {rule}"


def unread(turns: Sequence[SpeakerTurn], utterances: Sequence[dict]) -> dict[str, list[Span]]:
    """Per speaker, the stretches of its turns that no utterance of that speaker touches, less what
    another speaker's utterance holds: there the first reading heard words, in talk-over written as one
    voice's (the two are one mixture to Whisper), and reading it again would repeat them."""
    out: dict[str, list[Span]] = {}
    for speaker, spans in speaker_stretches(turns).items():
        mine = [(u["start"], u["end"]) for u in utterances if u["speaker_local"] == speaker]
        theirs = [(u["start"], u["end"]) for u in utterances if u["speaker_local"] != speaker]
        left = [(a, b) for a, b in spans if not any(min(e, b) > max(s, a) for s, e in mine)]
        left = subtract_spans(left, theirs)
        if left:
            out[speaker] = left
    return out


def through_pauses(spans: Sequence[Span], speaker: str, turns: Sequence[SpeakerTurn]) -> list[Span]:
    """``spans`` of ``speaker`` joined across the pauses between them shorter than ``MAX_PAUSE`` where
    no other speaker's turn lies, so Whisper hears a pause as it was spoken and not a splice: latentsync
    A's two stretches, 0.4 s apart, read spliced gave "Cheguei, fai zoom-meix, zoom-meix que cheguei.",
    read through the pause "Cheguei e faz um mês, um mês que cheguei." (base reading his whole
    clip: "Cheguei e faz um mês, um mês que eu cheguei.")."""
    others = [(t.start, t.end) for t in turns if t.speaker != speaker]
    out: list[Span] = []
    for a, b in spans:
        if out and a - out[-1][1] < MAX_PAUSE and not any(min(e, a) > max(s, out[-1][1]) for s, e in others):
            out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


def trustworthy(seg: AsrSegment) -> bool:
    """Whether Whisper's own measures of a segment pass, as Whisper applies them (a measure the backend
    does not give fails: text of unknown quality is not kept): mean log-probability at least
    ``MIN_LOGPROB``, compression ratio at most ``MAX_COMPRESSION``, and not "no speech" (no-speech
    probability over ``MAX_NO_SPEECH`` *with* an unsure text, which the first test already refuses).

    The no-speech probability alone refuses nothing: the speaker's turns are speech by the diarizer's
    and the language ID's word, and on the LatentSync kitchen man (Portuguese over kitchen noise) every
    segment of his 19.5 s came with a no-speech probability of 0.72 at log-probability -0.55 ("Eu
    cheguei e faz um mês, um mês que eu cheguei."), so refusing on it alone kept none of his words."""
    return (
        seg.avg_logprob is not None
        and seg.avg_logprob >= MIN_LOGPROB
        and seg.no_speech_prob is not None
        and seg.compression_ratio is not None
        and seg.compression_ratio <= MAX_COMPRESSION
    )


def second_reading(
    audio: np.ndarray,
    turns: Sequence[SpeakerTurn],
    utterances: list[dict],
    reader_of,
    languages: dict[str, Heard],
    translate: bool = False,
) -> tuple[list[dict], list[list]]:
    """(the clip's utterances after the second reading, every speaker's stretches with the language
    heard on them: ``[start, end, speaker, language, p]``; a speaker heard in another language while
    English stayed a candidate has none: LibriSpeech readers heard as Latin were written "speaks Latin").

    ``languages`` is what :func:`m3cli.stages.diarize.language_id.speaker_languages` heard before tiny.en read
    anything. A speaker surely heard in another language is read whole by the multilingual model in
    that language, and whatever the first reading wrote for it gives way: tiny.en reads English only, so
    what it wrote for such a speaker is its guess in English (the kitchen man through speakers6: "Then
    said", "Arta. This"; latentsync's A: "both the first time in Disneyland in", a line of the other
    man's, in his second turn). With ``translate`` every utterance read so also carries Whisper's
    English translation of its audio (``translation``).

    ``reader_of()`` gives the multilingual model (loaded on the first clip that needs it)."""
    from m3cli.stages.diarize.transcribe import transcribe_speech
    from m3cli.stages.diarize.utterances import fit_to_turns, split_by_speaker

    new: list[dict] = []
    heard: list[list] = []
    replaced: set[str] = set()
    stretches = speaker_stretches(turns)
    for speaker, known in sorted(languages.items()):
        voice = stretches.get(speaker, [])
        if known.foreign or known.language == "en":  # not a language English might still be
            heard += [[a, b, speaker, known.language, known.p] for a, b in voice]
        if not known.foreign or not voice:
            continue
        reader = reader_of()
        cpu = time.process_time()
        transcript = transcribe_speech(audio, through_pauses(voice, speaker, turns), reader, known.language)
        kept = [seg for seg in transcript.segments if trustworthy(seg)]
        own = [SpeakerTurn(a, b, speaker) for a, b in voice]
        found = split_by_speaker(kept, own, relabel=False)
        for u in found:
            u["speaker_local"] = speaker
            u["language"] = known.language
            u["language_p"] = known.p
            u["second_reading"] = True
        found = fit_to_turns(found, turns)
        if translate:
            for u in found:
                u["translation"] = translation(audio, u, reader, known.language)
        new += found
        replaced.add(speaker)
        log.debug(
            "%s heard in %s at %.2f: %d of %d segments kept, %d words of the first reading replaced, "
            "%.2f CPU s",
            speaker,
            known.language,
            known.p,
            len(kept),
            len(transcript.segments),
            sum(len(u["words"]) for u in utterances if u["speaker_local"] == speaker),
            time.process_time() - cpu,
        )
    if not replaced:
        return utterances, heard
    first = [u for u in utterances if u["speaker_local"] not in replaced]
    return sorted(first + new, key=lambda u: (u["start"], u["end"])), heard


def translation(audio: np.ndarray, u: dict, reader, language: str) -> str:
    """Whisper's English translation (its translate task) of the audio of utterance ``u``; segments that
    fail the guards are left out, so an unsure translation is shorter, not invented."""
    piece = audio[int(round(u["start"] * RATE)) : int(round(u["end"] * RATE))]
    if len(piece) < RATE // 2:
        return ""
    out = reader.transcribe(piece, language, task="translate")
    return " ".join(seg.text.strip() for seg in out.segments if trustworthy(seg)).strip()
