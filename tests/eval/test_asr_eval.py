"""`m3 eval asr --ref`: a plain transcript, or an STM file read as its words in time order."""

from __future__ import annotations

from pathlib import Path

from m3cli.stages.eval.speech import reference_text


def test_an_stm_reference_is_its_words_in_time_order():
    stm = (
        ";; comment line\n"
        "sample 1 Sheila 7.634 8.155 Hello?\n"
        "sample 1 Diane 6.68 7.16 Hello?\n"
        "sample 1 Diane 8.436 8.876 Oh, hello.\n"
    )
    assert reference_text(Path("talk.stm"), stm) == "Hello? Hello? Oh, hello."
    assert reference_text(Path("talk.txt"), stm) == stm  # plain text is taken as it is
