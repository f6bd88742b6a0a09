"""`m3 abstract`'s running totals give what a from-scratch fold over every earlier fact gives.

The reference recomputes the totals from all facts at every clip (what the fold did before it kept
running totals); both run on the same records, including a character mapping that changes half way
(an id earlier lines name joins another character) and contradicting statements. Similar-text links
are checked against a brute-force search over the real MiniLM vectors of every earlier line.
"""

from __future__ import annotations

import numpy as np
import pytest
from memory_helpers import clip

from m3cli.schemas.records import ClipRecord
from m3cli.stages.abstract.stage import AbstractConfig, Abstractor, VideoState
from m3cli.stages.backends.embed import make_embedder
from m3cli.stages.core.entity_ids import ID_RE
from m3cli.stages.core.memory_store import fact_id
from m3cli.stages.link.stage import LinkConfig, link_records
from m3cli.stages.memorize.stage import MemorizeConfig, memorize_records

STATEMENTS = ["{e} likes coffee", "{e} dislikes coffee", "{e} is married", "{e} is single", "{e} loves music"]


class FromScratch(Abstractor):
    """The fold without running totals: rebuilt from every fact so far at every clip."""

    def _tally(self, record, state, new, mapping):
        state.tally = None
        super()._tally(record, state, new, mapping)


def records(n_clips: int = 12) -> list[ClipRecord]:
    raw = []
    for i in range(n_clips):
        o = 30.0 * i
        a, b = i % 3 + 1, (i + 1) % 3 + 1
        raw.append(
            clip(
                i,
                {f"<face_{a}>": [(o, o + 10)], f"<face_{b}>": [(o + 10, o + 20)]},
                [
                    (f"<voice_{a}>", o + 0.5, o + 9.5, f"I keep talking about the garden, part {i}."),
                    (f"<voice_{b}>", o + 10.5, o + 19.5, f"The coffee in clip {i} was cold."),
                ],
            )
        )
    out = []
    for k, record in enumerate(link_records(memorize_records(raw, MemorizeConfig()), LinkConfig())):
        data = record.to_json()
        who = f"<face_{k % 3 + 1}>"
        data["memory"]["semantic"] += [
            {"text": STATEMENTS[(k * j) % len(STATEMENTS)].format(e=who), "entities": [who]} for j in (1, 2)
        ]
        chars = dict(data.get("characters") or {})
        if k >= n_clips // 2:  # earlier lines name <face_3>; from here on it is <character_1>'s
            chars["<face_3>"] = chars.get("<face_1>", "<character_1>")
        data["characters"] = chars
        out.append(ClipRecord.model_validate(data))
    return out


def fold(cls, recs: list[ClipRecord], config: AbstractConfig, embedder=None) -> list[list[dict]]:
    runner = cls(config, None, embedder)
    state = VideoState(video=recs[0].video.id)
    return [runner.step(r, state) for r in recs]


@pytest.mark.parametrize(
    ("config", "n_clips"),
    [
        (AbstractConfig(tau_char=3, tau_rel=2, check=True, embed=False), 12),
        (AbstractConfig(tau_char=50, tau_rel=30, check=True, embed=False), 40),
        (AbstractConfig(tau_char=5, tau_rel=4, embed=False), 12),
    ],
)
def test_running_totals_equal_the_from_scratch_fold(config, n_clips):
    recs = records(n_clips)
    got, want = fold(Abstractor, recs, config), fold(FromScratch, recs, config)
    assert got == want
    kinds = {item["kind"] for items in got for item in items}
    assert {"character", "relationship", "clip", "global", "link"} <= kinds
    if config.check:
        assert "conflict" in kinds


def test_similar_links_are_the_nearest_earlier_lines():
    embedder = make_embedder("local")
    config = AbstractConfig(similar_threshold=0.5, similar_k=2, embed=True)
    recs = records(6)
    got = fold(Abstractor, recs, config, embedder)
    links = {(i["src"], i["dst"]) for items in got for i in items if i.get("relation") == "similar"}
    assert links  # the threshold is low enough for the repeated garden/coffee lines

    texts, ids, want = [], [], set()
    for r in recs:
        new = [
            (fact_id(r.video.id, r.clip.index, section, j), item.text)
            for section in ("episodic", "semantic")
            for j, item in enumerate(getattr(r.memory, section))
        ]
        vecs = embedder.embed([ID_RE.sub("someone", t) for _, t in new])  # ids do not make lines similar
        if texts:
            earlier = np.stack(texts)
            for (fid, _), v in zip(new, vecs, strict=True):
                sims = earlier @ v
                above = [j for j in np.argsort(-sims, kind="stable") if sims[j] >= 0.5]
                linked = [ids.index(dst) for src, dst in links if src == fid]
                assert len(linked) == min(2, len(above)), fid
                # the nearest earlier lines above the threshold; two equal texts tie to within float
                # rounding (the fold's matrix product and this vector product may order them apart)
                kth = sims[above[len(linked) - 1]] if linked else 1.0
                assert all(sims[j] >= 0.5 and sims[j] >= kth - 1e-5 for j in linked), fid
                want |= {(fid, ids[j]) for j in linked}
        texts += list(vecs)
        ids += [fid for fid, _ in new]
    assert links == want  # every similar link checked above, none left over
