"""A detector box of several lines read as its lines (stages/backends/ocr/lines.py), on a real title
card: Big Buck Bunny's "Big Buck" over "BUNNY", which the detector returns as one box."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from conftest import DATA, SHARED_MEDIA
from m3cli.stages.backends.ocr import TextBox
from m3cli.stages.backends.ocr import lines as ocr_lines
from m3cli.stages.backends.ocr.lines import cut_row, holds_another, is_upright, looks_multiline

TITLE = DATA / "sight" / "lines" / "bbb_frame_27.5s.jpg"
PAGE = DATA / "sight" / "ocr" / "skimage_page.png"
#: the box PP-OCR's detector gives the title card, and what the recogniser reads in it
TITLE_BOX = (299.0, 85.0, 1002.0, 467.0)


def _frame(path) -> np.ndarray:
    return np.asarray(Image.open(path).convert("RGB"))


def test_a_box_tall_for_its_reading_is_a_candidate_and_a_line_is_not():
    assert looks_multiline("BUNKY", TITLE_BOX)  # 5 characters over 703 px, 382 px tall
    assert not looks_multiline("THE PEACH OPEN MOVIE PROJECT", (305.0, 307.0, 955.0, 353.0))
    assert not looks_multiline("PRESENTS", (528.0, 368.0, 732.0, 409.0))
    assert not looks_multiline("", (0.0, 0.0, 10.0, 12.0))  # too small to hold two lines


def test_the_cut_falls_between_the_lines_whatever_their_polarity():
    x0, y0, x1, y1 = (int(v) for v in TITLE_BOX)
    crop = np.ascontiguousarray(_frame(TITLE)[y0:y1, x0:x1, ::-1])
    row = cut_row(crop)
    # cut at any of rows 189-234 of the crop (tried every 15 rows from 114 to 264), the recogniser
    # reads both lines whole; at 174 it reads "BiaBuck", at 249 "ADONNY"
    assert row is not None and 189 <= row <= 234, row
    assert cut_row(255 - crop) == row  # dark letters on a light ground: the same gap
    assert cut_row(np.full((80, 300, 3), 90, np.uint8)) is None  # a flat box has no gap


def test_a_slanted_box_or_one_holding_a_found_line_is_not_cut():
    assert is_upright(np.array([[0, 0], [100, 2], [100, 40], [0, 38]], float))
    assert not is_upright(np.array([[0, 0], [100, 20], [100, 60], [0, 40]], float))
    curved = (165.0, 190.0, 291.0, 237.0)  # a plaque's bowed "Voted by the People" under "1887-90"
    assert holds_another(curved, [curved, (197.0, 186.0, 262.0, 209.0)])
    assert not holds_another(curved, [curved, (178.0, 170.0, 279.0, 192.0)])  # 2 px of a line above


@pytest.fixture(scope="module")
def reader():
    from m3cli.stages.backends.ocr.rapid import RapidOcr

    return RapidOcr()


@pytest.mark.slow
def test_the_text_reader_keeps_no_memory_arena(reader):
    # each text line's width grew onnxruntime's arena for good (docs/scale-length.md)
    options = reader._engine.text_rec.session.session.get_session_options()
    assert options.enable_cpu_mem_arena is False


def _keep(text: str, score: float) -> bool:
    from m3cli.stages.sight import SightConfig, keep_line

    return keep_line(text, score, SightConfig())


@pytest.mark.slow
def test_the_title_card_reads_as_its_two_lines(reader):
    frame = _frame(TITLE)
    for keep in (None, _keep):  # the full read, and the gated read sight uses
        found = reader.read(frame, keep=keep)
        assert [b.text for b in found] == ["Big Buck", "BUNNY"], found
        top, bottom = (b.box for b in found)
        assert top[1] == TITLE_BOX[1] and bottom[3] == TITLE_BOX[3] and top[3] == bottom[1]
        assert all(b.score >= ocr_lines.BAND_CONFIDENCE for b in found)
    assert reader.version.endswith(ocr_lines.VERSION)  # cached readings of old are read again


@pytest.mark.slow
def test_a_page_of_separate_lines_reads_the_same_with_or_without_cutting(reader, monkeypatch):
    frame = _frame(PAGE)
    cut = [(b.text, b.box) for b in reader.read(frame)]
    monkeypatch.setattr(ocr_lines, "MULTILINE_PITCH", float("inf"))
    assert [(b.text, b.box) for b in reader.read(frame)] == cut
    assert len(cut) >= 7


@pytest.mark.slow
@pytest.mark.skipif(
    not (SHARED_MEDIA / "sight" / "ocr" / "mmocr_demo_text_det.jpg").is_file(),
    reason="the shared media folder (local-only plaque photo) is not here",
)
def test_a_curved_line_over_another_is_left_to_the_detector(reader):
    found = [b.text for b in reader.read(_frame(SHARED_MEDIA / "sight" / "ocr" / "mmocr_demo_text_det.jpg"))]
    assert found.count("1887-90") == 1 and "Voted by the People" in found, found


def test_text_box_is_the_capabilitys_record():
    line = TextBox("BUNNY", 0.99, (0.0, 0.0, 1.0, 1.0))
    assert ocr_lines.split_lines(np.zeros((4, 4, 3), np.uint8), line, lambda crops: ([], [])) == [line]
