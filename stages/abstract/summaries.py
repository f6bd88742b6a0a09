"""`m3 abstract`'s summaries: PyraVid's clip and evolving global summaries, CAM's character and
relationship summaries.

A ``clip`` summary per clip and the ``global`` summary of the video so far after it; a ``character``
summary when ``tau_char`` new pieces of evidence (memory lines whose ids belong to the character) have
accumulated since its last summary, a ``relationship`` summary when ``tau_rel`` new interactions of a
pair have (lines naming both, plus each clip both appear in); each lists the evidence node ids it rests
on. With an LLM the text is its reply, checked to name only ids the video has; without one (or when the
call fails) it is a deterministic aggregation of counts, co-occurrences and quoted lines.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from typing import Any

from m3cli.schemas.records import ClipRecord
from m3cli.stages.abstract.facts import CharacterView, Fact, VideoState
from m3cli.stages.abstract.llm import LlmCalls
from m3cli.stages.abstract.tally import CharTally, PairTally
from m3cli.stages.configs.abstract import AbstractConfig
from m3cli.stages.core import memory_prompts as prompts
from m3cli.stages.core.entity_ids import CHARACTER_PREFIX, ID_RE, by_number
from m3cli.stages.core.memory_store import (
    character_node_id,
    clip_node_id,
    global_node_id,
    relationship_node_id,
)


class Summariser:
    """Summaries of one video's fold; ``llm`` writes them when given, else the offline aggregation."""

    def __init__(self, view: CharacterView, config: AbstractConfig, llm: LlmCalls | None = None) -> None:
        self.view = view
        self.tau_char = config.tau_char
        self.tau_rel = config.tau_rel
        self.max_evidence = config.max_evidence
        self.llm = llm

    def summaries(
        self, record: ClipRecord, state: VideoState, new: list[Fact], mapping: dict[str, str]
    ) -> list[dict[str, Any]]:
        """The clip and global summaries, then the character and relationship summaries that are due."""
        out = self._clip_and_global(record, state, new, mapping)
        out += self._characters(record, state, mapping)
        out += self._relationships(record, state, mapping)
        return out

    def _summary_check(self, state: VideoState, mapping: dict[str, str]) -> Any:
        """Validator of summary replies: only ids this video has, no placeholder copied from the prompt."""
        assert state.tally is not None
        known = state.tally.all_chars | state.entities_seen

        def validate(obj: Any) -> list[str]:
            text = " ".join(str(obj.get("summary", "")).split())
            if re.fullmatch(r"\.{2,}|…+|<[^<>]{0,80}>", text):
                return [f"the summary is the placeholder {text!r}; write the summary itself"]
            unknown = sorted({m.group(0) for m in ID_RE.finditer(text)} - known, key=by_number)
            if unknown:
                listed = ", ".join(
                    sorted((k for k in known if k.startswith(CHARACTER_PREFIX)), key=by_number)
                )
                return [
                    f"the summary names {', '.join(unknown)}, which this video does not have; use only "
                    f"{listed or 'the ids in the evidence'}"
                ]
            return []

        return validate

    # ----------------------------------------------------------------- pyramid
    def _clip_and_global(
        self, record: ClipRecord, state: VideoState, new: list[Fact], mapping: dict[str, str]
    ) -> list[dict[str, Any]]:
        vid, idx = record.video.id, record.clip.index
        start, end = record.clip.start, record.clip.end
        chars = sorted({c for f in new for c in self.view.chars(f.entities, mapping)}, key=by_number)
        text = None
        if self.llm is not None and new:
            lines = [self.view.render(f.text, mapping) for f in new][: self.max_evidence]
            obj = self.llm(
                vid,
                idx,
                "clip",
                prompts.clip_summary_prompt(idx, start, end, lines),
                prompts.SUMMARY_SCHEMA,
                self._summary_check(state, mapping),
            )
            text = obj["summary"] if obj else None
        source = "llm" if text else "offline"
        text = text or self._offline_clip(record, new, mapping)
        cid = clip_node_id(vid, idx)
        clip_item = {
            "id": cid,
            "kind": "clip",
            "text": text,
            "entities": chars,
            "evidence": [f.id for f in new],
            "source": source,
            "start": start,
            "end": end,
        }
        state.clip_nodes.append(cid)
        state.clip_span = (state.clip_span[0] if state.clip_span else start, end)
        gtext = None
        if self.llm is not None:
            obj = self.llm(
                vid,
                idx,
                "global",
                prompts.global_summary_prompt(state.global_text, text),
                prompts.SUMMARY_SCHEMA,
                self._summary_check(state, mapping),
            )
            gtext = obj["summary"] if obj else None
        gsource = "llm" if gtext else "offline"
        gtext = gtext or self._offline_global(state, mapping, text)
        state.global_text = gtext
        assert state.tally is not None
        all_chars = sorted(state.tally.all_chars, key=by_number)
        global_item = {
            "id": global_node_id(vid),
            "kind": "global",
            "text": gtext,
            "entities": all_chars,
            "evidence": list(state.clip_nodes),
            "source": gsource,
            "start": state.clip_span[0],
            "end": state.clip_span[1],
        }
        return [clip_item, global_item]

    def _offline_clip(self, record: ClipRecord, new: list[Fact], mapping: dict[str, str]) -> str:
        idx, start, end = record.clip.index, record.clip.start, record.clip.end
        speech: dict[str, list[Fact]] = defaultdict(list)
        seen: dict[str, None] = {}
        for f in new:
            chars = self.view.chars(f.entities, mapping)
            if f.kind == "speech":
                speech[chars[0] if chars else "an unidentified voice"].append(f)
            for c in chars:
                seen.setdefault(c, None)
        parts = [f"Clip {idx} ({start:.1f}-{end:.1f} s)"]
        said = []
        for who, fs in sorted(speech.items(), key=lambda kv: (kv[1][0].start, kv[0])):
            quote = _quote(max(fs, key=lambda f: (len(f.text), -f.order)).text, 80)
            said.append(f'{who} speaks {len(fs)} time{"s" if len(fs) != 1 else ""} (e.g. "{quote}")')
        if said:
            parts.append("; ".join(said))
        silent = [c for c in seen if c not in speech]
        if silent:
            parts.append("also present: " + ", ".join(sorted(silent, key=by_number)))
        n_e = sum(1 for f in new if f.section == "episodic")
        n_s = len(new) - n_e
        parts.append(f"{n_e} episodic and {n_s} semantic memory lines")
        return ": ".join(parts[:2]) + (". " + ". ".join(parts[2:]) if len(parts) > 2 else "") + "."

    def _offline_global(self, state: VideoState, mapping: dict[str, str], latest: str) -> str:
        assert state.tally is not None
        stats = state.tally.stats
        s, e = state.clip_span or (0.0, 0.0)
        ranked = sorted(
            stats.items(), key=lambda kv: (-len(kv[1]["clips"]), -kv[1]["speech"], by_number(kv[0]))
        )
        people = []
        for c, st in ranked[:10]:
            people.append(
                f"{c} in {len(st['clips'])} clip{'s' if len(st['clips']) != 1 else ''}, "
                f"{st['speech']} utterance{'s' if st['speech'] != 1 else ''}"
            )
        who = "; ".join(people) if people else "no identified people"
        more = f" (+{len(ranked) - 10} more)" if len(ranked) > 10 else ""
        n = len(state.clip_nodes)
        return (
            f"Video so far: {n} clip{'s' if n != 1 else ''}, {s:.1f}-{e:.1f} s. People: {who}{more}. "
            f"Latest: {latest}"
        )

    def _name_of(self, character: str, state: VideoState, mapping: dict[str, str]) -> str | None:
        votes: Counter = Counter()
        for eid, names in state.names.items():
            if mapping.get(eid, eid) == character:
                votes.update(names)
        return min(votes.items(), key=lambda kv: (-kv[1], kv[0]))[0] if votes else None

    # ----------------------------------------------------------------- CAM abstractions
    def _characters(
        self, record: ClipRecord, state: VideoState, mapping: dict[str, str]
    ) -> list[dict[str, Any]]:
        vid, idx = record.video.id, record.clip.index
        assert state.tally is not None
        out = []
        for c, tally in sorted(state.tally.characters.items(), key=lambda kv: by_number(kv[0])):
            fresh = tally.pending
            if len(fresh) < self.tau_char:
                continue
            batch = fresh[-self.max_evidence :]
            text = None
            if self.llm is not None:
                ev = [(f.id, self.view.render(f.text, mapping)) for f in batch]
                obj = self.llm(
                    vid,
                    idx,
                    f"char{c}",
                    prompts.character_prompt(c, state.summary_char.get(c), ev),
                    prompts.SUMMARY_SCHEMA,
                    self._summary_check(state, mapping),
                )
                text = obj["summary"] if obj else None
            source = "llm" if text else "offline"
            text = text or self._offline_character(c, tally, state, mapping)
            self._mark_character_done(c, tally, state, mapping)
            state.summary_char[c] = text
            out.append(
                {
                    "id": character_node_id(vid, idx, c),
                    "kind": "character",
                    "text": text,
                    "character": c,
                    "entities": [c],
                    "evidence": [f.id for f in fresh],
                    "evidence_count": tally.count,
                    "source": source,
                    "start": min(f.start for f in fresh),
                    "end": max(f.end for f in fresh),
                }
            )
            tally.pending = []
        return out

    def _mark_character_done(
        self, c: str, tally: CharTally, state: VideoState, mapping: dict[str, str]
    ) -> None:
        """The summarised set becomes every fact of ``c``: add the fresh ones, or recount after a remap."""
        done = state.summarized_char.setdefault(c, set())
        if len(done) == tally.count - len(tally.pending):  # done holds exactly the facts of c not fresh
            done.update(f.id for f in tally.pending)
        else:  # ids of facts a mapping change moved to another character: as from scratch
            state.summarized_char[c] = {
                f.id for f in state.facts if c in self.view.chars(f.entities, mapping)
            }

    def _offline_character(self, c: str, tally: CharTally, state: VideoState, mapping: dict[str, str]) -> str:
        n_clips, others = len(tally.clips), tally.others
        name = self._name_of(c, state, mapping)
        parts = [
            f"{c}"
            + (f" (says their name is {name})" if name else "")
            + f" appears in {tally.count} memory lines across {n_clips} clip{_s(n_clips)}"
            f" ({tally.start:.1f}-{tally.end:.1f} s)"
        ]
        if tally.speech:
            parts.append(f"speaks {tally.speech} time{'s' if tally.speech != 1 else ''} ({tally.talk:.0f} s)")
        if others:
            top = sorted(others.items(), key=lambda kv: (-kv[1], by_number(kv[0])))[:3]
            parts.append(
                "is mentioned together with "
                + ", ".join(f"{o} ({n} line{'s' if n != 1 else ''})" for o, n in top)
            )
        quotes = tally.quotes
        if quotes:
            parts.append(
                "says for example "
                + "; ".join(f'"{_quote(f.text, 80)}"' for f in sorted(quotes, key=lambda f: f.order))
            )
        return "; ".join(parts) + "."

    def _relationships(
        self, record: ClipRecord, state: VideoState, mapping: dict[str, str]
    ) -> list[dict[str, Any]]:
        vid, idx = record.video.id, record.clip.index
        assert state.tally is not None
        out = []
        # evidence of a pair: the lines naming both (in order), then the clips both appear in
        for (a, b), pair in sorted(
            state.tally.pairs.items(), key=lambda kv: (by_number(kv[0][0]), by_number(kv[0][1]))
        ):
            if len(pair.pending_facts) + len(pair.pending_clips) < self.tau_rel:
                continue
            direct = pair.pending_facts
            fresh = [f.id for f in direct] + pair.pending_clips
            text = None
            if self.llm is not None:
                ev = [(f.id, self.view.render(f.text, mapping)) for f in direct[-self.max_evidence :]]
                ev += [(i, "both appear in this clip") for i in pair.pending_clips][-10:]
                obj = self.llm(
                    vid,
                    idx,
                    f"rel{a}{b}",
                    prompts.relationship_prompt(a, b, state.summary_rel.get((a, b)), ev),
                    prompts.SUMMARY_SCHEMA,
                    self._summary_check(state, mapping),
                )
                text = obj["summary"] if obj else None
            source = "llm" if text else "offline"
            if not text:
                n_clips, n_lines = pair.clips, pair.lines
                text = (
                    f"{a} and {b} appear in the same clip {n_clips} time{_s(n_clips)} and are "
                    f"named together in {n_lines} memory line{'s' if n_lines != 1 else ''}"
                )
                if direct:
                    text += "; e.g. " + "; ".join(
                        f'"{_quote(self.view.render(f.text, mapping), 80)}"' for f in direct[:2]
                    )
                text += "."
            self._mark_pair_done((a, b), pair, state, mapping)
            state.summary_rel[(a, b)] = text
            times = [(f.start, f.end) for f in direct] or [(record.clip.start, record.clip.end)]
            out.append(
                {
                    "id": relationship_node_id(vid, idx, a, b),
                    "kind": "relationship",
                    "text": text,
                    "characters": [a, b],
                    "entities": [a, b],
                    "evidence": fresh,
                    "evidence_count": pair.lines + pair.clips,
                    "source": source,
                    "start": min(t[0] for t in times),
                    "end": max(t[1] for t in times),
                }
            )
            pair.pending_facts, pair.pending_clips = [], []
        return out

    def _mark_pair_done(
        self, key: tuple[str, str], pair: PairTally, state: VideoState, mapping: dict[str, str]
    ) -> None:
        """As :meth:`_mark_character_done`, for a pair's evidence (its lines and shared clips)."""
        done = state.summarized_rel.setdefault(key, set())
        fresh = len(pair.pending_facts) + len(pair.pending_clips)
        if len(done) == pair.lines + pair.clips - fresh:
            done.update(f.id for f in pair.pending_facts)
            done.update(pair.pending_clips)
            return
        a, b = key
        ids, clips = set(), set()
        for f in state.facts:
            chars = self.view.chars(f.entities, mapping)
            if a in chars and b in chars:
                ids.add(f.id)
        per_clip: dict[int, set[str]] = defaultdict(set)
        for f in state.facts:
            per_clip[f.clip].update(self.view.chars(f.entities, mapping))
        clips = {clip_node_id(state.video, c) for c, chars in per_clip.items() if a in chars and b in chars}
        state.summarized_rel[key] = ids | clips


def _quote(text: str, limit: int = 120) -> str:
    m = re.search(r'"([^"]+)"', text)
    q = m.group(1) if m else text
    return q if len(q) <= limit else q[: limit - 1].rstrip() + "…"


def _s(n: int) -> str:
    return "" if n == 1 else "s"
