"""The pipeline's stages and their configs, in pipeline order: `m3 run --options`, ``--set
STAGE.OPTION=VALUE`` and m3.toml's ``[pipeline.STAGE]`` tables are checked against this table."""

from __future__ import annotations

from m3cli.stages.configs.abstract import AbstractConfig
from m3cli.stages.configs.diarize import ClusterConfig, DiarizeConfig
from m3cli.stages.configs.faces import FacesConfig
from m3cli.stages.configs.index import IndexConfig
from m3cli.stages.configs.link import LinkConfig
from m3cli.stages.configs.memorize import MemorizeConfig
from m3cli.stages.configs.segment import SegmentConfig
from m3cli.stages.configs.sight import SightConfig
from m3cli.stages.configs.voices import VoicesConfig

#: Each stage's config, in pipeline order (`m3 run --options`, `--set`, ``[pipeline.STAGE]``).
STAGE_CONFIGS: dict[str, type] = {
    "segment": SegmentConfig,
    "diarize": DiarizeConfig,
    "voices": VoicesConfig,
    "faces": FacesConfig,
    "sight": SightConfig,
    "memorize": MemorizeConfig,
    "link": LinkConfig,
    "abstract": AbstractConfig,
    "index": IndexConfig,
}

__all__ = [
    "STAGE_CONFIGS",
    "AbstractConfig",
    "ClusterConfig",
    "DiarizeConfig",
    "FacesConfig",
    "IndexConfig",
    "LinkConfig",
    "MemorizeConfig",
    "SegmentConfig",
    "SightConfig",
    "VoicesConfig",
]
