"""Whisper's decoding choices and the ASR model, measured by WER on every set with a transcript and by
the ASR's CPU time.

Sets with a reference transcript: jfk.wav (22 words), grid_4people_turns.mp4 (36 words: the GRID
sentences its clip names encode, e.g. ``bbaf2n`` = "bin blue at f two now"; a digit the ASR writes,
``F2``, is read as its word) and pyannote's sample.wav (81 words, its STM). Choices are made on jfk and
grid; sample.wav is held out and reported untouched. Each recording goes through the diarize stage's
own steps (VAD, speaker turns, ASR on the VAD's speech and the turns, utterances fitted to the turns);
only the decoding options change. CPU is the process time of the ASR calls alone, on one thread.

    python bench/asr_decoding.py                 # the decoding sweep with the default model (tiny.en)
    python bench/asr_decoding.py --models tiny.en base --only default
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # bench.*, behind the installed m3cli
from bench.speech_coverage import DATA, SHARED  # noqa: E402

DIGITS = "zero one two three four five six seven eight nine".split()
GRID_WORDS = {
    "command": {"b": "bin", "l": "lay", "p": "place", "s": "set"},
    "colour": {"b": "blue", "g": "green", "r": "red", "w": "white"},
    "preposition": {"a": "at", "b": "by", "i": "in", "w": "with"},
    "adverb": {"a": "again", "n": "now", "p": "please", "s": "soon"},
}

#: name -> (decode option changes, VAD speech padding in ms or None for the default)
CHOICES: dict[str, tuple[dict, int | None]] = {
    "default": ({}, None),
    "greedy (beam 1)": ({"beam_size": 1}, None),
    "beam 3": ({"beam_size": 3}, None),
    "beam 8": ({"beam_size": 8}, None),
    "patience 2": ({"patience": 2.0}, None),
    "length penalty 0.8": ({"length_penalty": 0.8}, None),
    "length penalty 1.2": ({"length_penalty": 1.2}, None),
    "ladder T0 only": ({"temperature": [0.0]}, None),
    "ladder 6-step": ({"temperature": [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]}, None),
    "VAD pad 100 ms": ({}, 100),
    "VAD pad 400 ms": ({}, 400),
}


def grid_reference(clips: list[str]) -> str:
    """The GRID sentence each clip name encodes: command, colour, preposition, letter, digit, adverb."""
    out = []
    for c in clips:
        digit = DIGITS[0] if c[4] == "z" else DIGITS[int(c[4])]
        out.append(
            f"{GRID_WORDS['command'][c[0]]} {GRID_WORDS['colour'][c[1]]} {GRID_WORDS['preposition'][c[2]]} "
            f"{c[3]} {digit} {GRID_WORDS['adverb'][c[5]]}"
        )
    return " ".join(out)


def spell_digits(text: str) -> str:
    """``F2`` -> ``F two``: GRID's letter-digit pairs as their words, so a written digit is not an error."""
    return re.sub(r"(\d)", lambda m: f" {DIGITS[int(m[1])]} ", text)


def sets() -> list[tuple[str, Path, str, bool]]:
    """(name, media, reference, held out) of every set with a transcript present here."""
    import json

    out = [("jfk", DATA / "jfk.wav", (DATA / "jfk.ref.txt").read_text(), False)]
    truth = SHARED / "video" / "grid_4people_turns.truth.json"
    if truth.is_file():
        order = [t["grid_clip"].split(".")[0] for t in json.loads(truth.read_text())["turns"]]
        out.append(("grid", DATA / "link" / "grid_4people_turns.mp4", grid_reference(order), False))
    stm = SHARED / "diarization" / "sample.stm"
    if stm.is_file():
        ref = " ".join(line.split(maxsplit=5)[5] for line in stm.read_text().splitlines())
        out.append(("sample", SHARED / "diarization" / "sample.wav", ref, True))
    return out


class Decoder:
    """A faster-whisper model on one thread decoding with changed options; counts its CPU time."""

    name = "faster-whisper"

    def __init__(self, model: str | None) -> None:
        from m3cli.stages.backends.asr.faster_whisper import FasterWhisperAsr

        self.asr = FasterWhisperAsr(model, threads=1)
        self.changes: dict = {}
        self.cpu = 0.0
        self.audio_seconds = 0.0

    def transcribe(self, audio, language):
        import ctranslate2

        from m3cli.stages.backends.asr import AsrSegment, Transcript, Word
        from m3cli.stages.backends.asr.faster_whisper import decode_options
        from m3cli.stages.core.threads import one_blas_thread

        if not self.asr.multilingual:
            language = "en"
        ctranslate2.set_random_seed(0)
        t0 = time.process_time()
        out = []
        with one_blas_thread():
            segs, info = self.asr._model.transcribe(
                audio, language=language, **{**decode_options(), **self.changes}
            )
            for s in segs:
                words = tuple(Word(w.start, w.end, w.word, w.probability) for w in s.words or ())
                out.append(AsrSegment(s.start, s.end, s.text.strip(), words))
        self.cpu += time.process_time() - t0
        self.audio_seconds += len(audio) / 16000
        return Transcript(tuple(out), info.language)


def perceive(path: Path) -> dict:
    """Audio, VAD speech and speaker turns, as the stage computes them (model-independent)."""
    from m3cli.stages.core.audio_file import read_audio_file
    from m3cli.stages.diarize.stage import DiarizeConfig, Pipeline, speaker_turns

    pipe = Pipeline(DiarizeConfig())
    _, audio = read_audio_file(path)
    speech = pipe.vad.speech(audio)
    return {"audio": audio, "speech": speech, "turns": speaker_turns(audio, speech, pipe)}


def padded_speech(audio, pad_ms: int):
    from m3cli.stages.backends.asr import faster_whisper as fw

    old = fw.VAD_SPEECH_PAD_MS
    fw.VAD_SPEECH_PAD_MS = pad_ms
    try:
        return fw.SileroVad().speech(audio)
    finally:
        fw.VAD_SPEECH_PAD_MS = old


def hypothesis(got: dict, decoder: Decoder, speech) -> str:
    from m3cli.stages.backends.asr import merge_spans
    from m3cli.stages.diarize.transcribe import transcribe_speech
    from m3cli.stages.diarize.utterances import fit_to_turns, split_by_speaker

    turns = got["turns"]
    heard = merge_spans([*speech, *((t.start, t.end) for t in turns)])
    transcript = transcribe_speech(got["audio"], heard, decoder, None)
    utterances = fit_to_turns(split_by_speaker(transcript.segments, turns, relabel=False), turns)
    return " ".join(u["text"] for u in utterances)


def main() -> None:
    from m3cli.stages.eval.audio import word_error

    ap = argparse.ArgumentParser()
    ap.add_argument("--models", nargs="*", default=["tiny.en"])
    ap.add_argument("--only", nargs="*", help="choices to measure (default: all)")
    args = ap.parse_args()
    data = [(name, perceive(path), ref, held) for name, path, ref, held in sets()]
    names = [n for n, _, _, _ in data]
    print(
        f"{'model':8s} {'choice':20s} "
        + " ".join(f"{n + ' WER':>11s}" for n in names)
        + f" {'dev errors':>10s} {'ASR CPU s':>9s} {'CPU s/audio s':>13s}"
    )
    for model in args.models:
        decoder = Decoder(model)
        for label, (changes, pad) in CHOICES.items():
            if args.only and label not in args.only:
                continue
            decoder.changes, decoder.cpu, decoder.audio_seconds = changes, 0.0, 0.0
            cells, dev_errors = [], 0
            for name, got, ref, held in data:
                speech = got["speech"] if pad is None else padded_speech(got["audio"], pad)
                hyp = hypothesis(got, decoder, speech)
                w = word_error(ref, spell_digits(hyp) if name == "grid" else hyp)
                errors = w.substitutions + w.deletions + w.insertions
                dev_errors += 0 if held else errors
                cells.append(f"{100 * w.wer:5.1f}% ({errors:2d})")
            print(
                f"{model:8s} {label:20s} "
                + " ".join(f"{c:>11s}" for c in cells)
                + f" {dev_errors:10d} {decoder.cpu:9.2f} {decoder.cpu / decoder.audio_seconds:13.3f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
