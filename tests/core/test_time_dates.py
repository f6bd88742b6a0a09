"""Dates in questions (stages/ask/dates.py) and recording times (stages/core/recorded.py): parsing only,
no media; the tests on real media are in tests/core/test_time.py."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import pytest

from m3cli.stages.ask.dates import Timeline, Window, coverage, find_window
from m3cli.stages.core import recorded
from m3cli.stages.core.errors import InputError

NOW = datetime(2026, 11, 14, 8, 0, 35, tzinfo=timezone.utc)  # a Saturday


def window(question: str, now: datetime = NOW) -> Window:
    found = find_window(question, now)
    assert found is not None, question
    return found[0]


@pytest.mark.parametrize(
    ("question", "lo", "hi"),
    [
        ("What did people say on November 12?", "2026-11-12T00:00", "2026-11-13T00:00"),
        ("what was said on nov 12th", "2026-11-12T00:00", "2026-11-13T00:00"),
        ("What was said on 12 November 2025?", "2025-11-12T00:00", "2025-11-13T00:00"),
        ("What was said on 2026-11-13?", "2026-11-13T00:00", "2026-11-14T00:00"),
        ("Who was there yesterday?", "2026-11-13T00:00", "2026-11-14T00:00"),
        ("Who spoke this morning?", "2026-11-14T05:00", "2026-11-14T12:00"),
        ("What was said yesterday afternoon?", "2026-11-13T12:00", "2026-11-13T18:00"),
        ("What was said last week?", "2026-11-02T00:00", "2026-11-09T00:00"),
        ("What was said this week?", "2026-11-09T00:00", "2026-11-16T00:00"),
        ("What was said on Thursday?", "2026-11-12T00:00", "2026-11-13T00:00"),
        ("What was said in the last 3 days?", "2026-11-12T00:00", "2026-11-15T00:00"),
        # a date without a year is the one nearest "now"
        ("What was said on December 24?", "2026-12-24T00:00", "2026-12-25T00:00"),
        ("What was said on June 1?", "2026-06-01T00:00", "2026-06-02T00:00"),
    ],
)
def test_windows(question: str, lo: str, hi: str) -> None:
    w = window(question)
    assert (w.lo, w.hi) == (datetime.fromisoformat(lo), datetime.fromisoformat(hi))


def test_before_and_after_are_open_windows_and_the_phrase_leaves_the_question() -> None:
    found = find_window("What did Alice say before November 13?", NOW)
    assert found is not None
    w, rest = found
    assert (w.lo, w.hi) == (None, datetime(2026, 11, 13)) and w.label == "before November 13, 2026"
    assert rest == "What did Alice say ?"
    w = window("What was said after 2026-11-12?")
    assert (w.lo, w.hi) == (datetime(2026, 11, 13), None)
    w = window("Who has spoken since yesterday?")  # since and until include the day named
    assert (w.lo, w.hi) == (datetime(2026, 11, 13), None)
    w = window("What was said until November 13?")
    assert (w.lo, w.hi) == (None, datetime(2026, 11, 14))


def test_no_date_no_window() -> None:
    for q in ("Who speaks first?", "What does the second speaker say at 12 s?", "How many people?"):
        assert find_window(q, NOW) is None, q
    assert find_window("What was said on February 30?", NOW) is None  # no such day


def test_coverage_text() -> None:
    assert coverage([date(2026, 11, d) for d in (12, 13, 14)]) == "Nov 12\u201314, 2026"
    assert coverage([date(2026, 11, 10), date(2026, 11, 14)]) == "Nov 10 and 14, 2026"
    assert coverage([]) == "no dated recordings"


def test_days_are_the_recordings_own() -> None:
    """A recording at 23:30+01:00 is that evening's, though it is 22:30 UTC."""
    start = datetime(2026, 11, 12, 23, 30, tzinfo=timezone(timedelta(hours=1)))
    tl = Timeline({"v": start}, {"v": 3600.0})
    assert tl.days() == [date(2026, 11, 12), date(2026, 11, 13)]
    assert tl.wall("v", 60.0) == datetime(2026, 11, 12, 23, 31)
    assert tl.covering(window("on November 12")) == ["v"]
    assert tl.covering(window("on November 11")) == []


@pytest.mark.parametrize(
    ("text", "stored"),
    [
        ("2026-11-12T09:30:00.000000Z", "2026-11-12T09:30:00+00:00"),
        ("2026-11-13T10:15:00+0100", "2026-11-13T10:15:00+01:00"),
        ("2026-11-13 10:15:00", "2026-11-13T10:15:00+00:00"),  # no offset: UTC, as creation_time is
        ("2026-11-13T10:15:00.250-05:00", "2026-11-13T10:15:00.250-05:00"),
    ],
)
def test_recorded_parsing(text: str, stored: str) -> None:
    assert recorded.given(text) == stored


def test_placeholder_dates_are_no_dates() -> None:
    """Muxers write the MP4 epoch or zero when nobody set the date."""
    assert recorded.from_container([("creation_time", "1904-01-01T00:00:00.000000Z")]) is None
    assert recorded.from_container([("creation_time", "1970-01-01T00:00:00Z")]) is None
    assert recorded.from_container([("creation_time", "junk"), ("creation_time", "2026-11-12")]) == (
        "2026-11-12T00:00:00+00:00"
    )
    with pytest.raises(InputError, match="ISO 8601"):
        recorded.given("yesterday")


def test_trust_order() -> None:
    assert recorded.resolve("2026-11-12T09:30:00+00:00", "2020-01-01T00:00:00Z") == (
        "2026-11-12T09:30:00+00:00",
        "container",
    )
    assert recorded.resolve(None, "2020-01-01T00:00:00Z", "2019-01-01T00:00:00+00:00") == (
        "2020-01-01T00:00:00+00:00",
        "given",
    )
    assert recorded.resolve(None, None, "2019-01-01T00:00:00+00:00") == (
        "2019-01-01T00:00:00+00:00",
        "file-time-guess",
    )
    assert recorded.resolve(None) is None
