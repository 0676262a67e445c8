"""Per-turn session store cost (CPU and wall, p50/p95) at 10, 1,000 and 10,000 sessions, per backend.

The real runner and a scripted model run plain turns on one session of a store that holds N sessions in
all; the store is wrapped in a proxy that adds up the time spent inside each of its methods (``get``,
``all``, ``update``, ``delete``, ``open_transcript``, taking and releasing the turn lock, ...): what a turn
costs the store, without the model, the prompt building or the transcript appends. CPU is this thread's
(``time.thread_time``), wall is ``time.perf_counter`` (fsyncs included).

    python bench/bench_store.py                       # sessions.json and SQLite
    python bench/bench_store.py --store sqlite        # one backend
    python bench/bench_store.py --store postgresql://postgres@127.0.0.1:5432/test   # any session.store

``--store`` takes ``sessions.json``, ``sqlite`` (a fresh store in a temporary folder per size) or any
``session.store`` value (used as given: it must name an empty store). See bench/README.md.
"""

from __future__ import annotations

import asyncio
import random
import sys
import tempfile
import time
import uuid
from collections import Counter
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import WORDS, footer, header, parser, stats, table, verdict

SIZES = (10, 1_000, 10_000)
TARGET_CPU_MS = 1.0  # SQLite (and PostgreSQL) at 10,000 sessions
TARGET_GROWTH = 1.5  # at 10,000 sessions against 10
KEY = "agent:main:main"
NAMED = {"sessions.json": "sessions.json", "sqlite": "sessions.sqlite"}


class TimedStore:
    """Delegates every method of the store seam to ``inner`` and adds up the time spent inside."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.cpu = 0.0
        self.wall = 0.0
        self.calls: Counter[str] = Counter()

    def reset(self) -> None:
        self.cpu, self.wall, self.calls = 0.0, 0.0, Counter()

    def _timed(self, name: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        cpu, wall = time.thread_time(), time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            self.cpu += time.thread_time() - cpu
            self.wall += time.perf_counter() - wall
            self.calls[name] += 1

    @property
    def sessions_dir(self) -> Any:
        return self.inner.sessions_dir

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if not callable(attr):
            return attr
        return lambda *args, **kwargs: self._timed(name, attr, *args, **kwargs)

    def turn_lock(self, key: str, **kwargs: Any) -> Any:
        lock = self.inner.turn_lock(key, **kwargs)

        @asynccontextmanager
        async def timed() -> Any:
            self._timed("turn_lock", lambda: None)  # counts the call; the lock's own time is added below
            cpu, wall = time.thread_time(), time.perf_counter()
            await lock.__aenter__()
            self.cpu += time.thread_time() - cpu
            self.wall += time.perf_counter() - wall
            try:
                yield
            finally:
                cpu, wall = time.thread_time(), time.perf_counter()
                await lock.__aexit__(None, None, None)
                self.cpu += time.thread_time() - cpu
                self.wall += time.perf_counter() - wall

        return timed()


def seed(store: Any, count: int) -> None:
    """``count`` other sessions, each with the figures a session that ran a turn has."""
    from sessionmem.session.stores.entry import SessionEntry

    now = int(time.time() * 1000)
    entries = {}
    for i in range(count):
        sid = str(uuid.UUID(int=i))
        key = f"agent:main:telegram:direct:user{i}"
        entries[key] = SessionEntry.model_validate(
            {
                "sessionId": sid,
                "updatedAt": now - i,
                "sessionFile": str(Path(store.sessions_dir or ".") / f"{sid}.jsonl"),
                "sessionKey": key,
                "chatType": "direct",
                "model": "bench-scripted",
                "modelProvider": "scripted",
                "contextTokens": 200_000,
                "inputTokens": 1_000,
                "outputTokens": 5,
                "totalTokens": 1_000,
                "totalTokensFresh": True,
                "compactionCount": i % 4,
            }
        )
    if hasattr(store, "transaction"):  # sessions.json: one write for all
        with store.transaction() as held:
            held.update(entries)
    elif hasattr(store, "put_many"):  # SQLite: one transaction
        store.put_many(entries)
    else:  # any other backend, through the seam
        for key, entry in entries.items():
            store.update(key, lambda _current, entry=entry: entry)


async def measure(
    spec: str, size: int, turns: int, root: Path
) -> tuple[list[float], list[float], Counter[str]]:
    from sessionmem.config import Config, merge
    from sessionmem.messages import Message, Usage
    from sessionmem.model.scripted import ScriptedModel
    from sessionmem.session.runner import SessionRunner
    from sessionmem.session.stores.opening import open_session_store

    state = root / "state"
    store = open_session_store(spec, state_dir=state, agent_id="main")
    seed(store, size - 1)
    timed = TimedStore(store)

    def reply(request: Any) -> Any:
        return Message.assistant("Noted, thanks.", usage=Usage(input=1_000, output=5))

    ws = root / "workspace"
    (ws / "memory").mkdir(parents=True, exist_ok=True)
    config = merge(Config(), {"session": {"store": spec}})
    runner = SessionRunner(
        ScriptedModel(responder=reply, name="bench-scripted"),
        config=config,
        workspace=ws,
        state_dir=state,
        store=timed,  # type: ignore[arg-type]
    )
    session = runner.open(KEY)
    assert len(store.all()) == size, f"the store holds {len(store.all())} sessions, expected {size}"
    rng = random.Random(size)
    for _ in range(3):  # unmeasured: the session's first turns
        await session.run_turn(" ".join(rng.choice(WORDS) for _ in range(20)))
    cpu, wall, calls = [], [], Counter[str]()
    for _ in range(turns):
        timed.reset()
        await session.run_turn(" ".join(rng.choice(WORDS) for _ in range(20)))
        cpu.append(timed.cpu * 1000)
        wall.append(timed.wall * 1000)
        calls = timed.calls
    await runner.aclose()
    return cpu, wall, calls


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument(
        "--store", action="append", help="sessions.json, sqlite, or a session.store value (repeatable)"
    )
    p.add_argument("--turns", type=int, default=60, help="measured turns per size (default 60)")
    args = p.parse_args()
    stores = args.store or list(NAMED)
    sizes, turns = ((10, 100), 3) if args.smoke else ((10, 1_000), 10) if args.quick else (SIZES, args.turns)
    header("Session store cost per turn (bench_store.py)", args)
    from sessionmem.tokens import configure_litellm_environment

    configure_litellm_environment()
    results: dict[tuple[str, int], tuple[Any, Any, Counter[str]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-store-") as tmp_name:
        for name in stores:
            for size in sizes:
                root = Path(tmp_name) / f"{name.replace('/', '_').replace(':', '_')}-{size}"
                spec = str(root / "sessions" / NAMED[name]) if name in NAMED else name
                cpu, wall, calls = asyncio.run(measure(spec, size, turns, root))
                results[(name, size)] = (stats(cpu), stats(wall), calls)

    print(
        f"Per size: a store holding N sessions in all (N - 1 seeded, plus the one talking), then {turns} "
        "plain turns of the real runner with a scripted model (no flush, no compaction); per turn, the "
        "time spent inside the store's methods (calls per turn in the last column). CPU = this thread's "
        "CPU time; wall includes the disk (fsync).\n"
    )
    rows = []
    for (name, size), (cpu, wall, calls) in results.items():
        base = results.get((name, sizes[0]))
        growth = cpu.p50 / base[0].p50 if base is not None and base[0].p50 > 0 else float("nan")
        target = ""
        if name != "sessions.json" and size == sizes[-1]:
            target = (
                f"<= {TARGET_CPU_MS:g} ms: {verdict(cpu.p50, TARGET_CPU_MS)}; "
                f"<= {TARGET_GROWTH}x of {sizes[0]}: {verdict(growth, TARGET_GROWTH)}"
            )
        rows.append(
            [
                name,
                f"{size:,}",
                f"{cpu.p50:.3f} / {cpu.p95:.3f}",
                f"{wall.p50:.3f} / {wall.p95:.3f}",
                f"{growth:.2f}x",
                ", ".join(f"{k} {v}" for k, v in sorted(calls.items())),
                target,
            ]
        )
    headers = [
        "store",
        "sessions",
        "CPU p50 / p95 (ms)",
        "wall p50 / p95 (ms)",
        f"CPU p50 vs {sizes[0]}",
        "store calls per turn",
        "target",
    ]
    print(table(headers, rows))
    footer()


if __name__ == "__main__":
    main()
