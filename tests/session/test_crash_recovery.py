"""The flush and the compaction count survive crashes (DESIGN 16).

A runner in a child process is killed with SIGKILL at the moment named, then a new runner reopens the
session, as a restarted process would: the store is reconciled with the transcript (written first), a
flush that never ended runs again, one that ended is not run twice, and the next cycle is flushed before
it is compacted.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sessionmem.config import Config
from sessionmem.hooks import HookRegistry
from sessionmem.model.base import ModelRequest
from sessionmem.model.scripted import ScriptedModel, flush_aware
from sessionmem.session.runner import SessionRunner
from sessionmem.session.stores.transcript_folder import Transcript
from sessionmem.session.turn import gate
from sessionmem.session.turn.events import CompactionEvent, FlushEvent
from tests.scenarios.harness import (
    flush_prompt_requests,
    make_runner,
    small_config,
    store_entry,
    transcript_lines,
)

KEY = "agent:main:main"
pytestmark = pytest.mark.timeout(120)


def config() -> Config:
    return small_config(window=3000, reserve=500, floor=500, soft=800, keep=400)


def turn(i: int) -> str:
    return f"turn {i}: " + " ".join(f"w{j}" for j in range(60))


def reply(request: ModelRequest) -> str:
    return "ok " + " ".join(f"w{i}" for i in range(30))


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _kill_at(point: str, state: str, workspace: str) -> None:
    """A child: converse until the moment ``point`` names, where it SIGKILLs itself."""
    responder: Callable[[ModelRequest], Any] = flush_aware(reply)
    if point == "after the compaction entry":
        append_compaction = Transcript.append_compaction

        def append_then_die(self: Transcript, *args: Any, **kwargs: Any) -> str:
            append_compaction(self, *args, **kwargs)
            die()  # the compaction is in the transcript; the store does not know yet
            raise AssertionError("unreachable")

        Transcript.append_compaction = append_then_die  # type: ignore[method-assign]
    elif point == "in the flush's model call":

        def respond(request: ModelRequest) -> Any:
            if request.purpose == "flush":
                die()
            return reply(request)

        responder = respond
    elif point == "after the flush ended":

        def record_then_die(*args: Any, **kwargs: Any) -> None:
            die()  # the flush's turn is in the transcript; the store does not know yet

        gate.record_flush = record_then_die  # type: ignore[assignment]
    runner = SessionRunner(
        ScriptedModel(responder=responder),
        config=config(),
        workspace=Path(workspace),
        state_dir=Path(state),
        hooks=HookRegistry(),
    )
    session = runner.open(KEY)
    for i in range(60):
        session.run_turn_sync(turn(i))
    os._exit(3)  # the moment never came


def kill_child_at(point: str, tmp_path: Path, workspace: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    child = ctx.Process(target=_kill_at, args=(point, str(tmp_path / "state"), str(workspace)))
    child.start()
    child.join(60)
    assert child.exitcode == -signal.SIGKILL, f"the child was not killed {point} (exit {child.exitcode})"


def transcript_of(runner: SessionRunner) -> list[dict[str, Any]]:
    return transcript_lines(runner.store.sessions_dir / f"{store_entry(runner)['sessionId']}.jsonl")


def go_on_until_compaction(tmp_path: Path, workspace: Path) -> tuple[SessionRunner, Any, ScriptedModel]:
    """A new runner reopens the session and converses until its first compaction."""
    model = ScriptedModel(responder=flush_aware(reply))
    runner, recorder = make_runner(model, tmp_path, workspace, config(), hooks=HookRegistry())
    session = runner.open(KEY)
    for i in range(100, 160):
        session.run_turn_sync(turn(i))
        if recorder.kinds("compaction"):
            return runner, recorder, model
    raise AssertionError(f"no compaction in 60 turns: {recorder.kinds()}")


def test_killed_between_the_compaction_entry_and_the_store_the_count_is_reconciled_on_open(
    tmp_path: Path, workspace: Path
) -> None:
    kill_child_at("after the compaction entry", tmp_path, workspace)
    probe, _ = make_runner(ScriptedModel(), tmp_path, workspace, config())
    before = store_entry(probe)  # as the kill left it, read from the file
    assert sum(line["type"] == "compaction" for line in transcript_of(probe)) == 1
    assert before["compactionCount"] == 0  # the moment was hit: the store is one behind
    assert before["memoryFlushCompactionCount"] == 0  # cycle 0 was flushed before its compaction

    probe.open(KEY)  # opening reconciles
    after = store_entry(probe)
    assert after["compactionCount"] == 1 and after["memoryFlushCompactionCount"] == 0

    runner, recorder, _ = go_on_until_compaction(tmp_path, workspace)
    # Cycle 1 was open and unflushed: its flush comes before its compaction.
    order = [
        (e.kind, e.compaction_count) for e in recorder.events if isinstance(e, (FlushEvent, CompactionEvent))
    ]
    assert order == [("flush", 1), ("compaction", 2)]
    assert store_entry(runner)["compactionCount"] == 2


def test_a_flush_killed_in_its_model_call_runs_again_before_the_cycle_is_compacted(
    tmp_path: Path, workspace: Path
) -> None:
    kill_child_at("in the flush's model call", tmp_path, workspace)
    probe, _ = make_runner(ScriptedModel(), tmp_path, workspace, config())
    assert "memoryFlushCompactionCount" not in store_entry(probe)  # nothing claimed the cycle

    runner, recorder, model = go_on_until_compaction(tmp_path, workspace)
    order = [
        (e.kind, e.compaction_count) for e in recorder.events if isinstance(e, (FlushEvent, CompactionEvent))
    ]
    assert order[:2] == [("flush", 0), ("compaction", 1)]
    assert len(flush_prompt_requests(model.calls)) >= 1
    assert store_entry(runner)["memoryFlushCompactionCount"] == 0


def test_a_flush_that_ended_before_the_kill_counts_and_is_not_run_twice(
    tmp_path: Path, workspace: Path
) -> None:
    kill_child_at("after the flush ended", tmp_path, workspace)
    probe, _ = make_runner(ScriptedModel(), tmp_path, workspace, config())
    assert "memoryFlushCompactionCount" not in store_entry(probe)  # killed before the store heard of it
    ended = [
        line
        for line in transcript_of(probe)
        if line["type"] == "message" and line["message"].get("provenance", {}).get("kind") == "memory_flush"
    ]
    assert [m["message"]["role"] for m in ended] == ["user", "assistant"]  # prompt, then NO_REPLY
    assert ended[-1]["message"]["provenance"] == {"kind": "memory_flush", "cycle": 0}

    probe.open(KEY)
    assert store_entry(probe)["memoryFlushCompactionCount"] == 0  # the transcript's record counts

    runner, recorder, model = go_on_until_compaction(tmp_path, workspace)
    assert recorder.kinds("flush", "compaction")[0] == "compaction"  # cycle 0 is not flushed again
    assert flush_prompt_requests(model.calls) == []
    assert store_entry(runner)["compactionCount"] == 1
