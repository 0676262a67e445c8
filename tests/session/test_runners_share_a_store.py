"""Several runners on one sessions.json (a gateway running several processes): every gate decision is
taken against the store under its lock, never against a runner's cached entry. One flush per cycle
whoever reaches the threshold, compactions counted from the stored count, one sessionId per new key."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path
from typing import Any

import pytest

from sessionmem.config import Config
from sessionmem.model.scripted import ScriptedModel, flush_aware
from sessionmem.session.events import FlushEvent, FlushSkippedEvent
from sessionmem.session.runner import SessionRunner
from sessionmem.session.store import SessionStore
from tests.scenarios.harness import flush_prompt_requests, make_runner, small_config, store_entry

KEY = "agent:main:main"
# Window 8000, reserve 1000: compaction at 7000 tokens, the flush at 5000 (soft 2000). A prompt of about
# 4,800 tokens (plus the system prompt and tool schemas) is past the flush threshold and, with the flush's
# own messages and the reply, still below compaction: each turn flushes and nothing compacts.
BIG = "start" + " word" * 4800


def config() -> Config:
    return small_config(soft=2000)


def model() -> ScriptedModel:
    return ScriptedModel(responder=flush_aware(lambda request: "ok"))


def test_two_runners_flush_one_cycle_once(tmp_path: Path, workspace: Path) -> None:
    model_a, model_b = model(), model()
    runner_a, _ = make_runner(model_a, tmp_path, workspace, config())
    runner_b, events_b = make_runner(model_b, tmp_path, workspace, config())
    session_a, session_b = runner_a.open(KEY), runner_b.open(KEY)  # both read the entry: cycle 0, unflushed

    session_a.run_turn_sync(BIG)
    session_b.run_turn_sync(BIG)  # its cached entry still says unflushed; the store says cycle 0 is done

    assert len(flush_prompt_requests(model_a.calls)) == 1
    assert flush_prompt_requests(model_b.calls) == []  # only one flush prompt reached a model for cycle 0
    entry = store_entry(runner_a)
    assert entry["compactionCount"] == 0
    assert entry["memoryFlushCompactionCount"] == 0
    assert not [e for e in events_b.events if isinstance(e, FlushEvent)]
    skipped = [e for e in events_b.events if isinstance(e, FlushSkippedEvent)]
    assert skipped and "already flushed" in skipped[0].reason
    # The loser refreshed its entry from the store.
    assert session_b.entry.memory_flush_compaction_count == 0


def test_compactions_count_from_the_stored_count(tmp_path: Path, workspace: Path) -> None:
    model_a, model_b = model(), model()
    runner_a, _ = make_runner(model_a, tmp_path, workspace, config())
    runner_b, _ = make_runner(model_b, tmp_path, workspace, config())
    session_a, session_b = runner_a.open(KEY), runner_b.open(KEY)
    session_a.run_turn_sync(BIG)
    session_b.run_turn_sync(BIG)

    assert session_a.compact_sync().ok
    assert store_entry(runner_a)["compactionCount"] == 1
    # B's cached entry says 0 compactions; the store says 1. B's compaction is the second.
    result = session_b.compact_sync()
    assert result.ok
    entry = store_entry(runner_b)
    assert entry["compactionCount"] == 2
    # Cycle 1 (opened by A's compaction) had no flush: B's gate flushed it first, recorded against cycle 1.
    assert result.flushed
    assert entry["memoryFlushCompactionCount"] == 1
    assert len(flush_prompt_requests(model_a.calls)) + len(flush_prompt_requests(model_b.calls)) == 2


def test_two_runners_opening_one_new_key_share_one_session_id(
    tmp_path: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner_a, _ = make_runner(model(), tmp_path, workspace, config())
    runner_b, _ = make_runner(model(), tmp_path, workspace, config())
    # Trigger: B looked the key up before A created it (two processes opening one new chat at once).
    # Outcome: B must still end up on A's session, not overwrite it with a session of its own.
    monkeypatch.setattr(runner_b.store, "get", lambda key: None)
    session_a = runner_a.open(KEY)
    session_b = runner_b.open(KEY)

    assert session_b.entry.session_id == session_a.entry.session_id
    assert session_b.transcript.path == session_a.transcript.path
    assert store_entry(runner_a)["sessionId"] == session_a.entry.session_id


def _run_one_runner(state: str, workspace: str, barrier: Any, out: Any) -> None:
    """A child process: open the shared key, wait for the other process, run one big turn."""
    scripted = model()
    flushes: list[int] = []
    runner = SessionRunner(
        scripted,
        config=config(),
        workspace=Path(workspace),
        state_dir=Path(state),
        on_event=lambda e: flushes.append(e.compaction_count) if isinstance(e, FlushEvent) else None,
    )
    session = runner.open(KEY)
    barrier.wait(30)  # both processes hold an entry that says "cycle 0, unflushed"
    session.run_turn_sync(BIG)
    out.put((len(flush_prompt_requests(scripted.calls)), flushes, session.entry.session_id))


@pytest.mark.timeout(120)
def test_two_processes_flush_one_cycle_once(tmp_path: Path, workspace: Path) -> None:
    state = tmp_path / "state"
    ctx = multiprocessing.get_context("fork")
    barrier, out = ctx.Barrier(2), ctx.Queue()
    procs = [
        ctx.Process(target=_run_one_runner, args=(str(state), str(workspace), barrier, out)) for _ in range(2)
    ]
    for p in procs:
        p.start()
    results = [out.get(timeout=100) for _ in procs]
    for p in procs:
        p.join(100)
        assert p.exitcode == 0

    assert sum(prompts for prompts, _, _ in results) == 1
    assert sorted(cycle for _, flushes, _ in results for cycle in flushes) == [0]
    assert len({session_id for _, _, session_id in results}) == 1
    data = json.loads(SessionStore.for_agent(state).path.read_text(encoding="utf-8"))
    assert data[KEY]["memoryFlushCompactionCount"] == 0
    assert data[KEY]["compactionCount"] == 0
