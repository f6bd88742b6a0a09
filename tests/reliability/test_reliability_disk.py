"""A full disk under `m3 index -o DIR` when DIR already exists (as `m3 batch` makes it, for its
journal): one line, no table left that breaks later runs, and the next run on free space works.

Run in a private tmpfs of 64 MB filled to leave 60 kB .. 500 kB free, so the write fails at different
tables (or, with the most room, not at all)."""

from __future__ import annotations

import shlex
import sys

import pytest

from support.index_pipeline import pipeline
from support.small_fs import fill, in_small_fs, jsonl, needs_small_fs


@needs_small_fs
@pytest.mark.parametrize("free", ["60k", "200k"])
@pytest.mark.slow
def test_full_disk_on_an_existing_memory_dir_then_a_rerun_works(tmp_path, free):
    (tmp_path / "small.jsonl").write_bytes(jsonl(pipeline(2)))
    mnt = tmp_path / "mnt"
    mem = shlex.quote(str(mnt / "mem.lance"))
    count = (
        "from m3cli.stages.core.memory_store import open_memory as o; m = o('{}'); "
        "print(*[m.table(t).count_rows() for t in ('nodes', 'edges', 'entities', 'clips')])"
    ).format(mnt / "mem.lance")
    script = f"""
        mkdir -p {mem}; echo '{{"video":"x","status":"indexing"}}' > {mem}/_m3_batch_journal.jsonl
        {fill(mnt)}
        truncate -s -{free} {mnt}/filler
        $M3 index -o {mem} small.jsonl 2> err_full.txt; echo "full rc=$?"
        rm {mnt}/filler
        $M3 index -o {mem} small.jsonl 2> err_after.txt; echo "after rc=$?"
        {sys.executable} -c "{count}"
        $M3 index -o {mem} small.jsonl 2> /dev/null; echo "again rc=$?"
        {sys.executable} -c "{count}"
    """
    out = in_small_fs(mnt, "64m", script, tmp_path).strip().splitlines()
    assert out[0] == "full rc=1"
    [line] = (tmp_path / "err_full.txt").read_text().strip().splitlines()
    assert line.startswith("m3: error: ") and "no space left on device" in line
    assert out[1] == "after rc=0", (tmp_path / "err_after.txt").read_text()
    assert out[3] == "again rc=0" and out[2] == out[4]  # idempotent: the same rows
    assert out[2].split()[3] == "2"  # both clips


@needs_small_fs
@pytest.mark.slow
def test_a_failed_append_is_rolled_back_before_the_error_is_reported(tmp_path):
    """After `index` fails on a full disk, a plain LanceDB reader of the latest versions (as
    docs/concepts/memory.md invites) sees the previous memory, not the failed run's half-written
    rows: the writer rolled its tables back before reporting. Tried at several free-space sizes, so the
    write fails at different tables; no table's latest version is left past the one the manifest
    commits."""
    (tmp_path / "small.jsonl").write_bytes(jsonl(pipeline(2)))
    (tmp_path / "more.jsonl").write_bytes(jsonl(pipeline(5)))
    mnt = tmp_path / "mnt"
    tables = ("nodes", "edges", "entities", "clips")
    latest = (
        "import lancedb, orjson; db = lancedb.connect('{m}'); "
        "man = orjson.loads(open('{m}/m3.manifest.json', 'rb').read())['tables']; "
        f"t = [db.open_table(n) for n in {tables!r}]; "
        f"print(*[x.count_rows() for x in t], sum(x.version > man[n] for x, n in zip(t, {tables!r})))"
    )
    lines = []
    for i, free in enumerate(("40k", "120k", "300k", "700k")):
        mem = shlex.quote(str(mnt / f"m{i}.lance"))
        lines.append(f"""
        $M3 index -o {mem} small.jsonl 2> /dev/null; echo "small rc=$?"
        {sys.executable} -c "{latest.format(m=mnt / f"m{i}.lance")}"
        {fill(mnt)}
        truncate -s -{free} {mnt}/filler
        $M3 index -o {mem} more.jsonl 2> err{i}.txt; echo "more rc=$?"
        rm {mnt}/filler
        {sys.executable} -c "{latest.format(m=mnt / f"m{i}.lance")}"
        """)
    out = in_small_fs(mnt, "64m", "\n".join(lines), tmp_path).strip().splitlines()
    failed = 0
    for i in range(4):
        small_rc, before, more_rc, after = out[4 * i : 4 * i + 4]
        assert small_rc == "small rc=0", out
        if more_rc == "more rc=0":  # room enough: the append landed (then it is the latest version)
            continue
        failed += 1
        assert more_rc == "more rc=1"
        [line] = (tmp_path / f"err{i}.txt").read_text().strip().splitlines()
        assert "no space left on device" in line and "keeps its previous version" in line
        assert after.split()[:4] == before.split()[:4], (i, before, after)  # the previous rows only
        assert after.split()[4] == "0", (i, after)  # no table ahead of the manifest
    assert failed >= 2, out  # the small sizes fail (at different tables)
