"""Several runners on one sessions.json (a gateway running several processes): each turn holds the
session's turn lock and reloads what the other runners wrote before deciding anything, so one flush per
cycle whoever reaches the threshold, one compaction per cycle, no turn of another runner compacted away
unsummarised, and one sessionId per new key."""

from __future__ import annotations

from pathlib import Path

import pytest

from sessionmem.config import Config
from sessionmem.model.scripted import ScriptedModel, flush_aware
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


def compaction_requests(model: ScriptedModel) -> list[str]:
    return ["\n".join(m.content for m in c.messages) for c in model.calls if c.purpose == "compaction"]


def turn_text(name: str) -> str:
    return f"{name}:" + " word" * 1200  # four of these (and their replies) reach the flush threshold


def test_a_second_runner_sees_the_first_ones_turns_and_flush_before_deciding(
    tmp_path: Path, workspace: Path
) -> None:
    model_a, model_b = model(), model()
    runner_a, events_a = make_runner(model_a, tmp_path, workspace, config())
    runner_b, events_b = make_runner(model_b, tmp_path, workspace, config())
    session_a, session_b = runner_a.open(KEY), runner_b.open(KEY)  # both read the entry: cycle 0, unflushed
    for i in range(4):
        session_a.run_turn_sync(turn_text(f"a{i}"))
    assert events_a.kinds("flush", "compaction") == ["flush"]

    session_b.run_turn_sync(turn_text("b0"))  # B's first call carries A's four turns and A's flush
    sent = "\n".join(m.content for m in model_b.calls[0].messages)
    assert all(f"a{i}:" in sent for i in range(4)) and "Pre-compaction memory flush." in sent
    session_b.run_turn_sync(turn_text("b1"))  # over the compaction line: cycle 0 was flushed (by A)

    # B compacted without flushing cycle 0 again (A had); a flush of B's is the next cycle's, after its
    # reply.
    assert events_b.kinds("flush", "compaction")[0] == "compaction"
    assert all(e.compaction_count >= 1 for e in events_b.events if e.kind == "flush")
    assert len(flush_prompt_requests(model_b.calls)) == len(events_b.kinds("flush"))
    assert "a0:" in compaction_requests(model_b)[0]  # A's turns were summarised, not dropped
    entry = store_entry(runner_a)
    assert entry["compactionCount"] == 1
    assert entry["memoryFlushCompactionCount"] == (1 if events_b.kinds("flush") else 0)
    assert session_b.entry.compaction_count == 1


def test_a_runner_behind_another_reloads_before_compacting_so_each_cycle_compacts_once(
    tmp_path: Path, workspace: Path
) -> None:
    model_a, model_b = model(), model()
    runner_a, _ = make_runner(model_a, tmp_path, workspace, config())
    runner_b, _ = make_runner(model_b, tmp_path, workspace, config())
    session_a, session_b = runner_a.open(KEY), runner_b.open(KEY)
    for i in range(4):
        session_a.run_turn_sync(turn_text(f"a{i}"))

    result = session_b.compact_sync()  # B never saw A's turns in memory: it reloads them first
    assert result.ok and not result.flushed  # A flushed cycle 0
    assert "a0:" in compaction_requests(model_b)[0]
    assert store_entry(runner_a)["compactionCount"] == 1

    again = session_a.compact_sync()  # now A's context is the stale one: it reloads B's compaction first
    assert again.ok and again.flushed  # cycle 1 (opened by B) gets its own flush first
    assert "<previous-summary>" in compaction_requests(model_a)[0]  # built on B's summary, not from scratch
    entry = store_entry(runner_a)
    assert entry["compactionCount"] == 2 and entry["memoryFlushCompactionCount"] == 1
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


# Two runner *processes* flushing one cycle once: tests/session/test_store_contract.py, on every backend.
