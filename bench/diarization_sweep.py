"""Threshold sweeps and same/different-speaker pair calibration for the overlap diarizer, on the dev
manifest (tests/data/diarization_dev.manifest; local media from $M3_MEDIA, default ../shared/media).

Segmentation activity, CAM++ window embeddings and VAD regions are computed once and kept in a pickle
(/tmp/m3-diarization-sweep-memo.pkl), so a sweep replays only the clustering.

  python bench/diarization_sweep.py sweep "[{}, {'join_cosine': 0.52, 'min_cluster_seconds': 2.0}]"
  python bench/diarization_sweep.py pairs   # choose-on-one-group and leave-one-group-out tables
  python bench/diarization_sweep.py pooled-pairs   # the same for pooled 4-s pieces (the join's input)
  python bench/diarization_sweep.py logo overlap_prob "[None, 0.3, 0.4, 0.5]"   # leave-one-group-out
  python bench/diarization_sweep.py logo - "[{}, {'overlap_prob': 0.3, 'local_second': True}]"
"""

from __future__ import annotations

import hashlib
import os
import pickle
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.append(str(Path(__file__).resolve().parent.parent))  # bench.*, behind the installed m3cli
import bench  # noqa: E402,F401 - finds m3 (bench/__init__.py)
from m3cli.stages.backends.asr import make_vad, relabel_turns
from m3cli.stages.backends.diarizer.overlap import OverlapConfig, OverlapDiarizer
from m3cli.stages.backends.speaker import windows_over
from m3cli.stages.core.audio_file import read_audio_file
from m3cli.stages.eval.audio import (
    Tally,
    diarization_error,
    merge_regions,
    overlap_agreement,
    overlap_regions,
    read_manifest,
    speakers_heard,
    subtract_regions,
)

MEMO = Path(os.environ.get("M3_SWEEP_MEMO", "/tmp/m3-diarization-sweep-memo.pkl"))
GRID = np.round(np.arange(0.2, 0.81, 0.01), 2)


class Memo:
    def __init__(self) -> None:
        self.data = pickle.loads(MEMO.read_bytes()) if MEMO.exists() else {}
        self.items, _ = read_manifest(
            Path("tests/data/diarization_dev.manifest"), Path(os.environ.get("M3_MEDIA", "../shared/media"))
        )
        self.diarizer = OverlapDiarizer()
        seg, emb = self.diarizer.segmentation.activity, self.diarizer.embedding.embed
        pooled = self.diarizer.embedding.embed_pooled
        self.diarizer.embedding.embed_pooled = lambda a, groups: (
            np.stack([self._get("pool", a, list(g), lambda g=g: pooled(a, [g])[0]) for g in groups])
            if len(groups)
            else pooled(a, groups)
        )
        self.diarizer.segmentation.activity = lambda a, step, **k: self._get(
            "act", a, step, lambda: seg(a, step)
        )
        self.diarizer.embedding.embed = lambda a, spans: self._get(
            "emb", a, list(spans), lambda: emb(a, spans)
        )
        vad = make_vad("silero")
        self.audio = {}
        for it in self.items:
            _, a = read_audio_file(it.path)
            self.audio[it.uri] = (a, self._get("vad", a, None, lambda a=a: vad.speech(a)))

    def _get(self, kind, audio, extra, compute):  # noqa: ANN001,ANN202
        key = (kind, hashlib.sha1(audio.tobytes() + repr(extra).encode()).hexdigest())
        if key not in self.data:
            self.data[key] = compute()
        return self.data[key]

    def save(self) -> None:
        MEMO.write_bytes(pickle.dumps(self.data))


def sweep_tallies(m: Memo, changes: dict) -> tuple[dict[str, Tally], list[tuple]]:
    """Per-group (and ``"ALL"``) tallies of the diarizer with ``changes``, and per-file rows
    (uri, group, DER %, reference speakers of >= 3 s, speakers found, overlap ref/flagged/hyp s)."""
    m.diarizer.config = replace(OverlapConfig(), **changes)
    tallies: dict[str, Tally] = {}
    rows = []
    for it in m.items:
        a, speech = m.audio[it.uri]
        turns = relabel_turns(m.diarizer.turns(a, None, None, speech=speech))
        hyp = [(t.start, t.end, t.speaker) for t in turns]
        d = diarization_error(it.ref, hyp, it.uem, collar=0.25)
        o = overlap_agreement(it.ref, hyp, it.uem)
        for g in (it.group, "ALL"):
            tallies.setdefault(g, Tally()).add(d, o)
        rows.append(
            (
                it.uri,
                it.group,
                round(100 * d.der, 1),
                speakers_heard(it.ref),
                len({h[2] for h in hyp}),
                round(o["reference"], 1),
                round(o["both"], 1),
                round(o["hypothesis"], 1),
            )
        )
    return tallies, rows


def logo(m: Memo, name: str, values: list) -> None:
    """Leave one group out: for each group, the value of ``name`` with the least pooled DER on the other
    groups, and that value's figures on the held-out group; then every value's whole table."""
    results = {repr(v): sweep_tallies(m, v if name == "-" else {name: v}) for v in values}
    groups = list(dict.fromkeys(it.group for it in m.items))

    def cell(t: Tally) -> str:
        prec = t.overlap_flagged / t.overlap_hyp if t.overlap_hyp else float("nan")
        rec = t.overlap_flagged / t.overlap_ref if t.overlap_ref else float("nan")
        flagged = f"{t.overlap_flagged:5.1f}/{t.overlap_ref:5.1f} s"
        return f"DER {100 * t.der:5.1f}% ovl {flagged} (rec {rec:.2f} prec {prec:.2f})"

    print(f"# {name}: every value, per group")
    for v, (tallies, rows) in results.items():
        print(f"{name}={v}")
        for g in [*groups, "ALL"]:
            print(f"    {g:8s} {cell(tallies[g])}")
        files = (f"{r[0]}:{r[2]}%,{r[3]}/{r[4]}spk,ovl{r[6]}/{r[5]}(hyp{r[7]})" for r in rows)
        print("    files:", " ".join(files))
    print(f"# leave one group out: {name} chosen by pooled DER on the other groups")
    for g in groups:

        def pooled(v: str, g: str = g) -> float:
            t = Tally()
            for h in groups:
                if h != g:
                    x = results[v][0][h]
                    for f in ("missed", "false_alarm", "confusion", "total"):
                        setattr(t, f, getattr(t, f) + getattr(x, f))
            return t.der

        best = min(results, key=pooled)
        base = results[repr(values[0])][0][g]
        print(
            f"  held out {g:8s}: chosen {best} (rest {100 * pooled(best):.1f}%)"
            f"  held-out {cell(results[best][0][g])}  | {values[0]!r}: {cell(base)}"
        )


def sweep(m: Memo, changes: dict) -> list[tuple]:
    """Print the per-group DER and overlap of the diarizer with ``changes``; the per-file rows
    (uri, DER %, reference speakers of >= 3 s, speakers found)."""
    tallies, full = sweep_tallies(m, changes)
    rows = [(r[0], r[2], r[3], r[4]) for r in full]
    groups = " ".join(
        f"{g}={100 * t.der:.1f}% ({t.overlap_flagged:.1f}/{t.overlap_ref:.1f} s)" for g, t in tallies.items()
    )
    print(changes, groups)
    return rows


def pair_scores(m: Memo) -> dict[str, tuple[list[float], list[float]]]:
    """Cosines of same- and different-speaker pairs of 2-s CAM++ windows (hop 1 s) over each reference
    speaker's speech without overlap, pairs taken within one recording (what a clip's join decides)."""
    out: dict[str, tuple[list[float], list[float]]] = {}
    for it in m.items:
        a, _ = m.audio[it.uri]
        ov = overlap_regions(it.ref)
        wins, labels = [], []
        for spk in sorted({t[2] for t in it.ref}):
            clean = subtract_regions(merge_regions((s, e) for s, e, k in it.ref if k == spk), ov)
            w = windows_over([(s, e) for s, e in clean if e - s >= 1.0], 2.0, 1.0)
            wins += w
            labels += [spk] * len(w)
        if len(wins) < 2:
            continue
        emb = m.diarizer.embedding.embed(a, wins)
        sim = emb @ emb.T
        lab = np.asarray(labels)
        i, j = np.triu_indices(len(wins), 1)
        same = lab[i] == lab[j]
        g = out.setdefault(it.group, ([], []))
        g[0].extend(sim[i, j][same].tolist())
        g[1].extend(sim[i, j][~same].tolist())
    return out


def pooled_pair_scores(m: Memo, piece: float = 4.0) -> dict[str, tuple[list[float], list[float]]]:
    """Cosines of same- and different-speaker pairs of pooled CAM++ embeddings, each of ``piece``
    seconds of one reference speaker's speech without overlap (consecutive, within one recording)."""
    out: dict[str, tuple[list[float], list[float]]] = {}
    for it in m.items:
        a, _ = m.audio[it.uri]
        ov = overlap_regions(it.ref)
        groups, labels = [], []
        for spk in sorted({t[2] for t in it.ref}):
            clean = subtract_regions(merge_regions((s, e) for s, e, k in it.ref if k == spk), ov)
            cur, have = [], 0.0
            for s, e in clean:
                while e - s > 0:
                    take = min(e - s, piece - have)
                    cur.append((s, s + take))
                    have += take
                    s += take
                    if have >= piece - 1e-6:
                        groups.append(cur)
                        labels.append(spk)
                        cur, have = [], 0.0
        if len(groups) < 2:
            continue
        emb = m.diarizer.embedding.embed_pooled(a, groups)
        sim = emb @ emb.T
        lab = np.asarray(labels)
        i, j = np.triu_indices(len(groups), 1)
        same = lab[i] == lab[j]
        g = out.setdefault(it.group, ([], []))
        g[0].extend(sim[i, j][same].tolist())
        g[1].extend(sim[i, j][~same].tolist())
    return out


def errors(same, diff, t: float) -> tuple[float, float]:  # noqa: ANN001
    frr = float((np.asarray(same) < t).mean()) if len(same) else 0.0
    far = float((np.asarray(diff) >= t).mean()) if len(diff) else 0.0
    return frr, far


def choose(pairs: dict, groups: list[str]) -> float:
    """The cosine with the least balanced error (mean of FRR and FAR) on the pairs of ``groups``."""
    same = [x for g in groups for x in pairs[g][0]]
    diff = [x for g in groups for x in pairs[g][1]]
    errs = np.asarray([sum(errors(same, diff, t)) / 2 for t in GRID])
    best = GRID[errs <= errs.min() + 1e-12]
    return float(np.round((best.min() + best.max()) / 2, 2))  # the middle of the best range


def calibrate(m: Memo, pooled: bool = False) -> None:
    pairs = pooled_pair_scores(m) if pooled else pair_scores(m)
    groups = list(pairs)
    for g, (s, d) in pairs.items():
        print(
            f"{g}: {len(s)} same pairs (mean {np.mean(s):.2f}, min {np.min(s):.2f}), "
            f"{len(d)} different (mean {np.mean(d):.2f}, max {np.max(d):.2f})"
        )
    print("chosen on one group -> FRR/FAR % on every group")
    for g in groups:
        t = choose(pairs, [g])
        cells = " ".join(
            f"{h} {100 * errors(*pairs[h], t)[0]:.1f}/{100 * errors(*pairs[h], t)[1]:.1f}" for h in groups
        )
        print(f"  on {g}: t={t:.2f}  {cells}")
    print("leave one group out: chosen on the rest, reported on the held-out group")
    for g in groups:
        t = choose(pairs, [h for h in groups if h != g])
        frr, far = errors(*pairs[g], t)
        print(f"  {g}: t={t:.2f} FRR {100 * frr:.1f}% FAR {100 * far:.1f}%")
    print(f"all groups: t={choose(pairs, groups):.2f}")


if __name__ == "__main__":
    memo = Memo()
    if sys.argv[1] == "logo":
        logo(memo, sys.argv[2], eval(sys.argv[3]))  # noqa: S307 - a developer's own sweep grid
    elif sys.argv[1] in ("pairs", "pooled-pairs"):
        calibrate(memo, pooled=sys.argv[1] == "pooled-pairs")
    else:
        for ch in eval(sys.argv[2]):  # noqa: S307 - a developer's own sweep grid
            rows = sweep(memo, ch)
            if "-v" in sys.argv:
                print(rows)
    memo.save()
