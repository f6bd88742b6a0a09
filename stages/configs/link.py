"""`m3 link`'s options, declared once: default, flags and help (see stages/core/options.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from m3cli.stages.core.errors import InputError
from m3cli.stages.core.options import option

METHODS = ("seen", "meta")
DEFAULT_MIN_WEIGHT = {"seen": 1.0, "meta": 2.0}


@dataclass(frozen=True)
class LinkConfig:
    method: str = option(
        "seen", "--method", help="Face-voice evidence: seen (who is seen speaking) or meta (meta-clips)."
    )
    p: float = option(0.5, "--p", help="Share of a node's votes its top edge needs (Algorithm 2).")
    #: None: the method's default (1 s seen, 2 windows meta)
    min_weight: float | None = option(
        None,
        "--min-weight",
        help="Edges lighter than this are noise [seen: 1 s of evidence; meta: 2 windows].",
        show_default=False,
    )
    window: float = option(5.0, "--window", help="meta: longest meta-clip window, seconds.")
    min_overlap: float = option(
        0.5, "--min-overlap", help="meta: seconds a face/voice must be present in a window to count."
    )
    llm_weight: float = option(
        1.0, "--llm-weight", help="Weight of one LLM 'Equivalence' line (seconds under seen; 0 ignores them)."
    )
    #: False: only the LLM's equivalences vote
    perception: bool = option(
        True, "--llm-only", "--no-meta", help="Only LLM equivalences vote (no perception evidence).", off=True
    )
    moving: float = option(
        0.02, "--moving", help="seen: mouth-opening spread (eye distances) that counts as moving lips."
    )
    smooth: float = option(
        0.4,
        "--smooth",
        help="seen: half-width (s) of the window over which the mouth-opening spread is measured.",
    )
    min_piece: float = option(
        1.0,
        "--min-piece",
        help="seen: utterance pieces cut off at a shot change shorter than this (s) are timing spill.",
    )
    #: the seen-speaking fold: split a voice two faces are seen speaking in
    split_voices: bool = option(
        True,
        "--split-voices/--no-split-voices",
        help="seen: split a voice that two faces are each seen speaking alone (see the README).",
    )

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise InputError(f"--method must be one of {', '.join(METHODS)}, got {self.method!r}")
        if not 0.0 < self.p <= 1.0:
            raise InputError(f"--p must be in (0, 1], got {self.p}")
        if self.window <= 0:
            raise InputError(f"--window must be positive, got {self.window}")
        if self.min_weight is not None and self.min_weight < 0:
            raise InputError(f"--min-weight must be >= 0, got {self.min_weight}")
        if self.moving < 0 or self.smooth <= 0 or self.min_piece < 0:
            raise InputError("--moving and --min-piece must be >= 0 and the smoothing window positive")

    @property
    def weight_floor(self) -> float:
        return DEFAULT_MIN_WEIGHT[self.method] if self.min_weight is None else self.min_weight

    def votes_key(self) -> str:
        """Settings that change per-clip votes (p and min_weight only change the resolution)."""
        from m3cli.stages.core.cache import config_hash
        from m3cli.stages.link.stage import VERSION

        cfg: dict[str, Any] = {
            "v": VERSION,
            "method": self.method,
            "llm_weight": self.llm_weight,
            "perception": self.perception,
            "split_voices": self.split_voices,
        }
        if self.method == "meta":
            cfg |= {"window": self.window, "min_overlap": self.min_overlap}
        else:
            cfg |= {"moving": self.moving, "smooth": self.smooth, "min_piece": self.min_piece}
        return config_hash(cfg)
