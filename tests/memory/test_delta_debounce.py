"""The transcript delta scheduler's debounce: notifications inside one window give one check, and the
window is not pushed back by later notifications. Windows the test closes itself show that by structure
(how many windows opened, which closed); the real timer thread runs the rest."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sessionmem.config import SessionSyncConfig
from sessionmem.memory.sync.session_delta import TranscriptDeltaScheduler

DEBOUNCE_MS = 300


class Recorder:
    """``on_dirty``: the batches of files handed over."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []  # transcript names

    def __call__(self, paths: list[str]) -> None:
        self.batches.append(list(paths))


@pytest.fixture
def sessions(tmp_path: Path) -> Path:
    folder = tmp_path / "sessions"
    folder.mkdir()
    return folder


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


CONFIG = SessionSyncConfig(debounce_ms=DEBOUNCE_MS, delta_messages=10, delta_bytes=1_000_000)


@dataclass
class Window:
    """A debounce window the test closes itself (``close``), in place of the timer thread."""

    delay_s: float
    fire: Callable[[], object]
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True

    def close(self) -> None:
        assert not self.cancelled
        self.fire()


@pytest.fixture
def scheduler(sessions: Path, recorder: Recorder) -> Iterator[TranscriptDeltaScheduler]:
    made = TranscriptDeltaScheduler(sessions, CONFIG, recorder)
    yield made
    made.close()


@pytest.fixture
def windows() -> list[Window]:
    """The windows ``manual`` opened, in order."""
    return []


@pytest.fixture
def manual(sessions: Path, recorder: Recorder, windows: list[Window]) -> Iterator[TranscriptDeltaScheduler]:
    """A scheduler whose debounce windows are opened into ``windows`` and closed by the test."""

    def start(delay_s: float, fire: Callable[[], object]) -> Window:
        windows.append(Window(delay_s, fire))
        return windows[-1]

    made = TranscriptDeltaScheduler(sessions, CONFIG, recorder, start_timer=start)
    yield made
    made.close()


def wait_idle(scheduler: TranscriptDeltaScheduler, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while scheduler.pending:
        assert time.monotonic() < deadline, "the debounced check never ran"
        time.sleep(0.01)


def append_and_notify(scheduler: TranscriptDeltaScheduler, path: Path, count: int) -> None:
    """Append ``count`` lines to ``path``, notifying after each."""
    with path.open("a", encoding="utf-8") as handle:
        for n in range(count):
            handle.write(f'{{"type": "message", "n": {n}}}\n')
            handle.flush()
            assert scheduler.notify(path)


def test_twenty_notifications_inside_the_window_give_exactly_one_check(
    manual: TranscriptDeltaScheduler, windows: list[Window], recorder: Recorder, sessions: Path
) -> None:
    transcript = sessions / "s1.jsonl"
    append_and_notify(manual, transcript, 20)
    assert [w.delay_s for w in windows] == [DEBOUNCE_MS / 1000]  # one window for all twenty
    assert manual.checks == 0 and manual.pending  # nothing runs before the window closes
    windows[0].close()
    assert manual.checks == 1 and not manual.pending
    assert recorder.batches == [[transcript.name]]  # 20 lines >= deltaMessages 10: handed over once
    assert len(windows) == 1


def test_later_notifications_do_not_push_the_check_back(
    manual: TranscriptDeltaScheduler, windows: list[Window], recorder: Recorder, sessions: Path
) -> None:
    transcript = sessions / "s1.jsonl"
    for _ in range(12):  # notifications keep coming: the window they fall in is neither moved nor restarted
        append_and_notify(manual, transcript, 1)
    assert len(windows) == 1 and not windows[0].cancelled
    windows[0].close()  # it closes while notifications are still coming
    assert manual.checks == 1 and recorder.batches == [[transcript.name]]
    append_and_notify(manual, transcript, 1)  # the next one opens the next window
    assert len(windows) == 2 and manual.checks == 1
    windows[1].close()
    assert manual.checks == 2


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
    assert recorder.batches == [[transcript.name]]  # 3 + 8 pending lines cross 10 in the second window


def test_files_outside_the_sessions_folder_and_archives_start_no_check(
    manual: TranscriptDeltaScheduler, windows: list[Window], sessions: Path, tmp_path: Path
) -> None:
    assert not manual.notify(tmp_path / "elsewhere.jsonl")
    assert not manual.notify(sessions / "s1.jsonl.reset.2026-01-01T00-00-00.000Z")
    assert windows == [] and not manual.pending and manual.checks == 0
