"""Whether two models' English readings of a speaker agree: the choice of ``asr_guards.MIN_AGREEMENT``.

Every recording of known language in the dev media is cut into m3's 30-s clips and diarized as `m3
diarize` does (VAD, the default diarizer); tiny.en then reads the whole clip's speech, *every* speaker
included (the stage keeps a speaker surely of another language from it: here it reads them too, so
that what it writes on speech it cannot read is seen on every foreign speaker, not only on the few the
language ID leaves in doubt), and multilingual base reads each speaker's turns in English. Per speaker
with at least ``language_id.MIN_SECONDS`` of turns: its true language (by majority overlap with the
recording's truth), Whisper base's language answer (:func:`language_id.speaker_languages`), and the
share of the two readings' words that are the same (:func:`asr_guards.agreement`).

* **choose** (the bar is picked here): the audio recordings, FLEURS in eight languages (speech/
  languages), the AMI excerpts and diarization recordings, LibriSpeech.
* **report** (never used to choose): the videos, the LatentSync talking heads (Russian, Portuguese,
  English) alone, side by side and in the people set, GRID, the Hamilton clip.

Then each set in turn is held out: the bar the other set would choose, scored on it.

    M3_SHARED_MEDIA=../shared/media python bench/english_agreement.py   # tables; progress on stderr
    python bench/english_agreement.py --rows rows.json                  # also keep every speaker's row
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.append(str(Path(__file__).resolve().parent.parent))  # bench.*, behind the installed m3cli
import bench  # noqa: E402,F401 - finds m3 (bench/__init__.py)
from bench.common import table  # noqa: E402
from bench.language_carry import CLIP, diarized_clips, most_overlapped  # noqa: E402
from m3cli.stages.backends.asr import merge_spans, speaker_stretches  # noqa: E402
from m3cli.stages.diarize import asr_guards, language_id  # noqa: E402
from m3cli.stages.diarize.stage import DiarizeConfig, Pipeline  # noqa: E402
from m3cli.stages.diarize.transcribe import transcribe_speech  # noqa: E402
from m3cli.stages.diarize.utterances import fit_to_turns, split_by_speaker  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("M3_SHARED_MEDIA", ROOT.parent / "shared" / "media"))
PEOPLE = ROOT / "tests" / "data" / "people"
BARS = (0.1, 0.15, 0.2, 0.25, 0.3, 0.4)
#: the speakers of the people set's and shared videos' truth, by name: the language each speaks
SPOKEN = {"woman": "ru", "kitchen_man": "pt", "sofa_man": "en", "A": "pt", "B": "en"}


def _rttm() -> dict[str, list[tuple[float, float, str]]]:
    out: dict[str, list[tuple[float, float, str]]] = {}
    for rttm in sorted((SHARED / "diarization").glob("*.rttm")):
        for line in rttm.read_text().splitlines():
            f = line.split()
            out.setdefault(f[1], []).append((float(f[3]), float(f[3]) + float(f[4]), "en"))
    return out


def _spans(truth: Path, name: str) -> list[tuple[float, float, str]]:
    data = json.loads(truth.read_text())
    if "turns" in data:  # the side-by-side video: speaker A / B turns
        return [(t["start_s"], t["end_s"], SPOKEN[t["speaker"]]) for t in data["turns"]]
    return [(a, b, SPOKEN.get(who, "en")) for a, b, who in data[name]["spans"]]  # GRID: all English


def recordings() -> list[tuple[str, Path, str | list[tuple[float, float, str]]]]:
    """(set, file, its language or (start, end, language) spans)."""
    rttm = _rttm()
    out: list[tuple[str, Path, str | list[tuple[float, float, str]]]] = []
    for path in sorted((SHARED / "speech" / "languages").glob("*.wav")):
        out.append(("choose", path, path.stem.split("_")[0]))
    for path in sorted((SHARED / "diarization").glob("*.wav")):
        if path.stem in rttm:
            out.append(("choose", path, rttm[path.stem]))
    for path in sorted((SHARED / "speech" / "librispeech").glob("*/*.flac")):
        out.append(("choose", path, "en"))
    video = SHARED / "video"
    out += [
        ("report", video / "latentsync_demo1_woman_outdoor.mp4", "ru"),
        ("report", video / "latentsync_demo2_man_kitchen.mp4", "pt"),
        ("report", video / "latentsync_demo3_youngman_sofa.mp4", "en"),
        (
            "report",
            video / "latentsync_2people_turns.mp4",
            _spans(video / "latentsync_2people_turns.truth.json", ""),
        ),
        ("report", video / "grid_4people_turns.mp4", "en"),
        ("report", video / "short_hamilton_clip.mp4", "en"),
    ]
    for group in ("latentsync", "grid"):
        truth = PEOPLE / group / "truth.json"
        for path in sorted((PEOPLE / group).glob("*.mp4")):
            out.append(("report", path, _spans(truth, path.name)))
    return out


def _language(who, spans, start: float) -> str:
    return who if isinstance(who, str) else most_overlapped(who, spans, start)


def speakers(pipe: Pipeline) -> list[dict]:
    found = []
    for group, path, who in recordings():
        for k, clip, speech, turns, _ in diarized_clips(path, pipe):
            start = k * CLIP
            heard = language_id.speaker_languages(clip, turns, pipe.second_reader)
            spans = merge_spans([*speech, *((t.start, t.end) for t in turns)])
            transcript = transcribe_speech(clip, spans, pipe.asr, "en")
            utterances = fit_to_turns(split_by_speaker(transcript.segments, turns, relabel=False), turns)
            for speaker, mine in sorted(speaker_stretches(turns).items()):
                seconds = sum(b - a for a, b in mine)
                if speaker not in heard:
                    continue
                words = [w for u in utterances if u["speaker_local"] == speaker for w in u.get("words", [])]
                text = " ".join(u["text"] for u in utterances if u["speaker_local"] == speaker)
                h = heard[speaker]
                again = transcribe_speech(clip, mine, pipe.second_reader(), "en")
                base_text = " ".join(seg.text for seg in again.segments)
                found.append(
                    {
                        "set": group,
                        "clip": f"{path.name}#{k}",
                        "speaker": speaker,
                        "truth": _language(who, mine, start),
                        "seconds": round(seconds, 2),
                        "heard": [h.language, h.p, h.p_english],
                        "words": len(words),
                        "compared": asr_guards.comparable(text, base_text),
                        "agree": round(asr_guards.agreement(text, base_text), 3),
                        "text": text[:160],
                        "base": base_text[:160],
                    }
                )
        print(f"{path.name}: {len(found)} speakers so far", file=sys.stderr, flush=True)
    return found


def doubtful(row: dict) -> bool:
    """In the guard's hands: heard in another language while English stayed a real candidate."""
    language, p, english = row["heard"]
    return language_id.Heard(language, p, 0.0, english).doubtful


def choose(rows: list[dict]) -> float:
    """The lowest bar over every other-language speaker's agreement: each of them caught."""
    other = [r["agree"] for r in rows if r["truth"] != "en" and r["compared"]]
    return next(b for b in BARS if b > max(other))


def _count(rows: list[dict], bar: float) -> tuple[str, str]:
    """(English speakers under the bar, other-language speakers under it), of those compared."""
    english = [r["agree"] < bar for r in rows if r["truth"] == "en" and r["compared"]]
    other = [r["agree"] < bar for r in rows if r["truth"] != "en" and r["compared"]]
    return f"{sum(english)} of {len(english)}", f"{sum(other)} of {len(other)}"


def _range(xs: list[float]) -> str:
    a = np.asarray(xs)
    return f"{len(a)} | {a.min():.3f} | {np.median(a):.3f} | {a.max():.3f}" if len(a) else "0 | | |"


def main() -> str:
    rows = speakers(Pipeline(DiarizeConfig()))
    if "--rows" in sys.argv[1:]:
        Path(sys.argv[sys.argv.index("--rows") + 1]).write_text(
            json.dumps(rows, indent=1, ensure_ascii=False)
        )
    lines = [
        "| share of words two English readings have alike, per speaker | speakers | min | median | max |"
    ]
    lines.append("|---|---|---|---|---|")
    for group in ("choose", "report"):
        for label, test in (
            ("English", lambda r: r["truth"] == "en"),
            ("another language", lambda r: r["truth"] != "en"),
        ):
            xs = [r["agree"] for r in rows if r["set"] == group and test(r) and r["compared"]]
            lines.append(f"| {group}: {label} | {_range(xs)} |")
    lines.append("")
    body = []
    for bar in BARS:
        cells = [f"{bar:.2f}" + (" (chosen)" if bar == asr_guards.MIN_AGREEMENT else "")]
        for group in ("choose", "report"):
            cells += list(_count([r for r in rows if r["set"] == group], bar))
        body.append(cells)
    head = ["bar", "choose: English under it", "choose: others under it", "report: English", "report: others"]
    lines.append(
        table("Speakers under each bar (compared: more than 1 / bar words in each reading)", head, body)
    )
    lines.append("")
    body = []
    for held in ("report", "choose"):
        bar = choose([r for r in rows if r["set"] != held])
        body.append([held, f"{bar:.2f}", *_count([r for r in rows if r["set"] == held], bar)])
    head = ["held out", "bar the other set chooses", "English under it", "others under it"]
    lines.append(table("Each set held out in turn", head, body))
    lines.append("")
    body = [
        [
            r["clip"],
            r["speaker"],
            r["truth"],
            f"{r['heard'][0]} {r['heard'][1]:.2f} (en {r['heard'][2]:.3f})",
            f"{r['seconds']:.1f}",
            "-" if not r["compared"] else f"{r['agree']:.3f}",
            "not compared"
            if not r["compared"]
            else ("read in its language" if r["agree"] < asr_guards.MIN_AGREEMENT else "tiny.en kept"),
            r["text"][:50],
            r["base"][:50],
        ]
        for r in rows
        if doubtful(r)
    ]
    head = [
        "clip",
        "speaker",
        "truth",
        "heard",
        "s",
        "agree",
        "outcome",
        "tiny.en wrote",
        "base wrote in English",
    ]
    lines.append(
        table("The speakers in doubt (another language heard, English still a candidate)", head, body)
    )
    return "\n".join(lines)


if __name__ == "__main__":
    print(main())
