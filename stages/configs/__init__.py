"""Every stage's options, declared once (default, command-line flags, help) as a frozen dataclass.

Why apart from the stages: a command builds its flags from these declarations when its module is
imported, and `m3 faces --help` must not import numpy or a model library to print them; a stage module
imports its config from here. The same declarations are what `--set STAGE.OPTION=VALUE` and the
``[pipeline.STAGE]`` tables of m3.toml are checked against (stages/core/options.py), so a default or
a help text is written in one place.

`m3 ask` (ask.py) and `m3 watch` (watch.py) declare their options the same way but are not pipeline
stages, so they are not in ``STAGE_CONFIGS`` and take their options as flags only; they are imported
from their modules, not from here, so that a stage command's `--help` does not load them.
"""

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
