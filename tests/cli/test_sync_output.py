"""The ``memory index`` summary line and its --json report say how many chunks were written without a
vector (the provider gave none usable: they are keyword-only until the next sync asks again)."""

from __future__ import annotations

import json

from sessionmem.cli.output import format_sync_summary, sync_report_json, to_json_text
from sessionmem.memory.sync.plan import SyncReport


def report(without_vectors: int) -> SyncReport:
    return SyncReport(
        files_scanned=4,
        files_indexed=3,
        files_unchanged=1,
        chunks_written=12,
        embedded=9,
        cache_hits=0,
        without_vectors=without_vectors,
        seconds=0.25,
    )


def test_summary_names_chunks_without_vectors_when_there_are_some() -> None:
    line = format_sync_summary("main", report(3))
    assert "3 without vectors (see memory status)" in line
    assert line.endswith("9 embedded (0 cached), 3 without vectors (see memory status) in 0.25 s")


def test_summary_says_nothing_of_vectors_when_every_chunk_has_one() -> None:
    line = format_sync_summary("main", report(0))
    assert "without vectors" not in line
    assert line.endswith("9 embedded (0 cached) in 0.25 s")


def test_summary_names_vectors_filled_in_for_earlier_keyword_only_chunks() -> None:
    healed = SyncReport(files_scanned=4, files_unchanged=4, embedded=2, vectors_filled=2, seconds=0.25)
    line = format_sync_summary("main", healed)
    assert line.endswith("2 embedded (0 cached), 2 earlier missing vectors filled in 0.25 s")
    assert sync_report_json(healed, "main")["vectorsFilled"] == 2


def test_json_report_always_carries_without_vectors() -> None:
    assert sync_report_json(report(3), "main")["withoutVectors"] == 3
    data = json.loads(to_json_text(sync_report_json(report(0), "main")))
    assert data["withoutVectors"] == 0
    assert data["chunksWritten"] == 12 and data["embedded"] == 9
