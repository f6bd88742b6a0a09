"""`m3 eval diarization` and `m3 eval asr` as library calls: run the diarize stage on recordings with
ground truth and score it (the metrics themselves are in stages/eval/audio.py).

Why here and not in the command: the per-file scores, the per-group and pooled DER totals and the
untranscribed seconds are results a benchmark or a notebook wants as data; the command only parses its
flags, calls :func:`score_diarization` or :func:`score_asr` and prints the report as JSON or a table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from m3cli.stages.configs.diarize import DiarizeConfig
from m3cli.stages.core.common import RunContext
from m3cli.stages.eval.audio import (
    EvalItem,
    Tally,
    WerResult,
    diarization_error,
    overlap_agreement,
    speakers_heard,
    untranscribed,
    word_error,
)


@dataclass
class DiarizationReport:
    """Per-file scores, and DER pooled per (group, source) and over every file (group ``"ALL"``).

    ``sources`` are ``turns`` (the diarizer's speaker turns) and, unless only turns were scored,
    ``utterances`` (the stage's final output). ``lost`` holds, per group, the seconds of reference
    speech that the turns hold but no utterance does."""

    collar: float
    sources: tuple[str, ...]
    files: list[dict[str, Any]] = field(default_factory=list)
    tallies: dict[tuple[str, str], Tally] = field(default_factory=dict)
    lost: dict[str, float] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)

    @property
    def groups(self) -> list[str]:
        """Groups in order of first appearance, without ``"ALL"``."""
        return list(dict.fromkeys(e["group"] for e in self.files))

    @property
    def overall_der(self) -> dict[str, float]:
        return {src: round(self.tallies[("ALL", src)].der, 6) for src in self.sources}

    def as_json(self) -> dict[str, Any]:
        pooled = {
            g: {src: self.tallies[(g, src)].as_dict() for src in self.sources} for g in [*self.groups, "ALL"]
        }
        return {
            "collar": self.collar,
            "files": self.files,
            "groups": pooled,
            "overall_der": self.overall_der,
            "untranscribed": {g: round(v, 3) for g, v in self.lost.items()},
            "skipped": self.skipped,
        }


def score_diarization(
    items: list[EvalItem], config: DiarizeConfig, run: RunContext, collar: float, turns_only: bool = False
) -> DiarizationReport:
    """Diarize each recording of ``items`` and score its turns (and utterances) against the reference."""
    from m3cli.stages.diarize.stage import diarize_file, speaker_turns_file

    report = DiarizationReport(collar=collar, sources=("turns",) if turns_only else ("turns", "utterances"))
    for item in run.progress(items, desc="eval diarization", total=len(items)):
        if turns_only:
            hyps = {
                "turns": [(t.start, t.end, t.speaker) for t in speaker_turns_file(item.path, config, run)]
            }
        else:
            res = diarize_file(item.path, config, run)
            hyps = {
                "turns": [(t.start, t.end, t.speaker) for t in res.turns],
                "utterances": [(u["start"], u["end"], u["speaker_local"]) for u in res.utterances],
            }
        overlap = overlap_agreement(item.ref, hyps["turns"], item.uem)
        entry: dict[str, Any] = {
            "file": str(item.path),
            "uri": item.uri,
            "group": item.group,
            "ref_speakers": len({t[2] for t in item.ref}),
            "ref_speakers_3s": speakers_heard(item.ref),
            "overlap": overlap,
        }
        if not turns_only:
            entry["untranscribed"] = untranscribed(hyps["turns"], hyps["utterances"], item.ref, item.uem)
            for g in (item.group, "ALL"):
                report.lost[g] = report.lost.get(g, 0.0) + entry["untranscribed"]
        for source in report.sources:
            d = diarization_error(item.ref, hyps[source], item.uem, collar=collar)
            entry[source] = {**d.as_dict(), "hyp_speakers": len({h[2] for h in hyps[source]})}
            for key in ((item.group, source), ("ALL", source)):
                report.tallies.setdefault(key, Tally()).add(d, overlap)
        report.files.append(entry)
    return report


@dataclass(frozen=True)
class AsrReport:
    """Word error of one file's transcript, and the seconds of speaker turns in no utterance."""

    file: str
    wer: WerResult
    untranscribed: float

    def as_json(self) -> dict[str, Any]:
        return {"file": self.file, **self.wer.as_dict(), "untranscribed": self.untranscribed}


def reference_text(path: Path, text: str) -> str:
    """The words of a reference transcript: plain text as it is, or an STM file's (``.stm``: ``file
    channel speaker start end words`` per line, ``;;`` comments) words in time order."""
    if path.suffix.lower() != ".stm":
        return text
    rows = []
    for line in text.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and not line.startswith(";;"):
            rows.append((float(fields[3]), fields[5]))
    return " ".join(words for _, words in sorted(rows, key=lambda r: r[0]))


def score_asr(media_file: Path, reference: str, config: DiarizeConfig, run: RunContext) -> AsrReport:
    """Transcribe ``media_file`` with the diarize stage and score the words against ``reference``."""
    from m3cli.stages.diarize.stage import diarize_file

    res = diarize_file(media_file, config, run)
    hypothesis = " ".join(u["text"] for u in res.utterances)
    lost = untranscribed(
        [(t.start, t.end, t.speaker) for t in res.turns],
        [(u["start"], u["end"], u["speaker_local"]) for u in res.utterances],
    )
    return AsrReport(str(media_file), word_error(reference, hypothesis), lost)
