"""A conversation killed again and again, and the audit of what it left behind.

Used by ``tests/session/test_crash_loop.py`` (a few dozen kills) and ``bench/bench_crash.py`` (200 and
more). One or two *runners* (child processes, forked) open the same session key and run a scripted
conversation with a small context window, so a silent flush and a compaction come every few turns.
After each turn's reply, a runner acknowledges it with one line in its ack file (the memory work the
turn made due runs after that: replies first), and marks in its work file each time that work starts. The
model answers after a few milliseconds, as a real one would after many more. The parent kills a
runner with SIGKILL at a random moment, then, holding the session's turn lock so that no other runner is
half-way through a turn:

- reads sessions.json as the kill left it and compares it with the transcript ("store behind at kill":
  how often a kill landed between the two writes; these are the cases reconciliation must repair);
- opens the session in a new runner, as a restarted process would, and compares again ("count
  mismatches after reopen": ``compactionCount`` against the compaction entries, and
  ``memoryFlushCompactionCount`` against the cycle of the last flush that completed);

and starts the runner again. At the end :func:`audit` reads the transcript as a user would check it:

- lines torn (a line that does not parse) and lines lost (an entry seen at an earlier check that is
  gone, or a turn a runner acknowledged that is not in the transcript);
- cycles compacted without a flush: a compaction with no completed flush turn since the previous one
  (found by position in the transcript, not from the runner's own bookkeeping), and cycles flushed twice;
- turns dropped unsummarised: an acknowledged turn that is neither in the context the transcript rebuilds
  nor in the latest compaction summary (the scripted summariser lists every turn it was given, and
  carries over the turns of the summary before it).

The figures are computed from the files alone (with the PostgreSQL store: the transcript rows, read
with SQL), the way a user would look at them, never from the runner's events or its own reconciliation
code.

Backends: a :class:`Layout` keeps the session in the store its ``store_spec`` names (``session.store``:
None for sessions.json and JSONL files under ``root``, a SQLite file, or a PostgreSQL DSN whose
``search_path`` names a scratch schema: then in
:class:`~sessionmem.session.stores.sessions_postgres.PostgresSessionStore`, the runners acting as two hosts
on one
database). :func:`run_hosts` runs two runners without kills, each for a fixed number of turns.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import re
import signal
import sys
import time
import traceback
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import orjson

from sessionmem.config import Config, merge
from sessionmem.dsn import is_postgres_dsn
from sessionmem.messages import ToolCall, written_in_a_flush
from sessionmem.model.base import ModelRequest
from sessionmem.model.noreply import SILENT_REPLY_TOKEN
from sessionmem.model.scripted import ScriptedModel
from sessionmem.session.runner import SessionRunner
from sessionmem.session.stores.backend import SessionBackend
from sessionmem.session.stores.opening import open_session_store
from sessionmem.session.stores.transcript import context_from_entries, entry_from_dict, message_from_dict

KEY = "agent:main:main"
RUNNER_NAMES = "AB"
TAG = re.compile(r"\[([A-Z])(\d+)\]")  # in user messages: "[A17] ..."
SPAN = re.compile(r"([A-Z])(\d+)(?:-(\d+))?")  # in summaries: "turns: A0-16 A18 B0-12"
FILLER = [f"topic{i}" for i in range(24)]  # the words of the scripted turns


def loop_config(store: str | None = None) -> Config:
    """A small window: compaction at 2,500 projected tokens, the flush at 1,700; a turn adds about 300.
    ``store``: ``session.store`` (None: sessions.json in the state folder)."""
    config = merge(
        Config(),
        {
            "agents": {
                "defaults": {
                    "contextTokens": 3000,
                    "userTimezone": "UTC",
                    "compaction": {
                        "reserveTokens": 500,
                        "reserveTokensFloor": 500,
                        "keepRecentTokens": 400,
                        "memoryFlush": {"softThresholdTokens": 800},
                    },
                }
            },
            "session": {"turnLockTimeoutSeconds": 120},
        },
    )
    return merge(config, {"session": {"store": store}}) if store is not None else config


def turn_text(runner: str, n: int) -> str:
    words = [FILLER[(n * 7 + i * 3) % len(FILLER)] for i in range(110)]
    return f"[{runner}{n}] " + " ".join(words)


# --- the scripted model ----------------------------------------------------------------------------


def turns_in(messages: Any) -> set[tuple[str, int]]:
    """The turns a request or context shows: tags of user messages, and the ``turns:`` lines of the
    compaction summaries it carries (as a summary message, or quoted as the previous summary)."""
    seen: set[tuple[str, int]] = set()
    for message in messages:
        if message.role in ("user", "system"):
            seen |= {(name, int(n)) for name, n in TAG.findall(message.content)}
            seen |= turns_of_summary(message.content)
    return seen


def turns_of_summary(text: str) -> set[tuple[str, int]]:
    seen: set[tuple[str, int]] = set()
    for line in text.splitlines():
        if line.startswith("turns:"):
            for name, start, end in SPAN.findall(line):
                seen |= {(name, n) for n in range(int(start), int(end or start) + 1)}
    return seen


def spans(turns: set[tuple[str, int]]) -> str:
    """``A0-16 A18 B0-12``: the turns as runs of consecutive numbers."""
    out: list[str] = []
    for name in sorted({name for name, _ in turns}):
        numbers = sorted(n for m, n in turns if m == name)
        start = prev = numbers[0]
        for n in [*numbers[1:], None]:
            if n is not None and n == prev + 1:
                prev = n
                continue
            out.append(f"{name}{start}" if start == prev else f"{name}{start}-{prev}")
            if n is not None:
                start = prev = n
    return " ".join(out)


MODEL_LATENCY_S = 0.003  # per model call: the window between a reply and its memory work is real


async def respond(request: ModelRequest) -> Any:
    await asyncio.sleep(MODEL_LATENCY_S)
    if request.purpose == "compaction":
        return "## Turns\nturns: " + spans(turns_in(request.messages))
    if request.purpose == "flush":
        if request.messages[-1].role == "tool":
            return SILENT_REPLY_TOKEN
        latest = max(turns_in(request.messages), default=("-", 0), key=lambda t: t[1])
        note = f"- facts up to turn {latest[0]}{latest[1]}"
        return ToolCall(f"call-{uuid.uuid4().hex[:12]}", "memory_append_daily", {"text": note})
    return "ok " + " ".join(FILLER[:25])


# --- one runner (a child process) ------------------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    root: Path
    store_spec: str | None = None  # session.store of the runners (None: sessions.json, the default)

    @property
    def dsn(self) -> str | None:
        """The PostgreSQL DSN when the store is PostgreSQL (its transcripts are rows, not files)."""
        return self.store_spec if is_postgres_dsn(self.store_spec) else None

    @property
    def state(self) -> Path:
        return self.root / "state"

    @property
    def workspace(self) -> Path:
        return self.root / "workspace"

    def acks(self, runner: str) -> Path:
        return self.root / f"acks-{runner}.txt"

    def errors(self, runner: str) -> Path:
        return self.root / f"errors-{runner}.txt"

    def work_marks(self, runner: str) -> Path:
        """One line each time the runner's memory work after a reply starts."""
        return self.root / f"work-{runner}.txt"

    def early_marks(self, runner: str) -> Path:
        """One line each time a turn of the runner was answered while the memory work before it ran."""
        return self.root / f"early-{runner}.txt"

    def store(self) -> SessionBackend:
        """The session store (for PostgreSQL: this process's own connections, made once per process)."""
        if self.dsn is None:
            return open_session_store(self.store_spec, state_dir=self.state, agent_id="main")
        return _postgres_store(self.dsn, os.getpid())

    def sessions_dir(self) -> Path:
        """The transcripts' folder of a file backend."""
        folder = self.store().sessions_dir
        assert folder is not None, "a file backend keeps its transcripts in a folder"
        return folder

    def runner(self, on_event: Any = None) -> SessionRunner:
        """A runner of the loop's conversation on this layout's store."""
        return SessionRunner(
            ScriptedModel(responder=respond),
            config=loop_config(self.store_spec),
            workspace=self.workspace,
            state_dir=self.state,
            store=self.store(),
            on_event=on_event,
        )

    def transcript_lines(self) -> list[bytes]:
        """The current session's transcript as the lines a user would read: the JSONL file's lines, or
        the header and the entry rows in id order."""
        entry = self.store().get(KEY)
        assert entry is not None, "the session has no store entry"
        if self.dsn is None:
            path = self.sessions_dir() / f"{entry.session_id}.jsonl"
            return path.read_bytes().split(b"\n") if path.exists() else []
        return _rows(self.dsn, entry.session_id)

    def every_transcript(self) -> Iterator[list[bytes]]:
        """The lines of every transcript of the store (archived ones too)."""
        if self.dsn is None:
            for path in self.sessions_dir().glob("*.jsonl*"):
                yield path.read_bytes().split(b"\n")
            return
        ids = (
            _reader(self.dsn, os.getpid()).execute("SELECT session_id FROM sessionmem_transcripts").fetchall()
        )
        for (session_id,) in ids:
            yield _rows(self.dsn, session_id)

    def new_lines(self, cursor: tuple[str, int] | None) -> tuple[list[bytes], tuple[str, int] | None]:
        """Lines appended to the current transcript since ``cursor`` (None: start from now), and the new
        cursor: (session id, file offset or newest row id)."""
        entry = self.store().get(KEY)
        if entry is None:
            return [], cursor
        session_id = entry.session_id
        if self.dsn is None:
            path = self.sessions_dir() / f"{session_id}.jsonl"
            size = path.stat().st_size if path.exists() else 0
            if cursor is None or cursor[0] != session_id:
                return [], (session_id, size)
            if size <= cursor[1]:
                return [], cursor
            with open(path, "rb") as f:
                f.seek(cursor[1])
                return f.read(size - cursor[1]).split(b"\n"), (session_id, size)
        conn = _reader(self.dsn, os.getpid())
        after = cursor[1] if cursor is not None and cursor[0] == session_id else None
        if after is None:
            row = conn.execute(
                "SELECT coalesce(max(id), 0) FROM sessionmem_transcript_entries WHERE session_id = %s",
                (session_id,),
            ).fetchone()
            return [], (session_id, int(row[0]) if row else 0)
        rows = conn.execute(
            """SELECT id, entry::text FROM sessionmem_transcript_entries
               WHERE session_id = %s AND id > %s ORDER BY id""",
            (session_id, after),
        ).fetchall()
        if not rows:
            return [], cursor
        return [text.encode() for _, text in rows], (session_id, int(rows[-1][0]))


@cache
def _postgres_store(dsn: str, pid: int) -> SessionBackend:
    """One store per process (``pid``: a forked child makes its own connections, never its parent's)."""
    from sessionmem.session.stores.sessions_postgres import PostgresSessionStore

    return PostgresSessionStore.connect(dsn)


@cache
def _reader(dsn: str, pid: int) -> Any:
    """This process's connection for reading the transcript rows with plain SQL (not the store's code)."""
    import psycopg

    return psycopg.connect(dsn, autocommit=True)


def _rows(dsn: str, session_id: str) -> list[bytes]:
    """A PostgreSQL transcript's header and entries, as lines."""
    conn = _reader(dsn, os.getpid())
    header = conn.execute(
        "SELECT header::text FROM sessionmem_transcripts WHERE session_id = %s", (session_id,)
    ).fetchone()
    rows = conn.execute(
        "SELECT entry::text FROM sessionmem_transcript_entries WHERE session_id = %s ORDER BY id",
        (session_id,),
    ).fetchall()
    return [text.encode() for (text,) in ([header] if header else []) + rows]


def acknowledged(layout: Layout, runner: str) -> list[int]:
    try:
        lines = layout.acks(runner).read_text(encoding="utf-8").split()
    except FileNotFoundError:
        return []
    return [int(n) for n in lines]


def run_runner(layout: Layout, runner: str, turns: int | None = None, barrier: Any = None) -> None:
    """A child: go on with the conversation from the turn after its last acknowledged one, forever (or
    until ``turns`` are acknowledged); with ``barrier``, start together with the other runner."""
    try:
        done = acknowledged(layout, runner)
        n = max(done, default=-1) + 1
        ack = os.open(layout.acks(runner), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        marks = os.open(layout.work_marks(runner), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        early = os.open(layout.early_marks(runner), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        think = random.Random(f"{runner}-{n}")

        def mark_work(event: Any) -> None:
            if event.kind == "memory_work_start":
                os.write(marks, f"{event.work}\n".encode())
            elif event.kind == "turn" and event.early:
                os.write(early, b"early\n")

        session = layout.runner(on_event=mark_work).open(KEY)
        if barrier is not None:
            barrier.wait(60)

        async def converse(n: int) -> None:
            while turns is None or n < turns:
                await session.run_turn(turn_text(runner, n))  # the reply: its memory work runs after
                os.write(ack, f"{n}\n".encode())
                n += 1
                # The user answers within a few ms: often while that work runs (the next turn's first
                # model call is then made at once: session.turn.early_call).
                await asyncio.sleep(think.uniform(0.0, 0.005))
            await session.wait_idle()

        asyncio.run(converse(n))
        os._exit(0)
    except BaseException:
        with open(layout.errors(runner), "a", encoding="utf-8") as out:
            out.write(traceback.format_exc())
        sys.stderr.write(traceback.format_exc())
        os._exit(1)


def start_runner(layout: Layout, runner: str, turns: int | None = None, barrier: Any = None) -> Any:
    process = get_context("fork").Process(
        target=run_runner, args=(layout, runner, turns, barrier), daemon=True
    )
    process.start()
    return process


# --- reading the files ------------------------------------------------------------------------------


@dataclass
class TranscriptFacts:
    """What the transcript says, by position (independent of the runner's bookkeeping)."""

    entry_ids: set[str] = field(default_factory=set)
    torn_lines: int = 0
    compactions: int = 0
    last_completed_flush_cycle: int | None = None
    cycles_without_flush: int = 0
    cycles_flushed_twice: int = 0
    flushes_completed: int = 0
    flushes_interrupted: int = 0
    user_turns: set[tuple[str, int]] = field(default_factory=set)
    remembered: set[tuple[str, int]] = field(default_factory=set)  # in the context or the last summary
    turns_written_twice: int = 0  # a user turn's message in the transcript more than once
    order_violations: int = 0  # a runner's turn written after one of its later turns
    chain_breaks: int = 0  # an entry whose parentId is not the entry before it
    switches: int = 0  # consecutive user turns from different runners: how much the runners interleaved


def read_transcript(path: Path) -> TranscriptFacts:
    return read_lines(path.read_bytes().split(b"\n") if path.exists() else [])


def read_lines(lines: Iterable[bytes]) -> TranscriptFacts:
    """The facts of a transcript's lines, by position."""
    facts = TranscriptFacts()
    entries = []
    for no, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            facts.torn_lines += 1
            continue
        entry = entry_from_dict(no, obj) if isinstance(obj, dict) else None
        if entry is not None:
            entries.append(entry)
    flushed_this_cycle = 0
    flush_started: int | None = None  # the cycle a flush prompt was written in, until the flush completes
    latest: dict[str, int] = {}  # each runner's latest turn number seen, in transcript order
    last_runner: str | None = None
    previous: str | None = None
    for entry in entries:
        facts.entry_ids.add(entry.id)
        if previous is not None and entry.parent_id != previous:
            facts.chain_breaks += 1
        previous = entry.id
        if entry.type == "compaction":
            if flushed_this_cycle == 0:
                facts.cycles_without_flush += 1
            facts.compactions += 1
            flushed_this_cycle = 0
            continue
        raw_message = entry.data.get("message")
        message = message_from_dict(raw_message)
        if message is None or not isinstance(raw_message, dict):
            continue
        if not written_in_a_flush(raw_message):
            if message.role == "user":
                for name, number in TAG.findall(message.content):
                    turn = (name, int(number))
                    facts.turns_written_twice += turn in facts.user_turns
                    facts.order_violations += latest.get(name, -1) > turn[1]
                    facts.switches += last_runner is not None and last_runner != name
                    last_runner = name
                    latest[name] = max(latest.get(name, -1), turn[1])
                    facts.user_turns.add(turn)
            continue
        if message.role == "user":  # a flush prompt
            if flush_started is not None:
                facts.flushes_interrupted += 1
            flush_started = facts.compactions
        elif message.role == "assistant" and not message.tool_calls and flush_started is not None:
            facts.flushes_completed += 1
            flushed_this_cycle += 1
            if flushed_this_cycle == 2:
                facts.cycles_flushed_twice += 1
            facts.last_completed_flush_cycle = flush_started
            flush_started = None
    if flush_started is not None:
        facts.flushes_interrupted += 1
    facts.remembered = turns_in(message for _, message in context_from_entries(entries))
    return facts


def transcript_path(layout: Layout) -> Path:
    """The current transcript file (file layouts only)."""
    entry = layout.store().get(KEY)
    sessions = layout.store().sessions_dir
    assert entry is not None and sessions is not None, "the session has no store entry, or no file"
    return sessions / f"{entry.session_id}.jsonl"


# --- the loop ---------------------------------------------------------------------------------------


@dataclass
class CrashLoopReport:
    runners: int
    kills: int = 0  # SIGKILLs sent
    checks: int = 0  # times the parent checked the store and reopened the session (once per kill moment)
    store_behind_at_kill: int = 0
    killed_before_work_wrote: int = 0  # kills after a reply whose memory work had written nothing yet
    mismatches_after_reopen: int = 0
    mismatch_details: list[str] = field(default_factory=list)
    cycles_without_flush: int = 0
    cycles_flushed_twice: int = 0
    lines_torn: int = 0
    lines_lost: int = 0
    turns_lost: int = 0
    turns_unsummarised: int = 0
    turns_written_twice: int = 0
    order_violations: int = 0
    chain_breaks: int = 0  # reported, not a target: file transcripts' parentId may skip another runner's
    switches: int = 0  # how often the transcript goes from one runner's turn to the other's
    turns_acknowledged: int = 0
    compactions: int = 0
    flushes_completed: int = 0
    flushes_interrupted: int = 0
    turns_answered_early: int = 0  # first model call answered while the memory work before them ran
    runner_errors: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def problems(self) -> dict[str, int]:
        """The figures whose target is 0. A turn written twice is one only without kills: a runner killed
        after writing a turn and before acknowledging it sends that turn again, as a client would."""
        twice = {"turns written twice": self.turns_written_twice} if self.kills == 0 else {}
        return twice | {
            "count mismatches after reopen": self.mismatches_after_reopen,
            "cycles compacted without a flush": self.cycles_without_flush,
            "cycles flushed twice": self.cycles_flushed_twice,
            "transcript lines torn": self.lines_torn,
            "transcript lines lost": self.lines_lost,
            "acknowledged turns lost": self.turns_lost,
            "turns dropped unsummarised": self.turns_unsummarised,
            "transcript order violations": self.order_violations,
            "runner errors": len(self.runner_errors),
        }


def check_after_kill(layout: Layout, report: CrashLoopReport, seen_ids: set[str]) -> None:
    """Under the turn lock: the store as the kill left it, then as a reopened session leaves it."""
    store = layout.store()
    with store.turn_lock(KEY, timeout_s=120):
        if store.get(KEY) is None:  # killed before any runner created the session: nothing to compare
            layout.runner().open(KEY)
            return
        facts = read_lines(layout.transcript_lines())
        seen_ids |= facts.entry_ids
        if _mismatch(store, facts) is not None:
            report.store_behind_at_kill += 1
        layout.runner().open(KEY)
        problem = _mismatch(store, facts)
        if problem is not None:
            report.mismatches_after_reopen += 1
            report.mismatch_details.append(problem)


def _mismatch(store: SessionBackend, facts: TranscriptFacts) -> str | None:
    entry = store.get(KEY)
    assert entry is not None
    stored = (entry.compaction_count, entry.memory_flush_compaction_count)
    expected = (facts.compactions, facts.last_completed_flush_cycle)
    if stored == expected:
        return None
    return f"store (compactionCount, memoryFlushCompactionCount) = {stored}, transcript says {expected}"


KILL_MOMENTS = (
    "random",
    "after a compaction entry",
    "inside a flush",
    "after a reply, as its memory work starts",
)


def run_crash_loop(
    root: Path,
    *,
    kills: int,
    runners: int = 1,
    seed: int = 1,
    max_delay_s: float = 0.4,
    store: str | None = None,
    kill_one: bool = False,
) -> CrashLoopReport:
    """Kill ``runners`` runners ``kills`` times in all; audit; see the module docstring.

    The moments rotate through :data:`KILL_MOMENTS`: a uniformly random delay up to ``max_delay_s``;
    as soon as the parent sees a new compaction entry in the transcript (the runner is then between
    that line and the store's update, or just past it); a random 0-1 ms after it sees a new flush prompt
    (the runner is inside the flush turn); as soon as a runner marks that the memory work after a reply
    starts (the reply was acknowledged; the flush or the compaction has written nothing yet, or little).
    The parent watches the files by polling their size every 0.5 ms.
    With several runners a random moment kills one of them, a watched moment all of them (the line's
    writer is whichever holds the turn), unless ``kill_one``: then one, chosen at random, every time, and
    the other runner goes on meanwhile (a host dying while the other keeps serving the session).
    """
    rng = random.Random(seed)
    layout = Layout(root, store)
    (layout.workspace / "memory").mkdir(parents=True, exist_ok=True)
    names = RUNNER_NAMES[:runners]
    report = CrashLoopReport(runners=runners)
    started = time.monotonic()
    seen_ids: set[str] = set()
    processes = {name: start_runner(layout, name) for name in names}
    try:
        while report.kills < kills:
            moment = KILL_MOMENTS[report.checks % len(KILL_MOMENTS)]
            victims = [rng.choice(names)]
            if moment == "random" or not _wait_for_line(layout, moment, timeout_s=10.0):
                time.sleep(rng.uniform(0.0, max_delay_s))
            else:
                # The line's writer is whichever runner holds the turn: with several, all are killed.
                victims = victims if kill_one else list(names)
                if moment == "inside a flush":
                    time.sleep(rng.uniform(0.0, 0.001))
            for name in victims:
                _kill(processes[name], report)
                report.kills += 1
            if moment.startswith("after a reply") and _ends_on_a_reply(layout):
                report.killed_before_work_wrote += 1
            report.checks += 1
            check_after_kill(layout, report, seen_ids)
            for name in victims:
                processes[name] = start_runner(layout, name)
    finally:
        for process in processes.values():
            with contextlib.suppress(Exception):
                _kill(process, report)
    report.seconds = time.monotonic() - started
    audit(layout, report, seen_ids)
    return report


def run_hosts(
    root: Path, *, turns: int, store: str | None = None, timeout_s: float = 600.0
) -> CrashLoopReport:
    """Two runners (child processes: two hosts) on one session key, started together, ``turns`` turns
    each, as fast as they can, interleaving; then :func:`audit`. No kills."""
    layout = Layout(root, store)
    (layout.workspace / "memory").mkdir(parents=True, exist_ok=True)
    report = CrashLoopReport(runners=2)
    barrier = get_context("fork").Barrier(2)
    started = time.monotonic()
    processes = [start_runner(layout, name, turns, barrier) for name in RUNNER_NAMES]
    for process in processes:
        process.join(max(1.0, timeout_s - (time.monotonic() - started)))
        if process.exitcode != 0:
            _kill(process, report)
            report.runner_errors.append(f"a runner ended with status {process.exitcode}")
    report.seconds = time.monotonic() - started
    audit(layout, report, set())
    return report


def _wait_for_line(layout: Layout, moment: str, *, timeout_s: float) -> bool:
    """Poll the transcript until a line of the kind ``moment`` names is appended (or a runner's work file,
    for the memory work after a reply); False on timeout."""
    if moment.startswith("after a reply"):
        return _wait_for_work_mark(layout, timeout_s=timeout_s)
    needle = b'"type":"compaction"' if moment == "after a compaction entry" else b'"kind":"memory_flush"'
    deadline = time.monotonic() + timeout_s
    _, cursor = layout.new_lines(None)
    while time.monotonic() < deadline:
        lines, cursor = layout.new_lines(cursor)
        for line in lines:
            if needle in line and (b'"role":"user"' in line or moment == "after a compaction entry"):
                return True
        time.sleep(0.0005 if layout.dsn is None else 0.002)
    return False


def _ends_on_a_reply(layout: Layout) -> bool:
    """The transcript's last entry is a reply to the user (not a line of a flush or a compaction)."""
    lines = [line for line in layout.transcript_lines() if line.strip()]
    return bool(lines) and b'"role":"assistant"' in lines[-1] and b"memory_flush" not in lines[-1]


def _wait_for_work_mark(layout: Layout, *, timeout_s: float) -> bool:
    def sizes() -> list[int]:
        return [path.stat().st_size if path.exists() else 0 for path in map(layout.work_marks, RUNNER_NAMES)]

    deadline = time.monotonic() + timeout_s
    start = sizes()
    while time.monotonic() < deadline:
        if sizes() != start:
            return True
        time.sleep(0.0005)
    return False


def _kill(process: Any, report: CrashLoopReport) -> None:
    if process.pid is not None and process.exitcode is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGKILL)
    process.join(30)
    if process.exitcode not in (-signal.SIGKILL, None):
        report.runner_errors.append(f"a runner exited with status {process.exitcode}")


def audit(layout: Layout, report: CrashLoopReport, seen_ids: set[str]) -> None:
    for name in RUNNER_NAMES:
        errors = layout.errors(name)
        if errors.exists():
            report.runner_errors.append(errors.read_text(encoding="utf-8")[-2000:])
    facts = read_lines(layout.transcript_lines())
    for lines in layout.every_transcript():
        report.lines_torn += read_lines(lines).torn_lines
    acked = {(name, n) for name in RUNNER_NAMES for n in acknowledged(layout, name)}
    report.lines_lost = len(seen_ids - facts.entry_ids)
    report.turns_acknowledged = len(acked)
    report.turns_lost = len(acked - facts.user_turns)
    report.turns_unsummarised = len(acked - facts.remembered)
    report.cycles_without_flush = facts.cycles_without_flush
    report.cycles_flushed_twice = facts.cycles_flushed_twice
    report.turns_written_twice = facts.turns_written_twice
    report.order_violations = facts.order_violations
    report.chain_breaks = facts.chain_breaks
    report.switches = facts.switches
    report.compactions = facts.compactions
    report.flushes_completed = facts.flushes_completed
    report.flushes_interrupted = facts.flushes_interrupted
    report.turns_answered_early = sum(
        len(path.read_bytes().split()) for path in map(layout.early_marks, RUNNER_NAMES) if path.exists()
    )


def describe(report: CrashLoopReport) -> Iterator[str]:
    yield (
        f"runners on one key: {report.runners}; SIGKILLs: {report.kills} at {report.checks} moments; "
        f"{report.seconds:.1f} s"
    )
    yield (
        f"turns acknowledged: {report.turns_acknowledged}; compactions: {report.compactions}; "
        f"flushes completed: {report.flushes_completed}; flushes interrupted (run again): "
        f"{report.flushes_interrupted}; turns answered while the memory work before them ran: "
        f"{report.turns_answered_early}; kills that left the store behind the transcript: "
        f"{report.store_behind_at_kill}"
    )
    for name, value in report.problems().items():
        yield f"{name}: {value}"
    yield f"parentId chain breaks (not a target): {report.chain_breaks}; runner switches: {report.switches}"
