"""Threshold sweeps and same/different-speaker pair calibration for the overlap diarizer, on the dev
manifest (tests/data/diarization_dev.manifest; local media from $M3_MEDIA, default ../shared/media).

Segmentation activity, CAM++ window embeddings and VAD regions are computed once and kept in a pickle
(/tmp/m3-diarization-sweep-memo.pkl), so a sweep replays only the clustering.

  python bench/diarization_sweep.py sweep "[{}, {'join_cosine': 0.52, 'min_cluster_seconds': 2.0}]"
  python bench/diarization_sweep.py pairs   # choose-on-one-group and leave-one-group-out tables
  python bench/diarization_sweep.py pooled-pairs   # the same for pooled 4-s pieces (the join's input)
"""

from __future__ import annotations

import hashlib
import os
import pickle
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

from m3cli.stages.backends.asr import make_vad, relabel_turns
from m3cli.stages.backends.diarizer_overlap import OverlapConfig, OverlapDiarizer
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

MEMO = Path("/tmp/m3-diarization-sweep-memo.pkl")
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
        self.diarizer.embedding.embed_pooled = lambda a, groups: np.stack(
            [self._get("pool", a, list(g), lambda g=g: pooled(a, [g])[0]) for g in groups]
        ) if len(groups) else pooled(a, groups)
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


def sweep(m: Memo, changes: dict) -> list[tuple]:
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
        rows.append((it.uri, round(100 * d.der, 1), speakers_heard(it.ref), len({h[2] for h in hyp})))
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
    if sys.argv[1] in ("pairs", "pooled-pairs"):
        calibrate(memo, pooled=sys.argv[1] == "pooled-pairs")
    else:
        for ch in eval(sys.argv[2]):  # noqa: S307 - a developer's own sweep grid
            rows = sweep(memo, ch)
            if "-v" in sys.argv:
                print(rows)
    memo.save()
