"""Every stage's options, declared once (default, command-line flags, help) as a frozen dataclass.

Why apart from the stages: a command builds its flags from these declarations when its module is
imported, and `m3 faces --help` must not import numpy or a model library to print them; a stage module
imports its config from here. The same declarations are what `--set STAGE.OPTION=VALUE` and the
``[pipeline.STAGE]`` tables of m3.toml are checked against (stages/core/options.py), so a default or
a help text is written in one place.

`m3 ask` (ask.py) and `m3 watch` (watch.py) declare their options the same way but are not pipeline
stages, so they are not in ``STAGE_CONFIGS`` and take their options as flags only.

This package imports nothing: each command imports its own module, and the table of the pipeline's
stages is in stage_table.py, so `m3 ask --help` does not load nine other stages' declarations.
"""
