"""A small real pipeline's records ready for `m3 index` (memorize, link and abstract run offline on
made-up clips), the local MiniLM embedder and an embedding cache shared by a session: what the index,
memory and reliability tests build their memories from."""

from __future__ import annotations

import os

import pytest
from memory_helpers import VIDEO, clip

from m3cli.stages.abstract.stage import AbstractConfig, abstract_records
from m3cli.stages.backends.embed import make_embedder
from m3cli.stages.core.cache import Cache
from m3cli.stages.core.common import RunContext
from m3cli.stages.link.stage import LinkConfig, link_records
from m3cli.stages.memorize.stage import MemorizeConfig, memorize_records

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session")
def embedder():
    return make_embedder("local")


@pytest.fixture(scope="session")
def ctx(tmp_path_factory):
    """One embedding cache for the module: the same texts are embedded once across tests."""
    return RunContext(cache=Cache(tmp_path_factory.mktemp("index-cache")))


def pipeline(n: int = 4, video: str = VIDEO, check: bool = False, extra_semantic=None):
    recs = []
    for i in range(n):
        o = 30.0 * i
        recs.append(
            clip(
                i,
                {"<face_1>": [(o, o + 10)], "<face_2>": [(o + 10, o + 20)]},
                [
                    ("<voice_1>", o + 0.5, o + 9.5, "Hello, my name is Anna." if i == 0 else f"Point {i}."),
                    ("<voice_2>", o + 10.5, o + 19.5, "Thank you, Anna. I like the garden."),
                ],
                video=video,
            )
        )
    recs = memorize_records(recs, MemorizeConfig())
    for r in recs:
        for text in (extra_semantic or {}).get(r.clip.index, []):
            r.memory.semantic.append(
                type(r.memory.episodic[0])(text=text, kind="attribute", entities=[text.split()[0]])
            )
    recs = link_records(recs, LinkConfig())
    return abstract_records(recs, AbstractConfig(tau_char=5, tau_rel=3, check=check, embed=False))
