"""Multiple choice with any number of options: lettered A..Z, AA.. as benchmarks letter them (A-J
alone made the 11th option an IndexError on the LLM path, in --format text, and offline)."""

from __future__ import annotations

from m3cli.stages.ask.choice import index_of, letter, letter_in, with_options
from m3cli.stages.ask.loop import render_text


def test_letters_go_past_j_and_back():
    assert [letter(i) for i in (0, 9, 10, 25, 26, 27, 52)] == ["A", "J", "K", "Z", "AA", "AB", "BA"]
    assert all(index_of(letter(i)) == i for i in range(200))


def test_an_answer_past_j_is_read_back():
    options = [f"option {i}" for i in range(30)]
    asked = with_options("which?", options)
    assert "K. option 10" in asked and "AD. option 29" in asked
    assert letter_in("The answer is L.", 30) == "L"
    assert letter_in("(AB) option 27", 30) == "AB"
    assert letter_in("A. option 0", 30) == "A"
    assert letter_in("The answer is L.", 11) is None  # no 12th option


def test_text_format_lists_every_option():
    record = {"question": "which?", "mode": "llm", "answer": "L", "options": [f"o{i}" for i in range(12)],
              "tokens": {"prompt": 0, "completion": 0}, "rounds": 1, "latency_s": 0.1}  # fmt: skip
    text = render_text(record)
    assert "  K. o10" in text and "  L. o11" in text
