"""SQL literals for the filters m3 passes to LanceDB (``where`` strings).

LanceDB takes filters as SQL text, and ids, video hashes and kinds come from records a user can write,
so every value goes in through :func:`sql_literal`: quoted, with its quotes doubled, never spliced raw.
"""

from __future__ import annotations

from collections.abc import Iterable
from numbers import Integral


def sql_literal(value: object) -> str:
    """``value`` as one quoted SQL string literal (``it's`` -> ``'it''s'``)."""
    return "'" + str(value).replace("'", "''") + "'"


def sql_list(values: Iterable[object]) -> str:
    """Comma-separated literals, for ``IN (...)``: integers as numbers (clip numbers), all else quoted."""
    return ", ".join(
        str(int(v)) if isinstance(v, Integral) and not isinstance(v, bool) else sql_literal(v) for v in values
    )
