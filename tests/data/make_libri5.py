"""Build libri5.mp4 + libri5.rttm: five LibriSpeech readers taking turns in one 30-s clip.

Four readers speak in 1.9-4.5 s pieces; reader 533 is heard only in three short pieces (0.9-1.5 s),
the case where a voice id must come from pooling a speaker's short pieces. Video: dark 64x64 frames
(the audio is what is tested). Sources: ../../shared/media/speech/librispeech (LibriSpeech test-other,
CC BY 4.0). Run from the repository root: `python tests/data/make_libri5.py`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import soundfile as sf
from make_speakers import write_mp4

HERE = Path(__file__).resolve().parent
SRC = HERE.parent.parent.parent / "shared" / "media" / "speech" / "librispeech"
RATE = 16000
GAP = 0.4
SKIP = 0.5  # leading silence of the LibriSpeech files
# (speaker, utterance file, seconds)
PIECES = [
    ("1688", "1688-142285-0000.flac", 4.5),
    ("533", "533-1066-0000.flac", 1.2),
    ("1998", "1998-15444-0000.flac", 4.0),
    ("2033", "2033-164914-0000.flac", 4.0),
    ("533", "533-1066-0001.flac", 0.9),
    ("367", "367-130732-0000.flac", 4.0),
    ("1688", "1688-142285-0001.flac", 2.5),
    ("533", "533-1066-0002.flac", 1.5),
    ("1998", "1998-15444-0001.flac", 2.5),
    ("367", "367-130732-0001.flac", 2.5),
]


def build(out: Path = HERE / "libri5.mp4") -> list[tuple[float, float, str]]:
    parts = [np.zeros(int(GAP * RATE), np.float32)]
    turns = []
    t = GAP
    for speaker, name, seconds in PIECES:
        speech, rate = sf.read(SRC / speaker / name, dtype="float32")
        assert rate == RATE, name
        piece = speech[int(SKIP * RATE) : int((SKIP + seconds) * RATE)]
        turns.append((round(t, 3), round(t + len(piece) / RATE, 3), speaker))
        parts += [piece, np.zeros(int(GAP * RATE), np.float32)]
        t += len(piece) / RATE + GAP
    audio = np.concatenate(parts)
    write_mp4(out, audio, bit_rate=None)  # libri5.mp4 was made at the encoder's default rate
    with (HERE / "libri5.rttm").open("w") as fh:
        for s, e, spk in turns:
            fh.write(f"SPEAKER libri5 1 {s:.3f} {e - s:.3f} <NA> <NA> {spk} <NA> <NA>\n")
    return turns


if __name__ == "__main__":
    for turn in build():
        print(*turn)
