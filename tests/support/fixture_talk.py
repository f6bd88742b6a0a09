"""The fixture video's two people talking as one clip record (with <face_1>'s crop in the cache), an
LLM client for the loopback server, and a memory reply that passes validation: what the memorize and
prompt-style tests give the LLM path."""

from __future__ import annotations

from pathlib import Path

from memory_helpers import FIXTURE, clip

from conftest import DATA
from m3cli.stages.backends.llm import LlmClient
from m3cli.stages.core.cache import Cache, CacheKey
from m3cli.stages.core.media import content_id

OBAMA = str(DATA / "fixture_src" / "obama.jpg")
FIXTURE_ID = content_id(FIXTURE)  # stages check that a record's video is the file it names
FIXTURE_SECONDS = 49.8


def crop_in_cache(cache: Cache) -> str:
    """Obama's photo as `m3 faces` keeps a crop: in the cache, the only place a stage reads one from."""
    key = CacheKey.of(FIXTURE_ID, 0, "faces", {}, "test")
    return str(cache.put_bytes(key, "crop.jpg", Path(OBAMA).read_bytes()))


def talk(index: int = 0, cache: Cache | None = None, length: float = 30.0):
    """Two people talking in clip ``index`` of the real fixture video; <face_1>'s crop in ``cache``.

    Clips are ``length`` seconds; tests that read clip 1's frames or audio use 24.9 s clips, which
    tile the 49.8-s fixture (a 30-s clip 1 ends past the file: fine only while no media is read)."""
    o = length * index
    return clip(
        index,
        {
            "<face_1>": [(o + 0.6, o + 5.7), (o + 13.6, o + 21.7)],
            "<face_2>": [(o + 6.3, o + 13.0), (o + 5.0, o + 5.7)],
        },
        [
            ("<voice_1>", o + 0.6, o + 5.7, "Good morning, my name is Barack and I like coffee."),
            ("<voice_2>", o + 6.3, o + 13.0, "Thank you, Barack. I'm Joe."),
            (None, o + 25.0, o + 26.0, "Mm-hm."),
        ],
        length=length,
        duration=max(FIXTURE_SECONDS, o + length),
        video=FIXTURE_ID,
        crops={"<face_1>": crop_in_cache(cache)} if cache is not None else None,
    )


GOOD = {
    "episodic": [
        {"text": "<face_1> wears a dark suit", "start": 1.0, "end": 5.0},
        {"text": "<voice_2> thanks <voice_1> by name", "start": 6.3, "end": 13.0},
    ],
    "semantic": [
        {"text": "Equivalence: <face_1>, <voice_1>", "kind": "equivalence"},
        {"text": "The name of <voice_1> is Barack", "kind": "attribute"},
        {"text": "<voice_1> and <voice_2> are friendly colleagues", "kind": "relationship"},
    ],
    "equivalences": [["<face_2>", "<voice_2>"]],
}


def client_for(server, **kw) -> LlmClient:
    kw.setdefault("backoff", 0.01)
    kw.setdefault("timeout", 5.0)
    kw.setdefault("max_retries", 2)
    return LlmClient(server.url, "fake-vlm", **kw)
