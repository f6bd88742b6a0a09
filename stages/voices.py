"""`m3 voices`: global voice ids ``<voice_N>`` per video, from speaker embeddings and a voice bank.

As in M3-Agent, each video has a bank of voices; each voice keeps up to ``max_snapshots`` (20)
embeddings, and a new embedding joins the voice whose snapshots it matches best on average cosine
similarity if that average reaches ``threshold``, else it founds a new voice. Each backend has its own
default: CAM++ (default) 0.5 (one speaker's pooled speech ~0.6-0.9, different speakers ~0.0-0.45 on
LibriSpeech and AMI), resemblyzer 0.75 (GE2E vectors sit in the positive orthant: ~0.85-0.95 within,
~0.55-0.7 across), pyannote/WeSpeaker 0.5.

The diarizer has already decided which speech of a clip belongs to one local speaker, and one
embedding of all of it is far steadier than one per utterance, so:

1. Per local speaker (``speaker_local``) of the clip, its pieces are its turns where nobody talks over
   it (all its turns if none are clean; its utterances for records without ``turns``). Their audio is
   pooled into one embedding (CAM++ reads at most 8 s of it; other backends average the pieces'
   embeddings by duration), cached per clip; a threshold change only replays the fold below.
2. A local speaker with at least ``min_seconds`` (1.0 s) of such speech in the clip gets a voice: its
   pooled embedding is matched against the bank in order of first appearance (or founds a new voice)
   and becomes a snapshot of it. Someone heard only in short pieces (0.5-1.9 s each) thus still gets a
   ``<voice_N>``. The minimum is measured: pooled CAM++ embeddings of 1.0 s matched the right
   LibriSpeech reader at cosine >= 0.5 in 24 of 25 trials, 1.5 s and more in 25 of 25, 0.5 s in 18.
   The local speakers of one clip are matched together, one voice each (the best one-to-one
   matching): the diarizer has already heard them as different people. Two of them share a voice
   only at cosine >= ``SAME_CLIP_COSINE`` (0.8), which repairs a diarizer that split one person.
3. Every utterance and turn takes its local speaker's voice; a local speaker below the minimum stays
   unassigned (``speaker: null``).
4. Two voices of the clip that score at least ``threshold`` and are never heard at once are listed in
   ``voices.alike`` (:func:`alike_voices`): by sound they could be one person the diarizer split, and
   `m3 link` joins them when one face is seen speaking both.

:func:`assign_clip` also implements a per-utterance fold (a long utterance whose own embedding matches
another voice better moves there), kept for callers that embed utterances one by one.

``voice_score`` is the local speaker's average cosine similarity to its voice's snapshots once the clip
is folded in.

With ``recluster`` (off by default; offline use, like faces' ``--recluster``) the order-bound choices of
the online fold are made again once every clip of the video is in (:func:`recluster_video`): all local
speakers of the video are clustered by their pooled embeddings with average linkage, the same cosine
threshold the bank joins at and the same average-of-snapshots rule without the order, and two local
speakers of one clip are never joined (the diarizer kept them apart on the clip's own evidence). Voice
ids are then numbered in order of first appearance and every utterance's and turn's ``speaker`` follows;
``voice_score`` becomes the local speaker's average cosine similarity to its cluster (itself included).

Everything is deterministic: clips in order, ties broken by id number, and reruns give
byte-identical records.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from m3cli.schemas.records import AlikeVoices, ClipRecord, Turn, Utterance, VoicesSection
from m3cli.stages.backends.registry import backend_class
from m3cli.stages.backends.speaker import SpeakerModel, l2_normalize, make_speaker_model
from m3cli.stages.configs.voices import VoicesConfig
from m3cli.stages.core import media, media_audio
from m3cli.stages.core.cache import Cache, CacheKey, memo, put_once
from m3cli.stages.core.common import RunContext, by_video
from m3cli.stages.core.entity_ids import number_of, voice_id
from m3cli.stages.core.errors import InputError
from m3cli.stages.core.imports import heavy_import

log = logging.getLogger(__name__)

STAGE = "voices"
EMBED_STAGE = "voices-embed"
#: two local speakers of one clip share a voice only this close (the diarizer split one person in two);
#: the overlap diarizer itself joins clusters whose centroids are closer than this
SAME_CLIP_COSINE = 0.8


# -- the bank --------------------------------------------------------------------------------------
class VoiceBank:
    """Per-video voices, each a bounded list of snapshot embeddings."""

    def __init__(self, threshold: float, max_snapshots: int) -> None:
        self.threshold = threshold
        self.max_snapshots = max_snapshots
        self.snapshots: dict[str, list[np.ndarray]] = {}

    def scores(self, vec: np.ndarray) -> dict[str, float]:
        return {vid: float(np.mean(np.stack(snaps) @ vec)) for vid, snaps in self.snapshots.items()}

    def best(self, vec: np.ndarray, exclude: str | None = None) -> tuple[str | None, float]:
        """Best-matching voice and its score (ties: the older voice)."""
        best_id, best_score = None, -np.inf
        for vid, score in self.scores(vec).items():  # dict order = creation order
            if vid != exclude and score > best_score + 1e-9:
                best_id, best_score = vid, score
        return best_id, float(best_score)

    def match(self, vec: np.ndarray) -> tuple[str, float]:
        """The voice ``vec`` belongs to, creating one if none reaches the threshold."""
        vid, score = self.best(vec)
        if vid is not None and score >= self.threshold:
            return vid, score
        return self.create(), float("nan")

    def create(self) -> str:
        vid = voice_id(len(self.snapshots) + 1)
        self.snapshots[vid] = []
        return vid

    def add(self, vid: str, vec: np.ndarray) -> None:
        snaps = self.snapshots[vid]
        snaps.append(vec)
        if len(snaps) > self.max_snapshots:
            del snaps[0]

    def dump(self, arrays: Any) -> dict[str, Any]:
        """The bank as a checkpoint document (:mod:`~m3cli.stages.core.checkpoint`): each voice's
        snapshots as one array, in creation order."""
        return {
            "threshold": self.threshold,
            "max_snapshots": self.max_snapshots,
            "voices": [[vid, arrays.add(np.stack(s)) if s else None] for vid, s in self.snapshots.items()],
        }

    @classmethod
    def load(cls, doc: dict[str, Any], arrays: Any) -> VoiceBank:
        """The bank :meth:`dump` saved."""
        bank = cls(float(doc["threshold"]), int(doc["max_snapshots"]))
        for vid, ref in doc["voices"]:
            bank.snapshots[str(vid)] = [] if ref is None else [np.array(r) for r in arrays.get(ref)]
        return bank


# -- per-clip embeddings ---------------------------------------------------------------------------
def speaker_identity(config: VoicesConfig, device: str = "cpu") -> str:
    """Model identity for cache keys without loading the model (each backend states its own)."""
    return backend_class("speaker", config.backend).identity(config.model, device)


class Embedder:
    """Loads the speaker model on the first cache miss only."""

    def __init__(self, config: VoicesConfig, device: str) -> None:
        self.config = config
        self.device = device
        self._model: SpeakerModel | None = None
        self.identity = speaker_identity(config, device)

    @property
    def model(self) -> SpeakerModel:
        if self._model is None:
            self._model = make_speaker_model(self.config.backend, self.config.model, self.device)
        return self._model


def speaker_pieces(record: ClipRecord) -> tuple[list[str], list[list[tuple[float, float]]]]:
    """Per local speaker of the clip (first appearance order), the pieces of its speech to embed: its
    turns where nobody talks over it (all its turns if it has no clean ones), or, for records without
    turns, its utterances."""
    pieces: dict[str, list[tuple[float, float]]] = {}
    clean: dict[str, list[tuple[float, float]]] = {}
    for t in record.turns or []:
        pieces.setdefault(t.speaker_local, []).append((t.start, t.end))
        if not t.overlap:
            clean.setdefault(t.speaker_local, []).append((t.start, t.end))
    if not record.turns:
        for u in record.utterances or []:
            if u.speaker_local is not None:
                pieces.setdefault(u.speaker_local, []).append((u.start, u.end))
    labels = list(pieces)
    return labels, [clean.get(k) or pieces[k] for k in labels]


def clip_embeddings(
    record: ClipRecord, groups: list[list[tuple[float, float]]], embedder: Embedder, cache: Cache | None
) -> np.ndarray:
    """One embedding per group of spans (absolute times) of one clip: the group's audio is pooled, so
    a speaker heard only in short pieces gets one steady vector. Cached per clip and span list."""
    if not groups:
        return np.zeros((0, 0), np.float32)
    start, end = record.clip.start, record.clip.end
    cfg = {
        "start": start,
        "end": end,
        "groups": groups,
        "backend": embedder.config.backend,
        "model": embedder.config.model,
    }
    key = CacheKey.of(record.video.id, record.clip.index, EMBED_STAGE, cfg, embedder.identity)

    def embed() -> np.ndarray:
        path = media.source_path(record.video, cache)
        audio = media_audio.clip_audio(path, record.video.id, record.clip.index, start, end, cache=cache)
        rel = [[(max(0.0, s - start), max(0.0, e - start)) for s, e in g] for g in groups]
        model = embedder.model
        if hasattr(model, "embed_pooled"):
            emb = model.embed_pooled(audio, rel)
        else:  # duration-weighted mean of the pieces' embeddings
            emb = np.stack(
                [
                    l2_normalize(
                        np.average(model.embed(audio, g), axis=0, weights=[e - s + 1e-3 for s, e in g])
                    )
                    for g in rel
                ]
            )
        return emb.astype(np.float32)

    return memo(
        cache,
        key,
        "embeddings.npz",
        embed,
        usable=lambda hit: len(hit["emb"]) == len(groups),
        load=lambda hit: hit["emb"],
        dump=lambda emb: {"emb": emb},
    )


# -- the fold --------------------------------------------------------------------------------------
@dataclass
class ClipVoices:
    ids: list[str | None]  # per utterance
    scores: list[float | None]
    means: dict[str, np.ndarray]  # per voice id present, over this clip's long utterances


def assign_clip(
    utterances: Sequence[Utterance], long_idx: list[int], emb: np.ndarray, bank: VoiceBank
) -> ClipVoices:
    """Fold one clip into ``bank`` (steps 2-5 of the module docstring)."""
    n = len(utterances)
    ids: list[str | None] = [None] * n
    vec = {i: emb[k] for k, i in enumerate(long_idx)}
    groups: dict[object, list[int]] = {}
    for i in long_idx:
        label = utterances[i].speaker_local
        groups.setdefault(label if label is not None else ("utt", i), []).append(i)
    means = {key: l2_normalize(np.mean(np.stack([vec[i] for i in m]), axis=0)) for key, m in groups.items()}
    taken = _one_voice_each({k: v for k, v in means.items() if not isinstance(k, tuple)}, bank)
    used = set(taken.values())
    for key, members in groups.items():  # dict order = first appearance (utterances are in time order)
        mean = means[key]
        if isinstance(key, tuple):  # an utterance without a local speaker: any voice may take it
            vid, _ = bank.match(mean)
        elif key in taken:
            vid = taken[key]
        else:
            best, score = bank.best(mean)
            if best is None or score < bank.threshold or (best in used and score < SAME_CLIP_COSINE):
                best = bank.create()
            vid = best
        used.add(vid)
        fresh = not bank.snapshots[vid]
        for i in members:
            ids[i] = vid
            if fresh or len(members) == 1:
                continue
            own = bank.scores(vec[i]).get(vid, -1.0)
            other, score = bank.best(vec[i], exclude=vid)
            if own < bank.threshold and other is not None and score >= bank.threshold and score > own:
                ids[i] = other
        for i in members:
            bank.add(ids[i], vec[i])  # type: ignore[arg-type]
    # short utterances: the voice most long utterances of their local speaker got
    by_label: dict[str, list[str]] = {}
    for i in long_idx:
        if utterances[i].speaker_local is not None:
            by_label.setdefault(utterances[i].speaker_local, []).append(ids[i])  # type: ignore[arg-type]
    for i, u in enumerate(utterances):
        if ids[i] is None and u.speaker_local in by_label:
            votes = by_label[u.speaker_local]
            ids[i] = max(sorted(set(votes), key=_num), key=votes.count)
    scores: list[float | None] = [None] * n
    for i in long_idx:
        scores[i] = round(bank.scores(vec[i])[ids[i]], 4)  # type: ignore[index]
    voice_means: dict[str, np.ndarray] = {}
    for voice in sorted({v for v in (ids[i] for i in long_idx) if v is not None}, key=_num):
        heard = [vec[i] for i in long_idx if ids[i] == voice]
        voice_means[voice] = l2_normalize(np.mean(np.stack(heard), axis=0))
    return ClipVoices(ids, scores, voice_means)


def _one_voice_each(means: dict[object, np.ndarray], bank: VoiceBank) -> dict[object, str]:
    """The bank's voices for a clip's local speakers, one voice per local speaker at most: the
    one-to-one matching with the highest total similarity among pairs that reach the threshold.

    The diarizer, which hears the whole clip and the segmentation model's local speakers, has already
    said these are different people; matched one by one, two of them can land on one voice (pooled CAM++
    of LibriSpeech readers 1688 and 1998, a man and a woman, scored 0.52 against a 0.5 threshold)."""
    keys, voices = list(means), list(bank.snapshots)
    if not keys or not voices:
        return {}
    per_key = [bank.scores(means[k]) for k in keys]  # each scores every voice: once per local speaker
    scores = np.asarray([[row[v] for v in voices] for row in per_key])
    if len(keys) == 1 or len(voices) == 1:  # one side of one: the best pair is the matching (and most
        # clips have one speaker or meet a one-voice bank: no scipy import, 0.4-0.7 s, for them)
        r, c = np.unravel_index(int(np.argmax(scores)), scores.shape)
        rows, cols = [int(r)], [int(c)]
    else:
        linear_sum_assignment = heavy_import("scipy.optimize").linear_sum_assignment

        rows, cols = linear_sum_assignment(np.where(scores >= bank.threshold, scores, -10.0), maximize=True)
    return {keys[r]: voices[c] for r, c in zip(rows, cols, strict=True) if scores[r, c] >= bank.threshold}


def alike_voices(
    heard_in: Sequence[Turn] | Sequence[Utterance], means: dict[str, np.ndarray], threshold: float
) -> list[AlikeVoices] | None:
    """The pairs of this clip's voices that sound alike (their clip means score at least ``threshold``,
    the bar at which the bank joins speech of different clips to one voice) and are never heard at once.

    Inside one clip the diarizer's split stands unless the two score ``SAME_CLIP_COSINE``: by sound
    alone, 0.5-0.8 is where one person's split halves and two similar voices both fall. Sight can
    tell them apart, so the pair is recorded for `m3 link`, which joins it only when one face is seen
    speaking both. ``heard_in`` is the clip's turns (else utterances), each naming its voice."""
    heard: dict[str, list[tuple[float, float]]] = {}
    for piece in heard_in:
        if piece.speaker in means:
            heard.setdefault(piece.speaker, []).append((piece.start, piece.end))
    voices = sorted(means, key=_num)
    pairs = []
    for i, a in enumerate(voices):
        for b in voices[i + 1 :]:
            cosine = float(means[a] @ means[b])
            spans_b = heard.get(b, [])
            at_once = any(min(e1, e2) > max(s1, s2) for s1, e1 in heard.get(a, []) for s2, e2 in spans_b)
            if cosine >= threshold and not at_once:
                pairs.append(AlikeVoices(voices=[a, b], cosine=round(cosine, 4)))
    return pairs or None


def _num(vid: str | None) -> int:
    return number_of(vid) if vid else 0


def _store_means(record: ClipRecord, means: dict[str, np.ndarray], cache: Cache | None) -> str | None:
    if cache is None or not means:
        return None
    names = {vid.strip("<>"): vec.astype(np.float32) for vid, vec in means.items()}
    digest = hashlib.sha256(b"".join(k.encode() + v.tobytes() for k, v in sorted(names.items()))).hexdigest()[
        :16
    ]
    key = CacheKey.of(record.video.id, record.clip.index, STAGE, {"means": digest}, "voice-means/1")
    return put_once(cache, key, "voices.npz", lambda: names)


def voices_records(
    records: Sequence[ClipRecord],
    config: VoicesConfig,
    ctx: RunContext | None = None,
    embedder: Embedder | None = None,
    banks: dict[str, VoiceBank] | None = None,
) -> list[ClipRecord]:
    """Set ``speaker``/``voice_score`` on every utterance and add the ``voices`` section.

    ``embedder`` lets a caller that runs many videos in one process load the model once. ``banks``
    (video id -> its voice bank) lets a caller that feeds one video's clips in several calls (`m3 watch`)
    keep the bank between them, so each call folds only its own clips; without it every video starts
    a new bank."""
    ctx = ctx or RunContext()
    for r in records:
        if r.utterances is None:
            raise InputError(
                f"{r.video.path} clip {r.clip.index}: no utterances in the record; "
                "run `m3 diarize` before `m3 voices`"
            )
    embedder = embedder or Embedder(config, ctx.device)
    model_name = _model_name(config)
    out: dict[tuple[str, int], ClipRecord] = {}
    videos = list(by_video(records))
    total = sum(len(v) for v in videos)
    clips = (clip for video in videos for clip in video)
    if config.recluster and banks is not None:
        raise InputError(
            "voices.recluster clusters all clips of a video at once; it cannot run where clips arrive "
            "one call at a time (m3 watch): leave it off there"
        )
    banks = {} if banks is None else banks
    heard: dict[str, list[Heard]] = {}  # per video, with recluster: every local speaker's embedding
    bank: VoiceBank | None = None
    current: str | None = None
    for record in ctx.progress(clips, desc="voices", total=total):
        if record.video.id != current:
            current = record.video.id
            if current not in banks:
                banks[current] = VoiceBank(config.cosine, config.max_snapshots)
            bank = banks[current]
        assert bank is not None
        utts = list(record.utterances or [])
        labels, groups = speaker_pieces(record)
        keep = [i for i, g in enumerate(groups) if sum(e - s for s, e in g) >= config.min_seconds]
        emb = clip_embeddings(record, [groups[i] for i in keep], embedder, ctx.cache)
        pseudo = [
            Utterance(start=groups[i][0][0], end=groups[i][-1][1], text="", speaker_local=labels[i])
            for i in keep
        ]
        result = assign_clip(pseudo, list(range(len(keep))), emb, bank)
        voice_of = {labels[i]: vid for i, vid in zip(keep, result.ids, strict=True)}
        score_of = {labels[i]: sc for i, sc in zip(keep, result.scores, strict=True)}
        if config.recluster:
            heard.setdefault(record.video.id, []).extend(
                Heard(record.key, labels[i], emb[k]) for k, i in enumerate(keep)
            )
        new_utts = [
            u.model_copy(
                update={
                    "speaker": voice_of.get(u.speaker_local),
                    "voice_score": score_of.get(u.speaker_local),
                }
            )
            for u in utts
        ]
        new_turns = [
            t.model_copy(update={"speaker": voice_of.get(t.speaker_local)}) for t in record.turns or []
        ]
        ids = [u.speaker for u in new_utts]
        present = sorted({vid for vid in voice_of.values() if vid}, key=_num)
        section = VoicesSection(
            backend=config.backend,
            model=model_name,
            min_seconds=config.min_seconds,
            ids=present,
            assigned=sum(1 for v in ids if v),
            unassigned=sum(1 for v in ids if not v),
            embeddings=_store_means(record, result.means, ctx.cache),
            threshold=config.cosine,
            alike=alike_voices(new_turns or new_utts, result.means, config.cosine),
        )
        update = {"utterances": new_utts, "voices": section}
        if record.turns is not None:
            update["turns"] = new_turns
        out[record.key] = record.model_copy(update=update)
    for nodes in heard.values():
        _apply_recluster(out, nodes, config.cosine, ctx.cache)
    return [out[r.key] for r in records]


# -- the whole-video pass --------------------------------------------------------------------------
@dataclass
class Heard:
    """One local speaker of one clip that got a voice, and its pooled embedding."""

    key: tuple[str, int]  # the clip record's key
    label: str  # speaker_local
    vec: np.ndarray


def recluster_video(clips: Sequence[object], vecs: np.ndarray, threshold: float) -> list[int]:
    """Cluster number per local speaker (rows of ``vecs``, in order of first appearance): average-linkage
    agglomeration on cosine similarity, stopping when no two clusters average ``threshold``; two local
    speakers of the same clip (equal ``clips`` entries) never end up in one cluster. Clusters are
    numbered 0, 1, ... in order of their first member; ties go to the earliest pair.

    Why average linkage: the online bank joins a local speaker to a voice when its average cosine to the
    voice's snapshots reaches the threshold; this is the same rule, applied to all of the video at once
    instead of in clip order, so an early voice founded on little speech can still be joined later."""
    n = len(vecs)
    if n == 0:
        return []
    vecs = np.asarray(vecs, dtype=np.float64)
    avg = vecs @ vecs.T  # average similarity between clusters (rows/columns of live clusters)
    index: dict[object, int] = {}
    owner = np.asarray([index.setdefault(c, len(index)) for c in clips])
    apart = owner[:, None] == owner[None, :]  # True: never join (same clip, or the cluster itself)
    alive = np.ones(n, dtype=bool)
    size = np.ones(n)
    parent = np.arange(n)
    while True:
        usable = ~apart & alive[:, None] & alive[None, :]
        if not usable.any():
            break
        sim = np.where(usable, avg, -np.inf)
        i, j = np.unravel_index(int(np.argmax(sim)), sim.shape)  # row-major: the earliest pair first
        if sim[i, j] < threshold:
            break
        i, j = min(i, j), max(i, j)
        avg[i, :] = (size[i] * avg[i, :] + size[j] * avg[j, :]) / (size[i] + size[j])
        avg[:, i] = avg[i, :]
        apart[i, :] |= apart[j, :]
        apart[:, i] = apart[i, :]
        size[i] += size[j]
        alive[j] = False
        parent[parent == j] = i
    order = {root: k for k, root in enumerate(dict.fromkeys(parent.tolist()))}
    return [order[p] for p in parent.tolist()]


def _apply_recluster(
    out: dict[tuple[str, int], ClipRecord], nodes: list[Heard], threshold: float, cache: Cache | None
) -> None:
    """Rewrite one video's records in ``out`` with the voices of :func:`recluster_video`."""
    if not nodes:
        return
    vecs = np.stack([h.vec for h in nodes]).astype(np.float64)
    labels = recluster_video([h.key for h in nodes], vecs, threshold)
    voice_of: dict[tuple[str, int], dict[str, str]] = {}
    score_of: dict[tuple[str, int], dict[str, float]] = {}
    means: dict[tuple[str, int], dict[str, np.ndarray]] = {}
    for n, (h, k) in enumerate(zip(nodes, labels, strict=True)):
        vid = voice_id(k + 1)
        members = [m for m, other in enumerate(labels) if other == k]
        voice_of.setdefault(h.key, {})[h.label] = vid
        score_of.setdefault(h.key, {})[h.label] = round(float(np.mean(vecs[members] @ vecs[n])), 4)
        means.setdefault(h.key, {})[vid] = l2_normalize(h.vec)
    for key, voices in voice_of.items():
        record = out[key]
        scores = score_of[key]
        utts = [
            u.model_copy(
                update={
                    "speaker": voices.get(u.speaker_local or ""),
                    "voice_score": scores.get(u.speaker_local or ""),
                }
            )
            for u in record.utterances or []
        ]
        turns = None
        if record.turns is not None:
            turns = [t.model_copy(update={"speaker": voices.get(t.speaker_local)}) for t in record.turns]
        assert record.voices is not None
        section = record.voices.model_copy(
            update={
                "ids": sorted(set(voices.values()), key=_num),
                "embeddings": _store_means(record, means[key], cache),
                "recluster": True,
                "alike": alike_voices(turns or utts, means[key], threshold),
            }
        )
        update: dict[str, object] = {"utterances": utts, "voices": section}
        if turns is not None:
            update["turns"] = turns
        out[key] = record.model_copy(update=update)


def _model_name(config: VoicesConfig) -> str:
    return backend_class("speaker", config.backend).display_name(config.model)
