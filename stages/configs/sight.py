"""`m3 sight`'s options, declared once: default, flags and help (see stages/core/options.py)."""

from __future__ import annotations

from dataclasses import dataclass

from m3cli.stages.core.errors import InputError
from m3cli.stages.core.options import option

#: chosen by `m3 eval sight` on half A of the labelled tag set (highest Wilson lower bound on precision:
#: 9 of 9 right), scored on half B: 12 of 12 right; half B's own choice, 0.30, is 11 of 12 right on A
DEFAULT_TAG_THRESHOLD = 0.35


@dataclass(frozen=True)
class SightConfig:
    """Everything that changes the sight section."""

    #: samples per second compared for keyframes
    fps: float = option(2.0, "--fps", help="Frames compared per second when choosing keyframes.")
    every: float = option(10.0, "--every", help="At least one keyframe per this many seconds.")
    change: float = option(
        0.3, "--change", help="Difference (0..1) between neighbouring samples that starts a new segment."
    )
    drift: float = option(
        0.5, "--drift", help="Difference (0..1) from a segment's first sample that starts a new one."
    )
    frame_side: int = option(
        960, "--frame-side", help="Longer side (px) of the decoded frames and of the stored keyframes."
    )
    det_side: int = option(960, "--detect-side", help="Longer side (px) the text detector sees.")
    #: a first, cheaper detection at this side; 0: none (see ocr_rapid)
    gate_side: int = option(
        480, "--gate-side", help="Side (px) of the first, cheap text detection on every keyframe; 0: none."
    )
    text: bool = option(True, "--text/--no-text", help="Read on-screen text.")
    min_text_score: float = option(
        0.8, "--min-text-score", help="Drop text lines recognised with less confidence than this."
    )
    min_chars: int = option(3, "--min-chars", help="Drop text lines with fewer visible characters than this.")
    tags: bool = option(True, "--tags/--no-tags", help="Tag objects and scenes (ImageNet classes).")
    tag_threshold: float = option(
        DEFAULT_TAG_THRESHOLD,
        "--tag-threshold",
        help="Keep tags at least this probable [measured by `m3 eval sight`].",
        show_default=False,
    )
    max_tags: int = option(3, "--max-tags", help="Tags kept per keyframe.")

    def __post_init__(self) -> None:
        checks = [
            (self.fps > 0, f"sight.fps must be positive, got {self.fps}"),
            (self.every > 0, f"sight.every must be positive, got {self.every}"),
            (0 < self.change <= 1, f"sight.change must be within (0, 1], got {self.change}"),
            (0 < self.drift <= 1, f"sight.drift must be within (0, 1], got {self.drift}"),
            (self.frame_side >= 64, f"sight.frame_side must be >= 64, got {self.frame_side}"),
            (self.det_side >= 64, f"sight.det_side must be >= 64, got {self.det_side}"),
            (
                0 <= self.min_text_score <= 1,
                f"sight.min_text_score must be within 0..1, got {self.min_text_score}",
            ),
            (
                0 <= self.tag_threshold <= 1,
                f"sight.tag_threshold must be within 0..1, got {self.tag_threshold}",
            ),
            (self.max_tags >= 1, f"sight.max_tags must be >= 1, got {self.max_tags}"),
        ]
        for ok, message in checks:
            if not ok:
                raise InputError(message)
