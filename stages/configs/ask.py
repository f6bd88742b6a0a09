"""`m3 ask`'s options, declared once: default, flags and help (see stages/core/options.py).

Why here and not in the ask stage: `m3 ask --help` and `m3 eval qa --help` build their flags from
these declarations and must not import numpy or LanceDB to print them. Not one of ``STAGE_CONFIGS``:
asking is not a pipeline stage, so these options are command-line flags only (no ``--set ask.*`` and
no ``[pipeline.ask]`` table).

``--tools`` and ``--kinds`` take a spec (``paper``, ``-semantic``) that the ask stage reads into
``tools`` and ``kinds``/``raw_ids`` (``parse_tools``, ``parse_kinds``), so their flags are declared
beside the fields as help texts rather than as the fields' own flags.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from m3cli.stages.ask import prompts as P
from m3cli.stages.core.errors import InputError
from m3cli.stages.core.options import option

TOOLS_HELP = (
    "Tools the model may call, comma-separated: search, search_clip, character, expand, window, count, "
    "rewatch, listen; or all, paper (search,search_clip), default (all but listen)."
)
KINDS_HELP = "Node kinds to use, e.g. episodic,semantic or -semantic or -equivalences (ablations)."


@dataclass(frozen=True)
class AskConfig:
    rounds: int = option(5, "--rounds", "-H", help="Rounds H of search/answer (the last must answer).")
    k: int = option(5, "--k", help="Memory lines per [Search] (search_node top-k).")
    threshold: float = option(
        0.5, "--threshold", help="Cosine threshold for search_node (term matches pass too)."
    )
    clip_k: int = option(2, "--clip-k", help="Clips per [SearchClip] (the paper's k = 2).")
    clip_threshold: float = option(
        0.5, "--clip-threshold", help="Cosine threshold for search_clip (paper: 0.5)."
    )
    tools: tuple[str, ...] = P.DEFAULT_TOOLS  # from --tools (TOOLS_HELP)
    kinds: frozenset[str] | None = None  # from --kinds (KINDS_HELP); None: every kind
    raw_ids: bool = False  # from --kinds
    max_tokens: int | None = None  # None: the client's budget for the "ask" task
    #: or "m3-agent": the control prompts M3-Agent's checkpoint was trained with
    prompt_style: str = option(
        "m3",
        "--prompt-style",
        help="m3 (m3's tools and wording) or m3-agent (the [Search]/[Answer] prompts M3-Agent's control "
        "checkpoint was trained with).",
    )

    #: what "today", "yesterday" and "last week" count from (ISO 8601); None: the newest recording's end
    now: str | None = option(
        None,
        "--now",
        help="What 'today', 'yesterday' and 'last week' count from (ISO 8601; default: the end of the "
        "newest recording in the memory).",
    )

    def __post_init__(self) -> None:
        from m3cli.stages.ask.tools import parse_tools

        if self.prompt_style not in P.PROMPT_STYLES:
            raise InputError(
                f"--prompt-style must be one of {', '.join(P.PROMPT_STYLES)}, got {self.prompt_style!r}"
            )
        if self.prompt_style == "m3-agent" and not set(self.tools) <= set(P.AGENT_TOOLS):
            raise InputError(
                "--prompt-style m3-agent knows only [Search] and [Answer]: leave --tools out or use "
                f"--tools search (got {', '.join(self.tools)})"
            )
        if self.now is not None:
            from m3cli.stages.core.recorded import given

            given(self.now, "--now")
        if not 1 <= self.rounds <= 20:
            raise InputError(f"--rounds must be between 1 and 20, got {self.rounds}")
        if not 1 <= self.k <= 100 or not 1 <= self.clip_k <= 20:
            raise InputError(f"--k must be 1-100 and --clip-k 1-20, got {self.k} and {self.clip_k}")
        for name, t in (("--threshold", self.threshold), ("--clip-threshold", self.clip_threshold)):
            if not -1.0 <= t <= 1.0:
                raise InputError(f"{name} is a cosine similarity in [-1, 1], got {t}")
        parse_tools(list(self.tools))

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["tools"] = list(self.tools)
        data["kinds"] = sorted(self.kinds) if self.kinds is not None else None
        return data
