"""The crash loop, short: a conversation with frequent flushes and compactions, its runners killed with
SIGKILL 20 times at random moments and at the moments that matter (just after a compaction entry, inside
a flush), reopened and continued, on each store backend. Nothing may be lost, torn, left unflushed or
miscounted. On PostgreSQL two runners are two hosts sharing one database.
(``bench/bench_crash.py`` runs the long loop and prints the figures; ``bench/bench_hosts.py --kills``
the PostgreSQL one.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from sessionmem.dsn import is_postgres_dsn
from tests.support.crash_loop import describe, run_crash_loop


@pytest.mark.timeout(240)
@pytest.mark.parametrize("runners", [1, 2])
def test_a_conversation_killed_twenty_times_loses_nothing_and_flushes_every_cycle(
    tmp_path: Path, runners: int, store_spec: str
) -> None:
    report = run_crash_loop(tmp_path, kills=20, runners=runners, seed=7, store=store_spec)
    figures = "\n".join(describe(report))
    assert report.kills >= 20, figures
    assert report.compactions >= 3 and report.flushes_completed >= 3, figures  # the loop did its work
    if runners == 1:  # turns came while the memory work ran (with two, the other runner's turn often
        assert report.turns_answered_early > 0, figures  # comes between, and the early answer is dropped)
    assert {name: value for name, value in report.problems().items() if value} == {}, (
        f"{figures}\n{report.mismatch_details[:5]}\n{report.runner_errors[:2]}"
    )
    if is_postgres_dsn(store_spec):  # rows are appended whole, the chain from the entry before, by any host
        assert report.lines_torn == 0 and report.chain_breaks == 0, figures
