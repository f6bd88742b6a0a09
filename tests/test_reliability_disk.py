"""A full disk under `m3 index -o DIR` when DIR already exists (as `m3 batch` makes it, for its
journal): one line, no table left that breaks later runs, and the next run on free space works.

Run in a private tmpfs of 64 MB filled to leave 60 kB .. 500 kB free, so the write fails at different
tables (or, with the most room, not at all)."""

from __future__ import annotations

import shlex
import sys

import pytest
from test_index import pipeline
from test_memory_commit import fill, in_small_fs, jsonl, needs_small_fs


@needs_small_fs
@pytest.mark.parametrize("free", ["60k", "200k"])
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
