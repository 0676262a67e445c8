"""Replies first: the flush and the compaction a turn made due run after its reply reached the caller.

The model here holds its flush calls until the test lets them go, so what the caller has while the memory
work is still running is observed, not timed."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from sessionmem.model.base import ModelRequest
from sessionmem.model.scripted import ScriptedModel, flush_aware, flush_write
from sessionmem.session.runner import SessionRunner
from sessionmem.session.stores.transcript_folder import read_entries
from tests.scenarios.harness import Recorder, make_runner, small_config

CONFIG = small_config(
    window=3000, reserve=600, floor=600, soft=300, keep=600
)  # flush 2,100, compaction 2,400


def chat_line(n: int) -> str:
    return f"turn {n}: " + " ".join(f"w{n}x{i}" for i in range(60))


class HeldFlush:
    """A responder whose flush calls wait until :meth:`release`; everything else answers at once."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.flush_started = asyncio.Event()
        writer = flush_write("- the user keeps a plan\n")
        self.inner = flush_aware(lambda r: "ok " + " ".join(f"r{i}" for i in range(30)), flush=writer)

    async def __call__(self, request: ModelRequest) -> Any:
        if request.purpose == "flush":
            self.flush_started.set()
            await self.gate.wait()
        return self.inner(request)

    def release(self) -> None:
        self.gate.set()


async def turns_until_work(session: Any, recorder: Any, start: int = 0) -> int:
    """Run turns until one ends with its memory work started; the number of the next turn."""
    n = start
    while True:
        await session.run_turn(chat_line(n))
        n += 1
        idle = asyncio.create_task(session.wait_idle())
        while not idle.done() and "memory_work_start" not in recorder.kinds():
            await asyncio.sleep(0.001)  # until the turn's hold has ended or its work has started
        if "memory_work_start" in recorder.kinds():
            idle.cancel()
            return n
        assert n < 40, "the thresholds were never reached"


def test_the_reply_comes_back_while_the_flush_still_runs(tmp_path: Path, workspace: Path) -> None:
    held = HeldFlush()
    model = ScriptedModel(responder=held)
    runner, recorder = make_runner(model, tmp_path, workspace, CONFIG)

    async def scenario() -> None:
        session = runner.open("agent:main:a")
        n = await turns_until_work(session, recorder)
        await asyncio.wait_for(held.flush_started.wait(), 5)
        # The turn that made the flush due has returned; its flush is still waiting for the model.
        assert recorder.kinds("turn", "memory_work_start")[-2:] == ["turn", "memory_work_start"]
        assert "flush" not in recorder.kinds()
        # Another session is not held by it.
        other = await asyncio.wait_for(runner.open("agent:main:b").run_turn("hello"), 5)
        assert other.reply is not None
        # The same session's next turn waits for the work, then runs.
        following = asyncio.create_task(session.run_turn(chat_line(n)))
        await asyncio.sleep(0.05)
        assert not following.done()
        held.release()
        result = await asyncio.wait_for(following, 5)
        assert result.reply is not None
        await runner.aclose()

    asyncio.run(scenario())
    wanted = ("turn", "memory_work_start", "flush", "compaction", "memory_work_end")
    kinds = [e.kind for e in recorder.events if e.session_key == "agent:main:a" and e.kind in wanted]
    first_work = kinds.index("memory_work_start")
    assert kinds[first_work - 1] == "turn"
    assert kinds[first_work + 1] == "flush"  # the flush before any compaction of its cycle
    assert recorder.flush_cycles()  # every compaction closed a cycle that had its flush


def test_a_blocking_turn_returns_after_its_work_and_streams_the_reply_first(
    tmp_path: Path, workspace: Path
) -> None:
    order: list[str] = []
    inner = flush_aware(lambda r: "noted " + " ".join(f"r{i}" for i in range(30)), flush=flush_write("- x\n"))

    def respond(request: ModelRequest) -> Any:
        order.append(f"model:{request.purpose}")
        return inner(request)

    runner = SessionRunner(
        ScriptedModel(responder=respond),
        config=CONFIG,
        workspace=workspace,
        state_dir=tmp_path / "state",
        on_event=lambda event: order.append(f"event:{event.kind}"),
    )
    session = runner.open()
    n = 0
    while "event:memory_work_start" not in order:
        order.append("call")
        session.run_turn_sync(chat_line(n), on_partial=lambda text: order.append("partial"))
        order.append("returned")
        n += 1
        assert n < 40
    # The last turn's reply was streamed before its memory work began (the flush's first model call),
    # and the blocking call returned once that work had ended: nothing left running.
    last = order[len(order) - 1 - order[::-1].index("call") :]
    assert last.index("partial") < last.index("event:memory_work_start") < last.index("model:flush")
    assert last.index("event:memory_work_end") < last.index("returned")
    assert session.state.flushing is None


def test_aclose_waits_for_the_work_after_the_last_reply(tmp_path: Path, workspace: Path) -> None:
    held = HeldFlush()
    runner, recorder = make_runner(ScriptedModel(responder=held), tmp_path, workspace, CONFIG)

    async def scenario() -> None:
        session = runner.open()
        await turns_until_work(session, recorder)
        closing = asyncio.create_task(runner.aclose())
        await asyncio.sleep(0.05)
        assert not closing.done()  # the flush is still out
        held.release()
        await asyncio.wait_for(closing, 5)

    asyncio.run(scenario())
    assert recorder.kinds("flush", "memory_work_end")[:2] == ["flush", "memory_work_end"]
    transcript = next((tmp_path / "state").rglob("*.jsonl"))
    assert any("memory_flush" in str(entry) for entry in read_entries(transcript))


def test_a_caller_cancelled_after_the_reply_does_not_stop_the_work(tmp_path: Path, workspace: Path) -> None:
    held = HeldFlush()
    runner, recorder = make_runner(ScriptedModel(responder=held), tmp_path, workspace, CONFIG)

    async def scenario() -> None:
        session = runner.open()
        await turns_until_work(session, recorder)
        waiter = asyncio.create_task(session.wait_idle())
        await asyncio.sleep(0.01)
        waiter.cancel()  # a caller giving up on waiting does not cancel the work
        held.release()
        await session.wait_idle()
        await runner.aclose()

    asyncio.run(scenario())
    assert "flush" in recorder.kinds() and recorder.kinds("memory_work_end")


def test_a_caller_cancelled_before_the_reply_cancels_the_turn(tmp_path: Path, workspace: Path) -> None:
    started = asyncio.Event()

    async def slow(request: ModelRequest) -> Any:
        started.set()
        await asyncio.sleep(30)
        return "never"

    runner, recorder = make_runner(ScriptedModel(responder=slow), tmp_path, workspace, CONFIG)

    async def scenario() -> None:
        session = runner.open()
        turn = asyncio.create_task(session.run_turn("hello"))
        await asyncio.wait_for(started.wait(), 5)
        turn.cancel()
        with pytest.raises(asyncio.CancelledError):
            await turn
        await asyncio.wait_for(session.wait_idle(), 5)  # the turn's hold ended with it
        await asyncio.wait_for(runner.aclose(), 5)

    asyncio.run(scenario())
    assert "turn" not in recorder.kinds()


def test_a_failure_after_the_reply_is_reported_and_the_next_turn_goes_on(
    tmp_path: Path, workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    inner = flush_aware(lambda r: "ok " + " ".join(f"r{i}" for i in range(30)), flush=flush_write("- x\n"))
    model = ScriptedModel(responder=inner)
    recorder = Recorder()
    broken = {"on": False}

    def on_event(event: Any) -> None:
        recorder(event)
        if event.kind == "tool_call" and event.turn_kind == "flush":
            broken["on"] = True  # the store fails from the flush's write to the end of the work
        elif event.kind == "memory_work_end":
            broken["on"] = False

    runner = SessionRunner(
        model, config=CONFIG, workspace=workspace, state_dir=tmp_path / "state", on_event=on_event
    )
    store = runner.store
    real_update = store.update

    def update(key: str, fn: Any) -> Any:
        if broken["on"]:
            raise OSError("the disk went away")
        return real_update(key, fn)

    store.update = update  # type: ignore[method-assign]
    session = runner.open()
    caplog.set_level(logging.ERROR)
    n = 0
    while not recorder.kinds("memory_work_end"):
        result = session.run_turn_sync(chat_line(n))
        assert result.reply is not None  # the reply is never lost to the work after it
        n += 1
        assert n < 40
    (end,) = [e for e in recorder.events if e.kind == "memory_work_end"]
    assert end.work == "flush" and end.error is not None and "the disk went away" in end.error
    assert "after the reply failed" in caplog.text
    # The next turn reloads the session from the transcript, the record: the flush ended there, so its
    # cycle counts as flushed and it does not run again.
    follow = session.run_turn_sync(chat_line(n))
    assert follow.reply is not None
    entry = store.get(session.key)
    assert entry is not None and entry.memory_flush_compaction_count == 0
    assert (
        len([c for c in model.calls if c.purpose == "flush"]) == 2
    )  # the one flush: its write, then NO_REPLY
