"""The time a query names weighs the hits dated then (``date_boost``), on small hand-made workspaces
searched through the real index: daily logs dated by their names, transcripts by their timestamps."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest
from freezegun import freeze_time

from sessionmem.memory.index import MemoryIndex
from sessionmem.memory.search.date_boost import OUTSIDE_WEIGHT
from sessionmem.memory.search.records import SearchRequest, SearchResult
from sessionmem.messages import Message
from tests.memory.support import index_opener, make_config, new_transcript

MARCH = "memory/2026-03-02.md"
AUGUST = "memory/2026-08-14.md"


@pytest.fixture
def notes(tmp_path: Path, state: Path) -> Iterator[MemoryIndex]:
    """Two daily logs telling of the same dinner months apart, and an evergreen note about it."""
    workspace = tmp_path / "ws"
    (workspace / "memory").mkdir(parents=True)
    (workspace / MARCH).write_text(
        "# Dinner\n\nDinner with Anna at the harbour restaurant; we talked about the move.\n"
    )
    (workspace / AUGUST).write_text(
        "# Dinner\n\nDinner with Anna at the harbour restaurant; we talked about the job.\n"
    )
    (workspace / "MEMORY.md").write_text("# People\n\nAnna likes the harbour restaurant for dinner.\n")
    with index_opener(workspace, state) as open_index:
        index = open_index(make_config(sources=("memory",)))
        index.sync()
        yield index


def search(index: MemoryIndex, query: str, **kw: object) -> list[SearchResult]:
    return list(index.search(SearchRequest(query, explain=True, **kw)).results)  # type: ignore[arg-type]


def order(results: list[SearchResult]) -> list[str]:
    return [r.path for r in results if r.path != "MEMORY.md"]


def weights(results: list[SearchResult]) -> dict[str, float]:
    return {r.path: r.explanation.date_weight for r in results if r.explanation is not None}


def test_the_day_a_query_names_brings_its_log_first_whichever_it_is(notes: MemoryIndex) -> None:
    with freeze_time("2026-08-15 12:00:00"):
        assert order(search(notes, "Where did I have dinner with Anna yesterday?")) == [AUGUST, MARCH]
    with freeze_time("2026-03-03 12:00:00"):
        assert order(search(notes, "Where did I have dinner with Anna yesterday?")) == [MARCH, AUGUST]


def test_the_other_days_are_weighed_down_not_dropped(notes: MemoryIndex) -> None:
    results = search(notes, "dinner with Anna last summer", today=date(2026, 11, 28))
    assert order(results) == [AUGUST, MARCH]  # the March log is still there, after the August one
    assert weights(results) == {AUGUST: 1.0, MARCH: OUTSIDE_WEIGHT, "MEMORY.md": 1.0}  # evergreen kept
    by_path = {r.path: r for r in results}
    march = by_path[MARCH].explanation
    assert march is not None and by_path[MARCH].score == pytest.approx(march.merged * OUTSIDE_WEIGHT)


def test_an_event_told_weeks_later_is_still_within_the_month_it_names(notes: MemoryIndex) -> None:
    # "in July": the August 14 log may tell of it ("last month ..."); the March one cannot
    results = search(notes, "dinner with Anna in July 2026")
    assert order(results) == [AUGUST, MARCH]
    assert weights(results)[MARCH] == OUTSIDE_WEIGHT


def test_a_time_no_note_is_dated_in_changes_nothing(notes: MemoryIndex) -> None:
    plain = search(notes, "dinner with Anna harbour")
    dated = search(notes, "dinner with Anna harbour", today=date(2026, 11, 28))  # no date named
    far = search(notes, "dinner with Anna harbour last year", today=date(2026, 11, 28))  # 2025: none
    assert [r.path for r in plain] == [r.path for r in dated] == [r.path for r in far]
    assert set(weights(far).values()) == {1.0}


def test_an_explicit_range_is_a_filter_and_the_query_dates_do_not_override_it(notes: MemoryIndex) -> None:
    results = search(
        notes,
        "dinner with Anna yesterday",
        after=date(2026, 3, 1),
        before=date(2026, 3, 31),
        today=date(2026, 8, 15),
    )
    assert [r.path for r in results] == [MARCH]
    assert weights(results) == {MARCH: 1.0}


def test_transcript_lines_are_weighed_by_their_timestamps(tmp_path: Path, state: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with index_opener(workspace, state) as open_index:
        index = open_index(make_config(sources=("sessions",)))
        for name, day in (("early", "2026-05-04"), ("late", "2026-09-21")):
            with freeze_time(f"{day} 10:00:00"):
                transcript = new_transcript(state, workspace, name)
                transcript.append_message(Message.user("Book the train to Lisbon for the conference."))
                transcript.append_message(Message.assistant("Booked the train to Lisbon."))
        index.sync()
        for query, first in (
            ("train to Lisbon last spring", "early"),
            ("train to Lisbon in the fall", "late"),
        ):
            results = search(index, query, today=date(2026, 11, 28))
            assert [Path(r.path).stem for r in results] == [first, {"early": "late", "late": "early"}[first]]
            first_date = results[0].date
            assert first_date is not None and first_date.startswith(
                {"early": "2026-05", "late": "2026-09"}[first]
            )
