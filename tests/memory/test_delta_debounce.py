"""The transcript delta scheduler's debounce, on its real timer thread: notifications inside one window
give one check, and the window is not pushed back by later notifications."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sessionmem.config import SessionSyncConfig
from sessionmem.memory.session_sync import TranscriptDeltaScheduler

DEBOUNCE_MS = 300


class Recorder:
    """``on_dirty``: the batches of files handed over."""

    def __init__(self) -> None:
        self.batches: list[list[Path]] = []

    def __call__(self, paths: list[Path]) -> None:
        self.batches.append(list(paths))


@pytest.fixture
def sessions(tmp_path: Path) -> Path:
    folder = tmp_path / "sessions"
    folder.mkdir()
    return folder


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def scheduler(sessions: Path, recorder: Recorder) -> Iterator[TranscriptDeltaScheduler]:
    config = SessionSyncConfig(debounce_ms=DEBOUNCE_MS, delta_messages=10, delta_bytes=1_000_000)
    made = TranscriptDeltaScheduler(sessions, config, recorder)
    yield made
    made.close()


def wait_idle(scheduler: TranscriptDeltaScheduler, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while scheduler.pending:
        assert time.monotonic() < deadline, "the debounced check never ran"
        time.sleep(0.01)


def append_and_notify(scheduler: TranscriptDeltaScheduler, path: Path, count: int) -> float:
    """Append ``count`` lines to ``path``, notifying after each; returns the seconds it took."""
    started = time.monotonic()
    with path.open("a", encoding="utf-8") as handle:
        for n in range(count):
            handle.write(f'{{"type": "message", "n": {n}}}\n')
            handle.flush()
            assert scheduler.notify(path)
    return time.monotonic() - started


def test_twenty_notifications_inside_the_window_give_exactly_one_check(
    scheduler: TranscriptDeltaScheduler, recorder: Recorder, sessions: Path
) -> None:
    transcript = sessions / "s1.jsonl"
    elapsed = append_and_notify(scheduler, transcript, 20)
    assert elapsed < DEBOUNCE_MS / 1000  # all twenty fell inside one debounce window
    assert scheduler.checks == 0  # nothing runs before the window closes
    wait_idle(scheduler)
    time.sleep(2 * DEBOUNCE_MS / 1000)  # a second timer, had one been started, would have fired by now
    assert scheduler.checks == 1
    assert recorder.batches == [[transcript]]  # 20 lines >= deltaMessages 10: handed over once


def test_later_notifications_do_not_push_the_check_back(
    scheduler: TranscriptDeltaScheduler, sessions: Path
) -> None:
    transcript = sessions / "s1.jsonl"
    started = time.monotonic()
    # Notify every 50 ms for about two windows: a debounce that restarted on each notification would
    # not check before the notifications stop.
    while time.monotonic() - started < 2 * DEBOUNCE_MS / 1000:
        append_and_notify(scheduler, transcript, 1)
        time.sleep(0.05)
    assert scheduler.checks >= 1  # a window closed while the notifications were still coming
    wait_idle(scheduler)
    assert 2 <= scheduler.checks <= 4  # about one per window while notifications kept coming


def test_a_notification_after_the_window_starts_a_new_check(
    scheduler: TranscriptDeltaScheduler, recorder: Recorder, sessions: Path
) -> None:
    transcript = sessions / "s1.jsonl"
    append_and_notify(scheduler, transcript, 3)
    wait_idle(scheduler)
    assert scheduler.checks == 1 and recorder.batches == []  # 3 lines: below deltaMessages
    append_and_notify(scheduler, transcript, 8)
    wait_idle(scheduler)
    assert scheduler.checks == 2
    assert recorder.batches == [[transcript]]  # 3 + 8 pending lines cross 10 in the second window


def test_files_outside_the_sessions_folder_and_archives_start_no_check(
    scheduler: TranscriptDeltaScheduler, sessions: Path, tmp_path: Path
) -> None:
    assert not scheduler.notify(tmp_path / "elsewhere.jsonl")
    assert not scheduler.notify(sessions / "s1.jsonl.reset.2026-01-01T00-00-00.000Z")
    assert not scheduler.pending
    time.sleep(2 * DEBOUNCE_MS / 1000)
    assert scheduler.checks == 0
