"""Scoring speech in many languages (`m3 eval languages`): per recording of known language, whether each
speaker turn was heard in it, how far the text is from the reference, whether any English was
invented, and what it cost against plain faster-whisper.

* **language ID**: every turn of at least ``MIN_TURN`` seconds counts; it is right when the language
  its speaker was heard in with confidence (the turn's ``language``) is the recording's. A turn with no
  language decided counts as wrong.
* **WER / CER** after :func:`normalize`, which matches the references (FLEURS: lower case, no
  punctuation): lower case, typographic apostrophes made plain, punctuation dropped (any script's);
  Chinese and Japanese are scored by characters with spaces removed (their references have none).
* **invented**: utterances in English in a recording of another language (tiny.en's text, or a
  multilingual reading that came out English), as a share of the utterances.
* **cost**: CPU seconds of the diarize stage on the file (models loaded before timing), against plain
  faster-whisper Whisper base transcribing the whole file with its own language detection (what a user
  without m3 would run), in the same process.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from m3cli.stages.configs.diarize import DiarizeConfig
from m3cli.stages.core.errors import InputError

MIN_TURN = 3.0
BY_CHARACTER = {"zh", "ja", "yue", "th", "lo", "my", "km"}
_NAMED = re.compile(r"^([a-z]{2,3})_")
_PUNCT = re.compile(r"[^\w\s']|(?<!\w)'|'(?!\w)|_")


def normalize(text: str, language: str) -> str:
    """Lower case, ’ as ', punctuation dropped, spaces collapsed; outside English an apostrophe splits
    words (FLEURS writes "qu’« on" where Whisper writes "qu'on"); for languages scored by character, no
    spaces at all."""
    text = text.lower().replace("\u2019", "'")
    if language != "en":  # "qu’« on" (FLEURS) against "qu'on": elisions are split on both sides
        text = text.replace("'", " ")
    text = _PUNCT.sub(" ", text)
    return "".join(text.split()) if language in BY_CHARACTER else " ".join(text.split())


def error_rate(reference: str, hypothesis: str, language: str) -> float:
    """WER, or CER for languages written without spaces, after :func:`normalize`."""
    import jiwer

    ref, hyp = normalize(reference, language), normalize(hypothesis, language)
    if not ref:
        raise InputError("the reference transcript is empty after normalisation")
    if language in BY_CHARACTER:
        return float(jiwer.cer(ref, hyp)) if hyp else 1.0
    return float(jiwer.wer(ref, hyp)) if hyp else 1.0


def language_of(spec: str) -> tuple[Path, str]:
    """``FILE=LANG`` or a file named ``<lang>_...`` (the dev set's names) -> (file, language)."""
    if "=" in spec:
        path, _, language = spec.rpartition("=")
        return Path(path), language
    m = _NAMED.match(Path(spec).name)
    if not m:
        raise InputError(f"{spec}: name the language as FILE=LANG (e.g. talk.wav=pt) or call it <lang>_*.wav")
    return Path(spec), m[1]


@dataclass(frozen=True)
class LanguageRow:
    file: str
    language: str
    turns: int  # turns of at least MIN_TURN s
    turns_right: int
    heard: str  # languages the turns were heard in, "pt 0.99"
    error: float | None  # WER or CER (None: no reference)
    metric: str
    utterances: int
    invented: int
    cpu: float
    plain_cpu: float
    text: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def score_file(path: Path, language: str, pipe, plain) -> LanguageRow:
    """One recording through the diarize stage's pipeline ``pipe`` and through ``plain`` (a
    FasterWhisperAsr with nothing around it)."""
    from m3cli.stages.core.audio_file import read_audio_file
    from m3cli.stages.diarize.stage import diarize_audio, turn_records

    _, audio = read_audio_file(path)
    cpu = time.process_time()
    result = diarize_audio(audio, pipe)
    cpu = time.process_time() - cpu
    plain_cpu = time.process_time()
    plain.transcribe(audio, None)
    plain_cpu = time.process_time() - plain_cpu
    turns = [
        t for t in turn_records(result.turns, 0.0, None, result.languages) if t.end - t.start >= MIN_TURN
    ]
    heard = sorted({f"{t.language} {t.language_p:.2f}" for t in turns if t.language and t.language_p})
    text = " ".join(u["text"] for u in result.utterances)
    reference = path.with_suffix(".txt")
    error = error_rate(reference.read_text(encoding="utf-8"), text, language) if reference.is_file() else None
    invented = sum(1 for u in result.utterances if language != "en" and u.get("language") == "en")
    return LanguageRow(
        path.name,
        language,
        len(turns),
        sum(1 for t in turns if t.language == language),
        ", ".join(heard),
        error,
        "CER" if language in BY_CHARACTER else "WER",
        len(result.utterances),
        invented,
        round(cpu, 2),
        round(plain_cpu, 2),
        text,
    )


def score_languages(specs: Sequence[str], config: DiarizeConfig, device: str = "cpu") -> list[LanguageRow]:
    """Every ``FILE[=LANG]`` through one pipeline (models loaded before any timing)."""
    from m3cli.stages.backends.asr.faster_whisper import FasterWhisperAsr
    from m3cli.stages.diarize.stage import Pipeline

    files = [language_of(s) for s in specs]
    pipe = Pipeline(config, device)
    _ = pipe.asr, pipe.vad, pipe.diarizer
    if pipe.second_reading:
        pipe.second_reader()
    plain = FasterWhisperAsr("base", device=device)
    return [score_file(path, language, pipe, plain) for path, language in files]
