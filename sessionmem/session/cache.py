"""The sessions a runner holds in memory, the turns in flight, and the session:start hooks still due.

A gateway opens sessions for as long as it runs; holding every one of them would grow its memory with
every chat ever seen. :class:`SessionCache` keeps them least recently used first and drops the ones with
no turn running or queued beyond ``session.maxIdleSessions``. Nothing is lost by dropping one: its store
entry and transcript are the record, ``runner.open(key)`` reads them again, and a handle a caller kept
still works (its state reloads under the turn lock) and comes back into the cache at its next turn.

It remembers which of the sessions the runner created still owe their ``session:start`` hook (due at
their first turn): the debt is kept by key, so a session dropped before its first turn and opened again
still announces itself, once.

It also counts the turns in flight, so :meth:`SessionRunner.aclose
<sessionmem.session.runner.SessionRunner.aclose>` can let them finish and refuse new ones. Thread-safe:
turns may run in several threads' event loops (``run_turn_sync``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, Protocol, TypeVar

from sessionmem.errors import UsageError


class CachedSession(Protocol):
    """What the cache needs of a session: its key and its own count of turns in flight."""

    @property
    def key(self) -> str: ...

    in_flight: int


S = TypeVar("S", bound=CachedSession)


class SessionCache(Generic[S]):
    """Sessions by key, least recently used first; see the module docstring."""

    def __init__(self, max_idle: int) -> None:
        self.max_idle = max_idle
        self._sessions: OrderedDict[str, S] = OrderedDict()
        self._guard = threading.Lock()
        self._in_flight = 0  # turns running or queued, all sessions
        self._closed = False
        self._start_due: set[str] = set()  # keys created here whose session:start has not fired yet

    def get(self, key: str) -> S | None:
        with self._guard:
            found = self._sessions.get(key)
            if found is not None:
                self._sessions.move_to_end(key)
            return found

    def add(self, session: S) -> S:
        """Hold ``session``; returns the session now held for its key (another thread may have added one
        meanwhile: that one is kept, so one key has one session)."""
        with self._guard:
            kept = self._sessions.setdefault(session.key, session)
            self._sessions.move_to_end(session.key)
            self._evict_idle()
            return kept

    def start_due(self, key: str) -> None:
        """The runner created ``key``: its ``session:start`` is due at its first turn."""
        with self._guard:
            self._start_due.add(key)

    def take_start(self, key: str) -> bool:
        """True once for a key whose ``session:start`` is due (the caller fires it), then False."""
        with self._guard:
            if key not in self._start_due:
                return False
            self._start_due.discard(key)
            return True

    def discard(self, key: str) -> None:
        """Stop holding ``key``'s session (its record was erased); a handle a caller kept still works, and
        ``open(key)`` reads the store again."""
        with self._guard:
            self._sessions.pop(key, None)
            self._start_due.discard(key)

    def keys(self) -> tuple[str, ...]:
        with self._guard:
            return tuple(self._sessions)

    def check_open(self) -> None:
        if self._closed:
            raise UsageError("this SessionRunner is closed; create a new one")

    def turn_started(self, session: S) -> None:
        """A turn of ``session`` is about to queue; it is in flight until :meth:`turn_ended`."""
        with self._guard:
            self.check_open()
            self._in_flight += 1
            session.in_flight += 1
            if self._sessions.setdefault(session.key, session) is session:  # a dropped handle comes back
                self._sessions.move_to_end(session.key)

    def turn_ended(self, session: S) -> None:
        with self._guard:
            self._in_flight -= 1
            session.in_flight -= 1
            self._evict_idle()

    def close(self) -> None:
        """Take no more turns (those in flight go on)."""
        with self._guard:
            self._closed = True

    def drained(self) -> bool:
        """True once no turn is in flight; the sessions are then dropped."""
        with self._guard:
            if self._in_flight:
                return False
            self._sessions.clear()
            return True

    def _evict_idle(self) -> None:
        """Drop the least recently used idle sessions beyond ``max_idle`` (holding ``_guard``)."""
        idle = [key for key, session in self._sessions.items() if session.in_flight == 0]
        for key in idle[: max(0, len(idle) - self.max_idle)]:
            del self._sessions[key]
