"""Hybrid retrieval (search_node): vector candidates plus full-text candidates, one score.

The two searches are independent and release the GIL inside Lance, so they run side by side on a small
thread pool, created on the first search (importing the ask package starts no threads).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import PurePath
from typing import Any

import numpy as np

from m3cli.stages.ask.nodes import MemoryView, Node, Scope
from m3cli.stages.ask.text import has_quote, overlap, terms

#: Nodes a retrieval-only answer may read whole (the offline answerer's structural facts); a larger
#: scope (an archive asked without --video) is answered from the video its best hits come from.
FOCUS_ROWS = 20_000
LEX_WEIGHT = 0.3  # hybrid score = cosine + LEX_WEIGHT * share of query terms found in the line
QUOTE_BONUS = 0.05  # retrieval-only: prefer lines that quote what someone said

_searches: ThreadPoolExecutor | None = None
_searches_lock = threading.Lock()


def _search_pool() -> ThreadPoolExecutor:
    """The pool the full-text half of a search runs on; made once, by whichever search comes first."""
    global _searches
    if _searches is None:
        with _searches_lock:
            if _searches is None:
                _searches = ThreadPoolExecutor(max_workers=2, thread_name_prefix="m3-ask-search")
    return _searches


def hybrid(
    memory: MemoryView,
    query: str,
    query_vec: np.ndarray | None,
    k: int,
    threshold: float,
    scope: Scope,
    pool: int | None = None,
    quote_bonus: float = 0.0,
    exclude: Iterable[str] = (),
) -> list[Node]:
    """search_node: vector candidates plus full-text candidates, scored ``cos + 0.3 * term share``.

    A node qualifies when its cosine reaches ``threshold`` (the paper's rule) or when it contains at
    least half of the query's content terms (what a pure-vector search misses: names, rare words).
    """
    pool = pool or max(4 * k, 32)
    qterms = terms(query)
    found: dict[str, Node] = {}
    # the two searches are independent and release the GIL inside Lance: run them side by side
    text_part = _search_pool().submit(memory.text_search, query, pool, scope, query_vec) if qterms else None
    if query_vec is not None:
        for n in memory.vector_search(query_vec, pool, scope):
            found[n.id] = n
    if text_part is not None:
        for n in text_part.result():
            found.setdefault(n.id, n)
    skip = set(exclude)
    out = []
    for n in found.values():
        if n.id in skip:
            continue
        share = overlap(qterms, n.text)
        if n.sim < threshold and share < 0.5:
            continue
        n.score = n.sim + LEX_WEIGHT * share + (quote_bonus if has_quote(n.text) else 0.0)
        out.append(n)
    out.sort(key=lambda n: (-n.score, n.video, n.clip, n.id))
    return out[:k]


def focus(memory: MemoryView, embed: Any, scope: Scope, question: str) -> tuple[Scope, str | None]:
    """The scope a retrieval-only answer reads whole, and a note saying so when it was narrowed.

    The offline answerer reads every line of its scope (who spoke first, how many, what at 0:42): in
    an archive of hundreds of hours asked without ``--video`` that is millions of lines per question
    (seconds each, growing with the archive). Above :data:`FOCUS_ROWS` nodes the question is answered
    from the one video holding its best hybrid hit instead: the cost of one video, whatever the
    archive holds, and the answer says which video it read."""
    counts = getattr(memory, "counts", None)
    if scope.video or counts is None or counts().get("nodes", 0) <= FOCUS_ROWS:
        return scope, None
    best = hybrid(memory, question, embed(question), 1, -1.0, scope)
    if not best:
        return scope, None
    video = best[0].video
    path = memory.video_path(video) if hasattr(memory, "video_path") else None
    name = PurePath(path).name if path else video
    note = (
        f"(Answered from {name} ({video}), the video whose lines match the question best: the memory is "
        "too large to read whole for one question; --video picks another.)"
    )
    return replace(scope, video=video), note
