"""Utterances from words and turns: each word takes a speaker from the turns, runs of one speaker's words
become utterances (cut at pauses, where another speaker holds the floor, or where a talk-over's second
voice has a wordless stretch), and each utterance takes its times from its speaker's turns.

Separate from the stage because it is pure list work on the ASR's segments and the diarizer's turns,
no model and no audio: the part tests and the speech benchmarks exercise on hand-made turns and words,
and the one the second reading (:mod:`m3cli.stages.diarize.second`) reuses.
"""

from __future__ import annotations

from collections.abc import Sequence

from m3cli.stages.backends.asr import (
    AsrSegment,
    Span,
    SpeakerTurn,
    Word,
    local_names,
    speaker_stretches,
    subtract_spans,
)

MAX_WORD_GAP = 1.0  # an utterance is also cut where its words pause this long (s)
UNSURE_WORD = 0.5  # a word below this probability at a segment's end, outside every turn, is dropped
MIN_UTTERANCE = 0.1  # a shorter utterance is widened to this around its middle (s): a zero-length one
# overlaps no turn, so it could name a speaker no turn has (libri5 once had "-" at 5.392-5.392 s)


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
