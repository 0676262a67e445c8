"""The daemon threads of one ``MemoryIndex``: background syncs, session-delta syncs, the interval timer.

Kept apart so the index's close can stop and join all of them at once, and ``wait_idle`` can tell
work in progress from the timer that merely waits."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

__all__ = ["Workers"]

_INTERVAL = "interval"


class Workers:
    """Threads named ``sessionmem-<job>-<agent>``; finished ones are forgotten as new ones start."""

    def __init__(self, agent_id: str) -> None:
        self._agent_id = agent_id
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()

    def start(self, target: Callable[..., None], *args: Any, name: str) -> None:
        """Run ``target(*args)`` in a new daemon thread."""
        thread = threading.Thread(
            target=target, args=args, name=f"sessionmem-{name}-{self._agent_id}", daemon=True
        )
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
        thread.start()

    def every(self, seconds: float, job: Callable[[], None]) -> None:
        """Run ``job`` every ``seconds`` until :meth:`stop` (the first run after one interval)."""
        self.start(self._repeat, seconds, job, name=_INTERVAL)

    def _repeat(self, seconds: float, job: Callable[[], None]) -> None:
        while not self._stop.wait(seconds):
            job()

    def busy(self) -> list[threading.Thread]:
        """Threads doing work now (the interval timer only waits, so it is not counted)."""
        with self._lock:
            return [t for t in self._threads if t.is_alive() and f"-{_INTERVAL}-" not in t.name]

    def stop(self) -> None:
        """End the interval timer (its current wait returns at once)."""
        self._stop.set()

    def join(self) -> None:
        """Wait for every thread (except the calling one) to finish."""
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join()
