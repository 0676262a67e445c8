"""The time a query names (``query_dates``): the phrasings a user writes, read into ranges of days."""

from __future__ import annotations

from datetime import date

import pytest

from sessionmem.memory.search.query_bounds import MAX_QUERY_CHARS
from sessionmem.memory.search.query_dates import DateSpan, query_span

TODAY = date(2026, 11, 28)  # a Saturday


def span(first: str, last: str | None = None) -> DateSpan:
    return DateSpan(date.fromisoformat(first), date.fromisoformat(last or first))


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        # days, with their year
        ("What did we decide on 2023-05-08?", span("2023-05-08")),
        ("notes of 8 May 2023", span("2023-05-08")),
        ("What book did Tim finish on 8th December, 2023?", span("2023-12-08")),
        ("the 8th of May, 2023", span("2023-05-08")),
        ("What movie did Nate enjoy on October 6, 2022?", span("2022-10-06")),
        ("the forest picture shared on December 1,2023", span("2023-12-01")),
        ("Which team did John sign with on 21 May, 2023?", span("2023-05-21")),
        ("a call on Sept 3rd 2024", span("2024-09-03")),
        # days without a year: their latest occurrence up to today, or the year the query names
        ("What did Peter say on 8 May?", span("2026-05-08")),
        ("the party on December 24", span("2025-12-24")),
        ("Where was John between August 11 and August 15 2023?", span("2023-08-11", "2023-08-15")),
        # months and years
        ("Which city was Calvin visiting in August 2023?", span("2023-08-01", "2023-08-31")),
        ("plans for August of 2023", span("2023-08-01", "2023-08-31")),
        ("What did she paint in 2022?", span("2022-01-01", "2022-12-31")),
        ("things we did since 2021", span("2021-01-01", "2021-12-31")),
        ("the budget in early 2022", span("2022-01-01", "2022-04-30")),
        ("late May 2023", span("2023-05-21", "2023-05-31")),
        ("mid March 2024", span("2024-03-11", "2024-03-20")),
        ("what happened in August?", span("2026-08-01", "2026-08-31")),
        ("what happened in December?", span("2025-12-01", "2025-12-31")),  # December 2026 is ahead
        ("last August", span("2026-08-01", "2026-08-31")),
        ("next March", span("2027-03-01", "2027-03-31")),
        ("between 2020 and 2022", span("2020-01-01", "2022-12-31")),
        # seasons
        ("Where did we go last spring?", span("2026-03-01", "2026-05-31")),
        ("last summer", span("2026-06-01", "2026-08-31")),
        ("last winter", span("2025-12-01", "2026-02-28")),
        ("this winter", span("2026-12-01", "2027-02-28")),
        ("next spring", span("2027-03-01", "2027-05-31")),
        ("in the fall", span("2026-09-01", "2026-11-30")),
        ("the summer of 2023", span("2023-06-01", "2023-08-31")),
        ("autumn 2021", span("2021-09-01", "2021-11-30")),
        # relative to today
        ("What did I say yesterday?", span("2026-11-27")),
        ("the plan for today", span("2026-11-28")),
        ("last week", span("2026-11-16", "2026-11-22")),
        ("this week", span("2026-11-23", "2026-11-29")),
        ("next week", span("2026-11-30", "2026-12-06")),
        ("last weekend", span("2026-11-21", "2026-11-22")),
        ("last month", span("2026-10-01", "2026-10-31")),
        ("this month", span("2026-11-01", "2026-11-30")),
        ("last year", span("2025-01-01", "2025-12-31")),
        ("next year", span("2027-01-01", "2027-12-31")),
        ("last Monday", span("2026-11-23")),
        ("last Saturday", span("2026-11-21")),  # today is a Saturday: the one before
        ("3 days ago", span("2026-11-25")),
        ("a few days ago", span("2026-11-25")),
        ("two weeks ago", span("2026-11-11", "2026-11-17")),
        ("a couple of weeks ago", span("2026-11-11", "2026-11-17")),
        ("a month ago", span("2026-10-01", "2026-10-31")),
        ("two years ago", span("2024-01-01", "2024-12-31")),
        ("in the past 3 months", span("2026-08-28", "2026-11-28")),
        ("over the last two weeks", span("2026-11-14", "2026-11-28")),
        ("the past week", span("2026-11-21", "2026-11-28")),
    ],
)
def test_a_query_names_this_range(query: str, expected: DateSpan) -> None:
    assert query_span(query, TODAY) == expected


@pytest.mark.parametrize(
    "query",
    [
        "When did John host the programming competition?",  # asks when: names no time
        "What year did John start surfing?",
        "two weeks before the wedding",  # relative to something with no date
        "the day after the retro",
        "February 30",  # no such day
        "February 30, 2023",
        "on 31 April",
        "29 February 2023",
        "2023-13-45",
        "May I ask about the dog?",  # "may" and "march" alone are words
        "we march on",
        "2000 people came",  # a number is a year only after "in", "since", ...
        "summer camp and spring cleaning",
        "I said it a lot",
        "99999 days ago",
        "",
    ],
)
def test_a_query_names_no_time(query: str) -> None:
    assert query_span(query, TODAY) is None


def test_a_leap_day_without_a_year_is_the_latest_leap_day() -> None:
    assert query_span("on 29 February", TODAY) == span("2024-02-29")


def test_relative_dates_count_from_the_day_given() -> None:
    assert query_span("yesterday", date(2023, 3, 1)) == span("2023-02-28")
    assert query_span("last month", date(2024, 1, 15)) == span("2023-12-01", "2023-12-31")
    assert query_span("a month ago", date(2024, 3, 31)) == span("2024-02-01", "2024-02-29")


def test_the_calendars_edges_name_nothing_rather_than_fail() -> None:
    assert query_span("999 years ago", date(1, 6, 1)) is None
    assert query_span("next week", date(9999, 12, 30)) is None
    assert query_span("next spring", date(9999, 12, 30)) is None
    assert query_span("last winter", date(1, 1, 5)) is None
    assert query_span("in 2199", date(9999, 12, 30)) == span("2199-01-01", "2199-12-31")


def test_a_hostile_query_is_read_to_its_bound_and_no_further() -> None:
    filler = "8 May may march 2023 last next ago a couple of " * 20_000  # ~1 MB of date-like words
    assert len(filler) > 100 * MAX_QUERY_CHARS
    found = query_span(filler + " in 1999", TODAY)
    assert found is not None and found.first.year >= 2023  # the 1999 past the bound was never read
    assert query_span("x " * MAX_QUERY_CHARS + "in 1999", TODAY) is None
    assert query_span("in 1999 " + "x " * 500_000, TODAY) == span("1999-01-01", "1999-12-31")
