"""Options `m3 run` and `m3 batch` share: how flags, --set and [pipeline.STAGE] tables become one
PipelineConfig (m3cli.stages.pipeline)."""

from __future__ import annotations

from typing import Any

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


def option_rows(config: type, prefix: str = "") -> list[tuple[str, str, str]]:
    """``(path, default, meaning)`` of every option of a stage config, nested configs flattened; the
    meaning is the option's declared help, else the comment-free field name."""
    import dataclasses
    import typing

    hints = typing.get_type_hints(config)
    rows: list[tuple[str, str, str]] = []
    for f in dataclasses.fields(config):
        if dataclasses.is_dataclass(hints[f.name]):
            rows += option_rows(hints[f.name], f"{prefix}{f.name}.")
            continue
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = None
        shown = "none" if default is None else repr(default) if isinstance(default, str) else str(default)
        shown = shown.lower() if isinstance(default, bool) else shown
        rows.append((prefix + f.name, shown, " ".join(str(f.metadata.get("help", "")).split())))
    return rows


def print_options() -> None:
    """Every STAGE.OPTION that --set accepts, with its default and what it means (from the one
    declaration of each option in stages/configs)."""
    # the declarations alone: no stage module loads
    from m3cli.stages.configs.stage_table import STAGE_CONFIGS
    from m3cli.terminal import echo

    for stage, config in STAGE_CONFIGS.items():
        echo(f"{stage}:")
        for path, default, meaning in option_rows(config):
            echo(f"  {stage}.{path} = {default}" + (f"  # {meaning}" if meaning else ""))
