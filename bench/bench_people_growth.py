"""Memory-wide people: what adding one more video costs as the memory grows (the 2nd vs the 100th).

The memory is the people dev set replicated: the real people rows (real dlib face and CAM++ voice
means) of the eleven dev videos, video after video again under new video ids, matched as `m3 index`
matches them, so the same eleven people recur and their appearances pile up. Timed, in process,
the people step `m3 index` runs for one new video (stages/people/add.py): read the people table and
the edits, build the known people, match the video, write its rows (one Lance merge); as it was
(every row read whole) and as it is (the matcher's columns read as arrays). Also the matching
alone. Needs the dev memory: ``M3_BENCH_PEOPLE_MEMORY=all.lance`` (`m3 batch
tests/data/people/photos tests/data/people/latentsync tests/data/people/grid -o all.lance`).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))

from bench.common import table  # noqa: E402


def _replicated(rows: list[dict], n: int) -> list[dict]:
    """``n`` videos: the dev videos one after another, again and again, each under a new id."""
    videos = list(dict.fromkeys(r["video"] for r in sorted(rows, key=lambda r: (r["seq"], r["id"]))))
    out = []
    for i in range(n):
        src = videos[i % len(videos)]
        vid = f"{src}-r{i}"
        for r in rows:
            if r["video"] == src:
                out.append({**r, "video": vid, "id": f"{vid}:{r['character']}", "seq": i + 1})
    return out


def main() -> str:
    import pyarrow as pa

    from m3cli.stages.core.memory_writer import MemoryWriter
    from m3cli.stages.eval.people import memory_rows, replay
    from m3cli.stages.people.add import MATCH_COLUMNS, appearance_of_row, known_of_table, load_known
    from m3cli.stages.people.match import assign_video
    from m3cli.stages.people.store import EDITS, EDITS_SCHEMA, PEOPLE, PEOPLE_SCHEMA, Edits, person_number

    mem = os.environ.get("M3_BENCH_PEOPLE_MEMORY")
    if not mem:
        raise SystemExit("set M3_BENCH_PEOPLE_MEMORY to a memory of the people dev set")
    dev = memory_rows(mem)
    cols = [f.name for f in PEOPLE_SCHEMA]
    rows_out = []
    reps = 15
    for before in (1, 10, 99, 499, 4999):
        rows = _replicated(dev, before + reps)
        order = list(dict.fromkeys(r["video"] for r in rows))
        assigned = replay(rows, order)
        stored = [{k: r.get(k) for k in cols} for r in assigned if r["seq"] <= before]
        tmp = Path(tempfile.mkdtemp(prefix="m3-people-growth-"))
        try:
            w = MemoryWriter(tmp / "mem.lance")
            w.create(PEOPLE, pa.Table.from_pylist(stored, schema=PEOPLE_SCHEMA), PEOPLE_SCHEMA)
            w.create(EDITS, EDITS_SCHEMA.empty_table(), EDITS_SCHEMA)
            took: dict[str, list[float]] = {"old": [], "new": [], "match": [], "write": []}
            for k in range(reps):
                new = [r for r in rows if r["seq"] == before + 1 + k]
                t0 = time.perf_counter()
                load_known(w.scan(PEOPLE))  # before: every row whole, one appearance at a time
                t1 = time.perf_counter()
                Edits.of(w.scan(EDITS))  # now (stages/people/add.py)
                tab = w.dataset(PEOPLE).to_table(columns=MATCH_COLUMNS)
                w.scan(PEOPLE, f"video IN ('{new[0]['video']}')")
                known = known_of_table(tab)
                counter = [max(person_number(p) for p in tab.column("person").to_pylist())]
                t2 = time.perf_counter()

                def new_person(counter: list[int] = counter) -> str:
                    counter[0] += 1
                    return f"<person_{counter[0]}>"

                apps = [appearance_of_row(r) for r in new]
                assign_video(known, apps, new_person)
                t3 = time.perf_counter()
                out = [
                    {**{k: r.get(k) for k in cols}, "person": a.person}
                    for r, a in zip(new, apps, strict=True)
                ]
                w.merge(PEOPLE, pa.Table.from_pylist(out, schema=PEOPLE_SCHEMA), on="id")
                t4 = time.perf_counter()
                for name, a, b in (("old", t0, t1), ("new", t1, t2), ("match", t2, t3), ("write", t3, t4)):
                    took[name].append((b - a) * 1000)
            best = {k: min(v) for k, v in took.items()}
            rows_out.append(
                [
                    f"{before + 1}",
                    f"{len(stored):,}",
                    f"{best['old']:.1f}",
                    f"{best['new']:.1f}",
                    f"{best['match']:.2f}",
                    f"{best['write']:.1f}",
                    f"{best['new'] + best['match'] + best['write']:.1f}",
                ]
            )
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return table(
        "people: adding the Nth video to a memory of the dev set replicated (fastest of 15, ms)",
        ["video N", "people rows before", "read before", "read now", "match", "write", "step now"],
        rows_out,
    )


if __name__ == "__main__":
    print(main())
