"""Turns of one session key run one at a time, in order: queued within a process, and across runners and
processes through the store's turn lock, each reloading what the others wrote before it decides anything.
Waiting has a timeout that ends in TurnLockTimeout, naming the session."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from sessionmem.config import merge
from sessionmem.dsn import is_postgres_dsn
from sessionmem.errors import TurnLockTimeout, UsageError
from sessionmem.model.base import ModelRequest
from sessionmem.model.scripted import ScriptedModel, flush_aware
from sessionmem.session.runner import SessionRunner
from sessionmem.session.stores.sessions_json import SessionStore
from tests.scenarios.harness import make_runner, small_config, transcript_lines
from tests.session.test_backend import start_holder
from tests.support.crash_loop import Layout, describe, read_lines, run_hosts

KEY = "agent:main:main"


@pytest.mark.timeout(300)
def test_two_processes_on_one_key_lose_no_turn_and_flush_and_compact_each_cycle_once(
    tmp_path: Path, store_spec: str
) -> None:
    """Two processes as two hosts (on PostgreSQL: one database, two connection pools), the same key,
    interleaved turns with flushes and compactions, on each store backend."""
    turns = 50 if is_postgres_dsn(store_spec) else 25
    report = run_hosts(tmp_path, turns=turns, store=store_spec, timeout_s=280)
    figures = "\n".join(describe(report))
    assert report.turns_acknowledged == 2 * turns, figures
    # 0 lost, 0 written twice, 0 out of order, 0 compacted without a flush, 0 flushed twice, no error
    assert {name: value for name, value in report.problems().items() if value} == {}, (
        f"{figures}\n{report.runner_errors[:2]}"
    )
    assert report.compactions >= 4, figures  # the conversation did flush and compact, many times
    layout = Layout(tmp_path, store_spec)
    facts = read_lines(layout.transcript_lines())
    entry = layout.store().get(KEY)
    assert entry is not None and entry.compaction_count == facts.compactions
    assert entry.memory_flush_compaction_count == facts.last_completed_flush_cycle
    if is_postgres_dsn(store_spec):  # each entry's parentId is the entry before it, whichever host wrote it
        assert report.chain_breaks == 0, figures
        assert report.switches >= turns // 5, figures  # the hosts took turns (the server queues waiters)


def test_turns_of_one_session_queue_in_order_instead_of_failing(tmp_path: Path, workspace: Path) -> None:
    async def slow(request: ModelRequest) -> str:
        await asyncio.sleep(0.02)
        return "ok"

    runner, _ = make_runner(ScriptedModel(responder=flush_aware(slow)), tmp_path, workspace)
    session = runner.open(KEY)

    async def five() -> list[Any]:
        return await asyncio.gather(*(session.run_turn(f"message {i}") for i in range(5)))

    results = asyncio.run(five())
    assert [r.reply for r in results] == ["ok"] * 5
    users = [
        line["message"]["content"]
        for line in transcript_lines(session.transcript.path)
        if line["type"] == "message" and line["message"]["role"] == "user"
    ]
    assert users == [f"message {i}" for i in range(5)]


def test_a_turn_waits_for_another_process_then_times_out_naming_the_session(
    tmp_path: Path, workspace: Path
) -> None:
    config = merge(small_config(), {"session": {"turnLockTimeoutSeconds": 0.4}})
    runner, _ = make_runner(ScriptedModel(responder=flush_aware()), tmp_path, workspace, config)
    session = runner.open(KEY)
    store = runner.store
    assert isinstance(store, SessionStore)
    holder, release = start_holder(store)
    try:
        with pytest.raises(TurnLockTimeout) as caught:  # the wait itself: test_backend.py
            session.run_turn_sync("hello")
        assert caught.value.session_key == KEY and caught.value.path is not None
        assert f"session {KEY} is busy" in str(caught.value) and "0.4s" in str(caught.value)
    finally:
        release.set()
        holder.join(10)
    assert session.run_turn_sync("hello again").reply == "ok: hello again"  # the lock is free again
    users = [
        line["message"]["content"]
        for line in transcript_lines(session.transcript.path)
        if line["type"] == "message" and line["message"]["role"] == "user"
    ]
    assert users == ["hello again"]  # the turn that timed out wrote nothing


def test_a_turn_queued_behind_a_slow_one_in_this_process_times_out_too(
    tmp_path: Path, workspace: Path
) -> None:
    started, release = asyncio.Event(), asyncio.Event()

    async def blocked(request: ModelRequest) -> str:
        started.set()
        await release.wait()
        return "done"

    config = merge(small_config(), {"session": {"turnLockTimeoutSeconds": 0.3}})
    runner, _ = make_runner(ScriptedModel(responder=flush_aware(blocked)), tmp_path, workspace, config)
    session = runner.open(KEY)

    async def scenario() -> tuple[Any, BaseException | None]:
        first = asyncio.create_task(session.run_turn("first"))
        await started.wait()  # the first turn holds the session, in its model call
        try:
            await session.run_turn("second")
            error = None
        except TurnLockTimeout as exc:
            error = exc
        release.set()
        return await first, error

    first, error = asyncio.run(scenario())
    assert first.reply == "done"
    assert isinstance(error, TurnLockTimeout) and error.path is None
    assert "earlier turns of it in this process were still running after 0.3s" in str(error)


def test_a_session_reads_its_transcript_again_only_when_another_runner_wrote_to_it(
    tmp_path: Path, workspace: Path
) -> None:
    runner_a, _ = make_runner(ScriptedModel(responder=flush_aware()), tmp_path, workspace)
    runner_b, _ = make_runner(ScriptedModel(responder=flush_aware()), tmp_path, workspace)
    session_a, session_b = runner_a.open(KEY), runner_b.open(KEY)
    session_a.run_turn_sync("one")
    reads: list[int] = []
    read = session_a.transcript.entries
    session_a.transcript.entries = lambda: reads.append(1) or read()  # type: ignore[method-assign]

    session_a.run_turn_sync("two")
    assert reads == []  # nothing changed since its last turn: one stat and one store read, no re-read
    session_b.run_turn_sync("from the other runner")
    session_a.run_turn_sync("three")
    assert reads == [1]
    assert [m.content for _, m in session_a.context][-4:] == [
        "from the other runner",
        "ok: from the other runner",
        "three",
        "ok: three",
    ]


def test_a_turn_awaited_from_inside_a_turn_of_the_same_session_fails_at_once(
    tmp_path: Path, workspace: Path
) -> None:
    errors: list[BaseException] = []

    async def on_event(event: Any) -> None:
        if event.kind == "turn" and not errors:
            try:
                await session.run_turn("nested")
            except UsageError as exc:
                errors.append(exc)

    runner = SessionRunner(
        ScriptedModel(responder=flush_aware()),
        config=small_config(),
        workspace=workspace,
        state_dir=tmp_path / "state",
        on_event=on_event,
    )
    session = runner.open(KEY)
    assert session.run_turn_sync("outer").reply == "ok: outer"
    # A UsageError at once, not a wait for itself ending in TurnLockTimeout
    assert len(errors) == 1 and "from inside one of its own turns" in str(errors[0])
