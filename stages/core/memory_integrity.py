"""Is a memory whole? The one check every reader of a memory runs before it reads (`m3 ask`,
`m3 report`), so a damaged memory is the same one line everywhere.

Why a check of its own, before any query: readers open tables lazily and read only what a question
needs, so a memory with a data file gone or cut short answered some questions and died on others in
an Arrow traceback, and one whose ``edges`` versions were deleted answered as if whole. The check is
cheap (no data is read): every table the manifest commits opens at its committed version, and, for a
memory on local disk, every data and deletion file those versions name is there with the size Lance
recorded when it wrote it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from m3cli.stages.core.errors import M3Error
from m3cli.stages.core.redact import mask_credentials

REBUILD = "rebuild it with `m3 index -o` from the records, or restore a copy"


def damaged(location: str | Path, why: str) -> M3Error:
    """The one line for a damaged memory (the same words as :func:`storage.damaged_memory`)."""
    return M3Error(f"{mask_credentials(str(location))}: the memory is damaged ({why}); {REBUILD}")


def check_memory(location: str | Path, tables: dict[str, Any]) -> None:
    """Raise the one ``damaged`` line unless every table in ``tables`` (name -> its opened Lance
    dataset at the committed version, or the exception opening it raised) is whole."""
    for name, dataset in sorted(tables.items()):
        if isinstance(dataset, BaseException):
            raise damaged(location, f"table {name!r} cannot be opened at its committed version: "
                          f"{_first_line(dataset)}")  # fmt: skip
        if not isinstance(location, Path):
            continue  # an object store: opening the version is the check (listing files costs requests)
        root = location / f"{name}.lance"
        for fragment in dataset.get_fragments():
            meta = fragment.metadata
            files = meta.data_files() if callable(meta.data_files) else meta.data_files
            for data in files:
                _check_file(location, name, root / "data" / data.path, getattr(data, "file_size_bytes", None))
            deletion = getattr(meta, "deletion_file", None)
            if deletion is not None:
                path = getattr(deletion, "path", None)
                if callable(path):
                    path = path(fragment.fragment_id)
                if isinstance(path, str):
                    _check_file(location, name, root / path, None)


def _check_file(location: Path, table: str, path: Path, size: int | None) -> None:
    try:
        actual = os.stat(path).st_size
    except FileNotFoundError:
        raise damaged(location, f"a data file of table {table!r} is missing: {path.name}") from None
    except OSError as exc:
        raise damaged(location, f"a data file of table {table!r} cannot be read: {exc.strerror}") from None
    if size and actual != size:
        raise damaged(
            location, f"a data file of table {table!r} is truncated or damaged: {actual} bytes of {size}"
        )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return mask_credentials(text)[:160]
