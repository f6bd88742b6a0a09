"""Scoring speech stages: diarization error rate (DER) from RTTM/UEM, and word error rate (WER).

DER follows the NIST md-eval definition, implemented here (no pyannote.metrics dependency):

* Scored time is the UEM (or, without one, the extent of reference and hypothesis together), minus a
  no-score collar of ``collar`` seconds on each side of every reference turn boundary (md-eval's
  ``-c 0.25`` is ``collar=0.25``; pyannote.metrics calls the same thing ``collar=0.5``, the total width).
* Reference and hypothesis labels are mapped one-to-one so that the total time they co-occur in the
  scored region is maximal (Hungarian algorithm, ``scipy.optimize.linear_sum_assignment``).
* On every stretch where the sets of active speakers are constant, with ``R`` reference and ``H``
  hypothesis speakers of which ``C`` are correctly mapped: missed = max(0, R-H), false alarm =
  max(0, H-R), confusion = min(R, H) - C, all times the stretch's length; DER = (missed + false alarm +
  confusion) / total reference speech (sum of R). Overlapped speech is scored, as in md-eval.

The computation is exact (event based, no frame grid), so results do not depend on a resolution.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from m3cli.stages.core.errors import InputError

Turn = tuple[float, float, str]  # start, end, speaker label
Region = tuple[float, float]

DEFAULT_COLLAR = 0.25


# -- files ---------------------------------------------------------------------------------------
def read_rttm(path: Path) -> dict[str, list[Turn]]:
    """SPEAKER lines of an RTTM file, grouped by file id: ``{uri: [(start, end, speaker), ...]}``."""
    turns: dict[str, list[Turn]] = defaultdict(list)
    for lineno, fields in _lines(path):
        if fields[0] != "SPEAKER":
            continue
        if len(fields) < 8:
            raise InputError(f"{path}:{lineno}: RTTM SPEAKER line needs at least 8 fields, got {len(fields)}")
        try:
            start, dur = float(fields[3]), float(fields[4])
        except ValueError:
            raise InputError(
                f"{path}:{lineno}: RTTM start/duration are not numbers: {fields[3]!r} {fields[4]!r}"
            ) from None
        if dur < 0 or start < 0:
            raise InputError(f"{path}:{lineno}: negative RTTM start or duration")
        turns[fields[1]].append((start, start + dur, fields[7]))
    return dict(turns)


def read_uem(path: Path) -> dict[str, list[Region]]:
    """A UEM file (``uri channel start end`` per line): the scored regions of each file."""
    regions: dict[str, list[Region]] = defaultdict(list)
    for lineno, fields in _lines(path):
        if len(fields) < 4:
            raise InputError(
                f"{path}:{lineno}: UEM line needs 4 fields (uri channel start end), got {len(fields)}"
            )
        try:
            start, end = float(fields[2]), float(fields[3])
        except ValueError:
            raise InputError(f"{path}:{lineno}: UEM start/end are not numbers") from None
        if end < start:
            raise InputError(f"{path}:{lineno}: UEM end {end} is before start {start}")
        regions[fields[0]].append((start, end))
    return dict(regions)


def _lines(path: Path) -> Iterable[tuple[int, list[str]]]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read: {exc}") from None
    for lineno, line in enumerate(text.splitlines(), 1):
        fields = line.split()
        if fields and not fields[0].startswith("#") and not fields[0].startswith(";"):
            yield lineno, fields


def write_rttm(uri: str, turns: Iterable[Turn]) -> str:
    """Turns as RTTM text (handy for scoring a hypothesis with other tools)."""
    return "".join(f"SPEAKER {uri} 1 {s:.3f} {e - s:.3f} <NA> <NA> {spk} <NA> <NA>\n" for s, e, spk in turns)


# -- interval helpers ----------------------------------------------------------------------------
def merge_regions(regions: Iterable[Region]) -> list[Region]:
    """Sorted union of regions (touching or overlapping ones fused)."""
    out: list[list[float]] = []
    for s, e in sorted((float(s), float(e)) for s, e in regions if e > s):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def subtract_regions(regions: Sequence[Region], holes: Sequence[Region]) -> list[Region]:
    """``regions`` minus ``holes`` (both any order; result sorted, disjoint)."""
    out: list[Region] = []
    holes = merge_regions(holes)
    for s, e in merge_regions(regions):
        cur = s
        for hs, he in holes:
            if he <= cur or hs >= e:
                continue
            if hs > cur:
                out.append((cur, hs))
            cur = max(cur, he)
            if cur >= e:
                break
        if cur < e:
            out.append((cur, e))
    return out


def _crop(turns: Sequence[Turn], regions: Sequence[Region]) -> list[Turn]:
    out: list[Turn] = []
    for s, e, spk in turns:
        for rs, re_ in regions:
            lo, hi = max(s, rs), min(e, re_)
            if hi > lo:
                out.append((lo, hi, spk))
    return out


# -- DER -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DerResult:
    """Components of the diarization error rate, in seconds (``der`` is a fraction)."""

    total: float
    missed: float
    false_alarm: float
    confusion: float
    scored: float
    mapping: dict[str, str]

    @property
    def der(self) -> float:
        return (self.missed + self.false_alarm + self.confusion) / self.total if self.total > 0 else 0.0

    def as_dict(self) -> dict:
        return {
            "der": round(self.der, 6),
            "missed": round(self.missed, 6),
            "false_alarm": round(self.false_alarm, 6),
            "confusion": round(self.confusion, 6),
            "total": round(self.total, 6),
            "scored": round(self.scored, 6),
            "mapping": dict(sorted(self.mapping.items())),
        }


def _segments(
    ref: Sequence[Turn], hyp: Sequence[Turn], regions: Sequence[Region]
) -> list[tuple[float, frozenset[str], frozenset[str]]]:
    """Elementary stretches of the scored regions: (duration, active ref speakers, active hyp speakers)."""
    cuts = {t for s, e, _ in (*ref, *hyp) for t in (s, e)} | {t for r in regions for t in r}
    points = sorted(cuts)
    out = []
    region_idx = 0
    for lo, hi in zip(points[:-1], points[1:], strict=True):
        if hi <= lo:
            continue
        mid = 0.5 * (lo + hi)
        while region_idx < len(regions) and regions[region_idx][1] <= mid:
            region_idx += 1
        if region_idx >= len(regions) or regions[region_idx][0] > mid:
            continue
        r = frozenset(spk for s, e, spk in ref if s <= mid < e)
        h = frozenset(spk for s, e, spk in hyp if s <= mid < e)
        if r or h:
            out.append((hi - lo, r, h))
    return out


def diarization_error(
    ref: Sequence[Turn],
    hyp: Sequence[Turn],
    uem: Sequence[Region] | None = None,
    collar: float = DEFAULT_COLLAR,
) -> DerResult:
    """DER of ``hyp`` against ``ref`` (see the module docstring for the exact definition)."""
    from scipy.optimize import linear_sum_assignment

    if collar < 0:
        raise InputError(f"collar must be >= 0, got {collar}")
    if uem is None or not len(uem):
        times = [t for s, e, _ in (*ref, *hyp) for t in (s, e)]
        uem = [(min(times), max(times))] if times else []
    regions = merge_regions(uem)
    if collar > 0:
        holes = [(b - collar, b + collar) for s, e, _ in ref for b in (s, e)]
        regions = subtract_regions(regions, holes)
    ref_c = _crop(ref, regions)
    hyp_c = _crop(hyp, regions)
    segs = _segments(ref_c, hyp_c, regions)

    ref_labels = sorted({spk for _, _, spk in ref_c})
    hyp_labels = sorted({spk for _, _, spk in hyp_c})
    ri = {spk: i for i, spk in enumerate(ref_labels)}
    hi = {spk: i for i, spk in enumerate(hyp_labels)}
    co = np.zeros((len(ref_labels), len(hyp_labels)))
    for dur, r, h in segs:
        for a in r:
            for b in h:
                co[ri[a], hi[b]] += dur
    mapping: dict[str, str] = {}
    if co.size:
        rows, cols = linear_sum_assignment(co, maximize=True)
        mapping = {hyp_labels[c]: ref_labels[r] for r, c in zip(rows, cols, strict=True) if co[r, c] > 0}

    total = missed = false_alarm = confusion = 0.0
    for dur, r, h in segs:
        n_ref, n_hyp = len(r), len(h)
        correct = sum(1 for b in h if mapping.get(b) in r)
        total += n_ref * dur
        missed += max(0, n_ref - n_hyp) * dur
        false_alarm += max(0, n_hyp - n_ref) * dur
        confusion += (min(n_ref, n_hyp) - correct) * dur
    scored = sum(e - s for s, e in regions)
    return DerResult(total, missed, false_alarm, confusion, scored, mapping)


def overlap_regions(turns: Sequence[Turn]) -> list[Region]:
    """Where two or more speakers of ``turns`` talk at once."""
    points = sorted({t for s, e, _ in turns for t in (s, e)})
    out = []
    for lo, hi in zip(points[:-1], points[1:], strict=False):
        mid = 0.5 * (lo + hi)
        if len({spk for s, e, spk in turns if s <= mid < e}) >= 2:
            out.append((lo, hi))
    return merge_regions(out)


def overlap_agreement(ref: Sequence[Turn], hyp: Sequence[Turn], uem: Sequence[Region] | None = None) -> dict:
    """Seconds of overlapped speech in the reference and the hypothesis (inside the UEM) and their
    intersection: how much of the real overlap the diarizer flags, and how much it flags wrongly."""
    r, h = overlap_regions(ref), overlap_regions(hyp)
    if uem:
        r, h = crop_regions(r, uem), crop_regions(h, uem)
    both = crop_regions(r, h)
    return {
        "reference": round(sum(e - s for s, e in r), 3),
        "hypothesis": round(sum(e - s for s, e in h), 3),
        "both": round(sum(e - s for s, e in both), 3),
    }


def crop_regions(regions: Sequence[Region], within: Sequence[Region]) -> list[Region]:
    """The parts of ``regions`` inside ``within`` (merged), e.g. reference speech inside the scored UEM."""
    cropped = _crop([(s, e, "") for s, e in regions], merge_regions(within))
    return merge_regions((s, e) for s, e, _ in cropped)


def untranscribed(
    turns: Sequence[Turn],
    utterances: Sequence[Turn],
    reference: Sequence[Turn] | None = None,
    uem: Sequence[Region] | None = None,
) -> float:
    """Seconds of speech the turns cover but no utterance does: what the diarizer heard and the
    transcript lost. With ``reference`` turns only reference speech counts (inside ``uem`` when given),
    so a false-alarm turn is not counted as lost speech."""
    heard = merge_regions((s, e) for s, e, _ in turns)
    if reference is not None:
        heard = crop_regions(heard, [(s, e) for s, e, _ in reference])
    if uem:
        heard = crop_regions(heard, uem)
    lost = subtract_regions(heard, [(s, e) for s, e, _ in utterances])
    return round(sum(e - s for s, e in lost), 3)


# -- WER -----------------------------------------------------------------------------------------
_PUNCT = re.compile(r"[^\w\s']|(?<!\w)'|'(?!\w)")


def normalize_text(text: str) -> str:
    """Lowercase, strip punctuation (apostrophes inside words stay), collapse whitespace."""
    text = _PUNCT.sub(" ", text.lower())
    return " ".join(text.split())


@dataclass(frozen=True)
class WerResult:
    wer: float
    substitutions: int
    deletions: int
    insertions: int
    reference_words: int
    hypothesis: str

    def as_dict(self) -> dict:
        return {
            "wer": round(self.wer, 6),
            "substitutions": self.substitutions,
            "deletions": self.deletions,
            "insertions": self.insertions,
            "reference_words": self.reference_words,
            "hypothesis": self.hypothesis,
        }


def word_error(reference: str, hypothesis: str) -> WerResult:
    """WER after :func:`normalize_text` on both sides (jiwer does the alignment)."""
    import jiwer

    ref = normalize_text(reference)
    hyp = normalize_text(hypothesis)
    if not ref:
        raise InputError("the reference transcript is empty after normalisation")
    out = jiwer.process_words(ref, hyp if hyp else "")
    n = len(ref.split())
    return WerResult(out.wer, out.substitutions, out.deletions, out.insertions, n, hyp)


# -- many recordings -----------------------------------------------------------------------------
MEDIA_SUFFIXES = (".wav", ".flac", ".ogg", ".mp3", ".m4a", ".mp4", ".mkv", ".mov", ".webm", ".avi")


@dataclass(frozen=True)
class EvalItem:
    """One recording to score: its media file, its reference turns and scored regions, its group."""

    path: Path
    uri: str
    group: str
    ref: list[Turn]
    uem: list[Region] | None


def read_manifest(path: Path, media_root: Path | None = None) -> tuple[list[EvalItem], list[str]]:
    """Recordings listed in a manifest: one per line, ``group media rttm [uem]`` (whitespace separated,
    ``#`` comments). Relative paths are taken from the manifest's folder, or from ``media_root`` when a
    path starts with ``{media}/``. A media entry may be a folder (every media file in it whose stem the
    RTTM has). Entries whose files are missing are skipped and named in the second return value, so a
    fresh clone without the local-only recordings still scores what it has."""
    base = Path(path).parent
    items: list[EvalItem] = []
    skipped: list[str] = []

    def resolve(p: str) -> Path:
        if p.startswith("{media}/"):
            if media_root is None:
                return Path("/nonexistent") / p
            return Path(media_root) / p[len("{media}/") :]
        q = Path(p)
        return q if q.is_absolute() else base / q

    for lineno, fields in _lines(path):
        if len(fields) not in (3, 4):
            raise InputError(
                f"{path}:{lineno}: manifest line needs `group media rttm [uem]`, got {len(fields)} fields"
            )
        group, media_p, rttm_p = fields[0], resolve(fields[1]), resolve(fields[2])
        uem_p = resolve(fields[3]) if len(fields) == 4 else None
        missing = [str(p) for p in (media_p, rttm_p, uem_p) if p is not None and not p.exists()]
        if missing:
            skipped.append(f"{fields[1]} ({', '.join(missing)} missing)")
            continue
        items.extend(collect_items([media_p], rttm_p, uem_p, group))
    return items, skipped


def collect_items(
    media: Sequence[Path], rttm: Path, uem: Path | None = None, group: str = "all"
) -> list[EvalItem]:
    """Items for media files or folders scored against one RTTM (file id = media stem); a folder
    contributes its media files whose stem the RTTM has, a file without turns in it is an error."""
    refs = read_rttm(rttm)
    uems = read_uem(uem) if uem else {}
    out: list[EvalItem] = []
    for m in media:
        m = Path(m)
        if m.is_dir():
            files = [p for p in sorted(m.iterdir()) if p.suffix.lower() in MEDIA_SUFFIXES and p.stem in refs]
            if not files:
                raise InputError(f"{m}: no media file whose name the RTTM {rttm} has turns for")
        else:
            if m.stem not in refs:
                has = ", ".join(sorted(refs))
                raise InputError(f"{rttm}: no SPEAKER lines for file id {m.stem!r} (has: {has})")
            files = [m]
        out.extend(EvalItem(p, p.stem, group, refs[p.stem], uems.get(p.stem)) for p in files)
    return out


def speakers_heard(ref: Sequence[Turn], min_seconds: float = 3.0) -> int:
    """Reference speakers with at least ``min_seconds`` of speech (the ones a count target is about)."""
    seconds: dict[str, float] = defaultdict(float)
    for s, e, spk in ref:
        seconds[spk] += e - s
    return sum(1 for v in seconds.values() if v >= min_seconds)


@dataclass
class Tally:
    """Pooled DER components and overlap seconds over several files."""

    missed: float = 0.0
    false_alarm: float = 0.0
    confusion: float = 0.0
    total: float = 0.0
    overlap_ref: float = 0.0
    overlap_flagged: float = 0.0
    overlap_hyp: float = 0.0  # overlap the hypothesis claims, flagged right or not (overlap precision)
    files: int = 0

    def add(self, d: DerResult, overlap: dict) -> None:
        self.missed += d.missed
        self.false_alarm += d.false_alarm
        self.confusion += d.confusion
        self.total += d.total
        self.overlap_ref += overlap["reference"]
        self.overlap_flagged += overlap["both"]
        self.overlap_hyp += overlap["hypothesis"]
        self.files += 1

    @property
    def der(self) -> float:
        return (self.missed + self.false_alarm + self.confusion) / self.total if self.total > 0 else 0.0

    def as_dict(self) -> dict:
        return {
            "files": self.files,
            "der": round(self.der, 6),
            "missed": round(self.missed, 3),
            "false_alarm": round(self.false_alarm, 3),
            "confusion": round(self.confusion, 3),
            "total": round(self.total, 3),
            "overlap_reference": round(self.overlap_ref, 3),
            "overlap_flagged": round(self.overlap_flagged, 3),
        }
