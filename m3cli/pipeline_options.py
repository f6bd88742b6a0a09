"""Options `m3 run` and `m3 batch` share: how flags, --set and [pipeline.STAGE] tables become one
PipelineConfig (m3cli.stages.pipeline)."""

from __future__ import annotations

from typing import Any

import typer

SET_HELP = "A stage option, STAGE.OPTION=VALUE (repeatable), e.g. faces.fps=2; see --options."


def pipeline_from_flags(
    settings: Any,
    sets: list[str] | None,
    until: str,
    offline: bool,
    shortcuts: dict[str, Any],
    parallel: bool = True,
) -> Any:
    """The PipelineConfig of `m3 run` / `m3 batch`: [pipeline] config tables < --set < named flags."""
    from m3cli.stages.core.options import assignments, merge_trees
    from m3cli.stages.pipeline import pipeline_config

    named: dict[str, dict[str, Any]] = {}
    for dotted, value in shortcuts.items():
        if value is not None:
            stage, option = dotted.split(".", 1)
            named.setdefault(stage, {})[option] = value
    options = merge_trees(settings.pipeline, assignments(sets or []), named)
    return pipeline_config(options, until=until, offline=offline, parallel=parallel)


def print_options() -> None:
    # the declarations alone: no stage module loads
    from m3cli.stages.configs.stage_table import STAGE_CONFIGS
    from m3cli.stages.core.options import option_paths

    for stage, config in STAGE_CONFIGS.items():
        typer.echo(f"{stage}: {', '.join(option_paths(config))}")
