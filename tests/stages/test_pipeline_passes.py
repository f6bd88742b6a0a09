"""`m3 run`'s bounded memory: a video's clips go through the stages a few at a time and are held as
JSON until ``index``; the records and the memory are the ones one pass over all clips gives."""

from __future__ import annotations

import lancedb
import orjson
import pytest

from conftest import FIXTURE
from m3cli.stages.core.held_clips import HeldClips
from m3cli.stages.index.stage import index_records
from support.index_pipeline import pipeline


def dump(records):
    return [orjson.dumps(r.to_json(), option=orjson.OPT_SERIALIZE_NUMPY) for r in records]


def test_held_clips_give_back_the_records_they_hold():
    recs = pipeline(4)
    held = HeldClips(recs[:3])
    held.append(recs[3])
    assert len(held) == 4
    assert dump(held) == dump(recs)
    assert dump([held[-1]]) == dump(recs[-1:]) and dump(held[1:3]) == dump(recs[1:3])
    # JSON is what is held: far smaller than the objects it parses into
    assert held.nbytes == sum(len(line) for line in dump(recs))


def test_held_clips_cross_processes_as_lines_and_can_be_amended_on_the_way():
    recs = pipeline(2)
    lines = HeldClips(recs).lines()
    assert all(isinstance(line, bytes) for line in lines)

    def dated(record):
        record.video.recorded, record.video.recorded_source = "2026-11-11T07:00:00-05:00", "manifest"

    back = HeldClips.from_lines(lines, dated)
    assert [(r.video.recorded, r.video.recorded_source) for r in back] == [
        ("2026-11-11T07:00:00-05:00", "manifest")
    ] * 2
    assert dump(HeldClips.from_lines(lines)) == dump(recs)


def test_held_clips_are_one_video_in_clip_order():
    recs = pipeline(3)
    held = HeldClips(recs[:2])
    with pytest.raises(ValueError, match="one video in clip order: clip 0 .* after clip 1"):
        held.append(recs[0])
    other = pipeline(1, video="fedcba9876543210")[0]
    with pytest.raises(ValueError, match="fedcba9876543210"):
        held.append(other)
    assert len(held) == 2  # a refused record is not kept


@pytest.mark.slow
def test_a_held_video_indexes_to_the_same_memory(tmp_path, embedder, ctx):
    recs = pipeline(4)
    listed, held = tmp_path / "listed.lance", tmp_path / "held.lance"
    a = index_records(recs, listed, embedder, ctx=ctx)
    b = index_records(HeldClips(recs), held, embedder, ctx=ctx)
    assert (a.nodes_written, a.edges_written, a.entities_written, a.clips_written) == (
        b.nodes_written,
        b.edges_written,
        b.entities_written,
        b.clips_written,
    )
    assert a.nodes_written > 0
    for table in ("nodes", "edges", "entities", "clips", "people"):
        rows = [
            sorted(lancedb.connect(str(m)).open_table(table).to_arrow().to_pylist(), key=lambda r: r["id"])
            for m in (listed, held)
        ]
        assert rows[0] == rows[1], table


@pytest.mark.slow
def test_a_video_in_passes_equals_one_pass_and_reports_the_whole_video(cache_dir):
    from m3cli.stages.core.cache import open_cache
    from m3cli.stages.core.common import RunContext
    from m3cli.stages.core.config import load_settings
    from m3cli.stages.pipeline import Models, pipeline_config, process_records, process_video, roundtrip
    from m3cli.stages.segment import segment_video

    settings = load_settings(flags={}, config_path=None)
    config = pipeline_config({"segment": {"clip_seconds": 10}}, until="abstract", offline=True)
    models = Models(config, settings)
    seen: list[tuple[str, int, int | None]] = []

    def progress(items, desc="", total=None, done=0):
        for item in items:
            seen.append((desc, done, total))
            done += 1
            yield item

    ctx = RunContext(cache=open_cache(settings.cache_dir, settings.cache_max_size), device=settings.device)
    whole = process_records(roundtrip(segment_video(FIXTURE, config.segment, ctx.cache)), models, ctx)
    assert len(whole) == 5  # 50 s in 10-s clips

    told: list[tuple[str, int]] = []
    ctx.progress = progress
    held = process_video(FIXTURE, models, ctx, on_stage=lambda s, n: told.append((s, n)), clips_per_pass=2)

    assert isinstance(held, HeldClips)
    assert dump(held) == dump(whole)
    assert any(r.characters for r in held[2:])  # identities carried across the passes
    # every stage with a progress count (link has none) counts the video's clips 0..4 of 5 across its
    # three passes, and each is told done once, with the video's 5 clips
    for stage in ("diarize", "voices", "faces", "sight", "memorize", "abstract"):
        assert [(d, t) for s, d, t in seen if s == stage] == [(k, 5) for k in range(5)], stage
    assert sorted(told) == sorted((s, 5) for s in config.stages)  # segment .. abstract


@pytest.mark.slow
def test_an_option_that_clusters_the_whole_video_gets_one_pass(cache_dir):
    """voices.recluster needs every clip at once (fed in parts it refuses); process_video gives it one."""
    from m3cli.stages.core.cache import open_cache
    from m3cli.stages.core.common import RunContext
    from m3cli.stages.core.config import load_settings
    from m3cli.stages.pipeline import Models, pipeline_config, process_records, process_video, roundtrip
    from m3cli.stages.segment import segment_video

    settings = load_settings(flags={}, config_path=None)
    options = {"segment": {"clip_seconds": 10}, "voices": {"recluster": True}}
    config = pipeline_config(options, until="voices", offline=True)
    assert config.whole_video and not pipeline_config(options, until="diarize").whole_video
    models = Models(config, settings)
    ctx = RunContext(cache=open_cache(settings.cache_dir, settings.cache_max_size), device=settings.device)
    whole = process_records(roundtrip(segment_video(FIXTURE, config.segment, ctx.cache)), models, ctx)
    assert dump(process_video(FIXTURE, models, ctx, clips_per_pass=2)) == dump(whole)
