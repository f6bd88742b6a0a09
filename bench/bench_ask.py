"""`m3 ask` at scale: our own time per question and vector-search recall on a large memory.

The memory is written by the real index stage (:func:`m3cli.stages.index.index_records`, in chunks of videos,
the last chunk building the FTS and IVF_HNSW_SQ indexes exactly as `m3 index` does once a table passes
``ann_min_rows``). Texts are templated memory lines (speech, appearances, actions) with unique details;
vectors are the bundled MiniLM embedding of the line's template plus a small per-line perturbation, so
the data is clustered the way real memory is while 1M lines do not need 1M MiniLM calls on 2 cores.

Targets: own time per question (everything but the LLM) <= 50 ms p50 at 1M nodes; recall@10 of the
vector search >= 0.95 against exact (brute-force) search; a 5-round scripted question <= 100 ms of our
own time. Size: ``M3_BENCH_ASK_NODES`` (default 1,000,000); the memory is kept in bench/out between runs.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import OUT, machine, table  # noqa: E402

NODES = int(os.environ.get("M3_BENCH_ASK_NODES", "1000000"))
CLIPS_PER_VIDEO = 100
LINES_PER_CLIP = 50
VIDEOS_PER_CHUNK = 20
NOISE = 0.35
PEOPLE = ["Alice", "Bob", "Carol", "Dave", "Erin", "Frank", "Grace", "Heidi", "Ivan", "Judy"]
OBJECTS = [
    "coffee",
    "green tea",
    "the red folder",
    "a laptop",
    "the piano",
    "a bicycle",
    "the fridge",
    "a novel",
    "the vacuum cleaner",
    "a chess board",
    "the garden hose",
    "a birthday cake",
    "the TV remote",
    "keys",
    "a yoga mat",
    "the dishwasher",
    "a phone charger",
    "a paint brush",
    "the guitar",
    "a basketball",
]
PLACES = ["kitchen", "living room", "garden", "office", "bedroom", "garage", "hallway", "balcony"]
VERBS = [
    "likes",
    "picks up",
    "talks about",
    "puts away",
    "looks for",
    "cleans",
    "hides",
    "gives away",
    "complains about",
    "repairs",
]
QUESTIONS = [
    "Who likes coffee?",
    "Where did Bob put the red folder?",
    "What does Carol repair in the garage?",
    "Who talks about the piano?",
    "What did Alice give away?",
    "Who cleans the fridge?",
    "Where is the yoga mat?",
    "Who complains about the TV remote?",
    "What does Erin look for?",
    "Who hides the birthday cake?",
]


def templates() -> list[str]:
    out = []
    for p in PEOPLE:
        for v in VERBS:
            for o in OBJECTS:
                out.append(f"{p} {v} {o}")
    for p in PEOPLE:
        for o in OBJECTS:
            for place in PLACES:
                out.append(f'{p} says: "I left {o} in the {place}."')
    return out


class TemplateEmbedder:
    """MiniLM vectors of the template of each line, plus a deterministic per-line perturbation."""

    name = "bench:template-minilm"
    version = "bench:template-minilm@1"

    def __init__(self, base):
        self.base = base
        self.tpl = templates()
        vecs = base.embed(self.tpl)
        self.tvec = {t: v for t, v in zip(self.tpl, vecs, strict=True)}
        self.dim = int(vecs.shape[1])

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.empty((len(texts), self.dim), np.float32)
        for i, text in enumerate(texts):
            tpl = text.split(" @", 1)[0]
            base = self.tvec.get(tpl)
            if base is None:
                base = self.base.embed([tpl])[0]
                self.tvec[tpl] = base
            seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
            noise = np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32)
            v = base + NOISE * noise / np.sqrt(self.dim)
            out[i] = v / np.linalg.norm(v)
        return out


def clip_records(video_index: int) -> list:
    from m3cli.stream import parse_record

    vid = hashlib.sha256(f"bench-video-{video_index}".encode()).hexdigest()[:16]
    tpl = templates()
    rng = np.random.default_rng(video_index)
    recs = []
    characters = {f"<voice_{i + 1}>": f"<character_{i + 1}>" for i in range(len(PEOPLE))}
    names = [{"text": f"The name of <voice_{i + 1}> is {p}"} for i, p in enumerate(PEOPLE)]
    for c in range(CLIPS_PER_VIDEO):
        lines = []
        for j in range(LINES_PER_CLIP):
            t = 30.0 * c + j * 0.6
            lines.append({"text": f"{tpl[int(rng.integers(len(tpl)))]} @{c}.{j}", "start": t, "end": t + 0.5})
        recs.append(
            parse_record(
                {
                    "schema": "m3.clip/1",
                    "video": {
                        "id": vid,
                        "path": f"/videos/bench_{video_index}.mp4",
                        "duration": 30.0 * CLIPS_PER_VIDEO,
                    },
                    "clip": {"index": c, "start": 30.0 * c, "end": 30.0 * c + 30.0},
                    "memory": {"source": "offline", "episodic": lines, "semantic": names if c == 0 else []},
                    "characters": characters,
                }
            )
        )
    return recs


def build(path: Path, embedder) -> dict:
    from m3cli.stages.index import IndexConfig, index_records

    per_video = CLIPS_PER_VIDEO * LINES_PER_CLIP
    videos = max(1, NODES // per_video)
    marker = path / ".complete"
    if marker.exists() and marker.read_text() == str(videos):
        return {"videos": videos, "build_s": float("nan"), "reused": True}
    shutil.rmtree(path, ignore_errors=True)
    t0 = time.perf_counter()
    for start in range(0, videos, VIDEOS_PER_CHUNK):
        last = start + VIDEOS_PER_CHUNK >= videos
        records = [r for v in range(start, min(videos, start + VIDEOS_PER_CHUNK)) for r in clip_records(v)]
        cfg = IndexConfig(fts=last, ann_min_rows=0 if last else 10**12)
        index_records(records, path, embedder, cfg)
        print(
            f"  indexed {min(videos, start + VIDEOS_PER_CHUNK)}/{videos} videos "
            f"({time.perf_counter() - t0:.0f}s)",
            file=sys.stderr,
        )
    marker.write_text(str(videos))
    return {"videos": videos, "build_s": time.perf_counter() - t0, "reused": False}


def exact_top(all_vecs: np.ndarray, ids: list[str], q: np.ndarray, k: int, mask: np.ndarray | None = None):
    sims = all_vecs @ q
    if mask is not None:
        sims = np.where(mask, sims, -np.inf)
    top = np.argpartition(-sims, k)[:k]
    return {ids[i] for i in top}


def main() -> str:
    from m3cli.stages.ask.loop import AskConfig, Asker, Question
    from m3cli.stages.ask.memory import LanceMemory
    from m3cli.stages.ask.tools import Scope
    from m3cli.stages.backends.embed import make_embedder

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    minilm = make_embedder("local")
    embedder = TemplateEmbedder(minilm)
    path = OUT / f"ask_memory_{NODES}.lance"
    info = build(path, embedder)
    mem = LanceMemory.open(path)
    counts = mem.counts()
    videos = mem.videos()

    # -- recall@10 of the vector search against exact search, whole memory and one video
    nodes = mem._nodes.to_lance().to_table(columns=["id", "video", "vector"])
    ids = nodes.column("id").to_pylist()
    vids = np.asarray(nodes.column("video").to_pylist())
    all_vecs = np.asarray(nodes.column("vector").combine_chunks().flatten().to_numpy(), np.float32).reshape(
        len(ids), -1
    )
    del nodes
    queries = minilm.embed(QUESTIONS * 3)
    recalls, recalls_v, search_ms = [], [], []
    for i, q in enumerate(queries):
        t0 = time.perf_counter()
        got = {n.id for n in mem.vector_search(q, 10, Scope())}
        search_ms.append(1000 * (time.perf_counter() - t0))
        recalls.append(len(got & exact_top(all_vecs, ids, q, 10)) / 10)
        v = videos[i % len(videos)]
        got_v = {n.id for n in mem.vector_search(q, 10, Scope(video=v))}
        recalls_v.append(len(got_v & exact_top(all_vecs, ids, q, 10, vids == v)) / 10)
    del all_vecs

    # -- own time per question, retrieval-only (query embedding by MiniLM, LLM excluded: there is none)
    class QueryEmbedder:
        version = embedder.version
        dim = embedder.dim

        def embed(self, texts):
            return minilm.embed(texts)

    asker = Asker(mem, QueryEmbedder(), None, AskConfig(), memory_name=str(path))
    asker.warm()
    lat, lat_noembed, lat_video, embed_ms = [], [], [], []
    for i, question in enumerate(QUESTIONS * 3):
        t0 = time.perf_counter()
        minilm.embed([question + " (timing)"])
        embed_ms.append(1000 * (time.perf_counter() - t0))
        rec = asker.ask(Question(question + f" #{i}"))
        assert rec["error"] is None, rec["error"]
        lat.append(1000 * (rec["latency_s"] - rec["llm_s"]))
        rec = asker.ask(Question(question + f" #{i}"))  # same text: the query vector is cached
        lat_noembed.append(1000 * (rec["latency_s"] - rec["llm_s"]))
        rec = asker.ask(Question(question + f" ##{i}", video=videos[i % len(videos)], before_clip=50))
        lat_video.append(1000 * (rec["latency_s"] - rec["llm_s"]))

    # -- a 5-round question through the loopback server: our own time (latency minus LLM wait)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from m3cli.stages.backends.llm import LlmClient
    from support.fake_openai import FakeOpenAI

    own = []
    with FakeOpenAI() as server:
        asker.llm = LlmClient(server.url, "fake-model", max_retries=0)
        for i in range(10):
            server.script(
                "[Search] who likes coffee",
                "[SearchClip] coffee in the kitchen",
                "[Character] Alice",
                "[Count] coffee",
                "[Answer] Alice",
            )
            rec = asker.ask(Question(f"Who likes coffee? #{i}", video=videos[0]))
            assert rec["rounds"] == 5 and rec["answer"] == "Alice", rec
            own.append(1000 * (rec["latency_s"] - rec["llm_s"]))

    def p(xs, q):
        return f"{np.percentile(xs, q):.1f}"

    disk = sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**30
    rows = [
        [
            "memory",
            f"{counts['nodes']:,} nodes, {counts['edges']:,} edges, {len(videos)} videos, {disk:.2f} GiB",
        ],
        [
            "build (real index writer, chunks of 20 videos)",
            "reused" if info["reused"] else f"{info['build_s']:.0f} s",
        ],
        ["vector search recall@10 vs exact, whole memory", f"{statistics.mean(recalls):.3f}"],
        ["vector search recall@10 vs exact, one video (prefilter)", f"{statistics.mean(recalls_v):.3f}"],
        ["vector search latency p50 / p95", f"{p(search_ms, 50)} / {p(search_ms, 95)} ms"],
        [
            "question, retrieval-only, own time p50 / p95 (incl. MiniLM query embedding)",
            f"{p(lat, 50)} / {p(lat, 95)} ms",
        ],
        ["  of which MiniLM query embedding p50", f"{p(embed_ms, 50)} ms"],
        [
            "question, retrieval-only, own time excluding query embedding p50 / p95",
            f"{p(lat_noembed, 50)} / {p(lat_noembed, 95)} ms",
        ],
        [
            "question with --video and --before-clip, own time p50 / p95",
            f"{p(lat_video, 50)} / {p(lat_video, 95)} ms",
        ],
        [
            "5-round scripted question (loopback server), own time p50 / p95",
            f"{p(own, 50)} / {p(own, 95)} ms",
        ],
    ]
    return table(f"ask on {counts['nodes']:,} nodes ({machine()})", ["measure", "value"], rows)


if __name__ == "__main__":
    print(main())
