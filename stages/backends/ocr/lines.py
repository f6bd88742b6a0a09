"""A detector box that holds several lines of text, read as its lines.

Why: PP-OCR's detector (DBNet) merges lines set close together into one box, and its recogniser reads
one line: a box of two lines comes back as one of them, or a blend of both. A stylised title card is the
common case in video (Big Buck Bunny's "Big Buck" over "BUNNY", the capitals of the second line touching
the descenders of the first, was read "BUNKY"), and so are stacked captions and two-line signs.

A box is a candidate when it is tall for what was read in it: a line's height is about 1.4 times the
width of one of its characters (up to 2 with narrow letters and spaces), two lines' about 3 times, so a
box more than :data:`MULTILINE_PITCH` times as tall as its width per recognised character is looked at
again. It is cut at the row with the least ink in its middle half, where ink is whichever of the box's
light or dark pixels (split by Otsu's threshold) its top and bottom rows lack. The cut is kept only when
every band reads a line, each with at least the whole box's confidence and at least
:data:`BAND_CONFIDENCE`; otherwise the box stays as it was read. Bands are looked at again in turn, so a
block of three or four lines splits as far as its readings support.

Only boxes that are upright within :data:`MAX_SKEW` and hold no other box of the frame are looked at:
a band is cut from the box's upright rectangle, and the rectangle of a slanted or curved line (a plaque's
"Voted by the People" bowed under "1887-90") holds parts of the lines beside it, which the detector had
already found apart; a line it found apart is not a line this box merged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from m3cli.stages.backends.ocr import TextBox

#: part of the text reader's version, so sight sections cached before boxes were cut are read again
VERSION = "lines1"
#: a box this many times as tall as its width per recognised character may hold several lines
MULTILINE_PITCH = 2.4
#: the least confidence each band's reading needs for the cut to be kept
BAND_CONFIDENCE = 0.9
#: the least ink at the cut row, as a share of the fuller band's most inked row, that still counts as
#: a gap between lines (above it, the box has no gap to cut at)
GAP_SHARE = 0.8
#: slant (rise over run of the box's top edge) beyond which a box is not cut
MAX_SKEW = 0.05
#: the smallest band height, in pixels, worth reading
MIN_BAND = 8
#: how many times a band may be cut again (up to 2**depth lines)
MAX_DEPTH = 2
#: the share of another box's area inside a box's rectangle beyond which the box is not cut
MAX_HELD = 0.2

#: reads upright BGR crops: their texts and confidences, in order
Recognise = Callable[[list[np.ndarray]], tuple[Sequence[str], Sequence[float]]]


def looks_multiline(text: str, box: tuple[float, float, float, float]) -> bool:
    """Whether a box is tall for the characters read in it (the module docstring says why)."""
    x0, y0, x1, y1 = box
    height, width = y1 - y0, x1 - x0
    if height < 2 * MIN_BAND or width <= 0:
        return False
    pitch = width / max(1, len(text.strip()))
    return height > MULTILINE_PITCH * pitch


def is_upright(quad: np.ndarray) -> bool:
    """Whether a detector quadrilateral (four corners, clockwise from top-left) is level enough to be
    cut along a pixel row."""
    (xa, ya), (xb, yb) = quad[0], quad[1]
    run = abs(float(xb) - float(xa))
    return run > 0 and abs(float(yb) - float(ya)) / run <= MAX_SKEW


def _area(box: tuple[float, float, float, float]) -> float:
    return max(0.0, box[2] - box[0]) * max(0.0, box[3] - box[1])


def holds_another(
    box: tuple[float, float, float, float], others: Sequence[tuple[float, float, float, float]]
) -> bool:
    """Whether more than :data:`MAX_HELD` of some other box lies inside ``box``'s rectangle."""
    for other in others:
        if other == box or _area(other) <= 0:
            continue
        inside = (max(box[0], other[0]), max(box[1], other[1]), min(box[2], other[2]), min(box[3], other[3]))
        if _area(inside) > MAX_HELD * _area(other):
            return True
    return False


def read_as_lines(
    frame: np.ndarray, found: Sequence[tuple[TextBox, bool]], recognise: Recognise
) -> list[list[TextBox]]:
    """Each of a frame's detector readings (with whether its box is upright) as the lines it holds:
    ``[line]`` unless it is a candidate whose cut reads better (the module docstring gives the rules)."""
    boxes = [line.box for line, _ in found]
    return [
        split_lines(frame, line, recognise) if upright and not holds_another(line.box, boxes) else [line]
        for line, upright in found
    ]


def cut_row(crop: np.ndarray) -> int | None:
    """The row of a BGR (or grey) crop between two lines of text: the least-inked row of its middle
    half, when that row is a gap (less than :data:`GAP_SHARE` of the fuller side's ink); None when
    the crop shows no such gap."""
    import cv2

    grey = crop if crop.ndim == 2 else cv2.cvtColor(crop, cv2.COLOR_BGR2GRAY)
    height = grey.shape[0]
    if height < 2 * MIN_BAND:
        return None
    _, light = cv2.threshold(np.ascontiguousarray(grey), 0, 1, cv2.THRESH_BINARY + cv2.THRESH_OTSU)
    edge = max(1, height // 12)
    border = np.concatenate([light[:edge], light[-edge:]])
    ink = light if border.mean() < 0.5 else 1 - light  # the kind of pixel the box's margins lack
    profile = ink.mean(axis=1).astype(np.float64)
    window = max(1, height // 40)
    if window > 1:
        profile = np.convolve(profile, np.ones(window) / window, mode="same")
    low, high = max(MIN_BAND, height // 4), min(height - MIN_BAND, height - height // 4)
    if high <= low:
        return None
    row = low + int(np.argmin(profile[low:high]))
    fuller = min(profile[:row].max(), profile[row:].max())
    if fuller <= 0 or profile[row] > GAP_SHARE * fuller:
        return None
    return row


def split_lines(
    frame: np.ndarray, line: TextBox, recognise: Recognise, depth: int = MAX_DEPTH
) -> list[TextBox]:
    """``line`` as the lines its box holds, top to bottom: cut and read again while each cut's bands
    read better than the box did (the module docstring gives the rule); ``[line]`` when not."""
    if depth <= 0 or not looks_multiline(line.text, line.box):
        return [line]
    h, w = frame.shape[:2]
    x0, y0 = max(0, int(line.box[0])), max(0, int(line.box[1]))
    x1, y1 = min(w, int(round(line.box[2])) + 1), min(h, int(round(line.box[3])) + 1)
    crop = frame[y0:y1, x0:x1]
    if crop.size == 0:
        return [line]
    row = cut_row(crop)
    if row is None:
        return [line]
    bands = [np.ascontiguousarray(crop[:row]), np.ascontiguousarray(crop[row:])]
    texts, scores = recognise(bands)
    readings = [(str(t).strip(), float(s)) for t, s in zip(texts, scores, strict=True)]
    floor = max(BAND_CONFIDENCE, line.score)
    if not all(t and s >= floor for t, s in readings):
        return [line]
    left, upper, right, lower = line.box
    top = TextBox(readings[0][0], readings[0][1], (left, upper, right, float(y0 + row)))
    bottom = TextBox(readings[1][0], readings[1][1], (left, float(y0 + row), right, lower))
    return [*split_lines(frame, top, recognise, depth - 1), *split_lines(frame, bottom, recognise, depth - 1)]
