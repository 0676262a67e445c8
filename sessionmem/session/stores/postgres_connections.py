"""Which connection a PostgreSQL store's read or write goes through: the one holding the session's turn
lock, when this process holds it, else one of the pool's.

Trigger: a host is killed in the middle of a turn. Why: its turn lock and its writes were on different
connections, the server ends each of them on its own, and the lock's (idle, waiting for its next
command) ends first: another host could take the turn while the dead host's last write, already sent,
was still to be committed, then not see it (a flush or a compaction done twice, a row read out of
order). Outcome: while this process holds a session's turn lock, every statement about that session
goes through the lock's connection; the server runs a connection's statements in order and frees its
advisory lock only when the connection ends, so whatever the dead host sent is committed (or rolled
back) before anyone else gets the turn.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sessionmem.dsn import PostgresUrl


class Connections:
    """The store's pool, and the connections holding turn locks in this process, by session key; ``url``
    is the database's (its errors pass through :func:`~sessionmem.dsn.postgres_errors` with it)."""

    def __init__(self, pool: Any, url: PostgresUrl) -> None:
        self.pool = pool
        self.url = url
        self._holders: dict[str, tuple[Any, threading.RLock]] = {}
        self._guard = threading.Lock()

    def hold(self, key: str, conn: Any, guard: threading.RLock) -> None:
        """``conn`` holds the turn lock of ``key``: statements about ``key`` use it (under ``guard``)."""
        with self._guard:
            self._holders[key] = (conn, guard)

    def let_go(self, key: str, conn: Any) -> None:
        """``conn`` is about to give up the turn lock of ``key``: statements go to the pool again."""
        with self._guard:
            if key in self._holders and self._holders[key][0] is conn:
                del self._holders[key]

    @contextlib.contextmanager
    def connection(self, key: str | None = None) -> Iterator[Any]:
        """The connection for a statement about session ``key`` (None: about no one session)."""
        held = self._holders.get(key) if key is not None else None
        if held is not None:
            conn, guard = held
            with guard:
                yield conn
            return
        with self.pool.connection() as conn:
            yield conn
