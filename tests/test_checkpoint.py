"""Fold checkpoints (stages/core/checkpoint.py): a restart of `m3 watch` resumes the folds from the
checkpoint its memory's last commit wrote, and replays the committed clips only when the checkpoint is
missing, stale, damaged or of another format, saying so in one line.

Real media throughout: tests/data/fixture.mp4 (50 s, two people) through the real pipeline, and real
`m3 watch` processes on an MPEG-TS remux of it that grows while they run.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from conftest import FIXTURE, run_m3
from support.memory_rows import memory_view


def _pipeline(until: str = "abstract", **stage_options):
    from m3cli.stages.core.cache import open_cache
    from m3cli.stages.core.common import RunContext
    from m3cli.stages.core.config import load_settings
    from m3cli.stages.pipeline import Models, pipeline_config, roundtrip
    from m3cli.stages.segment import segment_video

    settings = load_settings(flags={}, config_path=None)
    config = pipeline_config({"segment": {"clip_seconds": 10}, **stage_options}, until=until, offline=True)
    models = Models(config, settings)
    ctx = RunContext(cache=open_cache(settings.cache_dir, settings.cache_max_size), device=settings.device)
    return models, ctx, roundtrip(segment_video(FIXTURE, config.segment, ctx.cache))


def _dump(records) -> list[bytes]:
    return [orjson.dumps(r.to_json(), option=orjson.OPT_SERIALIZE_NUMPY) for r in records]


@pytest.mark.slow
def test_folds_resumed_from_a_checkpoint_continue_exactly_as_one_pass(cache_dir):
    """The folds after clips 0-1, saved to bytes and read back in a new ``Folds``, give clips 2-4
    exactly as one pass over all five clips does; the bytes are deterministic and read back to the
    same bytes."""
    from m3cli.stages.core import checkpoint
    from m3cli.stages.pipeline import Folds, process_records

    models, ctx, records = _pipeline()
    assert len(records) == 5
    vid = records[0].video.id
    whole = process_records(records, models, ctx)

    folds = Folds()
    head = process_records(records[:2], models, ctx, folds=folds)
    saved = folds.checkpoint(vid, [0, 1], models)
    assert saved.blob == folds.checkpoint(vid, [0, 1], models).blob  # deterministic
    assert b"pickle" not in saved.blob and saved.blob.startswith(checkpoint.MAGIC)
    doc, arrays = checkpoint.decode(saved.blob)
    assert set(doc["folds"]) == {"voices", "faces", "link", "abstract"}
    assert doc["folds"]["faces"]["bank"]["nodes"] and doc["folds"]["voices"]["voices"]
    loaded = checkpoint.Loaded(doc["folds"], arrays, doc["clips"])
    resumed = Folds.resume(vid, loaded, models, ctx)
    assert resumed.checkpoint(vid, [0, 1], models).blob == saved.blob  # read back: the same bytes
    tail = process_records(records[2:], models, ctx, folds=resumed)
    assert _dump(head + tail) == _dump(whole)
    # the resumed folds carried identities: without them clip 2 numbers its people afresh
    assert any(r.characters for r in tail)
    assert _dump(process_records(records[2:3], models, ctx)) != _dump(whole[2:3])


@pytest.mark.slow
def test_faces_recluster_folds_are_not_checkpointed(cache_dir):
    """With faces.recluster the fold keeps every clip's detections (it grows with the video): no
    checkpoint is made, and the watcher replays instead."""
    from m3cli.stages.core.checkpoint import NotCheckpointable
    from m3cli.stages.pipeline import Folds, process_records

    models, ctx, records = _pipeline(until="faces", faces={"recluster": True})
    folds = Folds()
    process_records(records[:1], models, ctx, folds=folds)
    with pytest.raises(NotCheckpointable, match="recluster"):
        folds.checkpoint(records[0].video.id, [0], models)
