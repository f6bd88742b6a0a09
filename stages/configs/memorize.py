"""`m3 memorize`'s options, declared once: default, flags and help (see stages/core/options.py)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from m3cli.stages.core.errors import InputError
from m3cli.stages.core.options import option


@dataclass(frozen=True)
class MemorizeConfig:
    frames: int = option(8, "--frames", help="Frames sampled per clip and sent to the LLM (0-32).")
    max_side: int = option(512, "--max-side", help="Longest side of frames and crops sent to the LLM (px).")
    jpeg_quality: int = option(
        85, "--jpeg-quality", help="JPEG quality of the frames and crops sent to the LLM."
    )
    semantic: bool = option(True, "--no-semantic", help="Ablation: episodic memory only.", off=True)
    equivalence: bool = option(
        True, "--no-equivalence", help="Ablation: no face-voice equivalence lines.", off=True
    )
    repairs: int = option(
        2, "--repairs", help="Times a reply that is not valid memory is sent back to the LLM to be fixed."
    )
    jobs: int = option(4, "--jobs", "-j", help="Concurrent LLM requests.")
    #: None: send frames and crops unless the server refused images
    images: bool | None = option(
        None,
        "--images/--no-images",
        help="Send frames and face crops (default: unless the server refused images before).",
    )
    #: None: send audio when the model is known or named to listen (omni)
    audio: bool | None = option(
        None,
        "--audio/--no-audio",
        help="Send the clip's audio (default: only to models known or named to listen, e.g. *Omni*).",
    )
    max_audio_s: float = option(60.0, "--max-audio", help="Seconds of a clip's audio sent at most (0-600).")
    #: or "m3-agent": the output format M3-Agent's memorization checkpoint learned
    prompt_style: str = option(
        "m3",
        "--prompt-style",
        help="m3 (lines with kinds and times) or m3-agent (the plain lists of sentences M3-Agent's "
        "memorization checkpoint was trained to write).",
    )

    def __post_init__(self) -> None:
        from m3cli.stages.core import memory_prompts as prompts

        if self.prompt_style not in prompts.PROMPT_STYLES:
            raise InputError(
                f"--prompt-style must be one of {', '.join(prompts.PROMPT_STYLES)}, got {self.prompt_style!r}"
            )
        if not 0 <= self.frames <= 32:
            raise InputError(f"--frames must be between 0 and 32, got {self.frames}")
        if self.max_side < 64:
            raise InputError(f"max frame side must be at least 64 pixels, got {self.max_side}")
        if not 0 < self.max_audio_s <= 600:
            raise InputError(f"max audio per clip must be in (0, 600] seconds, got {self.max_audio_s}")

    def key(self) -> dict[str, Any]:
        """What changes an LLM answer besides its inputs (jobs does not; images/audio show in the inputs)."""
        d = asdict(self)
        for name in ("jobs", "images", "audio", "prompt_style"):
            d.pop(name)
        d["prompt"] = self.prompt_version
        return d

    @property
    def prompt_version(self) -> str:
        from m3cli.stages.core import memory_prompts as prompts

        return prompts.AGENT_PROMPT_VERSION if self.prompt_style == "m3-agent" else prompts.PROMPT_VERSION

    def instructions(self) -> str:
        from m3cli.stages.core import memory_prompts as prompts

        if self.prompt_style == "m3-agent":
            return prompts.agent_memorize_instructions(self.semantic, self.equivalence)
        return prompts.memorize_instructions(self.semantic, self.equivalence)
