"""Which schema versions of sessionmem have a PostgreSQL memory index open, so none drops it under another.

Trigger: a host starts with a sessionmem whose index schema version differs from the index's (an upgrade
rolled out one host at a time, or a host left behind).
Why: it used to drop the index's tables and rebuild them, while the other hosts were reading them: their
searches failed on missing tables or found an empty index, and a host of the old version, started
again, dropped the new tables in turn.
Outcome: every open index holds a shared session advisory lock keyed by its schema and its version (the
server frees it with the connection, so a crashed host holds nothing). A host finding another version
in the index replaces the tables only when no host of another version holds the index open, in one
transaction (readers see the old tables or the new ones, never none); otherwise it refuses to open,
naming both versions, and leaves the index to the hosts using it.
"""

from __future__ import annotations

from typing import Any

from sessionmem.errors import MemoryIndexError

_PREFIX = "sessionmem.memory.version:"


def hold(conn: Any, schema: str, version: int) -> None:
    """Say on ``conn`` (for as long as it lives) that a host of ``version`` has ``schema``'s index open."""
    conn.execute("SELECT pg_advisory_lock_shared(hashtext(%s), %s)", (_PREFIX + schema, version))


def others(conn: Any, schema: str, version: int) -> list[tuple[int, int]]:
    """(version, hosts) of every other schema version that has ``schema``'s index open."""
    rows = conn.execute(
        "SELECT objid::int, count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2"
        " AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        " AND classid = hashtext(%s)::oid AND objid::int <> %s GROUP BY 1 ORDER BY 1",
        (_PREFIX + schema, version),
    ).fetchall()
    return [(int(r[0]), int(r[1])) for r in rows]


def refusal(where: str, stored: str, mine: int, open_by: list[tuple[int, int]]) -> MemoryIndexError:
    """Why this host does not open the index: hosts of another version have it open."""
    hosts = ", ".join(f"{n} process{'es' if n > 1 else ''} of schema version {v}" for v, n in open_by)
    behind = ", ".join(str(v) for v, _ in open_by)
    return MemoryIndexError(
        f"memory index {where}: this index was built by schema version {stored}; this sessionmem uses "
        f"schema version {mine}, and {hosts} (another sessionmem, on this host or another) have it open. "
        "Rebuilding it now would drop its tables under them, so this sessionmem does not open it. Run the "
        f"same sessionmem on every host: upgrade (or stop) the hosts of schema version {behind}; then this "
        f"one rebuilds the index for version {mine} when it opens it."
    )
