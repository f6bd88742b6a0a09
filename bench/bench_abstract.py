"""`m3 abstract`'s fold at growing video length: CPU per clip at 60 and 960 clips.

Target: the per-clip CPU at 960 clips within 1.5x of the per-clip CPU at 60 clips (the fold used to rescan
every earlier fact, so its cost grew as n^1.65). Inputs are the synthetic clips of bench_memory (three
people taking turns) through offline memorize and link; only abstract is timed, in this process, once
with text vectors (hashed 384-d vectors computed beforehand: a model's cost per clip is constant, so
here it would only hide the fold) and once without. A third column is the stage as users run it: the
bundled MiniLM (onnxruntime) embedding every clip's lines, nothing cached, timed once after loading.
``M3_BENCH_ABSTRACT_CLIPS`` overrides the sizes (comma separated).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.append(str(Path(__file__).resolve().parent.parent))  # bench.*, behind the installed m3cli

from bench.bench_memory import HashEmbedder, synthetic_video  # noqa: E402
from bench.common import machine, table  # noqa: E402

SIZES = [int(n) for n in os.environ.get("M3_BENCH_ABSTRACT_CLIPS", "60,240,960").split(",")]


def prepared(n: int) -> list:
    from m3cli.stages.link.stage import LinkConfig, link_records
    from m3cli.stages.memorize.stage import MemorizeConfig, memorize_records

    return link_records(memorize_records(synthetic_video(n), MemorizeConfig()), LinkConfig())


class Precomputed(HashEmbedder):
    """Hashed vectors looked up from a table filled by the first (untimed) run."""

    def __init__(self) -> None:
        self.table: dict[str, np.ndarray] = {}

    def embed(self, texts):
        missing = [t for t in texts if t not in self.table]
        if missing:
            self.table.update(zip(missing, super().embed(missing), strict=True))
        return np.stack([self.table[t] for t in texts])


def cpu_per_clip(records: list, embed: bool) -> float:
    """CPU milliseconds per clip of one abstract run over ``records`` (best of two, after a warm-up)."""
    from m3cli.stages.abstract.stage import AbstractConfig, abstract_records

    embedder = Precomputed() if embed else None
    abstract_records(records, AbstractConfig(embed=embed), None, embedder)
    best = float("inf")
    for _ in range(2):
        started = time.process_time()
        out = abstract_records(records, AbstractConfig(embed=embed), None, embedder)
        best = min(best, time.process_time() - started)
        del out  # freed outside the timed part: freeing 960 records is not the fold's cost
    return 1000 * best / len(records)


def stage_cpu_per_clip(records: list, embedder) -> float:
    """CPU milliseconds per clip of the stage with a real text model embedding each clip's lines."""
    from m3cli.stages.abstract.stage import AbstractConfig, abstract_records

    started = time.process_time()
    out = abstract_records(records, AbstractConfig(embed=True), None, embedder)
    spent = time.process_time() - started
    del out
    return 1000 * spent / len(records)


def main() -> str:
    from m3cli.stages.backends.embed import make_embedder

    model = make_embedder("local")
    model.embed(["a warm-up line"])
    rows, per_clip = [], {}
    for n in SIZES:
        records = prepared(n)
        per_clip[n] = (
            cpu_per_clip(records, True),
            cpu_per_clip(records, False),
            stage_cpu_per_clip(records, model),
        )
    first = per_clip[SIZES[0]]
    for n in SIZES:
        with_vec, without, stage = per_clip[n]
        rows.append(
            [
                n,
                f"{with_vec:.2f}",
                f"{with_vec / first[0]:.2f}x",
                f"{without:.2f}",
                f"{without / first[1]:.2f}x",
                f"{stage:.2f}",
                f"{stage / first[2]:.2f}x",
            ]
        )
    last = per_clip[SIZES[-1]]
    fold_ok = max(last[0] / first[0], last[1] / first[1]) <= 1.5
    stage_ok = last[2] / first[2] <= 1.5
    return table(
        f"abstract, CPU ms per clip (target at {SIZES[-1]} clips <= 1.5x of {SIZES[0]}: the stage "
        f"{'met' if stage_ok else 'missed'}, the fold alone {'met' if fold_ok else 'missed'}) — {machine()}",
        [
            "clips",
            "fold, precomputed vectors",
            f"vs {SIZES[0]}",
            "fold, no vectors",
            f"vs {SIZES[0]}",
            "stage with MiniLM",
            f"vs {SIZES[0]}",
        ],
        rows,
    )


if __name__ == "__main__":
    print(main())
