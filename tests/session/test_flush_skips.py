"""A session whose workspace cannot take the daily log skips the flush, says why, and still compacts."""

from __future__ import annotations

from pathlib import Path

from sessionmem.model.scripted import ScriptedModel, flush_aware
from tests.scenarios.harness import flush_prompt_requests, make_runner, small_config


def test_a_workspace_that_cannot_take_the_daily_log_skips_the_flush(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "memory").write_text(
        "a file where the memory folder should be\n"
    )  # not writable as a folder
    model = ScriptedModel(responder=flush_aware(lambda r: "ok " + " ".join(f"w{i}" for i in range(30))))
    config = small_config(window=3000, reserve=500, floor=500, soft=300, keep=400)
    runner, recorder = make_runner(model, tmp_path, workspace, config)
    session = runner.open()
    for i in range(20):
        session.run_turn_sync(f"turn {i}: " + " ".join(f"w{j}" for j in range(40)))
    assert not flush_prompt_requests(model.calls)
    reasons = {e.reason for e in recorder.events if e.kind == "flush_skipped"}
    assert reasons and all(reason.startswith("workspace is read-only") for reason in reasons), reasons
    assert "compaction" in recorder.kinds()  # the conversation goes on, compacted unflushed
    assert (workspace / "memory").read_text() == "a file where the memory folder should be\n"
