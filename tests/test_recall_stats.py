"""bench/recall_stats.py: how far a recall figure moves with the questions, alone and between two settings.

Hand-made ranks stand in for a run: a figure's interval holds it and narrows with more questions, two
settings that find the same questions differ by exactly nothing, and a change of a few questions among
a thousand is told apart from a change of a hundred.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "bench"))
import recall_stats


def ranks(found: int, missed: int, rank: int = 1) -> dict[str, int | None]:
    """``found`` questions answered at ``rank``, then ``missed`` never answered."""
    out: dict[str, int | None] = {f"q{i:04d}": rank for i in range(found)}
    out.update({f"q{i:04d}": None for i in range(found, found + missed)})
    return out


def test_the_terms_of_recall_and_mrr() -> None:
    given = [1, 2, 7, None, 6]
    assert recall_stats.found_within(given, 6).tolist() == [1.0, 1.0, 0.0, 0.0, 1.0]
    assert recall_stats.reciprocal(given).tolist() == pytest.approx([1.0, 0.5, 1 / 7, 0.0, 1 / 6])


def test_an_interval_holds_the_figure_and_narrows_with_more_questions() -> None:
    small = recall_stats.found_within(list(ranks(94, 6).values()), 6)
    large = recall_stats.found_within(list(ranks(940, 60).values()), 6)
    low_s, high_s = recall_stats.interval(small)
    low_l, high_l = recall_stats.interval(large)
    assert low_s < 0.94 < high_s and low_l < 0.94 < high_l
    assert high_l - low_l < (high_s - low_s) / 2  # ten times the questions: about a third as wide
    # About two standard errors either side: sqrt(0.94 * 0.06 / 1000) = 0.0075.
    assert 0.02 < high_l - low_l < 0.04


def test_an_interval_is_the_same_from_one_run_to_the_next() -> None:
    values = recall_stats.reciprocal(list(ranks(500, 300, rank=3).values()) + [1] * 200)
    assert recall_stats.interval(values) == recall_stats.interval(values)


def test_no_question_is_refused() -> None:
    with pytest.raises(ValueError, match="no values"):
        recall_stats.interval(np.array([]))


def test_two_settings_finding_the_same_questions_differ_by_nothing() -> None:
    a = ranks(900, 100, rank=2)
    change = recall_stats.compare(a, dict(a))
    assert (change.gained, change.lost) == ([], [])
    assert change.recall_change == 0.0 and change.recall_interval == (0.0, 0.0)
    assert change.mrr_change == 0.0 and change.mrr_interval == (0.0, 0.0)


def test_a_few_questions_gained_are_not_told_apart_from_none_but_many_are() -> None:
    a = ranks(900, 100)
    few = dict(a, q0900=3, q0901=5)  # two more found in the top 6
    change = recall_stats.compare(a, few)
    assert change.gained == ["q0900", "q0901"] and change.lost == []
    assert change.recall_change == pytest.approx(0.002)
    assert change.recall_interval[0] <= 0.0  # two of a thousand: could be no change at all
    many = dict(a, **{f"q{i:04d}": 2 for i in range(900, 960)})
    change = recall_stats.compare(a, many)
    assert change.recall_change == pytest.approx(0.06)
    assert 0.0 < change.recall_interval[0] < 0.06 < change.recall_interval[1]
    assert change.mrr_interval[0] > 0.0


def test_a_question_lost_and_one_moved_down_are_counted_against() -> None:
    a = ranks(10, 0, rank=1)
    b = dict(a, q0000=None, q0001=2)
    change = recall_stats.compare(a, b, k=1)
    assert change.lost == ["q0000", "q0001"] and change.gained == []
    assert change.recall_change == pytest.approx(-0.2)
    assert change.mrr_change == pytest.approx((-1.0 - 0.5) / 10)
    assert "2 lost of 10" in change.line()


def test_settings_asked_different_questions_are_not_compared() -> None:
    with pytest.raises(ValueError, match="asked of one setting only"):
        recall_stats.compare(ranks(5, 0), ranks(6, 0))


def test_the_harness_file_is_read_question_by_question(tmp_path: Path) -> None:
    """The harness's ``per_question`` file: one JSON object per line, first_hit_rank null when missed."""
    path = tmp_path / "per-question.jsonl"
    rows = [
        {"qid": "conv-26:3", "category": "temporal", "first_hit_rank": 2, "hits": []},
        {"qid": "conv-26:4", "category": "multi-hop", "first_hit_rank": None, "hits": []},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + "\n", encoding="utf-8")
    assert recall_stats.read_ranks(path) == {"conv-26:3": 2, "conv-26:4": None}
