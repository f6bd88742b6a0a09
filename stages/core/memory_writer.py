"""Table-level writes of a memory through its Lance datasets, without LanceDB.

A memory (:mod:`~m3cli.stages.core.memory_store`) is a LanceDB directory whose tables are plain Lance
datasets ``<memory>/<table>.lance``. LanceDB adds nothing to them that ``m3 index`` needs: its table
operations (create, merge-insert on ``id``, restore, drop, scalar/full-text/vector indexes) are the
``lance`` package's own, run by the same engine. But ``import lancedb`` costs about a second of every
`m3 index` and `m3 run` (it eagerly imports its REST namespace client), against about a quarter of that
for ``lance``. So the indexer writes through this module and never imports LanceDB, and what it writes
stays a LanceDB database: ``lancedb.connect(memory)`` opens it, with the index names
(``<column>_idx``) and full-text tokenizer settings LanceDB's own builders produce.

Object-store memories (``s3://...``) are reached with the credentials of the standard SDK variables,
as LanceDB reaches them (Lance reads them itself). Every method takes a table name; datasets are
opened once and follow this writer's own commits.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from m3cli.stages.core.memory_reader import table_names as listed_tables
from m3cli.stages.core.memory_reader import table_uri
from m3cli.stages.core.storage import remove_dir

#: The English stop words of the Lance engine inside LanceDB (NLTK's list). The ``lance`` package's own
#: engine is newer and keeps negations and contraction pieces ("not", "no", "don", "t"...) in its
#: default list; passing LanceDB's list makes the index count each line's tokens as LanceDB's builder
#: does, so every full-text score and ranking stays what it was
#: (tests/stages/index/test_index_lance.py checks it).
LANCEDB_STOP_WORDS = """
i me my myself we our ours ourselves you you're you've you'll you'd your yours yourself yourselves
he him his himself she she's her hers herself it it's its itself they them their theirs themselves
what which who whom this that that'll these those am is are was were be been being have has had
having do does did doing a an the and but if or because as until while of at by for with about
against between into through during before after above below to from up down in out on off over
under again further then once here there when where why how all any both each few more most other
some such no nor not only own same so than too very s t can will just don don't should should've now
d ll m o re ve y ain aren aren't couldn couldn't didn didn't doesn doesn't hadn hadn't hasn hasn't
haven haven't isn isn't ma mightn mightn't mustn mustn't needn needn't shan shan't shouldn shouldn't
wasn wasn't weren weren't won won't wouldn wouldn't
""".split()

#: The tokenizer LanceDB's ``create_fts_index(column)`` passes by default (its native, non-tantivy
#: full-text index is a Lance ``INVERTED`` index), with its stop words spelled out.
LANCEDB_FTS_DEFAULTS: dict[str, Any] = {
    "base_tokenizer": "simple",
    "language": "English",
    "with_position": False,
    "max_token_length": 40,
    "lower_case": True,
    "stem": True,
    "remove_stop_words": True,
    "custom_stop_words": LANCEDB_STOP_WORDS,
    "ascii_folding": True,
    "min_ngram_length": 3,
    "max_ngram_length": 3,
    "prefix_only": False,
    "block_size": 128,
}

#: Segments an index may have before an append folds its newer ones together (see update_indexes).
MAX_SEGMENTS = 8

#: Lance's names for the scalar index kinds the indexer builds.
SCALAR_KINDS = {"btree": "BTREE", "bitmap": "BITMAP"}


class MemoryWriter:
    """The tables of one memory directory, for writing. ``path`` is a local directory (it may not
    exist yet) or an object-store URI."""

    def __init__(self, path: Path | str) -> None:
        self.path = path
        self._open: dict[str, Any] = {}

    # ------------------------------------------------------------------ tables
    def uri(self, name: str) -> str:
        return table_uri(self.path, name)

    def table_names(self) -> set[str]:
        """The tables present (``<name>.lance`` folders), as LanceDB lists them."""
        return set(listed_tables(self.path))

    def dataset(self, name: str) -> Any:
        """The ``lance.LanceDataset`` of table ``name`` at its latest version (opened once; this
        writer's commits move it along)."""
        if name not in self._open:
            import lance

            self._open[name] = lance.dataset(self.uri(name))
        return self._open[name]

    def version(self, name: str) -> int:
        return int(self.dataset(name).version)

    def reopen(self, name: str) -> None:
        """Open ``name`` again at its latest version (after a Lance operation committed outside this
        writer's handle, such as compaction)."""
        self._open.pop(name, None)

    def restore(self, name: str, version: int) -> None:
        """Make ``version`` the latest version of ``name`` again (one new commit, as LanceDB's restore)."""
        import lance

        old = lance.dataset(self.uri(name), version=version)
        old.restore()
        self._open[name] = lance.dataset(self.uri(name))

    def forget_after(self, name: str, version: int) -> bool:
        """Delete the version files of ``name`` newer than ``version`` (local tables only), so that
        ``version`` is the latest again without writing a byte: the rollback of a run that failed on a
        full disk, where :meth:`restore` (a new commit) cannot be written. Lance names version ``v``
        ``<v>.manifest`` or, in its newer scheme, ``<2**64 - 1 - v>.manifest``. Returns False (nothing
        done) where that cannot be done safely: an object store, or an older table's ``_latest`` copy."""
        if not isinstance(self.path, Path):
            return False
        folder = Path(self.uri(name)) / "_versions"
        if (folder / "_latest.manifest").exists():
            return False
        for f in folder.glob("*.manifest"):
            if f.stem.isdigit():
                n = int(f.stem)
                v = 2**64 - 1 - n if n >= 2**63 else n
                if v > version:
                    f.unlink()
        self._open.pop(name, None)
        return True

    def drop(self, name: str) -> None:
        """Remove table ``name`` whole, whatever state a failed writer left it in (so not through
        ``LanceDataset.drop``, which refuses a folder without a readable version)."""
        self._open.pop(name, None)
        remove_dir(self.path, f"{name}.lance")

    def create(self, name: str, data: pa.Table, schema: pa.Schema) -> None:
        """A new table holding ``data`` (one commit)."""
        import lance

        self._open[name] = lance.write_dataset(data, self.uri(name), schema=schema, mode="create")

    def merge(self, name: str, data: pa.Table, on: str = "id", delete_where: str | None = None) -> None:
        """Upsert ``data`` on column ``on`` in one commit: matching rows are replaced, others added, and
        rows ``data`` does not hold that match the SQL condition ``delete_where`` are removed."""
        builder = self.dataset(name).merge_insert(on).when_matched_update_all().when_not_matched_insert_all()
        if delete_where:
            builder = builder.when_not_matched_by_source_delete(delete_where)
        builder.execute(data)

    # ------------------------------------------------------------------ reading
    def scan(self, name: str, where: str | None = None, columns: list[str] | None = None) -> list[dict]:
        """Rows of ``name`` (the ``columns`` given, else all) matching the SQL condition ``where``, in
        table order."""
        return self.dataset(name).to_table(columns=columns, filter=where).to_pylist()

    def count(self, name: str) -> int:
        return int(self.dataset(name).count_rows())

    # ------------------------------------------------------------------ indexes
    def index_names(self, name: str) -> set[str]:
        table = self.dataset(name)
        if hasattr(table, "describe_indices"):
            return {d.name for d in table.describe_indices()}
        return {i["name"] for i in table.list_indices()}  # older pylance

    def full_text_index(self, name: str, column: str) -> None:
        """(Re)build the full-text index ``<column>_idx`` as LanceDB's ``create_fts_index(column)``."""
        self.dataset(name).create_scalar_index(column, "INVERTED", replace=True, **LANCEDB_FTS_DEFAULTS)

    def scalar_index(self, name: str, column: str, kind: str) -> None:
        """(Re)build the ``kind`` ("btree" or "bitmap") index ``<column>_idx``."""
        self.dataset(name).create_scalar_index(column, SCALAR_KINDS[kind], replace=True)

    def update_indexes(self, name: str, indexes: list[str]) -> None:
        """Add the rows the named indexes of ``name`` do not cover yet to them, without retraining or
        rewriting what they hold (Lance's ``optimize_indices``): the new rows become a small segment
        of their own, and once an index has :data:`MAX_SEGMENTS` segments its newest ones (every one
        but the first, full build) are folded into one. So an append costs in proportion to the rows
        it adds, never to the table (merging into the full segment rewrote all of it: 13 s for the
        vector index of 290,000 nodes on 2 cores, against 0.06 s for a segment of its own)."""
        segments = {d.name: len(d.segments) for d in self.dataset(name).describe_indices()}
        by_merge: dict[int, list[str]] = {}
        for index in sorted(indexes):
            n = segments.get(index, 1)
            by_merge.setdefault(0 if n < MAX_SEGMENTS else n - 1, []).append(index)
        for merge, names in sorted(by_merge.items()):
            self.dataset(name).optimize.optimize_indices(index_names=names, num_indices_to_merge=merge)

    def vector_index(self, name: str, column: str, metric: str, index_type: str) -> None:
        """Build the ANN index ``<column>_idx`` with Lance's default partitioning (as LanceDB's builder)."""
        self.dataset(name).create_index(column, index_type, metric=metric, replace=True)
