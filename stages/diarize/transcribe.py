"""The ASR's reading of a clip's speech: Whisper hears only the speech regions, joined, and every time it
gives is mapped back onto the clip's clock, without words read from its zero padding or a segment it
repeated in a loop.

Separate from the stage because it is one step with one input and one output (audio and speech
regions in, a :class:`~m3cli.stages.backends.asr.Transcript` out) that the second reading
(:mod:`m3cli.stages.diarize.second`) and the speech benchmarks call on their own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from m3cli.stages.backends.asr import RATE, AsrModel, AsrSegment, Span, Transcript, Word
from m3cli.stages.diarize.utterances import MAX_WORD_GAP

MIN_AUDIO_SECONDS = 0.5
ECHO_WORD = 0.1  # s per word: a repeated segment spoken faster than this is Whisper looping
PADDING_EPS = 0.02  # Whisper's time step (s): a word starting this close to the audio's end is padding


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
