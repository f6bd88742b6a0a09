"""`m3 abstract`'s contradictions: semantic statements about one character that cannot both hold.

Without an LLM a statement is reduced to (polarity, predicate) by :func:`polarity_form` and the groups of
one character and predicate that hold both polarities conflict; with one, the LLM is asked which of a
character's new statements contradict recent ones. Either way the better-supported side (more
statements with the same normalised text; ties go to the newer) is kept, and each pair of sides is
reported once per video as a ``conflict`` item.
"""

from __future__ import annotations

from typing import Any

from m3cli.schemas.records import ClipRecord
from m3cli.stages.abstract.facts import CharacterView, Fact, VideoState
from m3cli.stages.abstract.llm import LlmCalls
from m3cli.stages.core import memory_prompts as prompts
from m3cli.stages.core.memory_store import conflict_node_id, fact_text

_NEG_AUX = {"does not": "", "doesn't": "", "did not": "", "didn't": "", "do not": "", "don't": ""}
_ANTONYMS = {
    "dislikes": ("likes", -1),
    "hates": ("likes", -1),
    "detests": ("likes", -1),
    "loves": ("likes", 1),
    "enjoys": ("likes", 1),
    "unmarried": ("married", -1),
    "single": ("married", -1),
    "unhappy": ("happy", -1),
    "dishonest": ("honest", -1),
    "unfriendly": ("friendly", -1),
    "distrusts": ("trusts", -1),
    "disagrees": ("agrees", -1),
    "unemployed": ("employed", -1),
    "unable": ("able", -1),
    "impatient": ("patient", -1),
    "unkind": ("kind", -1),
}
_THIRD_PERSON = {"have": "has", "do": "does", "go": "goes", "be": "is"}
_FILLER = {"really", "very", "also", "still", "actually", "definitely", "clearly"}


def polarity_form(text: str) -> tuple[int, str] | None:
    """(polarity, normalised predicate) of a statement, or None if it is not a simple claim.

    Documented patterns: "does not / doesn't / did not / do not VERB" -> VERB(s) negated; "is not /
    isn't / was not / are not" -> negated; "cannot / can't / can not" -> "can" negated; "never" and
    "no longer" negate; antonyms in ``_ANTONYMS`` ("dislikes" = not "likes", "single" = not "married").
    """
    words = fact_text(text).replace("can't", "can not").replace("cannot", "can not").split()
    pol = 1
    out: list[str] = []
    i = 0
    while i < len(words):
        w = words[i]
        pair = " ".join(words[i : i + 2])
        if pair in _NEG_AUX and i + 2 < len(words):
            pol = -pol
            verb = words[i + 2]
            out.append(_THIRD_PERSON.get(verb, verb if verb.endswith("s") else verb + "s"))
            i += 3
            continue
        if w in ("doesn't", "didn't", "don't") and i + 1 < len(words):
            pol = -pol
            verb = words[i + 1]
            out.append(_THIRD_PERSON.get(verb, verb if verb.endswith("s") else verb + "s"))
            i += 2
            continue
        if w in ("not", "never") or pair == "no longer":
            pol = -pol
            i += 2 if pair == "no longer" else 1
            continue
        if w in ("isn't", "wasn't", "aren't", "weren't"):
            pol = -pol
            out.append({"isn't": "is", "wasn't": "was", "aren't": "are", "weren't": "were"}[w])
            i += 1
            continue
        if w in _ANTONYMS:
            base, sign = _ANTONYMS[w]
            pol *= sign
            out.append(base)
            i += 1
            continue
        if w not in _FILLER:
            out.append(w)
        i += 1
    if len(out) < 2:
        return None
    return pol, " ".join(out)


def support_key(f: Fact, mapping: dict[str, str], render: Any) -> str:
    """Statements with the same normalised text (ids resolved to characters) support each other."""
    return fact_text(render(f.text, mapping))


def subject_form(fact: Fact, character: str, mapping: dict[str, str]) -> tuple[int, str] | None:
    """:func:`polarity_form` of ``fact`` as a statement about ``character`` (who becomes ``<subject>``)."""
    return polarity_form(CharacterView.render(fact.text, mapping).replace(character, "<subject>"))


class ConflictFinder:
    """Conflicts of one video's fold; with ``llm`` the LLM judges them, else the polarity forms do."""

    def __init__(self, view: CharacterView, llm: LlmCalls | None = None) -> None:
        self.view = view
        self.llm = llm

    def conflicts(
        self, record: ClipRecord, state: VideoState, new: list[Fact], mapping: dict[str, str]
    ) -> list[dict[str, Any]]:
        vid, idx = record.video.id, record.clip.index
        render = self.view.render
        tally = state.tally
        assert tally is not None
        new_ids = {f.id for f in new}
        sides: list[tuple[list[Fact], list[Fact], str, str]] = []
        if self.llm is not None:
            groups = tally.groups
            for a, b, c in self._llm_conflict_pairs(record, tally.semantic, new_ids, mapping):
                sides.append(
                    (
                        groups[support_key(a, mapping, render)],
                        groups[support_key(b, mapping, render)],
                        c,
                        "llm",
                    )
                )
        else:  # groups of one character and predicate that this clip's statements joined
            for c, pred in tally.touched_forms(new):
                by_pol = tally.forms[(c, pred)]
                if 1 in by_pol and -1 in by_pol:
                    sides.append((by_pol[1], by_pol[-1], c, "offline"))
        out: list[dict[str, Any]] = []
        for side_a, side_b, c, source in sides:
            rank_a = (len(side_a), max(f.order for f in side_a))
            rank_b = (len(side_b), max(f.order for f in side_b))
            keep, drop = (side_a, side_b) if rank_a > rank_b else (side_b, side_a)
            tag = (tuple(f.id for f in keep), tuple(f.id for f in drop))
            if tag in state.conflicts_seen:
                continue
            state.conflicts_seen.add(tag)
            kt, dt = render(keep[-1].text, mapping), render(drop[-1].text, mapping)
            text = (
                f'Contradiction about {c}: "{kt}" ({len(keep)} statement{"s" if len(keep) != 1 else ""}) vs '
                f'"{dt}" ({len(drop)}); kept "{kt}"'
            )
            out.append(
                {
                    "id": conflict_node_id(vid, idx, len(out)),
                    "kind": "conflict",
                    "text": text,
                    "character": c,
                    "entities": [c],
                    "kept": [f.id for f in keep],
                    "dropped": [f.id for f in drop],
                    "weights": {"kept": len(keep), "dropped": len(drop)},
                    "evidence": [f.id for f in keep + drop],
                    "source": source,
                    "start": min(f.start for f in keep + drop),
                    "end": max(f.end for f in keep + drop),
                }
            )
        return out

    def _llm_conflict_pairs(
        self,
        record: ClipRecord,
        by_char: dict[str, list[Fact]],
        new_ids: set[str],
        mapping: dict[str, str],
    ) -> list[tuple[Fact, Fact, str]]:
        """Contradictions the LLM finds between a character's new and recent semantic statements."""
        assert self.llm is not None
        render = self.view.render
        pairs = []
        for c, facts in sorted(by_char.items()):
            fresh = len(facts)
            while fresh and facts[fresh - 1].id in new_ids:  # this clip's statements close the list
                fresh -= 1
            new, old = facts[fresh:][:20], facts[:fresh][-40:]
            if not new or len(new) + len(old) < 2:
                continue
            ids = {f.id: f for f in new + old}

            def validate(obj: Any, ids=ids) -> list[str]:
                return [
                    f"conflicts[{i}] uses an unknown id"
                    for i, p in enumerate(obj["conflicts"])
                    if p["a"] not in ids or p["b"] not in ids or p["a"] == p["b"]
                ][:5]

            obj = self.llm(
                record.video.id,
                record.clip.index,
                f"conflict{c}",
                prompts.conflict_prompt(
                    c,
                    [(f.id, render(f.text, mapping)) for f in new],
                    [(f.id, render(f.text, mapping)) for f in old],
                ),
                prompts.CONFLICT_SCHEMA,
                validate,
                task="conflicts",
            )
            for p in (obj or {}).get("conflicts", []):
                pairs.append((ids[p["a"]], ids[p["b"]], c))
        return pairs
