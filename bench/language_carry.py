"""How alike the diarizer's voices are across clips: the choice of ``carried.CARRY_COSINE``.

Every recording below is cut into m3's 30-s clips and diarized as `m3 diarize` does (VAD, then the
default diarizer); each speaker with at least ``language_id.MIN_SECONDS`` of turns in a clip gives its
voice (the mean of the CAM++ windows the diarizer clustered under it) and Whisper base's answer on its
first 6 s. Pairs of voices from different clips are then scored by cosine:

* **choose** (the bar is picked here): the English speakers, the AMI excerpts and joined diarization
  recordings (speaker by majority overlap with the RTTM) and the 50 LibriSpeech utterances (speaker
  = reader). Same person against different people; the bar is the lowest at which no pair of
  different people passes, plus a margin.
* **report** (never used to choose): every speaker of the eight-language FLEURS recordings against
  every voice of the choose set heard in English at ``LANGUAGE_P`` or more: a pair over the bar would
  have carried English to a speaker of another language.

    M3_SHARED_MEDIA=../shared/media python bench/language_carry.py   # the tables; progress on stderr
"""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np

sys.path.append(str(Path(__file__).resolve().parent.parent))  # bench.*, behind the installed m3cli
import bench  # noqa: E402,F401 - finds m3 (bench/__init__.py)
from bench.common import table  # noqa: E402
from m3cli.stages.backends.asr import RATE, speaker_stretches  # noqa: E402
from m3cli.stages.core.audio_file import read_audio_file  # noqa: E402
from m3cli.stages.diarize.carried import CARRY_COSINE  # noqa: E402
from m3cli.stages.diarize.language_id import LANGUAGE_P, MIN_SECONDS, SECONDS, first_seconds  # noqa: E402
from m3cli.stages.diarize.stage import DiarizeConfig, Pipeline, speaker_diarization  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("M3_SHARED_MEDIA", ROOT.parent / "shared" / "media"))
CLIP = 30.0
BARS = (0.6, 0.65, 0.7, 0.75, 0.8)


def _truth() -> dict[str, list[tuple[float, float, str]]]:
    out: dict[str, list[tuple[float, float, str]]] = {}
    for rttm in sorted((SHARED / "diarization").glob("*.rttm")):
        for line in rttm.read_text().splitlines():
            f = line.split()
            out.setdefault(f[1], []).append((float(f[3]), float(f[3]) + float(f[4]), f[7]))
    return out


def recordings() -> list[tuple[str, Path, object]]:
    """(set, file, who: a callable of (start, end spans) or a fixed name)."""
    truth = _truth()
    out: list[tuple[str, Path, object]] = []
    for path in sorted((SHARED / "diarization").glob("*.wav")):
        if path.stem in truth:
            out.append(("choose", path, truth[path.stem]))
    for path in sorted((SHARED / "speech" / "librispeech").glob("*/*.flac")):
        out.append(("choose", path, path.parent.name))
    for path in sorted((SHARED / "speech" / "languages").glob("*.wav")):
        out.append(("report", path, path.stem))
    return out


def diarized_clips(path: Path, pipe: Pipeline) -> Iterator[tuple[int, np.ndarray, list, list, dict]]:
    """Each of ``path``'s 30-s clips as `m3 diarize` cuts and diarizes it: (clip number, its audio,
    the VAD's speech, the speaker turns, each speaker's voice); clips without speech are left out."""
    audio = np.asarray(read_audio_file(path, None)[1], dtype=np.float32)
    n = max(1, int(np.ceil(len(audio) / RATE / CLIP - 0.2)))  # a last piece under 6 s joins the one before
    for k in range(n):
        clip = audio[int(k * CLIP * RATE) : int((k + 1) * CLIP * RATE) if k < n - 1 else None]
        speech = pipe.vad.speech(clip)
        if speech:
            turns, heard = speaker_diarization(clip, speech, pipe)
            yield k, clip, speech, turns, heard


def most_overlapped(truth: list[tuple[float, float, str]], spans: list, start: float) -> str:
    """The label of ``truth`` ((start, end, label) on the recording's clock) that overlaps ``spans``
    (on the clip's clock, the clip starting at ``start``) the longest."""
    overlap: dict[str, float] = {}
    for s, e, label in truth:
        for a, b in spans:
            overlap[label] = overlap.get(label, 0.0) + max(0.0, min(e, b + start) - max(s, a + start))
    return max(overlap, key=overlap.__getitem__)


def voices(pipe: Pipeline) -> list[dict]:
    found = []
    for group, path, who in recordings():
        for k, clip, _, turns, heard in diarized_clips(path, pipe):
            start = k * CLIP
            for speaker, spans in sorted(speaker_stretches(turns).items()):
                if sum(b - a for a, b in spans) < MIN_SECONDS or speaker not in heard:
                    continue
                if isinstance(who, list):  # the RTTM speaker that overlaps these turns most
                    name = f"{path.stem}:{most_overlapped(who, spans, start)}"
                    name = name.split(":", 1)[1] if path.stem.startswith(("trn", "dev")) else name  # AMI ids
                else:
                    name = str(who)
                language, p, _ = pipe.second_reader().language_of(first_seconds(clip, spans, SECONDS))
                found.append(
                    {
                        "set": group,
                        "clip": f"{path.stem}#{k}",
                        "who": name,
                        "v": heard[speaker],
                        "lang": (language, p),
                    }
                )
        print(f"{path.name}: {len(found)} voices so far", file=sys.stderr, flush=True)
    return found


def _range(xs: list[float]) -> str:
    a = np.asarray(xs)
    return f"{len(a)} | {a.min():.3f} | {np.median(a):.3f} | {a.max():.3f}" if len(a) else "0 | | |"


def main() -> str:
    found = voices(Pipeline(DiarizeConfig()))
    pairs = [
        (a, b, float(a["v"] @ b["v"]))
        for a, b in itertools.combinations([f for f in found if f["set"] == "choose"], 2)
        if a["clip"] != b["clip"]
    ]
    same = [c for a, b, c in pairs if a["who"] == b["who"]]
    other = [c for a, b, c in pairs if a["who"] != b["who"]]
    english = [
        f for f in found if f["set"] == "choose" and f["lang"][0] == "en" and f["lang"][1] >= LANGUAGE_P
    ]
    foreign = [f for f in found if f["set"] == "report"]
    cross = [float(a["v"] @ b["v"]) for a in english for b in foreign]
    lines = [
        "| pairs of voices from different clips | pairs | min | median | max |",
        "|---|---|---|---|---|",
        f"| choose: the same English speaker | {_range(same)} |",
        f"| choose: two different English speakers | {_range(other)} |",
        f"| report: a FLEURS speaker against a voice heard in English | {_range(cross)} |",
        "",
    ]
    rows = [
        [
            f"{bar:.2f}" + (" (chosen)" if bar == CARRY_COSINE else ""),
            f"{np.mean(np.asarray(same) >= bar):.0%}",
            str(int(np.sum(np.asarray(other) >= bar))),
            str(int(np.sum(np.asarray(cross) >= bar))),
        ]
        for bar in BARS
    ]
    head = ["bar", "same speaker over it", "different speakers over it", "FLEURS speakers heard as English"]
    lines.append(table("Carrying English at each bar", head, rows))
    return "\n".join(lines)


if __name__ == "__main__":
    print(main())
