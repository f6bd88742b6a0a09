"""`m3 abstract`'s options, declared once: default, flags and help (see stages/core/options.py)."""

from __future__ import annotations

from dataclasses import dataclass

from m3cli.stages.core.errors import InputError
from m3cli.stages.core.options import option


@dataclass(frozen=True)
class AbstractConfig:
    tau_char: int = option(
        50, "--tau-char", help="New evidence lines about a character that trigger its summary."
    )
    tau_rel: int = option(
        30, "--tau-rel", help="New interactions of a pair that trigger a relationship summary."
    )
    similar_threshold: float = option(
        0.8, "--similar", help="Cosine similarity above which two facts are linked."
    )
    similar_k: int = option(2, "--similar-k", help="Earlier facts a fact is linked to as similar, at most.")
    check: bool = option(
        False, "--check", help="Flag contradicting statements about a character (kind conflict)."
    )
    embed: bool = option(True, "--no-embed", help="Skip text embeddings (no 'similar' links).", off=True)
    causal: bool = option(True, "--no-causal", help="Do not ask the LLM for causal links.", off=True)
    max_evidence: int = option(
        60, "--max-evidence", help="Evidence lines sent to the LLM per summary or check, at most."
    )

    def __post_init__(self) -> None:
        if self.tau_char < 1 or self.tau_rel < 1:
            raise InputError(f"--tau-char and --tau-rel must be >= 1, got {self.tau_char}, {self.tau_rel}")
