"""Seen speaking splits a voice that two people share: the fold `m3 link` runs before its voting.

The diarizer decides how many people speak from the audio of one clip, and a merge made there is final
for `m3 voices` (the bank matches the merged speaker as one voice). The picture can undo it: when two
faces on screen at the same time are each seen speaking *alone* (their lips move, every other visible
face's lips are still) while the diarizer says the same voice speaks, that voice's speech comes from two
mouths. Diarize and voices run before faces in the pipe, so this is a fold at the start of `m3 link`,
which is the first stage that holds turns, voices and mouths together; `m3 run` calls the same fold,
so the pipe and `m3 run` stay equal and every earlier record stays as it was.

Per clip, walked in steps of one sampled frame (as link's ``seen`` votes):

* a step is evidence for face F when F is the only visible face whose lips move and at least one
  other face is visible and still; each voice active in it earns F its seconds (per video, summed).
* a voice V is split when, with everything seen so far, two faces each hold ``min_seconds`` of such
  evidence on V, V is each one's main voice (at least ``share`` of that face's evidence seconds, so
  a listener's stray lip motion during another person's voice never splits it), and the two faces
  were on screen together (two ids seen at once are two people; one person's two face ids are
  never seen at once, so they never split a voice). The face with most evidence keeps V; each other
  face gets a new voice id, kept for the rest of the video (later clips reuse it).
* in each clip, V's turns (or utterances without turns) are cut where the nearest evidence changes
  face and each piece goes to its face's voice; speech of V with no evidence inside its turn keeps V.
  Utterances are cut at their words to follow the turns.

A still or off-screen speaker gives no evidence and changes nothing; a voice seen on one face only is
never touched. Joining two voices seen on one face is left to link's voting (the face keeps its main
voice): a join would be final, a split can still be outvoted. New ids start above every voice id seen
so far; a later clip's voice from the bank that collides with one is renamed (and in its memory too).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from m3cli.schemas.records import ClipRecord, Turn, Utterance
from m3cli.stages.core.entity_ids import VOICE_ID_RE, number_of, voice_id
from m3cli.stages.core.lips import moving_times, shot_bounds


@dataclass(frozen=True)
class SplitConfig:
    moving: float = 0.02  # mouth-opening spread above which lips move (link's ``moving``)
    smooth: float = 0.4  # half-width (s) of that spread's window (link's ``smooth``)
    min_seconds: float = 1.0  # evidence each face needs on the voice: link's 1 s to join a face
    share: float = 0.5  # the voice must hold this share of each face's evidence (link's ``p``)


def evidence_steps(record: ClipRecord, config: SplitConfig) -> tuple[list[tuple[float, float, str]], set]:
    """(start, end, face) steps in which that face alone is seen speaking beside a still face, and the
    pairs of faces seen on screen at the same time."""
    faces = record.faces
    if faces is None or len(faces.tracks) < 2:
        return [], set()
    tracks = faces.tracks
    bounds = shot_bounds(record)
    step = 1.0 / (faces.fps or 5.0)
    moving = {t.face_id: moving_times(t, bounds, config.moving, config.smooth) for t in tracks}
    steps: list[tuple[float, float, str]] = []
    together: set[tuple[str, str]] = set()
    k = 0
    while k * step < bounds[-1] - bounds[0] - 1e-9:
        lo, hi = bounds[0] + k * step, min(bounds[0] + (k + 1) * step, bounds[-1])
        k += 1
        mid = (lo + hi) / 2
        visible = sorted(t.face_id for t in tracks if any(a <= mid < b for a, b in t.spans))
        together.update((a, b) for i, a in enumerate(visible) for b in visible[i + 1 :])
        movers = [f for f in visible if any(lo - 1e-6 <= t < hi - 1e-6 for t in moving[f])]
        if len(movers) == 1 and len(visible) >= 2:
            steps.append((lo, hi, movers[0]))
    return steps, together


def _activity(record: ClipRecord) -> tuple[list[Any], bool]:
    """The items that say who speaks when: turns carrying voice ids, else utterances."""
    turns = [t for t in record.turns or [] if t.speaker]
    if turns:
        return turns, True
    return [u for u in record.utterances or [] if u.speaker], False


def _overlap(a: float, b: float, s: float, e: float) -> float:
    return max(0.0, min(b, e) - max(a, s))


def _pieces(s: float, e: float, labels: list[tuple[float, str]]) -> list[tuple[float, float, str]]:
    """[s, e] cut where the nearest labelled time changes label: (start, end, label) pieces."""
    labels = sorted(labels)
    out: list[tuple[float, float, str]] = []
    start = s
    for (t0, a), (t1, b) in zip(labels[:-1], labels[1:], strict=True):
        if a != b:
            cut = min(max(round((t0 + t1) / 2, 3), s), e)
            if cut > start:
                out.append((start, cut, a))
            start = cut
    if e > start:
        out.append((start, e, labels[-1][1]))
    merged: list[tuple[float, float, str]] = []
    for p in out:
        if merged and merged[-1][2] == p[2]:
            merged[-1] = (merged[-1][0], p[1], p[2])
        else:
            merged.append(p)
    return merged


@dataclass
class SeenSpeaking:
    """Per-video state of the fold: evidence seconds, faces seen together, the splits made."""

    config: SplitConfig = field(default_factory=SplitConfig)
    seconds: dict[tuple[str, str], float] = field(default_factory=lambda: defaultdict(float))
    together: set[tuple[str, str]] = field(default_factory=set)
    keeper: dict[str, str] = field(default_factory=dict)  # split voice -> the face that keeps it
    into: dict[tuple[str, str], str] = field(default_factory=dict)  # (voice, face) -> new voice id
    splits: list[dict[str, Any]] = field(default_factory=list)
    alias: dict[str, str] = field(default_factory=dict)  # incoming voice id -> id used from now on
    issued: set[str] = field(default_factory=set)
    top: int = 0

    def _fresh(self) -> str:
        self.top += 1
        vid = voice_id(self.top)
        self.issued.add(vid)
        return vid

    def _rename_incoming(self, record: ClipRecord) -> ClipRecord:
        """Give an incoming voice id that collides with one this fold issued a fresh id."""
        ids = {u.speaker for u in record.utterances or [] if u.speaker}
        ids |= {t.speaker for t in record.turns or [] if t.speaker}
        ids |= set(record.voices.ids or []) if record.voices else set()
        for vid in sorted(ids, key=number_of):
            self.top = max(self.top, number_of(vid))
        for vid in sorted(ids):
            if vid not in self.alias:
                self.alias[vid] = self._fresh() if vid in self.issued else vid
        rename = {a: b for a, b in self.alias.items() if a != b and a in ids}
        if not rename:
            return record
        return _renamed(record, rename)

    def _decide(self, voices: set[str], clip: int) -> None:
        """Split each voice whose speech two faces seen together are each seen speaking alone."""
        per_face: dict[str, float] = defaultdict(float)
        for (_, face), sec in self.seconds.items():
            per_face[face] += sec
        for voice in sorted(voices):
            ranked = sorted(
                (
                    (sec, face)
                    for (v, face), sec in self.seconds.items()
                    if v == voice
                    and sec >= self.config.min_seconds
                    and sec >= self.config.share * per_face[face]
                ),
                key=lambda x: (-x[0], x[1]),
            )
            if voice not in self.keeper:
                if len(ranked) < 2:
                    continue
                self.keeper[voice] = ranked[0][1]
            keeper = self.keeper[voice]
            for sec, face in ranked:
                if face == keeper or (voice, face) in self.into:
                    continue
                if tuple(sorted((face, keeper))) not in self.together:
                    continue
                new = self._fresh()
                self.into[(voice, face)] = new
                self.splits.append(
                    {
                        "voice": voice,
                        "into": new,
                        "face": face,
                        "keeper": keeper,
                        "seconds": round(sec, 3),
                        "keeper_seconds": round(self.seconds[(voice, keeper)], 3),
                        "clip": clip,
                    }
                )

    def fold(self, record: ClipRecord) -> tuple[ClipRecord, dict[str, float]]:
        """This clip with split voices' speech reassigned; seconds moved to each new id."""
        record = self._rename_incoming(_typed(record))
        steps, together = evidence_steps(record, self.config)
        self.together |= together
        items, are_turns = _activity(record)
        for lo, hi, face in steps:
            for item in items:
                sec = _overlap(lo, hi, item.start, item.end)
                if sec > 0:
                    self.seconds[(item.speaker, face)] += sec
        self._decide({i.speaker for i in items}, record.clip.index)
        split = {v for v, _ in self.into}
        if not split & {i.speaker for i in items}:
            return record, {}
        timeline: dict[str, list[tuple[float, float, str]]] = defaultdict(list)
        moved: dict[str, float] = defaultdict(float)
        for item in items:
            v = item.speaker
            if v not in split:
                continue
            targets = {self.keeper[v]: v} | {f: new for (w, f), new in self.into.items() if w == v}
            labels = [((lo + hi) / 2, targets[f]) for lo, hi, f in steps if f in targets]
            labels = [(t, vid) for t, vid in labels if item.start <= t <= item.end]
            pieces = _pieces(item.start, item.end, labels) if labels else [(item.start, item.end, v)]
            timeline[v].extend(pieces)
        new_turns = record.turns
        if are_turns:
            new_turns = []
            for turn in record.turns or []:
                if turn.speaker not in timeline:
                    new_turns.append(turn)
                    continue
                for s, e, vid in timeline[turn.speaker]:
                    if _overlap(s, e, turn.start, turn.end) > 0:
                        start, end = max(s, turn.start), min(e, turn.end)
                        new_turns.append(turn.model_copy(update={"start": start, "end": end, "speaker": vid}))
                        if vid != turn.speaker:
                            moved[vid] += end - start
            new_turns.sort(key=lambda t: (t.start, t.end, t.speaker or ""))
        new_utts: list[Utterance] = []
        for u in record.utterances or []:
            voice_pieces = timeline.get(u.speaker or "")
            if not voice_pieces:
                new_utts.append(u)
                continue
            split_utts = _split_utterance(u, voice_pieces)
            if not are_turns:
                for x in split_utts:
                    if x.speaker is not None and x.speaker != u.speaker:
                        moved[x.speaker] += x.end - x.start
            new_utts.extend(split_utts)
        ids = {u.speaker for u in new_utts if u.speaker} | {t.speaker for t in new_turns or [] if t.speaker}
        update: dict[str, Any] = {"utterances": new_utts, "turns": new_turns}
        if record.voices is not None:
            known = set(record.voices.ids or []) | ids
            vids = sorted(known, key=number_of)
            update["voices"] = record.voices.model_copy(update={"ids": vids})
        return record.model_copy(update=update), {k: round(x, 3) for k, x in sorted(moved.items())}


def _typed(record: ClipRecord) -> ClipRecord:
    """Turns and utterances as models (callers may have set plain dicts on a record, e.g. the truth's
    speech in `m3 eval link --oracle-voices`; a turn without a local label takes its voice id)."""
    turns = record.turns
    utts = record.utterances or []
    if not any(isinstance(x, dict) for x in [*(turns or []), *utts]):
        return record
    update: dict[str, Any] = {
        "utterances": [Utterance.model_validate(u) if isinstance(u, dict) else u for u in utts]
    }
    if turns is not None:
        update["turns"] = [
            Turn.model_validate({"speaker_local": t.get("speaker") or "?", **t}) if isinstance(t, dict) else t
            for t in turns
        ]
    return record.model_copy(update=update)


def _renamed(record: ClipRecord, rename: dict[str, str]) -> ClipRecord:
    """The record with voice ids renamed in its speech, voices section and memory."""

    def sub(text: str) -> str:
        return VOICE_ID_RE.sub(lambda m: rename.get(m.group(0), m.group(0)), text)

    def speaker(item: Any) -> Any:
        return item.model_copy(update={"speaker": rename.get(item.speaker, item.speaker)})

    update: dict[str, Any] = {"utterances": [speaker(u) for u in record.utterances or []]}
    if record.turns is not None:
        update["turns"] = [speaker(t) for t in record.turns]
    if record.voices is not None and record.voices.ids:
        update["voices"] = record.voices.model_copy(
            update={"ids": [rename.get(v, v) for v in record.voices.ids]}
        )
    memory = record.memory
    if memory is not None:

        def item(m: Any) -> Any:
            ents = [sub(e) for e in m.entities] if m.entities else m.entities
            return m.model_copy(update={"text": sub(m.text), "entities": ents})

        pairs = [(f, sub(v)) for f, v in memory.equivalences] if memory.equivalences else memory.equivalences
        update["memory"] = memory.model_copy(
            update={
                "episodic": [item(m) for m in memory.episodic],
                "semantic": [item(m) for m in memory.semantic],
                "equivalences": pairs,
            }
        )
    return record.model_copy(update=update)


def _voice_at(s: float, e: float, pieces: list[tuple[float, float, str]], default: str | None) -> str | None:
    """The voice of the piece overlapping [s, e] most, else of the nearest piece, else ``default``."""
    if not pieces:
        return default
    best = max(pieces, key=lambda p: (_overlap(p[0], p[1], s, e), -p[0]))
    if _overlap(best[0], best[1], s, e) > 0:
        return best[2]
    mid = (s + e) / 2
    return min(pieces, key=lambda p: (min(abs(p[0] - mid), abs(p[1] - mid)), p[0]))[2]


def _split_utterance(u: Utterance, pieces: list[tuple[float, float, str]]) -> list[Utterance]:
    """One utterance per run of consecutive words that fall in the same voice's pieces."""
    words = u.words or []
    if not words:
        return [u.model_copy(update={"speaker": _voice_at(u.start, u.end, pieces, u.speaker)})]
    runs: list[tuple[str | None, list[Any]]] = []
    for w in words:
        vid = _voice_at(w.start, w.end, pieces, u.speaker)
        if runs and runs[-1][0] == vid:
            runs[-1][1].append(w)
        else:
            runs.append((vid, [w]))
    if len(runs) == 1:
        return [u.model_copy(update={"speaker": runs[0][0]})]
    out = []
    for i, (vid, ws) in enumerate(runs):
        start = u.start if i == 0 else ws[0].start
        end = u.end if i == len(runs) - 1 else ws[-1].end
        text = " ".join(w.word.strip() for w in ws).strip()
        update = {"start": start, "end": end, "words": ws, "text": text or u.text, "speaker": vid}
        if vid != u.speaker:
            update["voice_score"] = None
        out.append(u.model_copy(update=update))
    return out
