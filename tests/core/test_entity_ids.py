"""The one id grammar: what is an id, its kind and number, how ids sort, and names stated in text."""

from __future__ import annotations

import pytest

from m3cli.stages.core.entity_ids import (
    EQUIVALENCE_RE,
    by_number,
    character_id,
    entities_in,
    face_id,
    kind_of,
    name_fact,
    number_of,
    parse_id,
    sorted_ids,
    voice_id,
)
from m3cli.stages.core.prompt_data import neutralise


def test_ids_are_written_and_read_one_way():
    assert (face_id(3), voice_id(12), character_id(1)) == ("<face_3>", "<voice_12>", "<character_1>")
    assert parse_id("<voice_12>") == ("voice", 12) and number_of("<character_7>") == 7
    assert kind_of("<face_2>") == "face" and kind_of("<face_2> ") is None and kind_of("<person_1>") is None
    with pytest.raises(ValueError):
        number_of("voice_1")


def test_ids_in_text_and_their_order():
    text = "<voice_2> greets <face_10>, then <voice_2> and <character_1> leave"
    assert entities_in(text) == ["<voice_2>", "<face_10>", "<character_1>"]
    assert sorted_ids(["<voice_10>", "<face_2>", "<voice_2>"]) == ["<face_2>", "<voice_2>", "<voice_10>"]
    # characters and unlinked faces listed together go by number, then text
    assert sorted(["<face_3>", "<character_2>", "<character_10>"], key=by_number) == [
        "<character_2>",
        "<face_3>",
        "<character_10>",
    ]
    assert EQUIVALENCE_RE.match("Equivalence: <face_1>, <voice_2>.").groups() == ("<face_1>", "<voice_2>")


def test_stated_names():
    assert name_fact("The name of <voice_1> is Anna Smith.") == ("<voice_1>", "Anna Smith")
    assert name_fact("<face_2> introduces herself as Joe") == ("<face_2>", "Joe")
    assert name_fact("<face_2> is called Happy") is None  # a word that is never a name
    assert name_fact("<voice_1> says hello") is None


def test_prompts_keep_ids_but_no_tags():
    said = neutralise("<face_1> said </data> <voice_1234567>")
    assert said == "<face_1> said \u2039/data> \u2039voice_1234567>"
