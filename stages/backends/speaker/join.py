"""Joining local speakers by a calibrated CAM++ cosine of their pooled speech.

The per-clip clustering of short windows keeps apart what it is unsure about (it over-splits rather
than merges: a merge made on a handful of 2-s windows cannot be undone later). Two groups of speech are
then the same person when the CAM++ embeddings of their pooled speech (each group's frames joined,
at most 8 s, as `m3 voices` embeds a local speaker) reach :data:`JOIN_COSINE`. Pooled embeddings are
far steadier than 2-s windows, so one threshold serves short clips and long files alike; it is the
same kind of number the voice bank matches on, chosen on same/different-speaker pairs of the dev data
(bench/diarization_sweep.py ``pooled-pairs``; the README gives the leave-one-group-out table).

Measured: on pure 4-s pieces of one reference speaker the dev groups separate completely (every group
chosen on the others picks 0.59-0.60, with no error on the held-out group). On whole clusters of a
clip it is not yet safe: a cluster's speech carries bits of the other voice, and at 0.60 sample.wav's
two speakers were joined, so the overlap diarizer keeps it off by default (``OverlapConfig.pooled_join``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from m3cli.stages.backends.asr import Span, merge_spans
from m3cli.stages.backends.speaker import fold_small_clusters

#: pooled CAM++ cosine at which two groups of speech are one speaker (see the module docstring)
JOIN_COSINE = 0.6


def pooled_spans(
    wins: Sequence[Span], labels: np.ndarray, k: int, emb: np.ndarray | None = None, seconds: float = 8.0
) -> list[Span]:
    """The speech of cluster ``k`` to pool: with window embeddings ``emb``, its windows most like the
    cluster's mean, up to ``seconds`` of audio (a cluster's edges hold stray bits of other voices and
    overlap, which pull two clusters' pooled vectors together); else the union of all its windows."""
    members = np.flatnonzero(np.asarray(labels) == k)
    if emb is not None and len(members):
        centre = emb[members].mean(axis=0)
        members = members[np.argsort(-(emb[members] @ centre), kind="stable")]
        chosen: list[Span] = []
        for i in members.tolist():
            chosen = merge_spans([*chosen, wins[i]])
            if sum(e - s for s, e in chosen) >= seconds:
                break
        return chosen
    return merge_spans([wins[i] for i in members.tolist()])


def join_clusters(
    audio: np.ndarray,
    wins: Sequence[Span],
    labels: np.ndarray,
    model,  # noqa: ANN001 - any embedder with ``embed_pooled(audio, groups)`` (CAM++)
    threshold: float = JOIN_COSINE,
    emb: np.ndarray | None = None,
    apart: np.ndarray | None = None,
    apart_share: float = 0.0,
) -> np.ndarray:
    """Labels after joining, greedily and most similar first, every two clusters whose pooled speech
    reaches ``threshold``; a joined cluster is embedded again from its pooled speech before the next
    comparison (average linkage on pooled embeddings). With ``apart`` (window pairs another witness
    heard as two people: the segmentation model's local speakers of one chunk), two clusters with more
    than ``apart_share`` of their window pairs apart are never joined."""
    labels = np.asarray(labels, dtype=np.int64).copy()
    ids = [int(k) for k in np.unique(labels)]
    if len(ids) < 2:
        return labels
    first = model.embed_pooled(audio, [pooled_spans(wins, labels, k, emb) for k in ids])
    vecs = dict(zip(ids, first, strict=True))
    while len(vecs) > 1:
        keys = sorted(vecs)
        mat = np.stack([vecs[k] for k in keys])
        sim = mat @ mat.T
        np.fill_diagonal(sim, -2.0)
        if apart is not None:
            for x, a in enumerate(keys):
                for y, b in enumerate(keys):
                    if x < y and apart[np.ix_(labels == a, labels == b)].mean() > apart_share:
                        sim[x, y] = sim[y, x] = -2.0
        i, j = np.unravel_index(int(np.argmax(sim)), sim.shape)
        if sim[i, j] < threshold:
            break
        a, b = keys[min(i, j)], keys[max(i, j)]
        labels[labels == b] = a
        del vecs[b]
        vecs[a] = model.embed_pooled(audio, [pooled_spans(wins, labels, a, emb)])[0]
    _, labels = np.unique(labels, return_inverse=True)
    return labels.astype(np.int64)


def split_within(
    audio: np.ndarray,
    wins: Sequence[Span],
    labels: np.ndarray,
    model,  # noqa: ANN001 - any embedder with ``embed_pooled(audio, groups)`` (CAM++)
    emb: np.ndarray,
    weights: np.ndarray,
    split: Callable[[np.ndarray, np.ndarray | None], np.ndarray],
    apart: np.ndarray | None,
    min_seconds: float,
    threshold: float = JOIN_COSINE,
) -> np.ndarray:
    """Split locally, join by the calibrated rule, never across clusters: each cluster's windows are
    split again by ``split`` (average linkage, with the cannot-links ``apart``), pieces with under
    ``min_seconds`` of window weight go back to their nearest sibling, and siblings whose pooled speech
    reaches ``threshold`` are joined again (:func:`join_clusters`); pieces of two different clusters
    are never joined.

    Why: the eigengap over a clip's windows is right where each person holds several windows (sample.wav's
    two speakers, which no threshold on pooled speech keeps apart: they score up to 0.66), but it folds
    people who speak once for 2-3 s into one cluster (speakers8's second clip: six people, two clusters).
    Linkage inside each cluster finds those people; the eigengap's own split is kept as a cannot-link,
    so a join decided by one cosine can only undo what this step split."""
    labels = np.asarray(labels, dtype=np.int64)
    out = labels.copy()
    fresh = int(labels.max()) + 1 if len(labels) else 0
    for k in np.unique(labels).tolist():
        members = np.flatnonzero(labels == k)
        if len(members) < 2:
            continue
        sub = split(emb[members], None if apart is None else apart[np.ix_(members, members)])
        sub = fold_small_clusters(emb[members], sub, weights[members], min_seconds)
        _, sub = np.unique(sub, return_inverse=True)
        if sub.max() == 0:
            continue
        sub = join_clusters(audio, [wins[i] for i in members.tolist()], sub, model, threshold, emb[members])
        for j in range(1, int(sub.max()) + 1):
            out[members[sub == j]] = fresh
            fresh += 1
    _, out = np.unique(out, return_inverse=True)
    return out.astype(np.int64)
