"""`m3 ask` at scale: our own time per question and vector-search recall on a large memory.

The memory is written by the real index stage (:func:`m3cli.stages.index.stage.index_records`, in chunks of
videos, the last chunk building the FTS and IVF_HNSW_SQ indexes exactly as `m3 index` does once a table
passes ``ann_min_rows``). Texts are templated memory lines (speech, appearances, actions) with unique details;
vectors are the bundled MiniLM embedding of the line's template plus a small per-line perturbation, so
the data is clustered the way real memory is while 1M lines do not need 1M MiniLM calls on 2 cores.

Targets: own time per question (everything but the LLM) <= 50 ms p50 at 1M nodes; recall@10 of the
vector search >= 0.95 against exact (brute-force) search; a 5-round scripted question <= 100 ms of our
own time. Size: ``M3_BENCH_ASK_NODES`` (default 1,000,000); the memory is kept in bench/out between runs.

Also, side by side in one run: a cold retrieval-only `m3 ask` on the quickstart memory (median of 5
fresh processes, wall and own time) with this tree and with ``M3_BENCH_ASK_BASELINE`` (a git revision,
default the last one whose `m3 ask` read memories through LanceDB), checked to give the same answer.
The quickstart memory is ``$TMPDIR/m3-quickstart/mem.lance`` (``bash examples/quickstart.sh`` makes it;
this benchmark runs that script when it is missing). ``M3_BENCH_ASK_COLD=0`` skips this part.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.append(str(Path(__file__).resolve().parent.parent))  # bench.*, behind the installed m3cli

from bench.common import OUT, m3, machine, run_cmd, table  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
NODES = int(os.environ.get("M3_BENCH_ASK_NODES", "1000000"))
#: the last revision whose `m3 ask` imported LanceDB to read a memory
BASELINE = os.environ.get("M3_BENCH_ASK_BASELINE", "e88fe77")
QUICKSTART_MEMORY = Path(os.environ.get("TMPDIR", "/tmp")) / "m3-quickstart" / "mem.lance"
QUICKSTART_QUESTION = "Who talked about being a self starter?"
COLD_RUNS = 5
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
    from m3cli.stages.index.stage import IndexConfig, index_records

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


def baseline_tree(rev: str, into: Path) -> Path | None:
    """The m3 package of revision ``rev`` laid out as installed (stages/ and schemas/ inside m3cli/), or
    None when this checkout cannot produce it (no git, unknown revision)."""
    src = into / "src"
    src.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "m3cli", "stages", "schemas"], capture_output=True
    )
    if archive.returncode:
        print(f"  baseline {rev}: {archive.stderr.decode().strip()}", file=sys.stderr)
        return None
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive.stdout, check=True)
    pkg = into / "pkg"
    pkg.mkdir()
    shutil.move(str(src / "m3cli"), pkg / "m3cli")
    shutil.move(str(src / "stages"), pkg / "m3cli" / "stages")
    shutil.move(str(src / "schemas"), pkg / "m3cli" / "schemas")
    return pkg


def cold_asks(memory: Path, runs: int) -> list[list[str]]:
    """Fresh `m3 ask` processes on ``memory``, this tree's and the baseline's alternately (so both see the
    same machine load): per variant the walls (s), own times (ms), peak RSS and the answers."""
    env = {"M3_LLM_BASE_URL": "", "M3_LLM_MODEL": "", "HF_HUB_OFFLINE": "1", "PYTHONSAFEPATH": "1"}
    with tempfile.TemporaryDirectory(prefix="m3-bench-ask-") as tmp:
        old_pkg = baseline_tree(BASELINE, Path(tmp))
        args = ["ask", str(memory), QUICKSTART_QUESTION]
        variants = {"this tree": (m3(*args), env)}
        if old_pkg is not None:
            old = [sys.executable, "-c", "import sys; from m3cli.app import main; sys.argv[0] = 'm3'; main()"]
            variants[f"before ({BASELINE}, reads through LanceDB)"] = (
                [*old, *args],
                {**env, "PYTHONPATH": str(old_pkg)},
            )
        seen: dict[str, dict] = {n: {"wall": [], "own": [], "rss": 0.0, "answers": set()} for n in variants}
        for _ in range(runs):
            for name, (cmd, cmd_env) in variants.items():
                run = run_cmd(cmd, env=cmd_env)
                rec = json.loads(run.stdout)
                seen[name]["wall"].append(run.seconds)
                seen[name]["own"].append(1000 * (rec["latency_s"] - rec["llm_s"]))
                seen[name]["rss"] = max(seen[name]["rss"], run.peak_rss_mb)
                seen[name]["answers"].add(json.dumps([rec["answer"], rec["evidence"]], sort_keys=True))
    answers = {a for v in seen.values() for a in v["answers"]}
    rows = []
    for name, v in seen.items():
        rows.append(
            [
                f"cold retrieval-only `m3 ask`, quickstart memory: {name}",
                f"{statistics.median(v['wall']):.2f} s wall (median of {runs}; min {min(v['wall']):.2f}), "
                f"own time p50 {statistics.median(v['own']):.0f} ms, peak RSS {v['rss']:.0f} MB",
            ]
        )
    rows.append(["  same answer and evidence in every run", "yes" if len(answers) == 1 else "NO"])
    return rows


def quickstart_memory() -> Path | None:
    if not (QUICKSTART_MEMORY / "m3.manifest.json").exists():
        print("== building the quickstart memory (bash examples/quickstart.sh)", file=sys.stderr, flush=True)
        subprocess.run(["bash", str(ROOT / "examples" / "quickstart.sh")], check=False, capture_output=True)
    return QUICKSTART_MEMORY if (QUICKSTART_MEMORY / "m3.manifest.json").exists() else None


def main() -> str:
    from m3cli.stages.ask.loop import AskConfig, Asker
    from m3cli.stages.ask.memory import LanceMemory
    from m3cli.stages.ask.nodes import Scope
    from m3cli.stages.ask.questions import Question
    from m3cli.stages.backends.embed import make_embedder
    from m3cli.stages.core import threads

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    threads.limit_blas()  # one BLAS thread, as `m3 ask` runs (m3cli.context configures it from settings)
    cold_rows: list[list[str]] = []
    if os.environ.get("M3_BENCH_ASK_COLD", "1") != "0":
        memory = quickstart_memory()
        if memory is not None:
            print("== cold m3 ask, this tree vs baseline", file=sys.stderr, flush=True)
            cold_rows = cold_asks(memory, COLD_RUNS)
    minilm = make_embedder("local")
    embedder = TemplateEmbedder(minilm)
    path = OUT / f"ask_memory_{NODES}.lance"
    info = build(path, embedder)
    mem = LanceMemory.open(path)
    counts = mem.counts()
    videos = mem.videos()

    # -- recall@10 of the vector search against exact search, whole memory and one video
    nodes = mem.reader.arrow("nodes", ["id", "video", "vector"])
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
    from m3cli.stages.ask import memory as ask_memory
    from m3cli.stages.backends.llm import LlmClient
    from support.fake_openai import FakeOpenAI

    def scripted(video: str, questions: int = 10) -> list[float]:
        own = []
        for i in range(questions):
            server.script(
                "[Search] who likes coffee",
                "[SearchClip] coffee in the kitchen",
                "[Character] Alice",
                "[Count] coffee",
                "[Answer] Alice",
            )
            rec = asker.ask(Question(f"Who likes coffee? #{i}", video=video))
            assert rec["rounds"] == 5 and rec["answer"] == "Alice", rec
            own.append(1000 * (rec["latency_s"] - rec["llm_s"]))
        return own

    with FakeOpenAI() as server:
        asker.llm = LlmClient(server.url, "fake-model", max_retries=0)
        own = scripted(videos[0])  # the first question loads the video's nodes into RAM
        held_max = ask_memory.EXACT_MAX_ROWS
        ask_memory.EXACT_MAX_ROWS = 0  # the same question with every search in Lance (IVF + prefilter)
        try:
            own_lance = scripted(videos[1])
        finally:
            ask_memory.EXACT_MAX_ROWS = held_max

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
        [
            "vector search recall@10 vs exact, one video (its nodes held in RAM: exact)",
            f"{statistics.mean(recalls_v):.3f}",
        ],
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
            "5-round scripted question (loopback server, --video), own time p50 / p95 (10 questions)",
            f"{p(own, 50)} / {p(own, 95)} ms",
        ],
        ["  the first of them (loads the video's nodes into RAM)", f"{own[0]:.1f} ms"],
        [
            "  same, every search in Lance (IVF_SQ + prefilter, no video held in RAM), p50 / p95",
            f"{p(own_lance, 50)} / {p(own_lance, 95)} ms",
        ],
    ]
    rows += cold_rows
    return table(f"ask on {counts['nodes']:,} nodes ({machine()})", ["measure", "value"], rows)


if __name__ == "__main__":
    print(main())
