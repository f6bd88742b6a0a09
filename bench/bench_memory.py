"""Memory stages: per-clip overhead of offline memorize + link + abstract + index, 100k-node indexing, size.

Targets: memorize(offline) + link + abstract + index <= 50 ms per clip (no LLM time); indexing 100k nodes
<= 60 s; the memory of a 1-hour video (120 clips) <= 50 MB excluding face crops.

The 120-clip video is synthetic perception output (three people taking turns, ~10 utterances per clip),
so the numbers measure the memory stages only. Text embedding (bundled MiniLM on CPU) is reported on its
own line, first run and cached rerun, because it dominates and is cached per clip.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.append(str(Path(__file__).resolve().parent.parent))  # bench.*, behind the installed m3cli
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from bench.common import machine, table  # noqa: E402

CLIPS = 120
WORDS = (
    "the budget meeting garden coffee school project deadline weather train station music dinner "
    "report family holiday doctor market river bridge camera letter city council"
).split()


def synthetic_video(n: int = CLIPS):
    from m3cli.schemas.records import ClipRecord

    rng = np.random.default_rng(0)
    out = []
    for i in range(n):
        o = 30.0 * i
        faces, utts, t = {}, [], o
        for k in range(10):
            who = (i + k) % 3 + 1
            dur = float(rng.uniform(1.5, 2.8))
            words = " ".join(rng.choice(WORDS, 8))
            utts.append(
                {
                    "start": round(t, 2),
                    "end": round(t + dur, 2),
                    "text": f"I think {words}.",
                    "speaker": f"<voice_{who}>",
                }
            )
            faces.setdefault(f"<face_{who}>", []).append([round(t, 2), round(t + dur, 2)])
            t += 3.0
        out.append(
            ClipRecord.model_validate(
                {
                    "schema": "m3.clip/1",
                    "video": {"id": "b" * 16, "path": "/bench/video.mp4", "duration": 30.0 * n},
                    "clip": {"index": i, "start": o, "end": o + 30.0},
                    "faces": {
                        "backend": "bench",
                        "tracks": [
                            {"face_id": f, "detections": 5, "spans": s, "quality": 0.9}
                            for f, s in faces.items()
                        ],
                    },
                    "utterances": utts,
                }
            )
        )
    return out


class HashEmbedder:
    """384-d hashed bag of words: stands in for MiniLM where only storage speed is measured."""

    name, version, dim = "hash", "hash-384", 384

    def embed(self, texts):
        out = np.zeros((len(texts), self.dim), np.float32)
        for i, text in enumerate(texts):
            for w in text.lower().split():
                out[i, int(hashlib.md5(w.encode()).hexdigest()[:6], 16) % self.dim] += 1
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


def dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def stages_run(records, embedder, cache_root: Path, out: Path) -> dict[str, float]:
    from m3cli.stages.abstract.stage import AbstractConfig, abstract_records
    from m3cli.stages.core.cache import Cache
    from m3cli.stages.core.common import RunContext
    from m3cli.stages.index.stage import index_records
    from m3cli.stages.link.stage import LinkConfig, link_records
    from m3cli.stages.memorize.stage import MemorizeConfig, memorize_records

    ctx = RunContext(cache=Cache(cache_root))
    times = {}
    t = time.perf_counter()
    recs = memorize_records(records, MemorizeConfig())
    times["memorize"] = time.perf_counter() - t
    t = time.perf_counter()
    recs = link_records(recs, LinkConfig())
    times["link"] = time.perf_counter() - t
    t = time.perf_counter()
    recs = abstract_records(recs, AbstractConfig(check=True), None, embedder, ctx)
    times["abstract"] = time.perf_counter() - t
    t = time.perf_counter()
    index_records(recs, out, embedder, ctx=ctx)
    times["index"] = time.perf_counter() - t
    return times


def bench_100k(embedder, tmp: Path) -> tuple[float, int]:
    """100k fact nodes: one 100k-clip-line stream of 1000 clips x 100 lines, vectors precomputed (cached)."""
    from m3cli.schemas.records import ClipRecord
    from m3cli.stages.core.cache import Cache
    from m3cli.stages.core.common import RunContext
    from m3cli.stages.index.stage import index_records

    rng = np.random.default_rng(1)
    records = []
    for i in range(1000):
        lines = [
            {
                "text": f'<voice_{k % 7 + 1}> says: "{" ".join(rng.choice(WORDS, 10))} {i}-{k}"',
                "kind": "speech",
                "start": 30.0 * i + k * 0.3,
                "end": 30.0 * i + k * 0.3 + 0.3,
                "entities": [f"<voice_{k % 7 + 1}>"],
            }
            for k in range(100)
        ]
        records.append(
            ClipRecord.model_validate(
                {
                    "schema": "m3.clip/1",
                    "video": {"id": "c" * 16, "path": "/bench/long.mp4", "duration": 30000.0},
                    "clip": {"index": i, "start": 30.0 * i, "end": 30.0 * i + 30},
                    "memory": {"source": "offline", "episodic": lines, "semantic": []},
                }
            )
        )
    ctx = RunContext(cache=Cache(tmp / "cache100k"))
    t = time.perf_counter()
    index_records(records, tmp / "warm.lance", embedder, ctx=ctx)  # fills the vector cache
    first = time.perf_counter() - t
    t = time.perf_counter()
    index_records(records, tmp / "k100.lance", embedder, ctx=ctx)
    return time.perf_counter() - t, first


def main() -> str:
    from m3cli.stages.backends.embed import make_embedder

    tmp = Path(tempfile.mkdtemp(prefix="m3-bench-memory-"))
    try:
        records = synthetic_video()
        minilm = make_embedder("local")
        minilm.embed(["warm up"])
        first = stages_run(records, minilm, tmp / "cache", tmp / "mem1.lance")
        rerun = stages_run(records, minilm, tmp / "cache", tmp / "mem2.lance")
        hashed = stages_run(records, HashEmbedder(), tmp / "cache-h", tmp / "mem3.lance")
        size = dir_size(tmp / "mem1.lance")
        import lancedb

        nodes = lancedb.connect(str(tmp / "mem1.lance")).open_table("nodes").count_rows()
        k100, k100_first = bench_100k(HashEmbedder(), tmp)
        rows = []
        for label, t in (
            ("MiniLM, first run (embeds every line)", first),
            ("MiniLM, rerun (embeddings cached)", rerun),
            ("hashed 384-d embedder (no model)", hashed),
        ):
            total = sum(t.values())
            rows.append(
                [label]
                + [f"{1000 * t[k] / CLIPS:.1f}" for k in ("memorize", "link", "abstract", "index")]
                + [f"{1000 * total / CLIPS:.1f}", "yes" if 1000 * total / CLIPS <= 50 else "no"]
            )
        out = table(
            f"Memory stages, {CLIPS} synthetic clips (1 h), ms per clip — {machine()}",
            ["embedder", "memorize", "link", "abstract", "index", "total", "<= 50 ms"],
            rows,
        )
        out += "\n" + table(
            "Scale and size",
            ["measure", "value", "target"],
            [
                ["index 100k fact nodes (vectors cached)", f"{k100:.1f} s", "<= 60 s"],
                ["index 100k fact nodes (hashed vectors computed)", f"{k100_first:.1f} s", ""],
                [f"1-hour memory on disk ({nodes} nodes, 384-d)", f"{size / 1e6:.1f} MB", "<= 50 MB"],
            ],
        )
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    print(main())
