"""The rule that says a video's character is a person the memory already knows, and why.

Each appearance (one ``<character_k>`` of one video) carries at most one face embedding and one
voice embedding: the normalised mean of its members' per-video embeddings (the ``entities`` table's
``embedding``, itself a per-clip mean). A person is the set of appearances joined to it, so a new
appearance is compared with every appearance of every person (the nearest one counts: a person seen
in profile in one video and frontal in another is still one person).

* **Faces decide where both sides have one.** dlib's ResNet embeddings of one person stay within
  L2 0.6 across photos and recordings (the published rule); the memory's per-video means are tighter
  still. A face pair farther apart than ``face_l2`` keeps the two apart whatever their voices say.
* **Voices only where a side has no face**, and with a stricter bar: speaker embeddings drift with
  the room and the microphone, and two people joined is worse than one person split.
* **One person per video once**: two characters of one video are two people to the linker, so they
  never join the same person here (the split the linker made stays a split).

Thresholds: each dev group left out in turn, the thresholds chosen on the others and scored on it
(``m3 eval people --leave-one-out``; the table in docs/people.md): face 0.35 is what the same rule
chooses on all groups; voice 0.75 lies inside every fold's tied range.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

#: Same person if the faces' L2 distance is below this (dlib ResNet 128-d, unit-normalised means).
FACE_L2 = 0.35
#: Same person by voice alone if the cosine similarity of the voices is at least this (CAM++ 192-d).
VOICE_COS = 0.75


@dataclass(frozen=True)
class Thresholds:
    face_l2: float = FACE_L2
    voice_cos: float = VOICE_COS


@dataclass
class Appearance:
    """One character of one video, as the matcher sees it."""

    key: str  # "<video>:<character>"
    video: str
    character: str
    face: np.ndarray | None = None
    face_model: str | None = None
    voice: np.ndarray | None = None
    voice_model: str | None = None
    person: str | None = None


@dataclass
class Match:
    person: str
    by: str  # "face" or "voice"
    similarity: float  # face: L2 distance; voice: cosine
    against: str  # the known appearance it matched best ("<video>:<character>")

    def evidence(self) -> dict[str, Any]:
        what = "face_l2" if self.by == "face" else "voice_cos"
        return {"by": self.by, what: round(self.similarity, 4), "against": self.against}


def unit(vec: Any) -> np.ndarray | None:
    if vec is None:
        return None
    v = np.asarray(vec, np.float32).reshape(-1)
    n = float(np.linalg.norm(v))
    return v / n if v.size and n > 0 else None


class _Bank:
    """The stacked embeddings of one modality and model, with the person and appearance of each row.

    The rows live in one array whose capacity doubles as it fills, so adding appearances one video
    after another (`m3 batch`, the arrival-order replay) never stacks the whole bank again: stacking
    it at every video made a replay of 5,000 videos quadratic (two minutes at 10,000 appearances)."""

    def __init__(self) -> None:
        self._m: np.ndarray | None = None
        self._person = np.zeros(0, np.int64)
        self.key: list[str] = []
        self.n = 0

    def add(self, vec: np.ndarray, person: int, key: str) -> None:
        self.extend(np.asarray(vec, np.float32)[None, :], np.asarray([person], np.int64), [key])

    def extend(self, vecs: np.ndarray, persons: np.ndarray, keys: list[str]) -> None:
        """Rows at the end, in order: ``vecs`` (one per row), each row's person number and key."""
        k = len(vecs)
        if not k:
            return
        if self._m is None:
            self._m = np.zeros((max(16, k), vecs.shape[1]), np.float32)
            self._person = np.zeros(len(self._m), np.int64)
        if self.n + k > len(self._m):
            size = max(2 * len(self._m), self.n + k)
            grown = np.zeros((size, self._m.shape[1]), np.float32)
            grown[: self.n] = self._m[: self.n]
            self._m = grown
            self._person = np.concatenate([self._person[: self.n], np.zeros(size - self.n, np.int64)])
        self._m[self.n : self.n + k] = vecs
        self._person[self.n : self.n + k] = persons
        self.key += keys
        self.n += k

    def matrix(self) -> np.ndarray:
        assert self._m is not None
        return self._m[: self.n]

    @property
    def person(self) -> np.ndarray:
        return self._person[: self.n]


class KnownPeople:
    """Every appearance the memory holds, by person, for matching new ones (brute force: 10,000 people
    x 128 floats is a 5 MB matrix and one product)."""

    def __init__(self, thresholds: Thresholds | None = None):
        self.t = thresholds or Thresholds()
        self.ids: list[str] = []
        self._index: dict[str, int] = {}
        self.videos: dict[str, set[str]] = {}  # person -> videos it appears in
        self.in_video: dict[str, set[str]] = {}  # video -> people appearing in it (the same, inverted)
        self.faces: dict[str, _Bank] = {}
        self.voices: dict[str, _Bank] = {}

    def _pid(self, person: str) -> int:
        if person not in self._index:
            self._index[person] = len(self.ids)
            self.ids.append(person)
            self.videos[person] = set()
        return self._index[person]

    def add(self, app: Appearance) -> None:
        assert app.person is not None
        p = self._pid(app.person)
        self.seen_in(app.person, app.video)
        if app.face is not None:
            self.faces.setdefault(app.face_model or "", _Bank()).add(app.face, p, app.key)
        if app.voice is not None:
            self.voices.setdefault(app.voice_model or "", _Bank()).add(app.voice, p, app.key)

    def seen_in(self, person: str, video: str) -> None:
        """Record that ``person`` appears in ``video``."""
        self.videos[person].add(video)
        self.in_video.setdefault(video, set()).add(person)

    def _nearest(self, bank: _Bank | None, vec: np.ndarray, far: bool) -> tuple[np.ndarray, np.ndarray]:
        """Per person: the best value (least L2 if ``far`` else most cosine) and its bank row."""
        n = len(self.ids)
        best = np.full(n, np.inf if far else -np.inf, np.float32)
        arg = np.full(n, -1, np.int64)
        if bank is None or not bank.n:
            return best, arg
        m = bank.matrix()
        sims = m @ np.asarray(vec, np.float32)
        values = (np.sqrt(np.maximum(0.0, 2.0 - 2.0 * sims)) if far else sims).astype(np.float32, copy=False)
        persons = bank.person
        (np.minimum if far else np.maximum).at(best, persons, values)  # each person's best value
        hits = np.flatnonzero(values == best[persons])  # the rows holding it, in row order
        _, first = np.unique(persons[hits], return_index=True)  # ties: the earliest row
        arg[persons[hits[first]]] = hits[first]
        return best, arg

    def candidates(self, app: Appearance) -> list[Match]:
        """People the appearance may be, best first, each on the evidence that passes the rule."""
        if not self.ids:
            return []
        out: list[tuple[tuple, Match]] = []
        face_bank = self.faces.get(app.face_model or "") if app.face is not None else None
        fd, fa = (
            self._nearest(face_bank, app.face, True)
            if app.face is not None
            else (np.full(len(self.ids), np.inf), None)
        )
        voice_bank = self.voices.get(app.voice_model or "") if app.voice is not None else None
        vs, va = (
            self._nearest(voice_bank, app.voice, False)
            if app.voice is not None
            else (np.full(len(self.ids), -np.inf), None)
        )
        has_face = np.isfinite(fd)
        face_ok = np.flatnonzero(has_face & (fd < self.t.face_l2))
        voice_ok = np.flatnonzero(~has_face & (vs >= self.t.voice_cos))
        for p in face_ok:
            assert face_bank is not None and fa is not None
            m = Match(self.ids[p], "face", float(fd[p]), face_bank.key[int(fa[p])])
            out.append(((0, float(fd[p]), self.ids[p]), m))
        for p in voice_ok:
            assert voice_bank is not None and va is not None
            m = Match(self.ids[p], "voice", float(vs[p]), voice_bank.key[int(va[p])])
            out.append(((1, -float(vs[p]), self.ids[p]), m))
        out.sort(key=lambda x: x[0])
        return [m for _, m in out]


def assign_video(
    known: KnownPeople, apps: list[Appearance], new_person: Any, forbidden: dict[str, set[str]] | None = None
) -> dict[str, Match | None]:
    """People for one video's new appearances (their ``person`` set in place), one person at most once
    per video; an appearance nothing matches gets ``new_person()``. ``forbidden``: appearance key ->
    people it must not join (the user's splits). Returns key -> the match (None: a new person)."""
    taken = set().union(*(known.in_video.get(a.video, set()) for a in apps))
    pairs: list[tuple[tuple, Appearance, Match]] = []
    for app in apps:
        for rank, m in enumerate(known.candidates(app)):
            if m.person in (forbidden or {}).get(app.key, set()):
                continue
            strength = (0 if m.by == "face" else 1, m.similarity if m.by == "face" else -m.similarity)
            pairs.append(((*strength, rank, app.key, m.person), app, m))
    pairs.sort(key=lambda x: x[0])
    result: dict[str, Match | None] = {}
    for _, app, m in pairs:
        if app.key in result or m.person in taken:
            continue
        result[app.key] = m
        taken.add(m.person)
        app.person = m.person
    for app in apps:  # in the caller's order (characters by number)
        if app.key not in result:
            app.person = new_person()
            result[app.key] = None
    for app in apps:
        known.add(app)
    return result
