"""Finding where a person is still named, or what their sessions wrote, in the notes ``forget`` leaves."""

from __future__ import annotations

import pytest

from sessionmem.errors import UsageError
from sessionmem.memory.mentions import MAX_LINES, MentionFinder


def test_a_name_is_found_as_a_whole_word_in_any_case_never_inside_a_number_a_time_or_a_date() -> None:
    finder = MentionFinder(["42", "Ana Lima"])
    lines = [
        "- peer 42 runs the bakery",  # 1: yes
        "- session at 00:42:55 UTC, on 2026-11-42, 3.42 km, id 1042, x42, 42nd",  # 2: none of these
        "- ANA LIMA called; ana limaX did not",  # 3: yes (the first)
        "- ends with 42.",  # 4: yes (a full stop is not a number)
        "(42)",  # 5: yes
    ]
    mention = finder.scan("memory/team.md", lines)
    assert mention is not None
    assert mention.lines == (1, 3, 4, 5) and mention.total == 4
    assert mention.names == ("42", "Ana Lima") and mention.written == 0


def test_lines_their_sessions_wrote_are_found_whole_and_short_ones_are_ignored() -> None:
    finder = MentionFinder([], written=["- the user keeps bees in the garden", "- ok", ""])
    mention = finder.scan(
        "memory/2026-11-10.md", ["# log", "  - the user keeps bees in the garden  ", "- ok"]
    )
    assert mention is not None and (mention.lines, mention.written, mention.names) == ((2,), 1, ())
    assert finder.scan("memory/other.md", ["- the user keeps bees in the garden, twice"]) is None


def test_line_numbers_listed_are_capped_and_the_total_counted() -> None:
    mention = MentionFinder(["ana"]).scan("x.md", ["ana"] * (MAX_LINES + 5))
    assert mention is not None and len(mention.lines) == MAX_LINES and mention.total == MAX_LINES + 5


def test_nothing_to_look_for_finds_nothing_and_too_many_names_are_refused() -> None:
    assert not MentionFinder([" ", ""])
    assert MentionFinder([]).scan("x.md", ["anything"]) is None
    with pytest.raises(UsageError, match="at most 20 names"):
        MentionFinder([f"n{i}" for i in range(21)])
    with pytest.raises(UsageError, match="at most 200 characters"):
        MentionFinder(["x" * 201])
