"""`sessionmem sessions list | show | delete`: the same views as the management API, for people and
with --json (camelCase); a delete forgets that chat; bad keys and unknown sessions are clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from sessionmem.cli import cli
from sessionmem.config import Config
from sessionmem.model.scripted import ScriptedModel, flush_aware, flush_write
from sessionmem.session.runner import SessionRunner

KEY = "agent:main:telegram:direct:42"
FACT = "- The user's cat is called Mochi."
SMALL = {
    "contextTokens": 8000,
    "userTimezone": "UTC",
    "compaction": {
        "reserveTokens": 1000,
        "reserveTokensFloor": 1000,
        "keepRecentTokens": 1500,
        "memoryFlush": {"softThresholdTokens": 2000},
    },
}


@pytest.fixture
def state(tmp_path: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The sessions of a runner with a small window; the commands read the same config file."""
    state = tmp_path / "state"
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"agents": {"defaults": SMALL}}), encoding="utf-8")
    monkeypatch.setenv("SESSIONMEM_CONFIG", str(config))
    runner = SessionRunner(
        ScriptedModel(responder=flush_aware(lambda request: "noted", flush=flush_write(FACT))),
        config=Config.load(config),
        workspace=workspace,
        state_dir=state,
    )
    for i in range(8):
        runner.open(KEY).run_turn_sync(f"turn {i}: " + " ".join(f"w{i}x{j}" for j in range(500)))
    runner.open("agent:main:discord:group:7").run_turn_sync("hello group")
    return state


def run(state: Path, workspace: Path, *args: str) -> object:
    return CliRunner().invoke(
        cli, ["--state-dir", str(state), "--workspace", str(workspace), "sessions", *args]
    )


def test_list(state: Path, workspace: Path) -> None:
    shown = run(state, workspace, "list")
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    assert "agent:main:discord:group:7" in lines[0] and KEY in lines[1]  # newest first
    assert "compactions" in lines[1] and "Page 1 of 1 (2 sessions)" in lines[-1]
    as_json = json.loads(run(state, workspace, "list", "--filter", "telegram", "--json").output)
    assert [s["sessionKey"] for s in as_json["sessions"]] == [KEY]
    assert (
        as_json["sessions"][0]["compactionCount"] >= 1
        and "memoryFlushCompactionCount" in as_json["sessions"][0]
    )
    assert run(state, workspace, "list", "--limit", "0").exit_code == 2


def test_show(state: Path, workspace: Path) -> None:
    shown = run(state, workspace, "show", "telegram:direct:42")
    assert shown.exit_code == 0, shown.output
    assert f"Session {KEY}" in shown.output
    assert "flush at 5,000 · compaction at 7,000" in shown.output
    assert "Timeline: 8 turns" in shown.output
    assert "flush (cycle 0): wrote - The user's cat is called Mochi." in shown.output
    assert "[flush]" in shown.output or "[compaction]" in shown.output
    as_json = json.loads(run(state, workspace, "show", KEY, "--json", "--page", "1", "--limit", "3").output)
    assert as_json["transcript"]["page"] == 1 and len(as_json["transcript"]["items"]) == 3
    assert as_json["entry"]["sessionKey"] == KEY and as_json["timeline"]["turns"] == 8
    assert {"contextWindow", "flushThreshold", "compactionThreshold"} <= set(as_json["thresholds"])


def test_show_and_delete_refuse_bad_keys(state: Path, workspace: Path) -> None:
    other = run(state, workspace, "show", "agent:other:main")
    assert other.exit_code == 1 and "belongs to agent 'other'" in other.output
    missing = run(state, workspace, "delete", "telegram:direct:404")
    assert missing.exit_code == 1 and "no session 'agent:main:telegram:direct:404'" in missing.output


def test_delete_forgets_the_chat(state: Path, workspace: Path) -> None:
    dry = run(state, workspace, "delete", KEY, "--dry-run")
    assert dry.exit_code == 0 and "Would forget" in dry.output
    deleted = json.loads(run(state, workspace, "delete", KEY, "--json").output)
    assert deleted["sessionKeys"] == [KEY] and not deleted["dryRun"]
    listed = json.loads(run(state, workspace, "list", "--json").output)
    assert [s["sessionKey"] for s in listed["sessions"]] == ["agent:main:discord:group:7"]
