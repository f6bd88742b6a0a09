"""Memory-wide people: the cost of matching a new video's characters against a memory's people.

Targets: matching a new video (4 characters, face + voice) against 10,000 known people <= 50 ms; the
100th video costs about what the 2nd does (+-20%). The people are SYNTHETIC: each is a real dlib face
embedding and a real CAM++ voice embedding (from the people dev set's memory when given as
``M3_BENCH_PEOPLE_MEMORY``, else random unit vectors) moved by independent noise, so every person is
distinct; the matcher is the one `m3 index` runs (KnownPeople + assign_video), timed in process
without the table read.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))

from bench.common import table  # noqa: E402


def _bases() -> tuple[list[np.ndarray], list[np.ndarray]]:
    mem = os.environ.get("M3_BENCH_PEOPLE_MEMORY")
    if mem:
        from m3cli.stages.eval.people import memory_rows

        rows = memory_rows(mem)
        faces = [np.asarray(r["face"], np.float32) for r in rows if r["face"]]
        voices = [np.asarray(r["voice"], np.float32) for r in rows if r["voice"]]
        if faces and voices:
            return faces, voices
    rng = np.random.default_rng(0)
    return list(rng.normal(size=(8, 128)).astype(np.float32)), list(
        rng.normal(size=(8, 192)).astype(np.float32)
    )


def _person(rng: np.random.Generator, base: np.ndarray, scale: float) -> np.ndarray:
    v = base / np.linalg.norm(base) + rng.normal(scale=scale, size=base.shape).astype(np.float32)
    return v / np.linalg.norm(v)


def main() -> str:
    from m3cli.stages.people.match import Appearance, KnownPeople, assign_video

    faces, voices = _bases()
    rng = np.random.default_rng(1)
    counter = [0]

    def new() -> str:
        counter[0] += 1
        return f"<person_{counter[0]}>"

    def video(i: int, n: int = 4) -> list[Appearance]:
        return [
            Appearance(
                f"v{i}:<character_{k}>",
                f"v{i}",
                f"<character_{k}>",
                face=_person(rng, faces[(i + k) % len(faces)], 0.2),
                face_model="dlib",
                voice=_person(rng, voices[(i + k) % len(voices)], 0.2),
                voice_model="campplus",
            )
            for k in range(1, n + 1)
        ]

    rows = []
    for size in (0, 1_000, 10_000):
        known = KnownPeople()
        for i in range(size // 4):
            assign_video(known, video(-1 - i), new)
        took = []
        for j in range(20):
            t = time.perf_counter()
            assign_video(known, video(10**6 + j), new)
            took.append((time.perf_counter() - t) * 1000)
        rows.append([f"{len(known.ids):,}", f"{statistics.median(took):.2f}", f"{max(took):.2f}"])
    known = KnownPeople()
    per_video = []
    for i in range(100):
        t = time.perf_counter()
        assign_video(known, video(i), new)
        per_video.append((time.perf_counter() - t) * 1000)
    rows.append(["2nd video", f"{per_video[1]:.2f}", ""])
    rows.append(["100th video", f"{per_video[99]:.2f}", ""])
    return table(
        "people: matching one new video (4 characters, synthetic people from real embeddings)",
        ["known people", "median ms", "max ms"],
        rows,
    )


if __name__ == "__main__":
    print(main())
