"""One sync at a time per index: ``SyncFlight`` lets concurrent callers wait for, or share, the run.

A whole unforced call shares a running whole call's result; a forced call shares only a forced
run's; a targeted call (some transcripts only) never shares and is never shared: it waits for the
running pass to end, then runs."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Generic, TypeVar

__all__ = ["SyncFlight"]

T = TypeVar("T")


class SyncFlight(Generic[T]):
    """The run in flight, guarded by ``lock`` (the owner's state lock, so that the owner can test
    :attr:`running` together with its own state)."""

    def __init__(self, lock: threading.Lock) -> None:
        self._lock = lock
        self._current: Future[T] | None = None
        self._force = False
        self._targeted = False

    @property
    def running(self) -> bool:
        return self._current is not None

    def run(self, job: Callable[[], T], *, force: bool, whole: bool, check_open: Callable[[], None]) -> T:
        """``job()``'s result, or a running run's when this call may share it. ``check_open`` is called
        under the lock before each try and raises when the owner is closed."""
        while True:
            with self._lock:
                check_open()
                current = self._current
                if current is None:
                    mine: Future[T] = Future()
                    self._current, self._force, self._targeted = mine, force, not whole
                    break
                share = whole and not self._targeted and (not force or self._force)
            if share:
                return current.result()
            with contextlib.suppress(BaseException):
                current.result()
        try:
            result = job()
        except BaseException as exc:
            mine.set_exception(exc)
            raise
        else:
            mine.set_result(result)
            return result
        finally:
            with self._lock:
                self._current = None

    def wait(self) -> None:
        """Wait for the run in flight, if any, ignoring how it ends."""
        current = self._current
        if current is not None:
            with contextlib.suppress(BaseException):
                current.result()
