"""Where speech is lost between the speaker turns and the utterances, per eval recording.

For each recording with reference turns: turn DER, utterance DER, and the seconds of reference speech
that the turns cover but no utterance does, attributed to a cause:

* ``vad``: outside every VAD speech region (the ASR never heard it);
* ``asr``: inside VAD speech, but no ASR segment spans it (Whisper skipped or returned nothing there);
* ``words``: inside an ASR segment whose words leave it out (word times tighter than the speech, or
  words dropped as punctuation);
* ``split``: a word covers it but no utterance does (the word-to-turn assignment or the utterance split).

Those seconds are speaker-blind: in talk-over another speaker's utterance covers them. ``over`` counts,
per speaker, the reference speech inside that speaker's turns that no utterance of theirs covers but
another speaker's does: Whisper hears the mixture and writes one voice, so the second voice of an
overlapped stretch has no words to be an utterance (``wordless``: such turns, in seconds, with no word
of their speaker anywhere in them).

Intermediate results (VAD regions, raw ASR, turns) are kept in a pickle under ``--work`` so the
attribution can be rerun without the models. Usage::

    python bench/speech_coverage.py [--work /tmp/coverage] [--only NAME ...]
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # bench.*, behind the installed m3cli
DATA = ROOT / "tests" / "data"
HEAR_TURNS = True  # the stage's ASR hears VAD speech and the turns (False: VAD speech alone, as before)
SHARED = Path(os.environ.get("M3_SHARED_MEDIA", ROOT.parent / "shared" / "media"))


def recordings() -> list[tuple[str, Path, Path, Path | None]]:
    """(name, media, rttm, uem) of every recording with reference turns that is present here."""
    diar = SHARED / "diarization"
    out = [
        (n, DATA / f"{n}.wav", DATA / "debug.development.rttm", DATA / "debug.development.uem")
        for n in ("dev00", "dev01")
    ]
    out.append(("sample", diar / "sample.wav", diar / "sample.rttm", None))
    out += [
        (f"trn{i:02d}", diar / f"trn{i:02d}.wav", diar / "debug.train.rttm", diar / "debug.train.uem")
        for i in range(10)
    ]
    out.append(("katiesteve", diar / "katiesteve.wav", diar / "katiesteve.rttm", None))
    for name in ("latentsync_2people_turns", "grid_4people_turns"):
        out.append((name, DATA / "link" / f"{name}.mp4", DATA / "link" / f"{name}.rttm", None))
    for name in ("fixture", "libri5", "speakers3", "speakers6", "speakers8"):
        out.append((name, DATA / f"{name}.mp4", DATA / f"{name}.rttm", None))
    return [r for r in out if r[1].is_file() and r[2].is_file()]


_PIPE = None


def perceive(path: Path) -> dict:
    """VAD regions, turns, and the transcript on the audio's clock, as the stage computes them."""
    from m3cli.stages.backends.asr import merge_spans
    from m3cli.stages.core.audio_file import read_audio_file
    from m3cli.stages.diarize.stage import DiarizeConfig, Pipeline, speaker_turns
    from m3cli.stages.diarize.transcribe import transcribe_speech

    global _PIPE
    pipe = _PIPE = _PIPE or Pipeline(DiarizeConfig())
    _, audio = read_audio_file(path)
    speech = pipe.vad.speech(audio)
    turns = speaker_turns(audio, speech, pipe)
    heard = merge_spans([*speech, *((t.start, t.end) for t in turns)]) if HEAR_TURNS else speech
    transcript = transcribe_speech(audio, heard, pipe.asr, None)
    return {"duration": len(audio) / 16000, "speech": heard, "transcript": transcript, "turns": turns}


def measure(name: str, got: dict, ref, uem, fit: bool = True) -> dict:
    from m3cli.stages.diarize.utterances import fit_to_turns, split_by_speaker
    from m3cli.stages.eval.audio import crop_regions, diarization_error, merge_regions, subtract_regions

    utts = split_by_speaker(got["transcript"].segments, got["turns"], relabel=False)
    if fit:
        utts = fit_to_turns(utts, got["turns"])
    turns = [(t.start, t.end, t.speaker) for t in got["turns"]]
    uhyp = [(u["start"], u["end"], u["speaker_local"]) for u in utts]
    region = uem or [(0.0, got["duration"])]
    ref_speech = crop_regions(merge_regions((s, e) for s, e, _ in ref), region)
    heard = crop_regions(ref_speech, merge_regions((s, e) for s, e, _ in turns))
    lost = subtract_regions(heard, [(s, e) for s, e, _ in uhyp])
    segs = got["transcript"].segments
    causes = {}
    rest = lost
    for cause, cover in (
        ("vad", got["speech"]),
        ("asr", [(s.start, s.end) for s in segs]),
        ("words", [(w.start, w.end) for s in segs for w in s.words]),
    ):
        inside = crop_regions(rest, merge_regions(cover))
        causes[cause] = round(sum(e - s for s, e in subtract_regions(rest, inside)), 2)
        rest = inside
    causes["split"] = round(sum(e - s for s, e in rest), 2)
    over = wordless = 0.0
    for spk in {k for _, _, k in turns}:
        own = crop_regions(ref_speech, merge_regions((s, e) for s, e, k in turns if k == spk))
        mine = [(s, e) for s, e, k in uhyp if k == spk]
        missing = subtract_regions(own, mine)
        others = merge_regions((s, e) for s, e, k in uhyp if k != spk)
        over += sum(e - s for s, e in crop_regions(missing, others)) if others else 0.0
        for s, e, k in turns:
            if k == spk and not crop_regions([(s, e)], mine):
                wordless += sum(b - a for a, b in crop_regions(ref_speech, [(s, e)]))
    causes["over"] = round(over, 2)
    causes["wordless"] = round(wordless, 2)
    bad = [u for u in utts if u["end"] - u["start"] < 0.1 - 1e-6 or not any(c.isalnum() for c in u["text"])]
    return {
        "name": name,
        "bad": len(bad),
        "turn_der": diarization_error(ref, turns, uem).der,
        "utt_der": diarization_error(ref, uhyp, uem).der,
        "lost": round(sum(e - s for s, e in lost), 2),
        "lost_spans": [(round(s, 2), round(e, 2)) for s, e in lost if e - s >= 0.3],
        **causes,
    }


def main() -> None:
    from m3cli.stages.eval.audio import read_rttm, read_uem

    ap = argparse.ArgumentParser()
    ap.add_argument("--work", type=Path, default=Path("/tmp/coverage"))
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--words", action="store_true", help="utterance times from the words alone (before)")
    ap.add_argument("--fresh", action="store_true", help="recompute the pickled perception")
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    if not (SHARED / "diarization").is_dir():
        print(
            f"note: {SHARED}/diarization not found (set M3_SHARED_MEDIA): "
            "AMI trn, sample.wav and katiesteve are left out",
            file=sys.stderr,
        )
    head = ["turnDER", "uttDER", "lost", "vad", "asr", "words", "split", "over", "wordless", "bad"]
    print(f"{'file':26s} " + " ".join(f"{h:>7s}" for h in head))
    for name, path, rttm, uem_path in recordings():
        if args.only and name not in args.only:
            continue
        store = args.work / f"{name}.pkl"
        if args.fresh or not store.is_file():
            store.write_bytes(pickle.dumps(perceive(path)))
        got = pickle.loads(store.read_bytes())
        ref = read_rttm(rttm)[name]
        uem = read_uem(uem_path).get(name) if uem_path else None
        m = measure(name, got, ref, uem, fit=not args.words)
        print(
            f"{name:26s} {100 * m['turn_der']:6.1f}% {100 * m['utt_der']:6.1f}% {m['lost']:7.2f} "
            f"{m['vad']:7.2f} {m['asr']:7.2f} {m['words']:7.2f} {m['split']:7.2f} {m['over']:7.2f} "
            f"{m['wordless']:7.2f} {m['bad']:7d}  "
            f"{m['lost_spans'][:4]}"
        )


if __name__ == "__main__":
    main()
