"""``sessionmem demo``: the scripted long conversation flushes, compacts, archives on /new and recalls
the early fact through memory_search, on the real runner, hook, Markdown files and FTS-only index."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sessionmem.cli import cli
from sessionmem.cli.demo import STATE_FOLDER, Timeline, bar, format_record
from sessionmem.config import MemorySearchConfig
from sessionmem.runs.walkthrough import RECALL_QUERY, run_demo

REPO_ROOT = Path(__file__).resolve().parents[1]


def records_of(stdout: str) -> list[dict[str, Any]]:
    lines = [line for line in stdout.splitlines() if line.strip()]
    return [json.loads(line) for line in lines]  # every stdout line must be one JSON object


def first(records: list[dict[str, Any]], event: str) -> int:
    return next(i for i, r in enumerate(records) if r["event"] == event)


def check_story(records: list[dict[str, Any]], workspace: Path) -> None:
    """What a user would check in the event stream and on disk."""
    events = [r["event"] for r in records]
    for required in ("start", "turn", "flush", "compaction", "new", "memory_write", "memory_search", "done"):
        assert required in events, f"no {required} event in {events}"
    assert events[0] == "start" and events[-1] == "done"

    # The first flush comes before its compaction and belongs to the cycle that compaction closes.
    flush_at, compaction_at = first(records, "flush"), first(records, "compaction")
    assert flush_at < compaction_at
    assert records[flush_at]["compactionCount"] == records[compaction_at]["compactionCount"] - 1 == 0
    compaction = records[compaction_at]
    assert compaction["tokensAfter"] < compaction["tokensBefore"]

    # Turns cross the thresholds: the turn before the first flush is below the flush threshold, a later
    # one reaches it; the compaction comes at its threshold.
    turns = [r for r in records if r["event"] == "turn" and r["session"] == 1]
    assert 15 <= len(turns) <= 25
    assert turns[0]["tokens"] < turns[0]["flushThreshold"]
    assert max(t["tokens"] for t in turns) >= turns[0]["flushThreshold"]
    assert compaction["tokensBefore"] >= turns[0]["compactionThreshold"]

    # One measure throughout (the session's projection). Replies first: the flush runs after the reply of
    # the turn that brought the context within one message of the flush threshold (that turn's message
    # standing in for the next), between memory_work_start and memory_work_end; the compaction follows it
    # once the context (the flush's own messages included) reaches its threshold; the turn after it
    # continues from its "after" with an ordinary step.
    steps = [b["tokens"] - a["tokens"] for a, b in itertools.pairwise(turns[:10])]
    flush = records[flush_at]
    before_flush = next(r for r in reversed(records[:flush_at]) if r["event"] == "turn")
    assert turns[0]["flushThreshold"] <= flush["tokens"] < turns[0]["compactionThreshold"]
    assert 0 <= flush["tokens"] - before_flush["tokens"] <= max(steps)  # + the stand-in message
    started = next(r for r in reversed(records[:flush_at]) if r["event"] in ("memory_work_start", "turn"))
    assert (started["event"], started["work"]) == ("memory_work_start", "flush")
    triggering = next(r for r in reversed(records[:compaction_at]) if r["event"] == "turn")
    assert triggering["tokens"] <= compaction["tokensBefore"]
    following = next(r for r in records[compaction_at:] if r["event"] == "turn")
    assert 0 < following["tokens"] - compaction["tokensAfter"] <= max(steps)

    # The flush wrote the early fact (stated in turn 2) to the daily log.
    flush_write = next(r for r in records[:flush_at] if r["event"] == "memory_write")
    daily = workspace / flush_write["path"]
    assert flush_write["path"] == records[flush_at]["path"]
    assert "- Tomás has a severe peanut allergy and carries an EpiPen" in flush_write["lines"]
    assert "Tomás has a severe peanut allergy" in daily.read_text(encoding="utf-8")

    # /new comes after the compaction, archives the transcript and saves the session under its slug.
    new_at = first(records, "new")
    assert new_at > compaction_at
    new = records[new_at]
    slug_file = workspace / new["memoryFile"]
    assert slug_file.name == daily.name.removesuffix(".md") + "-japan-trip.md"
    assert slug_file.is_file() and "Session Key" in slug_file.read_text(encoding="utf-8")
    archived = workspace / new["archivedPath"]
    assert archived.is_file() and ".jsonl.reset." in archived.name
    created = [r for r in records if r["event"] == "memory_write" and r["mode"] == "create"]
    assert [r["path"] for r in created] == [new["memoryFile"]]

    # The new session searches memory and answers from the hit.
    search_at = first(records, "memory_search")
    assert search_at > new_at
    search = records[search_at]
    assert search["query"] == RECALL_QUERY
    assert search["results"] and all(h["path"].startswith("memory/") for h in search["results"])
    top = search["results"][0]
    assert top["path"] == flush_write["path"] and "peanut" in top["snippet"] and top["score"] > 0
    answer = next(r for r in records[search_at:] if r["event"] == "turn")
    assert answer["session"] == 2 and "peanut allergy" in answer["reply"]
    assert f"{top['path']}#L{top['startLine']}-L{top['endLine']}" in answer["reply"]
    done = records[-1]
    assert done["recalled"] is True and done["compactions"] >= 1 and done["flushes"] >= 1


def test_demo_json_tells_the_whole_story(tmp_path: Path) -> None:
    workspace = tmp_path / "demo"
    result = CliRunner().invoke(cli, ["demo", "--workspace", str(workspace), "--json"])
    assert result.exit_code == 0, result.output
    records = records_of(result.stdout)
    check_story(records, workspace)
    assert records[0]["workspace"] == str(workspace.resolve())
    # Sessions and index live in the demo folder, not in the user's state folder.
    sessions = json.loads((workspace / STATE_FOLDER / "agents/main/sessions/sessions.json").read_text())
    entry = sessions["agent:main:main"]
    assert entry["sessionId"] == records[first(records, "new")]["sessionId"]
    assert entry.get("compactionCount", 0) == 0  # the new session starts its own cycles


def test_demo_as_a_real_command(tmp_path: Path) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    workspace = tmp_path / "ws"
    proc = subprocess.run(
        [sys.executable, "-m", "sessionmem.cli", "demo", "--json", "--workspace", str(workspace)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    check_story(records_of(proc.stdout), workspace)


def test_demo_timeline_for_people(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["demo", "--workspace", str(tmp_path / "w")])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "turn  1  ▕" in out and "/ 2,100 tokens" in out
    assert "silent memory flush" in out and "+ - Tomás has a severe peanut allergy" in out
    assert "compaction #1 (threshold):" in out
    assert "/new" in out and "-japan-trip.md" in out
    assert f'memory_search "{RECALL_QUERY}"' in out and "score " in out
    assert "assistant: From my notes (memory/" in out
    assert "✓ recalled the early fact" in out
    # The flush heading is printed before the lines it wrote.
    assert out.index("silent memory flush") < out.index("+ - Tomás has a severe peanut allergy")


def test_demo_without_workspace_uses_a_new_temp_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    result = CliRunner().invoke(cli, ["demo", "--json"])
    assert result.exit_code == 0, result.output
    start = records_of(result.stdout)[0]
    folder = Path(start["workspace"])
    assert folder.parent == tmp_path and folder.name.startswith("sessionmem-demo-")
    assert (folder / "memory").is_dir()


def test_demo_refuses_a_workspace_with_files(tmp_path: Path) -> None:
    (tmp_path / "notes.md").write_text("mine\n")
    result = CliRunner().invoke(cli, ["demo", "--workspace", str(tmp_path)])
    assert result.exit_code == 2
    assert "must be a new or empty folder" in result.output
    assert (tmp_path / "notes.md").read_text() == "mine\n" and not (tmp_path / "memory").exists()


def test_demo_fails_clearly_when_recall_cannot_work(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"agents": {"defaults": {"memorySearch": {"enabled": False}}}}))
    result = CliRunner().invoke(cli, ["--config", str(config), "demo", "--workspace", str(tmp_path / "w")])
    assert result.exit_code == 1
    assert "demo failed: the new session did not find the early fact" in result.output
    assert "✗ the early fact was NOT recalled" in result.stdout


def test_run_demo_from_python_reports_the_recall(tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []
    report = run_demo(tmp_path / "ws", tmp_path / "state", emit=seen.append)
    assert report.recalled and report.hit is not None and report.hit["path"].startswith("memory/")
    assert "peanut" in report.answer
    assert report.memory_files == sorted(report.memory_files) and len(report.memory_files) == 2
    disabled = run_demo(
        tmp_path / "ws2",
        tmp_path / "state2",
        emit=seen.append,
        memory_search=MemorySearchConfig(provider="none", enabled=False),
    )
    assert not disabled.recalled and disabled.hit is None


def test_bar_and_timeline_order() -> None:
    assert bar(0, 100, 10) == "▕" + "░" * 10 + "▏"
    assert bar(50, 100, 10) == "▕" + "█" * 5 + "░" * 5 + "▏"
    assert bar(250, 100, 10) == "▕" + "█" * 10 + "▏"  # over the threshold: full, never longer
    printed: list[str] = []
    timeline = Timeline(printed.append)
    timeline({"event": "memory_write", "path": "memory/d.md", "mode": "append", "chars": 5, "lines": ["- x"]})
    timeline({"event": "flush", "reason": "r", "path": "memory/d.md", "compactionCount": 0})
    assert "silent memory flush" in printed[0] and printed[-1].endswith("+ - x")


def test_a_failing_workspace_hook_is_a_record_and_a_timeline_line(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    hook = workspace / "hooks" / "broken-audit"
    hook.mkdir(parents=True)
    (hook / "HOOK.md").write_text("---\nname: broken-audit\nevents: [compaction:after]\n---\n")
    (hook / "handler.py").write_text("def handle(event):\n    raise RuntimeError('audit log offline')\n")
    records: list[dict[str, Any]] = []
    report = run_demo(workspace, tmp_path / "state", emit=records.append)
    assert report.recalled and report.compactions >= 1  # the failing hook cost nothing
    for record in records:
        json.dumps(record)  # every --json line still serialises
    failures = [r for r in records if r["event"] == "hook_error"]
    assert len(failures) == report.compactions  # one per compaction:after
    failed = failures[0]
    assert (failed["hook"], failed["hookEvent"]) == ("broken-audit", "compaction:after")
    assert "audit log offline" in failed["error"]
    assert format_record(failed) == [f"         ⚠ {failed['error']}"]
    kinds = [r["event"] for r in records]
    assert kinds.index("compaction") < kinds.index("hook_error")


def test_demo_uses_a_configured_local_model(tmp_path: Path, gguf_model: Path) -> None:
    config = tmp_path / "config.json"
    search = {"provider": "local", "local": {"modelPath": str(gguf_model)}}
    config.write_text(json.dumps({"agents": {"defaults": {"memorySearch": search}}}))
    workspace = tmp_path / "w"
    result = CliRunner().invoke(
        cli, ["--config", str(config), "demo", "--json", "--workspace", str(workspace)]
    )
    assert result.exit_code == 0, result.output
    records = records_of(result.stdout)
    assert records[0]["memoryMode"] == "hybrid"
    search_record = records[first(records, "memory_search")]
    assert search_record["mode"] == "hybrid"
    check_story(records, workspace)


def test_demo_and_replay_keep_their_state_where_the_global_state_dir_says(tmp_path: Path) -> None:
    state, workspace = tmp_path / "my-state", tmp_path / "w"
    result = CliRunner().invoke(
        cli, ["--state-dir", str(state), "demo", "--workspace", str(workspace), "--json"]
    )
    assert result.exit_code == 0, result.output
    assert (state / "agents" / "main" / "sessions" / "sessions.json").is_file()
    assert (state / "memory" / "main.sqlite").is_file()
    assert not (workspace / ".sessionmem").exists()
    recording = Path(__file__).resolve().parents[1] / "transcripts" / "trip-planning.jsonl"
    replayed, replay_ws = tmp_path / "replay-state", tmp_path / "r"
    result = CliRunner().invoke(
        cli, ["--state-dir", str(replayed), "replay", str(recording), "--workspace", str(replay_ws), "--json"]
    )
    assert result.exit_code == 0, result.output
    assert (replayed / "agents" / "main" / "sessions" / "sessions.json").is_file()
    assert not (replay_ws / ".sessionmem").exists()
