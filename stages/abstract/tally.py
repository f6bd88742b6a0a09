"""Running totals for `m3 abstract`'s fold, so a clip costs the same whether it is the 10th or the 1000th.

The fold's outputs (character and relationship summaries, the offline global summary, conflicts) are
functions of every fact so far under the clip's character mapping. Recomputing them from all facts made
each clip cost O(facts before it). Here each fact is added once; what a summary needs (counts, spans,
the top quotes, the facts not yet summarised) is kept up to date. The totals depend on the mapping, so
when a mapping change touches an entity that earlier facts name (or clips come out of order) they are
rebuilt from all facts, giving exactly what a from-scratch recomputation gives.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from m3cli.stages.core.entity_ids import CHARACTER_PREFIX

QUOTES = 3  # quotes an offline character summary shows


@dataclass
class CharTally:
    """What one character's summary needs: every fact naming it, folded."""

    count: int = 0
    pending: list[Any] = field(default_factory=list)  # facts not in the last summary, in fact order
    clips: set[int] = field(default_factory=set)
    speech: int = 0
    talk: float = 0  # an int 0 first, as sum() starts, so float rounding matches a plain sum()
    others: Counter = field(default_factory=Counter)
    quotes: list[Any] = field(default_factory=list)  # longest speech lines, at most QUOTES
    start: float = float("inf")
    end: float = float("-inf")

    def add(self, fact: Any, chars: list[str], c: str, done: set[str]) -> None:
        self.count += 1
        if fact.id not in done:
            self.pending.append(fact)
        self.clips.add(fact.clip)
        self.start = min(self.start, fact.start)
        self.end = max(self.end, fact.end)
        if fact.kind == "speech":
            self.speech += 1
            self.talk += max(0.0, fact.end - fact.start)
            self.quotes.append(fact)
            self.quotes.sort(key=lambda f: (-len(f.text), f.order))
            del self.quotes[QUOTES:]
        for o in chars:
            if o != c:
                self.others[o] += 1


@dataclass
class PairTally:
    """One pair of characters: facts naming both, then clips both appear in (the evidence order)."""

    lines: int = 0
    clips: int = 0
    pending_facts: list[Any] = field(default_factory=list)
    pending_clips: list[str] = field(default_factory=list)


class FoldTally:
    """The fold's totals under one character mapping."""

    def __init__(
        self,
        mapping: dict[str, str],
        chars: Callable[[list[str], dict[str, str]], list[str]],
        form: Callable[[Any, str, dict[str, str]], tuple[int, str] | None],
        support_key: Callable[[Any, dict[str, str]], str],
        clip_node: Callable[[int], str],
        char_key: Callable[[str], Any],
    ) -> None:
        self.mapping = mapping
        self._chars, self._form, self._support_key, self._clip_node = chars, form, support_key, clip_node
        self._char_key = char_key
        self.last_clip: int | None = None
        self.all_chars: set[str] = set()
        self.stats: dict[str, dict[str, Any]] = defaultdict(lambda: {"clips": set(), "speech": 0})
        self.characters: dict[str, CharTally] = {}
        self.pairs: dict[tuple[str, str], PairTally] = {}
        self.forms: dict[tuple[str, str], dict[int, list[Any]]] = {}  # offline contradiction candidates
        self.form_position: dict[tuple[str, str], int] = {}
        self.form_of: dict[str, tuple[str, str]] = {}  # fact id -> its contradiction group
        self.groups: dict[str, list[Any]] = defaultdict(list)  # semantic facts by normalised text
        self.semantic: dict[str, list[Any]] = defaultdict(list)  # semantic facts by first character

    def still_valid(self, mapping: dict[str, str], clip: int, seen: set[str]) -> bool:
        """True when adding ``clip`` under ``mapping`` leaves every earlier fact's characters as they are."""
        if self.last_clip is not None and clip <= self.last_clip:
            return False
        if mapping == self.mapping:
            return True
        changed = {k for k in mapping.keys() | self.mapping.keys() if mapping.get(k) != self.mapping.get(k)}
        if changed & seen:
            return False
        self.mapping = mapping
        return True

    def add_clip(
        self,
        clip: int,
        facts: list[Any],
        done_char: dict[str, set[str]],
        done_rel: dict[tuple[str, str], set[str]],
    ) -> None:
        """Fold one clip's facts (facts of one clip index, in fact order)."""
        self.last_clip = clip
        in_clip: set[str] = set()
        for f in facts:
            chars = self._chars(f.entities, self.mapping)
            self.all_chars.update(chars)
            for c in chars:
                self.stats[c]["clips"].add(f.clip)
                self.stats[c]["speech"] += f.kind == "speech"
            people = sorted((c for c in chars if c.startswith(CHARACTER_PREFIX)), key=self._char_key)
            for c in people:
                tally = self.characters.setdefault(c, CharTally())
                tally.add(f, chars, c, done_char.get(c, set()))
            in_clip.update(people)
            for i, a in enumerate(people):
                for b in people[i + 1 :]:
                    pair = self.pairs.setdefault((a, b), PairTally())
                    pair.lines += 1
                    if f.id not in done_rel.get((a, b), set()):
                        pair.pending_facts.append(f)
            if f.section == "semantic" and f.kind != "equivalence" and f.entities:
                c = chars[0]
                self.semantic[c].append(f)
                self.groups[self._support_key(f, self.mapping)].append(f)
                form = self._form(f, c, self.mapping)
                if form:
                    key = (c, form[1])
                    if key not in self.forms:
                        self.forms[key] = {}
                        self.form_position[key] = len(self.form_position)
                    self.forms[key].setdefault(form[0], []).append(f)
                    self.form_of[f.id] = key
        ordered = sorted(in_clip, key=self._char_key)
        node = self._clip_node(clip)
        for i, a in enumerate(ordered):
            for b in ordered[i + 1 :]:
                pair = self.pairs.setdefault((a, b), PairTally())
                pair.clips += 1
                if node not in done_rel.get((a, b), set()):
                    pair.pending_clips.append(node)

    def touched_forms(self, facts: list[Any]) -> list[tuple[str, str]]:
        """Contradiction groups these facts are in, in the order the groups first appeared."""
        keys = {self.form_of[f.id] for f in facts if f.id in self.form_of}
        return sorted(keys, key=self.form_position.__getitem__)
