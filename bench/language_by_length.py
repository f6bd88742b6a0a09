"""Whisper base's language detection against speech length, on real speech of known language.

Pieces of 0.5, 1, 1.5, 2, 3 and 5 s are cut one after another from each speaker's speech (at most
``PER`` per length, spread over it) and base's language detection is run on each; p >= LANGUAGE_P is a
decision, and a decision for any language but the speaker's is wrong. The choose set picks
``diarize_second.MIN_LANGUAGE_SECONDS``; the report set is only reported (README, "too short to tell").

    M3_SHARED_MEDIA=../shared/media python bench/language_by_length.py   # the table; rows on stderr
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.append(str(Path(__file__).resolve().parent.parent))  # bench.*, behind the installed m3cli
import bench  # noqa: E402,F401 - finds m3 (bench/__init__.py)
from m3cli.stages.backends.asr import RATE, make_asr
from m3cli.stages.diarize.second import LANGUAGE_P, MODEL

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
SHARED = Path(os.environ.get("M3_SHARED_MEDIA", ROOT.parent / "shared" / "media"))
LENGTHS = (0.5, 1.0, 1.5, 2.0, 3.0, 5.0)
PER = 5


def load(path: Path, start: float | None = None, end: float | None = None) -> np.ndarray:
    cut = ["-ss", str(start), "-to", str(end)] if start is not None else []
    cmd = ["ffmpeg", "-v", "error", *cut, "-i", str(path), "-ac", "1", "-ar", str(RATE), "-f", "f32le", "-"]
    return np.frombuffer(subprocess.run(cmd, capture_output=True, check=True).stdout, np.float32)


def librispeech(reader: str, n: int = 3) -> list[np.ndarray]:
    return [load(f) for f in sorted((SHARED / "speech" / "librispeech" / reader).glob("*.flac"))[:n]]


def turns_of(name: str, who: str) -> np.ndarray:
    """``who``'s turns in tests/data/NAME.mp4 (its RTTM), joined as the second reading joins them."""
    audio = load(DATA / f"{name}.mp4")
    rows = [line.split() for line in (DATA / f"{name}.rttm").read_text().splitlines()]
    spans = [(float(r[3]), float(r[3]) + float(r[4])) for r in rows if r[7] == who]
    return np.concatenate([audio[int(a * RATE) : int(b * RATE)] for a, b in spans])


def sources() -> list[tuple[str, str, str, list[np.ndarray]]]:
    two = SHARED / "video" / "latentsync_2people_turns.mp4"
    return [
        ("choose", "latentsync A", "pt", [load(two, 0.3, 5.0), load(two, 10.0, 15.0)]),
        ("choose", "reader 1688", "en", librispeech("1688")),
        ("choose", "reader 1998", "en", librispeech("1998")),
        ("report", "kitchen man", "pt", [load(SHARED / "video" / "latentsync_demo2_man_kitchen.mp4")]),
        ("report", "kitchen man in speakers6/8", "pt", [turns_of(f"speakers{k}", "ls_man") for k in (6, 8)]),
        ("report", "reader 2033", "en", librispeech("2033")),
        ("report", "reader 367", "en", librispeech("367")),
        ("report", "reader 533", "en", librispeech("533")),
        ("report", "jfk", "en", [load(DATA / "jfk.wav")]),
    ]


def main() -> None:
    reader = make_asr("faster-whisper", MODEL)
    rows = []
    for part, speaker, truth, arrays in sources():
        for seconds in LENGTHS:
            n = int(seconds * RATE)
            pieces = [(a, i * n) for a in arrays for i in range(len(a) // n)]
            if not pieces:
                continue
            for k in np.unique(np.linspace(0, len(pieces) - 1, min(PER, len(pieces))).round().astype(int)):
                audio, at = pieces[k]
                language, p = reader.detect_language(audio[at : at + n])
                row = {"set": part, "speaker": speaker, "truth": truth, "seconds": seconds}
                rows.append({**row, "offset": at / RATE, "language": language, "p": round(p, 3)})
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    for part in ("choose", "report"):
        print(f"\n{part} set\n| s | pieces | decided | wrong |\n|---|---|---|---|")
        for seconds in LENGTHS:
            some = [r for r in rows if r["set"] == part and r["seconds"] == seconds]
            decided = [r for r in some if r["p"] >= LANGUAGE_P]
            wrong = [r for r in decided if r["language"] != r["truth"]]
            which = ", ".join(f"{r['speaker']}: {r['language']} {r['p']:.2f}" for r in wrong)
            print(f"| {seconds:g} | {len(some)} | {len(decided)} | {len(wrong)} {which} |")


if __name__ == "__main__":
    main()
