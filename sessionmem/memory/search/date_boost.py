"""Hits dated within the time a query names rank first: a soft weight, not a filter.

Trigger: a query names a time ("in August 2023", "last spring", "yesterday"; ``query_dates``) and the
request sets no ``after``/``before`` range of its own. Why: the notes and transcript lines of that
time are the likely answer, but a date read from words can be wrong (the user misremembers, "last
summer" meant the one before) and an event is often written down days after it happened, so
dropping the others would lose answers a filter cannot know it lost. Outcome: a hit dated outside the
range (its daily log's name, its transcript's timestamp, else the date the index holds for the
file) weighs ``OUTSIDE_WEIGHT`` of its score; hits within it, and hits with no date (``MEMORY.md``:
evergreen), keep theirs. When no candidate falls within the range, nothing changes: a range
no note is dated in says nothing about which notes answer. An explicit ``after``/``before`` is a hard
filter, applied before this (``searcher``).

The range reaches past the last day named by as many days as it spans, at least
``WRITTEN_AFTER_MIN_DAYS`` and at most ``WRITTEN_AFTER_MAX_DAYS``: what happened in March is often told
in April ("last month we went to..."; LoCoMo's "in March 2023" was said on 18 April), what happened on
a day within the week.

The weight is applied like temporal decay, to the ranking score and not to the score ``minScore``
compares (``ranking`` module docstring): a date says which relevant note comes first, not whether a
note is relevant.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import date, timedelta

from sessionmem.memory.search.query_dates import DateSpan
from sessionmem.memory.search.ranking import Candidate, decay_date

OUTSIDE_WEIGHT = 0.8
WRITTEN_AFTER_MIN_DAYS = 7
WRITTEN_AFTER_MAX_DAYS = 31


def hit_day(c: Candidate) -> date | None:
    """The day a hit speaks of: a daily log's name, a transcript's first line, else the indexed date;
    None for evergreen notes (``MEMORY.md``, undated ``memory/`` files)."""
    return decay_date(c.path, c.source, c.date)


def weigh_by_span(cands: Sequence[Candidate], span: DateSpan) -> list[Candidate]:
    """``cands`` with ``date_weight`` set: ``OUTSIDE_WEIGHT`` for a hit dated outside ``span`` (widened by
    the days it may be written after, module docstring), 1 otherwise; all 1 when none is dated within it."""
    wide = DateSpan(span.first, _later(span.last, written_after_days(span)))
    days = [hit_day(c) for c in cands]
    if not any(day in wide for day in days):
        return list(cands)
    return [
        c if day is None or day in wide else replace(c, date_weight=OUTSIDE_WEIGHT)
        for c, day in zip(cands, days, strict=True)
    ]


def written_after_days(span: DateSpan) -> int:
    """How long after a range its events may be written down: as long as the range, within bounds."""
    length = (span.last - span.first).days + 1
    return max(WRITTEN_AFTER_MIN_DAYS, min(WRITTEN_AFTER_MAX_DAYS, length))


def _later(day: date, days: int) -> date:
    try:
        return day + timedelta(days=days)
    except OverflowError:
        return date.max
