"""`m3 watch`'s options, declared once: default, flags and help (see stages/core/options.py).

Why here and not in stages/live/stage.py: `m3 watch --help` builds its flags from these declarations and
must not import the media stack to print them. Not one of ``STAGE_CONFIGS``: watching drives the
pipeline rather than being a stage of it, so these options are command-line flags only (the pipeline
stages it runs still take ``--set`` and ``[pipeline.STAGE]``).
"""

from __future__ import annotations

from dataclasses import dataclass

from m3cli.stages.core.options import option


@dataclass(frozen=True)
class WatchConfig:
    #: a growing file has ended once it has not grown for this long
    idle: float = option(
        10.0,
        "--idle",
        help="A growing file or drop-folder file is complete after this many seconds without growth.",
    )
    #: read a file to its current end, do not wait for more
    until_eof: bool = option(
        False, "--until-eof", help="Read a file (or folder) as it is now; do not wait for more."
    )
    settle: float = 0.5  # seconds past a clip's end that must arrive before it is cut
    #: bound on how far (media seconds) the oldest waiting clip may trail
    max_lag: float = option(
        300.0, "--max-lag", help="Skip the oldest waiting clips when they trail the live edge by more (s)."
    )
    max_batch: int = 4  # complete clips taken in one round
    #: a stream that never yields a packet in this long is an error
    connect_timeout: float = option(
        15.0, "--connect-timeout", help="A stream that yields nothing for this long is an error (s)."
    )
    #: a dropped stream not back in this long ends the watch
    give_up: float = option(
        60.0, "--give-up", help="A dropped stream not back after this long ends the watch (s)."
    )
    poll: float = 0.2
