"""Build speakers3.mp4, speakers6.mp4 and speakers8.mp4 (+ .rttm): three, six and eight real voices taking
turns, to check how many speakers the diarizer finds when it is not told.

Every speaker talks in 2.5-s pieces (three pieces each in speakers3, two in the others), 0.4 s apart,
in two rounds of different order, each piece cut from another recording of that speaker and brought to
one loudness (RMS 0.05) as a mixing desk would. speakers3 holds three LibriSpeech readers (one
recording setup: the hard case for telling voices apart); speakers6 adds the other two readers and the
man of LatentSync's kitchen demo; speakers8 has the five readers and all three LatentSync demo
speakers. Video: dark 64x64 frames (the audio is what is tested).

Sources: ../../shared/media/speech/librispeech (LibriSpeech test-other, CC BY 4.0) and
../../shared/media/video/latentsync_demo{1,2,3}_*.mp4 (bytedance/LatentSync@a229c39, Apache-2.0).
Run from the repository root: `python tests/data/make_speakers.py`.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import soundfile as sf

HERE = Path(__file__).resolve().parent
MEDIA = HERE.parent.parent.parent / "shared" / "media"
LIBRI = MEDIA / "speech" / "librispeech"
VIDEO = MEDIA / "video"
RATE, FPS, W, H = 16000, 5, 64, 64
GAP, PIECE, LEVEL = 0.4, 2.5, 0.05
SKIP = 0.5  # leading silence of the LibriSpeech files

READERS = {  # speaker -> recordings (LibriSpeech utterance ids)
    "1688": ["1688-142285-0002", "1688-142285-0003", "1688-142285-0004"],
    "1998": ["1998-15444-0002", "1998-15444-0003", "1998-15444-0004"],
    "2033": ["2033-164914-0002", "2033-164914-0003"],
    "367": ["367-130732-0002", "367-130732-0003", "367-130732-0004"],
    "533": ["533-1066-0003", "533-1066-0004"],
}
DEMOS = {  # speaker -> (video, piece starts in s: inside its continuous speech, by silero VAD)
    "ls_woman": ("latentsync_demo1_woman_outdoor.mp4", [0.3, 5.0]),
    "ls_man": ("latentsync_demo2_man_kitchen.mp4", [4.9, 10.5]),
    "ls_young_man": ("latentsync_demo3_youngman_sofa.mp4", [2.0, 10.0]),
}
FILES = {  # name -> speaking order of the rounds
    "speakers3": [["1688", "1998", "367"], ["367", "1688", "1998"], ["1998", "367", "1688"]],
    "speakers6": [
        ["1688", "1998", "ls_man", "2033", "367", "533"],
        ["533", "2033", "1688", "367", "ls_man", "1998"],
    ],
    "speakers8": [
        ["1688", "ls_woman", "1998", "2033", "ls_man", "367", "ls_young_man", "533"],
        ["ls_young_man", "1688", "533", "ls_woman", "367", "2033", "ls_man", "1998"],
    ],
}


def _video_audio(path: Path) -> np.ndarray:
    with av.open(str(path)) as container:
        resampler = av.AudioResampler(format="flt", layout="mono", rate=RATE)
        chunks = [
            f.to_ndarray().reshape(-1)
            for frame in container.decode(audio=0)
            for f in resampler.resample(frame)
        ]
    return np.concatenate(chunks).astype(np.float32)


def piece(speaker: str, k: int) -> np.ndarray:
    """The ``k``-th 2.5-s piece of ``speaker``, at the common loudness."""
    if speaker in READERS:
        name = READERS[speaker][k]
        speech, rate = sf.read(LIBRI / speaker / f"{name}.flac", dtype="float32")
        assert rate == RATE, name
        start = SKIP
    else:
        video, starts = DEMOS[speaker]
        speech, start = _video_audio(VIDEO / video), starts[k]
    out = speech[int(start * RATE) : int((start + PIECE) * RATE)]
    return (out * (LEVEL / max(float(np.sqrt(np.mean(out**2))), 1e-6))).astype(np.float32)


def write_mp4(out: Path, audio: np.ndarray, bit_rate: int | None = 32000) -> None:
    """A dark 64x64 video at 5 fps with ``audio`` (16 kHz mono) as AAC; ``bit_rate`` None: the encoder's."""
    n_frames = int(np.ceil(len(audio) / RATE * FPS))
    with av.open(str(out), "w") as container:
        vs = container.add_stream("libx264", rate=FPS)
        vs.width, vs.height, vs.pix_fmt = W, H, "yuv420p"
        aud = container.add_stream("aac", rate=RATE)
        aud.layout = "mono"
        if bit_rate:
            aud.bit_rate = bit_rate  # 32 kb/s, half the default: ~4 kB per second
        dark = np.full((H, W, 3), 16, np.uint8)
        for i in range(n_frames):
            frame = av.VideoFrame.from_ndarray(dark, format="rgb24")
            frame.pts, frame.time_base = i, Fraction(1, FPS)
            container.mux(vs.encode(frame))
        container.mux(vs.encode())
        for i in range(0, len(audio), 1024):
            chunk = audio[i : i + 1024].reshape(1, -1)
            frame = av.AudioFrame.from_ndarray(chunk, format="flt", layout="mono")
            frame.sample_rate, frame.pts, frame.time_base = RATE, i, Fraction(1, RATE)
            container.mux(aud.encode(frame))
        container.mux(aud.encode())


def build(name: str) -> list[tuple[float, float, str]]:
    parts = [np.zeros(int(GAP * RATE), np.float32)]
    turns = []
    t = GAP
    for k, order in enumerate(FILES[name]):
        for speaker in order:
            p = piece(speaker, k)
            turns.append((round(t, 3), round(t + len(p) / RATE, 3), speaker))
            parts += [p, np.zeros(int(GAP * RATE), np.float32)]
            t += len(p) / RATE + GAP
    write_mp4(HERE / f"{name}.mp4", np.clip(np.concatenate(parts), -1.0, 1.0))
    with (HERE / f"{name}.rttm").open("w") as fh:
        for s, e, spk in turns:
            fh.write(f"SPEAKER {name} 1 {s:.3f} {e - s:.3f} <NA> <NA> {spk} <NA> <NA>\n")
    return turns


if __name__ == "__main__":
    for file_name in FILES:
        turns = build(file_name)
        print(file_name, len({t[2] for t in turns}), "speakers", turns[-1][1] + GAP, "s")
