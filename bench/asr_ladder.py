"""Whisper's temperature ladder and hallucination guards, measured on short clips and whole recordings.

Short clips: every sentence of sample.wav (its STM) and jfk.wav cut at its reference times and followed
by 2 s of digital silence, or of low white noise (-50 dBFS), as a short video's last clip ends; the
count of words the ASR adds after the sentence is the measure of invention. Whole recordings: WER of
jfk.wav and sample.wav, and how many windows fall back to a temperature above 0 on every eval set.

    python bench/asr_ladder.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # bench.*, behind the installed m3cli
from bench.speech_coverage import SHARED, recordings  # noqa: E402

LADDERS = {
    "T0": (0.0,),
    "3-step": (0.0, 0.4, 0.8),
    "6-step": (0.0, 0.2, 0.4, 0.6, 0.8, 1.0),
}


class Probe:
    """The bundled model decoding with one ladder; remembers the temperature of every segment."""

    name = "faster-whisper"

    def __init__(self, model, temperatures, silence) -> None:
        self.model, self.temperatures, self.silence = model, temperatures, silence
        self.fallbacks = 0

    def transcribe(self, audio, language):
        from m3cli.stages.backends.asr import AsrSegment, Transcript, Word
        from m3cli.stages.backends.asr.faster_whisper import decode_options

        opts = decode_options(self.temperatures)
        opts["hallucination_silence_threshold"] = self.silence
        segs, info = self.model._model.transcribe(audio, language="en", **opts)
        out = []
        for s in segs:
            self.fallbacks += s.temperature > 0
            words = tuple(Word(w.start, w.end, w.word, w.probability) for w in s.words or ())
            out.append(AsrSegment(s.start, s.end, s.text.strip(), words))
        return Transcript(tuple(out), info.language)


def short_clips():
    from m3cli.stages.core.audio_file import read_audio_file

    _, sample = read_audio_file(SHARED / "diarization" / "sample.wav")
    clips = []
    for line in (SHARED / "diarization" / "sample.stm").read_text().splitlines():
        f = line.split(maxsplit=5)
        a, b = int(float(f[3]) * 16000), int(float(f[4]) * 16000)
        clips.append((f"sample {f[3]}", sample[a:b], f[5]))
    _, jfk = read_audio_file(ROOT / "tests" / "data" / "jfk.wav")
    clips.append(("jfk", jfk, (ROOT / "tests" / "data" / "jfk.ref.txt").read_text()))
    rng = np.random.default_rng(0)
    out = []
    for name, audio, ref in clips:
        pad = int(2.0 * 16000)
        out.append((f"{name} +silence", np.r_[audio, np.zeros(pad, np.float32)].astype(np.float32), ref))
        noise = (rng.standard_normal(pad) * 10 ** (-50 / 20)).astype(np.float32)
        out.append((f"{name} +noise", np.r_[audio, noise].astype(np.float32), ref))
    return out


def main() -> None:
    from m3cli.stages.core.audio_file import read_audio_file
    from m3cli.stages.diarize.stage import DiarizeConfig, Pipeline
    from m3cli.stages.diarize.transcribe import transcribe_speech
    from m3cli.stages.eval.audio import normalize_text, word_error

    pipe = Pipeline(DiarizeConfig())
    clips = short_clips()
    whole = [(n, p) for n, p, _, _ in recordings()]
    whole.append(("jfk", ROOT / "tests" / "data" / "jfk.wav"))
    settings = [(k, v, s) for k, v in LADDERS.items() for s in (None, 1.0)]
    print(
        f"{'ladder':8s} {'hst':>4s} {'short: inserted':>15s} {'clips w/ ins':>12s} {'jfk WER':>8s} "
        f"{'sample WER':>10s} {'fallback windows (all sets)':>28s}"
    )
    for label, temps, silence in settings:
        probe = Probe(pipe.asr, temps, silence)
        inserted, bad = 0, []
        for name, audio, ref in clips:
            speech = pipe.vad.speech(audio)
            hyp = " ".join(s.text for s in transcribe_speech(audio, speech, probe, "en").segments)
            w = word_error(ref, hyp)
            inserted += w.insertions
            if w.insertions:
                bad.append(f"{name}: {normalize_text(hyp)!r}")
        probe.fallbacks = 0
        wers = {"jfk": float("nan"), "sample": float("nan")}
        for name, path in whole if silence else ():
            _, audio = read_audio_file(path)
            hyp = " ".join(
                s.text for s in transcribe_speech(audio, pipe.vad.speech(audio), probe, "en").segments
            )
            if name == "jfk":
                wers[name] = word_error((ROOT / "tests" / "data" / "jfk.ref.txt").read_text(), hyp).wer
            if name == "sample":
                ref = " ".join(
                    ln.split(maxsplit=5)[5]
                    for ln in (SHARED / "diarization" / "sample.stm").read_text().splitlines()
                )
                wers[name] = word_error(ref, hyp).wer
        print(
            f"{label:8s} {silence or '-':>4} {inserted:15d} {len(bad):12d} {100 * wers['jfk']:7.1f}% "
            f"{100 * wers['sample']:9.1f}% {probe.fallbacks:28d}"
        )
        for b in bad:
            print("   ", b)


if __name__ == "__main__":
    main()
