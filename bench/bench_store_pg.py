"""Per-turn cost of the PostgreSQL session store at 10, 1,000 and 10,000 sessions (CPU and wall, p50/p95).

For each size, in a scratch schema of the server (``SESSIONMEM_TEST_PG_DSN``, default
``postgresql://postgres@127.0.0.1:5432/test``): the agent's store is filled with that many sessions (an
entry each and a 20-entry transcript, written with COPY: the rows the store itself writes), then a
``SessionRunner`` on a ``PostgresSessionStore`` runs turns on 10 of them in turn, with a scripted model
that answers at once with a fixed reported usage (plain turns: no flush, no compaction). Per turn:

- turn overhead: ``run_turn`` wall time and this process's CPU time (all threads, ``time.process_time``)
  minus the model's;
- of which in the store: wall and CPU inside the store's and the transcript's methods and the turn lock;
- server CPU: the CPU the PostgreSQL backends serving this process used during the turn (from
  ``/proc/<pid>/stat`` of the backends, when the server runs on this machine; else n/a).

Target (issue 10): <= 1 ms CPU per turn at 10,000 sessions, and within 1.5x of the cost at 10.

    python bench/bench_store_pg.py             # 10, 1,000 and 10,000 sessions, 200 turns each
    python bench/bench_store_pg.py --quick     # 10 and 1,000 sessions, 40 turns

:func:`measure` is the function another script (bench_store.py) calls for the PostgreSQL column.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.support.postgres
from bench_runner import TimedModel
from common import footer, header, parser, stats, table, verdict

SIZES = (10, 1_000, 10_000)
ACTIVE = 10  # sessions the measured turns go round
TRANSCRIPT_ENTRIES = 20  # per filled session
TARGET_CPU_MS = 1.0
TARGET_RATIO = 1.5
APPLICATION = "sessionmem-bench-store"


@dataclass
class TurnCost:
    wall_ms: float
    cpu_ms: float
    store_wall_ms: float
    store_cpu_ms: float
    server_cpu_ms: float | None


@dataclass
class StoreClock:
    """Adds up wall and CPU time spent in the store's methods (wrapped on the classes, behaviour as is)."""

    wall: float = 0.0
    cpu: float = 0.0
    depth: int = 0
    installed: list[tuple[Any, str, Any]] = field(default_factory=list)

    def wrap(self, cls: Any, name: str) -> None:
        real = getattr(cls, name)
        clock = self

        if asyncio.iscoroutinefunction(real):

            @functools.wraps(real)
            async def timed_async(*args: Any, **kwargs: Any) -> Any:
                with clock.span():
                    return await real(*args, **kwargs)

            setattr(cls, name, timed_async)
        else:

            @functools.wraps(real)
            def timed(*args: Any, **kwargs: Any) -> Any:
                with clock.span():
                    return real(*args, **kwargs)

            setattr(cls, name, timed)
        self.installed.append((cls, name, real))

    @contextlib.contextmanager
    def span(self) -> Iterator[None]:
        self.depth += 1
        start, cpu = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            self.depth -= 1
            if self.depth == 0:  # nested calls (patch -> update) counted once
                self.wall += time.perf_counter() - start
                self.cpu += time.process_time() - cpu

    def uninstall(self) -> None:
        for cls, name, real in reversed(self.installed):
            setattr(cls, name, real)
        self.installed.clear()


class CpuTimedModel(TimedModel):
    """bench_runner's timed model, plus the model's CPU time by ``time.process_time`` (precise, where
    getrusage counts in clock ticks), so it can be taken out of each turn's."""

    cpu = 0.0

    async def complete(self, request: Any) -> Any:
        cpu = time.process_time()
        try:
            return await super().complete(request)
        finally:
            self.cpu += time.process_time() - cpu


def server_cpu_s(conn: Any) -> float | None:
    """CPU seconds used so far by the server backends of this benchmark's connections (None: unknown)."""
    pids = conn.execute(
        "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (APPLICATION,)
    ).fetchall()
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for (pid,) in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        total += (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
    return total


def fill(dsn: str, sessions: int, agent_id: str, cwd: Path) -> list[str]:
    """``sessions`` sessions with a transcript each, written with COPY; returns their keys."""
    import orjson
    import psycopg

    from sessionmem.messages import Message
    from sessionmem.session.stores.entry import SessionEntry
    from sessionmem.session.stores.transcript import message_fields, new_entry, new_header

    keys = [f"agent:{agent_id}:direct:user{i:05d}" for i in range(sessions)]
    with psycopg.connect(dsn) as conn, conn.cursor() as cur:
        with cur.copy("COPY sessionmem_sessions (agent_id, key, entry, updated_at) FROM STDIN") as copy:
            ids = []
            for key in keys:
                session_id = str(uuid.uuid4())
                ids.append(session_id)
                entry = SessionEntry.model_validate({"sessionId": session_id, "sessionKey": key})
                copy.write_row((agent_id, key, orjson.dumps(entry.to_json_dict()).decode(), entry.updated_at))
        with cur.copy(
            "COPY sessionmem_transcripts (agent_id, session_id, session_key, header) FROM STDIN"
        ) as copy:
            for key, session_id in zip(keys, ids, strict=True):
                header = new_header(session_id, cwd, session_key=key)
                copy.write_row((agent_id, session_id, key, orjson.dumps(header).decode()))
        with cur.copy(
            "COPY sessionmem_transcript_entries (agent_id, session_id, kind, entry, bytes) FROM STDIN"
        ) as copy:
            for session_id in ids:
                parent = None
                for n in range(TRANSCRIPT_ENTRIES):
                    message = Message.user(f"hello {n}") if n % 2 == 0 else Message.assistant(f"hi {n}")
                    eid = f"{n:08x}"
                    line = orjson.dumps(new_entry("message", eid, parent, message_fields(message))).decode()
                    copy.write_row((agent_id, session_id, "message", line, len(line) + 1))
                    parent = eid
    with psycopg.connect(dsn, autocommit=True) as conn:
        # Settled before timing: an autovacuum of the fresh rows starting mid-measurement would take a
        # core from the turns (two cores here), and it starts later the more rows there are.
        conn.execute("VACUUM ANALYZE")
    return keys


def measure(dsn: str, sessions: int, turns: int, root: Path) -> list[TurnCost]:
    """Fill a store (on ``dsn``, an empty schema) with ``sessions`` sessions, then time ``turns`` turns
    round ``ACTIVE`` of them through the runner; see the module docstring."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    from sessionmem.messages import Message, Usage
    from sessionmem.model.scripted import ScriptedModel
    from sessionmem.session.runner import SessionRunner
    from sessionmem.session.stores.postgres_transcript import PostgresTranscript
    from sessionmem.session.stores.sessions_postgres import PgTurnLock, PostgresSessionStore

    # A URL still (the store takes postgresql:// URLs only), naming this process to the observer below.
    dsn = f"{dsn}{'&' if '?' in dsn else '?'}application_name={APPLICATION}"
    workspace = root / "workspace"
    (workspace / "memory").mkdir(parents=True, exist_ok=True)
    store = PostgresSessionStore.connect(dsn, agent_id="main")
    keys = fill(dsn, sessions, "main", workspace)
    active = keys[:: max(1, len(keys) // ACTIVE)][:ACTIVE]

    def reply(request: Any) -> Any:
        return Message.assistant("Noted, thanks.", usage=Usage(input=1_000, output=5))

    model = CpuTimedModel(ScriptedModel(responder=reply, name="bench-scripted"))
    runner = SessionRunner(model, workspace=workspace, state_dir=root / "state", store=store)
    clock = StoreClock()
    for name in ("get", "all", "update", "delete", "open_transcript", "archive_transcript"):
        clock.wrap(PostgresSessionStore, name)
    # The transcript's own reads and writes (write_entry: one row; _rows_after: only what is new).
    for name in ("write_entry", "_rows_after", "version", "bytes_since_compaction"):
        clock.wrap(PostgresTranscript, name)
    for name in ("__aenter__", "__aexit__"):
        clock.wrap(PgTurnLock, name)
    out: list[TurnCost] = []
    try:
        with psycopg.connect(make_conninfo(dsn, application_name="sessionmem-bench-observer")) as observer:

            async def run() -> None:
                for key in active:  # opened and warmed (one turn each), not timed
                    await runner.open(key).run_turn("warm up")
                for n in range(turns):
                    session = runner.open(active[n % len(active)])
                    model.model_s = model.cpu = clock.wall = clock.cpu = 0.0
                    server = server_cpu_s(observer)
                    start, cpu = time.perf_counter(), time.process_time()
                    await session.run_turn(f"turn {n}: what did we decide about the cutover?")
                    wall, cpu_used = time.perf_counter() - start, time.process_time() - cpu
                    after = server_cpu_s(observer)
                    out.append(
                        TurnCost(
                            (wall - model.model_s) * 1000,
                            (cpu_used - model.cpu) * 1000,
                            clock.wall * 1000,
                            clock.cpu * 1000,
                            (after - server) * 1000 if after is not None and server is not None else None,
                        )
                    )

            asyncio.run(run())
    finally:
        clock.uninstall()
        store.close()
    return out


def describe(sessions: int, costs: list[TurnCost]) -> list[object]:
    wall, cpu = stats(c.wall_ms for c in costs), stats(c.cpu_ms for c in costs)
    store_wall, store_cpu = stats(c.store_wall_ms for c in costs), stats(c.store_cpu_ms for c in costs)
    server = [c.server_cpu_ms for c in costs if c.server_cpu_ms is not None]
    return [
        f"{sessions:,}",
        f"{cpu.p50:.3f} / {cpu.p95:.3f}",
        f"{wall.p50:.3f} / {wall.p95:.3f}",
        f"{store_cpu.p50:.3f} / {store_cpu.p95:.3f}",
        f"{store_wall.p50:.3f} / {store_wall.p95:.3f}",
        f"{sum(server) / len(server):.3f}" if server else "n/a",
        len(costs),
    ]


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--turns", type=int, default=200, help="measured turns per size (default 200)")
    p.add_argument("--sizes", help="comma-separated session counts (default 10,1000,10000)")
    args = p.parse_args()
    sizes, turns = ((10, 100), 5) if args.smoke else ((10, 1_000), 40) if args.quick else (SIZES, args.turns)
    if args.sizes:
        sizes = tuple(int(n) for n in args.sizes.split(","))
    header("PostgreSQL session store: per-turn cost by number of sessions (bench_store_pg.py)", args)
    from tests.support.postgres import scratch_schema, server_dsn, unavailable

    problem = unavailable()
    if problem is not None:
        print(f"SKIPPED: {problem}")
        footer()
        return
    print(
        f"Server: {server_dsn().split('@')[-1]}. For each size, a fresh schema filled with that many "
        f"sessions ({TRANSCRIPT_ENTRIES} transcript entries each), then {turns} plain turns through "
        f"the runner round {ACTIVE} of them (scripted model answering at once; its time taken out). "
        "CPU: this process, all threads (the pool's too). Server CPU: the backends' utime + stime "
        "(clock ticks, so a mean over the turns).\n"
    )
    import tempfile

    from sessionmem.tokens import configure_litellm_environment

    configure_litellm_environment()
    results: dict[int, list[TurnCost]] = {}
    for size in sizes:
        print(f"{size:,} sessions ...", file=sys.stderr, flush=True)
        with scratch_schema("sessionmem_bench") as dsn, tempfile.TemporaryDirectory() as root:
            results[size] = measure(dsn, size, turns, Path(root))
    print(
        table(
            [
                "sessions",
                "turn CPU p50 / p95 (ms)",
                "turn wall p50 / p95 (ms)",
                "in the store: CPU p50 / p95 (ms)",
                "in the store: wall p50 / p95 (ms)",
                "server CPU per turn, mean (ms)",
                "turns",
            ],
            [describe(size, costs) for size, costs in results.items()],
        )
    )
    base = stats(c.cpu_ms for c in results[sizes[0]]).p50
    top = stats(c.cpu_ms for c in results[sizes[-1]]).p50
    print(
        f"\nTargets: CPU per turn at {sizes[-1]:,} sessions <= {TARGET_CPU_MS} ms: p50 {top:.3f} ms, "
        f"{verdict(top, TARGET_CPU_MS)}; within {TARGET_RATIO}x of {sizes[0]:,} sessions: "
        f"{top / base:.2f}x, {verdict(top / base, TARGET_RATIO)}."
    )
    footer()


if __name__ == "__main__":
    main()
