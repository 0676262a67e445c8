"""The runner's own lifecycle: closing it lets the turns in flight finish and stops the memory index's
watcher and background work; idle sessions are dropped from memory beyond ``session.maxIdleSessions``
(and come back intact); turns leave nothing behind in the event loop; ``/status`` only looks, never
rotating a stale session."""

from __future__ import annotations

import asyncio
import gc
import json
import threading
import time
from pathlib import Path

import pytest

from sessionmem.config import merge
from sessionmem.errors import MemoryIndexError, UsageError
from sessionmem.memory.embed.embedder import EmbedderSelection
from sessionmem.memory.index import MemoryIndex
from sessionmem.memory.search.records import SearchRequest
from sessionmem.model.base import ModelRequest
from sessionmem.model.scripted import ScriptedModel, flush_aware
from sessionmem.session.runner import SessionRunner
from tests.scenarios.harness import make_runner, small_config


def open_index(workspace: Path, state: Path, *, watch: bool) -> MemoryIndex:
    settings = small_config().for_agent("main").memory_search
    selection = EmbedderSelection(None, "none", reason="FTS-only test")
    return MemoryIndex.open("main", workspace, settings, state_dir=state, selection=selection, watch=watch)


def watcher_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if "watchdog" in type(t).__module__ or "Observer" in t.name]


def test_closing_lets_the_turn_in_flight_finish_then_refuses_new_ones(
    tmp_path: Path, workspace: Path
) -> None:
    started, release = asyncio.Event(), asyncio.Event()

    async def slow(request: ModelRequest) -> str:
        started.set()
        await release.wait()
        return "finished"

    runner, _ = make_runner(ScriptedModel(responder=flush_aware(slow)), tmp_path, workspace)
    session = runner.open()

    async def scenario() -> tuple[str | None, bool]:
        turn = asyncio.create_task(session.run_turn("a long question"))
        await started.wait()  # the turn is in its model call
        closing = asyncio.create_task(runner.aclose())
        await asyncio.sleep(0.1)
        closed_early = closing.done()
        release.set()
        result = await turn
        await closing
        return result.reply, closed_early

    reply, closed_early = asyncio.run(scenario())
    assert reply == "finished" and not closed_early  # close waited for the turn
    with pytest.raises(UsageError, match="closed"):
        session.run_turn_sync("too late")
    with pytest.raises(UsageError, match="closed"):
        runner.open("agent:main:other")
    assert runner.sessions_in_memory == ()


def test_async_with_closes_the_memory_index_and_stops_its_watcher(tmp_path: Path, workspace: Path) -> None:
    (workspace / "memory" / "2026-01-01.md").write_text("- The boiler is serviced in March.\n")
    index = open_index(workspace, tmp_path / "state", watch=True)
    assert watcher_threads()

    async def scenario() -> None:
        async with SessionRunner(
            ScriptedModel(responder=flush_aware()),
            config=small_config(),
            workspace=workspace,
            state_dir=tmp_path / "state",
            memory_index=index,
        ) as runner:
            await runner.open().run_turn("hello")

    asyncio.run(scenario())
    deadline = time.monotonic() + 5
    while watcher_threads() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert watcher_threads() == []
    with pytest.raises(MemoryIndexError, match="closed"):
        index.search(SearchRequest("boiler"))


def test_a_runner_told_not_to_close_the_index_leaves_it_serving(tmp_path: Path, workspace: Path) -> None:
    (workspace / "memory" / "2026-01-01.md").write_text("- The boiler is serviced in March.\n")
    with open_index(workspace, tmp_path / "state", watch=False) as index:
        with SessionRunner(
            ScriptedModel(responder=flush_aware()),
            config=small_config(),
            workspace=workspace,
            state_dir=tmp_path / "state",
            memory_index=index,
            close_index=False,
        ) as runner:
            runner.open().run_turn_sync("hello")
        assert index.search(SearchRequest("boiler serviced")).results  # still open for the other runner


def test_idle_sessions_beyond_the_limit_leave_memory_and_come_back_intact(
    tmp_path: Path, workspace: Path
) -> None:
    config = merge(small_config(), {"session": {"maxIdleSessions": 2}})
    model = ScriptedModel(responder=flush_aware())
    runner, _ = make_runner(model, tmp_path, workspace, config)
    keys = [f"agent:main:telegram:direct:{n}" for n in range(5)]
    first = runner.open(keys[0])
    first.run_turn_sync("I am user zero")
    for key in keys[1:]:
        runner.open(key).run_turn_sync(f"I am {key}")
    assert runner.sessions_in_memory == tuple(keys[3:])  # the two most recently used

    again = runner.open(keys[0])  # read back from the store and the transcript
    assert again is not first
    assert [m.content for _, m in again.context] == ["I am user zero", "ok: I am user zero"]
    assert runner.sessions_in_memory == (*keys[4:], keys[0])
    first.run_turn_sync("still here")  # a handle a caller kept keeps working on the same session
    again.run_turn_sync("and now?")  # and the other handle sees that turn before its own
    sent = [m.content for m in model.calls[-1].messages[1:]]
    assert sent == ["I am user zero", "ok: I am user zero", "still here", "ok: still here", "and now?"]


def test_turns_that_never_wait_leave_no_timer_behind(tmp_path: Path, workspace: Path) -> None:
    """A gateway (or a test) running turns back to back in one coroutine, each finding its session free:
    no turn may leave anything behind in the event loop. Each used to arm a turn-lock timeout of 120 s,
    cancelled at once but kept in the loop's heap until the loop next ran: memory grew with every turn
    (about 0.3 KB) for as long as nothing else woke the loop."""
    runner, _ = make_runner(ScriptedModel(responder=flush_aware()), tmp_path, workspace)

    async def converse() -> int:
        for n in range(50):
            await runner.open(f"agent:main:telegram:direct:{n % 5}").run_turn(f"message {n}")
        gc.collect()
        return sum(1 for o in gc.get_objects() if isinstance(o, asyncio.TimerHandle) and o.cancelled())

    assert asyncio.run(converse()) == 0


def test_status_never_rotates_a_stale_session(tmp_path: Path, workspace: Path) -> None:
    config = merge(small_config(), {"session": {"reset": {"mode": "idle", "idleMinutes": 30}}})
    runner, recorder = make_runner(ScriptedModel(responder=flush_aware()), tmp_path, workspace, config)
    session = runner.open()
    session.run_turn_sync("remember the boiler")
    first_id = session.entry.session_id
    store_path = runner.store.sessions_dir / "sessions.json"
    data = json.loads(store_path.read_text())
    data["agent:main:main"]["updatedAt"] -= 2 * 3600 * 1000  # idle for two hours
    store_path.write_text(json.dumps(data))

    status = session.run_turn_sync("/status")
    assert status.command == "status"
    assert "Expired (idle reset): the next message starts a new session" in (status.reply or "")
    assert session.entry.session_id == first_id and "new" not in recorder.kinds()
    assert not list(runner.store.sessions_dir.glob("*.reset.*"))  # nothing archived
    assert json.loads(store_path.read_text())["agent:main:main"]["sessionId"] == first_id

    session.run_turn_sync("hello again")  # an ordinary message does rotate
    assert session.entry.session_id != first_id and "new" in recorder.kinds()
