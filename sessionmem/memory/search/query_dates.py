"""The time a query names, as a range of days: "in August 2023", "on 8 May", "last spring", "yesterday".

Trigger: a question about when something happened, or about what happened at a time ("Which city was
Calvin visiting in August 2023?"). Why: the notes of that time are the likely answer, and every note
carries a date (a daily log its name, a transcript line its timestamp); words alone matched the
date only where the keyword index held it in the same spelling. Outcome: :func:`query_span` reads
the dates and periods of a query into one inclusive range of days (``DateSpan``), which the search
uses to weigh its hits (``date_boost``); it never reads anything else of the query.

What it reads (case-insensitive; every mention a query holds is merged into the range covering all):

- days: ``2023-05-08``, ``8 May 2023``, ``8th of May, 2023``, ``May 8th, 2023``, ``on 8 May``;
- months and years: ``August 2023``, ``in August``, ``last August``, ``early May``, ``in 2022``;
- seasons (northern hemisphere, by month: spring March-May, summer June-August, autumn or fall
  September-November, winter December-February, named by the year of its December):
  ``last spring``, ``this summer``, ``the summer of 2023``, ``in winter``;
- relative to ``today``: ``today``, ``yesterday``, ``last week``, ``this month``, ``next year``,
  ``last weekend``, ``last Monday``, ``two weeks ago``, ``a few days ago``, ``in the past 3 months``.

A day or month without a year takes the year another mention of the query names ("between August 11
and August 15 2023"), else its latest occurrence up to ``today``. A date that does not exist
("February 30") is no mention at all. A phrase relative to something it cannot date ("two weeks
before the wedding") names nothing. A bare number is a year only after a word that introduces one
("in", "since", "of", "early", ...), so "2000 people" is no date.

Cost: one regular-expression pass cuts the query (bounded by ``query_bounds``) into words, and each
word is looked at with at most a few words around it: linear in the query's length.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta

from sessionmem.memory.search.query_bounds import bound_query

_TOKEN = re.compile(r"\d{4}[-/.]\d{1,2}[-/.]\d{1,2}(?!\d)|\d+(?:st|nd|rd|th)?|[^\W\d_]+")
_ISO = re.compile(r"(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})")
_DAY = re.compile(r"(\d{1,2})(?:st|nd|rd|th)?")
_MONTHS = {
    name: i + 1
    for i, names in enumerate(
        (
            ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",),
            ("june", "jun"), ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"),
            ("october", "oct"), ("november", "nov"), ("december", "dec"),
        )
    )
    for name in names
}  # fmt: skip
_FULL_MONTHS = frozenset(name for name in _MONTHS if len(name) > 3 or name == "may")
_SEASONS = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}  # month each begins
_WEEKDAYS = {
    name: i
    for i, name in enumerate(["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"])
}  # English whatever the locale (``calendar.day_name`` follows it)
_UNITS = {
    "day": "day", "days": "day", "week": "week", "weeks": "week",
    "month": "month", "months": "month", "year": "year", "years": "year",
}  # fmt: skip
_NUMBER_WORDS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "few": 3, "couple": 2,
}  # fmt: skip
# Words after which a bare month, season or number names a time ("in May", "since 2021").
_CUES = frozenset(
    [
        "in",
        "on",
        "during",
        "since",
        "until",
        "till",
        "by",
        "from",
        "to",
        "through",
        "throughout",
        "of",
        "early",
        "mid",
        "late",
        "around",
        "before",
        "after",
        "over",
        "between",
        "and",
        "last",
        "this",
        "next",
        "year",
    ]
)
_SEASON_CUES = _CUES - {"and", "of", "year"}  # "summer camp and spring cleaning" names no time
_RELATIVE = ("last", "this", "next")
_PART = {"early": (1, 10), "mid": (11, 20), "late": (21, 31)}  # days of a month "early May" covers
MIN_YEAR, MAX_YEAR = 1900, 2199  # a number in this range may be a year
MAX_COUNT = 1000  # "N days ago" beyond this names no date
_YEARS_BACK = 8  # a yearless 29 February looks this far back for a leap year


@dataclass(frozen=True, slots=True)
class DateSpan:
    """An inclusive range of days."""

    first: date
    last: date

    def __contains__(self, day: object) -> bool:
        return isinstance(day, date) and self.first <= day <= self.last


@dataclass(frozen=True, slots=True)
class _Yearless:
    """A day or month named without its year ("8 May", "in August"), resolved once the query is read."""

    month: int
    day: int | None  # None: the whole month
    part: tuple[int, int] | None  # "early"/"mid"/"late": the days of the month


def query_span(query: str, today: date) -> DateSpan | None:
    """The range of days ``query`` names (module docstring), or None when it names none."""
    words = [m.group() for m in _TOKEN.finditer(bound_query(query).casefold())]
    spans: list[DateSpan] = []
    yearless: list[_Yearless] = []
    i = 0
    while i < len(words):
        try:
            found, end = _mention(words, i, today)
        except (OverflowError, ValueError):  # past the calendar's ends (year 1, year 9999): no time
            found, end = None, i + 1
        if isinstance(found, DateSpan):
            spans.append(found)
        elif isinstance(found, _Yearless):
            yearless.append(found)
        i = max(end, i + 1)
    named_year = _named_year(spans)
    for item in yearless:
        span = _resolve(item, named_year, today)
        if span is not None:
            spans.append(span)
    if not spans:
        return None
    return DateSpan(min(s.first for s in spans), max(s.last for s in spans))


def _named_year(spans: Sequence[DateSpan]) -> int | None:
    """The year a query's dated mentions share (a yearless day of the same query takes it)."""
    years = {s.first.year for s in spans if s.first.year == s.last.year}
    return years.pop() if len(years) == 1 else None


def _mention(words: list[str], i: int, today: date) -> tuple[DateSpan | _Yearless | None, int]:
    """The mention starting at word ``i`` and the index after it; (None, i) when none starts there."""
    word = words[i]
    before = _previous(words, i)
    if m := _ISO.fullmatch(word):
        return _day(int(m.group(1)), int(m.group(2)), int(m.group(3))), i + 1
    if _DAY.fullmatch(word):
        found, end = _day_first(words, i)
        if end > i:
            return found, end
    if word in _MONTHS:
        return _month_first(words, i, before, today)
    if word in _SEASONS:
        return _season(words, i, before, today)
    if word in ("today", "tonight"):
        return DateSpan(today, today), i + 1
    if word == "yesterday":
        return _single(today - timedelta(days=1)), i + 1
    if word in ("last", "this", "next", "past"):
        return _relative(words, i, today)
    if word in _NUMBER_WORDS or word.isdigit():
        found, end = _ago(words, i, today)
        if end > i:
            return found, end
    if _is_year(word) and before in _CUES:
        return _part_of_year(int(word), _PART.get(before)), i + 1
    return None, i


def _previous(words: list[str], i: int) -> str:
    """The word before ``i``, looking past "the" ("in the summer")."""
    j = i - 1
    if j >= 0 and words[j] == "the":
        j -= 1
    return words[j] if j >= 0 else ""


def _is_year(word: str) -> bool:
    return word.isdigit() and len(word) == 4 and MIN_YEAR <= int(word) <= MAX_YEAR


def _year_at(words: list[str], i: int) -> int | None:
    """The year at word ``i`` ("of" before it allowed), or None."""
    if i < len(words) and words[i] == "of":
        i += 1
    return int(words[i]) if i < len(words) and _is_year(words[i]) else None


def _skip_of(words: list[str], i: int) -> int:
    return i + 1 if i < len(words) and words[i] == "of" else i


def _day(year: int, month: int, day: int) -> DateSpan | None:
    try:
        return _single(date(year, month, day))
    except ValueError:  # "February 30": no such day, no mention
        return None


def _single(day: date) -> DateSpan:
    return DateSpan(day, day)


def _month_span(year: int, month: int, part: tuple[int, int] | None = None) -> DateSpan:
    days = calendar.monthrange(year, month)[1]
    first, last = part if part is not None else (1, days)
    return DateSpan(date(year, month, first), date(year, month, min(last, days)))


def _part_of_year(year: int, part: tuple[int, int] | None) -> DateSpan:
    """A year, or its first, middle or last third ("early 2022": January to April)."""
    if part is None:
        return DateSpan(date(year, 1, 1), date(year, 12, 31))
    first_month = {1: 1, 11: 5, 21: 9}[part[0]]
    return DateSpan(date(year, first_month, 1), _month_span(year, first_month + 3).last)


def _day_first(words: list[str], i: int) -> tuple[DateSpan | _Yearless | None, int]:
    """``8 May``, ``8th of May, 2023``."""
    j = _skip_of(words, i + 1)
    if j >= len(words) or words[j] not in _MONTHS:
        return None, i
    day, month = int(_DAY.fullmatch(words[i]).group(1)), _MONTHS[words[j]]  # type: ignore[union-attr]
    year = _year_at(words, j + 1)
    if year is not None:
        return _day(year, month, day), j + 2
    return (_Yearless(month, day, None) if 1 <= day <= 31 else None), j + 1


def _month_first(
    words: list[str], i: int, before: str, today: date
) -> tuple[DateSpan | _Yearless | None, int]:
    """``May 8th, 2023``, ``August 2023``, ``August of 2023``, ``in August``, ``last August``."""
    month = _MONTHS[words[i]]
    nxt = words[i + 1] if i + 1 < len(words) else ""
    if _DAY.fullmatch(nxt):
        day = int(_DAY.fullmatch(nxt).group(1))  # type: ignore[union-attr]
        year = _year_at(words, i + 2)
        if year is not None:
            return _day(year, month, day), _skip_of(words, i + 2) + 1
        return (_Yearless(month, day, None) if 1 <= day <= 31 else None), i + 2
    part = _PART.get(before)
    year = _year_at(words, i + 1)
    if year is not None:
        return _month_span(year, month, part), _skip_of(words, i + 1) + 1
    if words[i] not in _FULL_MONTHS or (before not in _CUES and part is None):
        return None, i  # "may", "mar" alone are words; a month alone needs "in", "since", ...
    if before in _RELATIVE:
        start = _month_span(today.year, month).first
        if before == "last":
            year = today.year if start.replace(day=1) < today.replace(day=1) else today.year - 1
        elif before == "next":
            year = today.year if start > today else today.year + 1
        else:
            year = today.year
        return _month_span(year, month), i + 1
    return _Yearless(month, None, part), i + 1


def _season(words: list[str], i: int, before: str, today: date) -> tuple[DateSpan | None, int]:
    """``last spring``, ``this summer``, ``the summer of 2023``, ``winter 2022``, ``in the fall``."""
    start_month = _SEASONS[words[i]]
    year = _year_at(words, i + 1)
    if year is not None:
        return _season_span(year, start_month), _skip_of(words, i + 1) + 1
    if before not in _SEASON_CUES:
        return None, i  # "summer camp", "spring cleaning"
    # the instances around today: the one beginning in each year from last year to next
    spans = [
        _season_span(y, start_month) for y in (today.year - 2, today.year - 1, today.year, today.year + 1)
    ]
    if before == "last":
        chosen = max((s for s in spans if s.last < today), key=lambda s: s.first)
    elif before == "next":
        chosen = min((s for s in spans if s.first > today), key=lambda s: s.first)
    elif before == "this":
        current = [s for s in spans if today in s]
        chosen = current[0] if current else _season_span(today.year, start_month)
    else:  # "in the summer": the latest one begun by today
        chosen = max((s for s in spans if s.first <= today), key=lambda s: s.first)
    return chosen, i + 1


def _season_span(year: int, start_month: int) -> DateSpan:
    first = date(year, start_month, 1)
    end_year, end_month = (year + 1, 2) if start_month == 12 else (year, start_month + 2)
    return DateSpan(first, _month_span(end_year, end_month).last)


def _relative(words: list[str], i: int, today: date) -> tuple[DateSpan | None, int]:
    """``last week``, ``this month``, ``next year``, ``last weekend``, ``last Monday``,
    ``the past 3 days``, ``in the last two weeks``."""
    which = words[i]
    nxt = words[i + 1] if i + 1 < len(words) else ""
    count, after = _count(words, i + 1)
    if which in ("last", "past") and count is not None and after < len(words) and words[after] in _UNITS:
        back = _shift(today, _UNITS[words[after]], -count)
        return (DateSpan(back, today) if back is not None else None), after + 1
    if which == "past" and nxt in _UNITS:
        back = _shift(today, _UNITS[nxt], -1)
        return (DateSpan(back, today) if back is not None else None), i + 2
    step = {"last": -1, "this": 0, "next": 1}.get(which)
    if step is None:
        return None, i
    if nxt in ("week", "weekend"):
        monday = today - timedelta(days=today.weekday()) + timedelta(weeks=step)
        if nxt == "weekend":
            return DateSpan(monday + timedelta(days=5), monday + timedelta(days=6)), i + 2
        return DateSpan(monday, monday + timedelta(days=6)), i + 2
    if nxt == "month":
        first = _shift(today.replace(day=1), "month", step)
        return (_month_span(first.year, first.month) if first is not None else None), i + 2
    if nxt == "year":
        return _part_of_year(today.year + step, None), i + 2
    if nxt in _WEEKDAYS and which == "last":
        days_back = (today.weekday() - _WEEKDAYS[nxt]) % 7 or 7
        return _single(today - timedelta(days=days_back)), i + 2
    return None, i  # "last August", "last summer": their own readers see "last" before them


def _count(words: list[str], i: int) -> tuple[int | None, int]:
    """A count at word ``i`` ("3", "two", "a", "a few", "a couple of") and the index after it."""
    if i >= len(words):
        return None, i
    word = words[i]
    if word.isdigit() and len(word) <= 4:
        return (int(word) if 0 < int(word) <= MAX_COUNT else None), i + 1
    if word not in _NUMBER_WORDS:
        return None, i
    if word in ("a", "an") and i + 1 < len(words) and words[i + 1] in ("few", "couple"):
        return _NUMBER_WORDS[words[i + 1]], _skip_of(words, i + 2)
    return _NUMBER_WORDS[word], _skip_of(words, i + 1) if word == "couple" else i + 1


def _ago(words: list[str], i: int, today: date) -> tuple[DateSpan | None, int]:
    """``3 days ago`` (that day), ``two weeks ago`` (the week around that day), ``a month ago``
    (that calendar month), ``two years ago`` (that calendar year)."""
    count, j = _count(words, i)
    if count is None or j + 1 >= len(words) or words[j] not in _UNITS or words[j + 1] != "ago":
        return None, i
    unit = _UNITS[words[j]]
    day = _shift(today, unit, -count)
    if day is None:
        return None, j + 2
    if unit == "day":
        return _single(day), j + 2
    if unit == "week":
        return DateSpan(day - timedelta(days=3), min(today, day + timedelta(days=3))), j + 2
    if unit == "month":
        return _month_span(day.year, day.month), j + 2
    return _part_of_year(day.year, None), j + 2


def _shift(day: date, unit: str, count: int) -> date | None:
    """``day`` moved by ``count`` units (a month keeps its day where the month has it); None past the
    calendar's ends."""
    try:
        if unit == "day":
            return day + timedelta(days=count)
        if unit == "week":
            return day + timedelta(weeks=count)
        months = day.year * 12 + day.month - 1 + (count * 12 if unit == "year" else count)
        year, month = divmod(months, 12)
        return date(year, month + 1, min(day.day, calendar.monthrange(year, month + 1)[1]))
    except (OverflowError, ValueError):
        return None


def _resolve(item: _Yearless, named_year: int | None, today: date) -> DateSpan | None:
    """A yearless day or month in the year the query names, else at its latest up to ``today``."""
    years = [named_year] if named_year is not None else range(today.year, today.year - _YEARS_BACK, -1)
    for year in years:
        if item.day is None:
            span = _month_span(year, item.month, item.part)
            if named_year is not None or span.first <= today:
                return span
            continue
        found = _day(year, item.month, item.day)
        if found is not None and (named_year is not None or found.first <= today):
            return found
    return None
