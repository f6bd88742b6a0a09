"""A video's clips fed to the pipeline in several calls that share one ``Folds`` come out exactly as
from one call over all of them: what lets `m3 watch` fold only each round's new clips."""

from __future__ import annotations

import orjson
import pytest

from conftest import FIXTURE


@pytest.mark.slow
def test_clips_fed_in_parts_with_kept_folds_equal_one_pass(cache_dir):
    from m3cli.stages.core.cache import open_cache
    from m3cli.stages.core.common import RunContext
    from m3cli.stages.core.config import load_settings
    from m3cli.stages.pipeline import Folds, Models, pipeline_config, process_records, roundtrip
    from m3cli.stages.segment import segment_video

    settings = load_settings(flags={}, config_path=None)
    config = pipeline_config({"segment": {"clip_seconds": 10}}, until="abstract", offline=True)
    models = Models(config, settings)
    ctx = RunContext(cache=open_cache(settings.cache_dir, settings.cache_max_size), device=settings.device)
    records = roundtrip(segment_video(FIXTURE, config.segment, ctx.cache))
    chunks = [2, 1, 2]  # 50 s in 10-s clips: cut after the second clip and after the third
    assert len(records) == sum(chunks)

    whole = process_records(records, models, ctx)

    folds, parts, at = Folds(), [], 0
    for size in chunks:
        parts += process_records(records[at : at + size], models, ctx, folds=folds)
        at += size

    def dump(rs):
        return [orjson.dumps(r.to_json(), option=orjson.OPT_SERIALIZE_NUMPY) for r in rs]

    assert dump(parts) == dump(whole)
    # the fold carried identities over the cut: later parts name faces and voices of earlier ones
    assert any(r.characters for r in parts[2:])
    # without the kept folds the later parts would start new banks and number identities afresh
    fresh = process_records(records[2:3], models, ctx)
    assert dump(fresh) != dump(whole[2:3])
