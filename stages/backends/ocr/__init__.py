"""Reading text on screen: :mod:`~.rapid` (PP-OCR through RapidOCR, the default), :mod:`~.decode`
(its recognition output turned into lines) and :mod:`~.lines` (a box of several lines read as its
lines).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TextBox:
    """One recognised line: its text, recognition confidence and box (x0, y0, x1, y1) in source pixels."""

    text: str
    score: float
    box: tuple[float, float, float, float]
