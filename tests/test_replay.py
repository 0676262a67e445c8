"""``sessionmem replay``: recorded transcripts driven through the real runner with a small window."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sessionmem.cli import cli
from sessionmem.errors import TranscriptError
from sessionmem.runs.recorded import SESSION_TOOLS, first_sentence, load_recording, run_replay
from sessionmem.session.lifecycle.commands import parse_command
from sessionmem.session.stores.transcript_folder import read_messages

RECORDINGS = sorted((Path(__file__).resolve().parents[1] / "transcripts").glob("*.jsonl"))
WINDOW = 2500


def recorded_results(path: Path) -> dict[str, list[str]]:
    """Recorded tool results by tool name, in order."""
    out: dict[str, list[str]] = {}
    for turn in load_recording(path):
        for result in turn.results:
            out.setdefault(result.tool_name or "", []).append(result.content)
    return out


def test_there_are_recordings() -> None:
    assert {p.name for p in RECORDINGS} >= {
        "trip-planning.jsonl",
        "billing-migration.jsonl",
        "study-renovation-zh.jsonl",
    }


@pytest.mark.parametrize("recording", RECORDINGS, ids=lambda p: p.stem)
def test_replay_flushes_once_per_compaction_cycle(recording: Path, tmp_path: Path) -> None:
    records: list[dict[str, Any]] = []
    workspace, state = tmp_path / "ws", tmp_path / "state"
    report = run_replay(recording, workspace, state, context_window=WINDOW, emit=records.append)
    turns = load_recording(recording)
    assert report.turns == len(turns)
    assert report.flushes > 0 and report.compactions > 0

    # Events: every compaction closes a cycle whose flush ran before it, and no cycle flushed twice.
    cycles_flushed: list[int] = []
    for record in records:
        if record["event"] == "flush":
            assert record["error"] is None
            cycles_flushed.append(record["compactionCount"])
        elif record["event"] == "compaction":
            assert record["compactionCount"] - 1 in cycles_flushed
    assert cycles_flushed == sorted(set(cycles_flushed)) == report.flush_cycles
    assert report.compactions == sum(r["event"] == "compaction" for r in records)

    # sessions.json agrees: the last flush is recorded against a cycle no later than the current one.
    entry = json.loads(Path(report.sessions_json or "").read_text())["agent:main:main"]
    assert entry["compactionCount"] == report.compactions
    assert entry["memoryFlushCompactionCount"] == cycles_flushed[-1] <= entry["compactionCount"]

    # The replay's transcript is valid JSONL: a header, every recorded user message in order (commands
    # such as /status are run, not sent), one compaction entry per compaction.
    lines = Path(report.transcript or "").read_text(encoding="utf-8").splitlines()
    entries = [json.loads(line) for line in lines]
    assert entries[0]["type"] == "session" and entries[0]["version"] == 3
    assert sum(e["type"] == "compaction" for e in entries) == report.compactions
    users = [
        e["message"]["content"]
        for e in entries
        if e["type"] == "message" and e["message"]["role"] == "user" and "provenance" not in e["message"]
    ]
    users = [u for u in users if "Pre-compaction memory flush" not in u]
    assert users == [t.user for t in turns if parse_command(t.user) is None]

    # The flush saved what the user said early on to the daily log.
    flush_path = next(r["path"] for r in records if r["event"] == "flush")
    daily = (workspace / flush_path).read_text(encoding="utf-8")
    assert f"- {first_sentence(turns[0].user)}" in daily
    assert flush_path in report.memory_files


@pytest.mark.parametrize("recording", RECORDINGS, ids=lambda p: p.stem)
def test_stand_in_tools_return_the_recorded_results(recording: Path, tmp_path: Path) -> None:
    report = run_replay(recording, tmp_path / "ws", tmp_path / "state", context_window=WINDOW)
    replayed: dict[str, list[str]] = {}
    for _, entry in read_messages(report.transcript or ""):
        message = entry["message"]
        if message.get("provenance"):  # the flush's own write
            continue
        if message["role"] == "toolResult" and message["toolName"] not in SESSION_TOOLS:
            text = "".join(b.get("text", "") for b in message["content"])
            replayed.setdefault(message["toolName"], []).append(text)
    expected = {
        name: texts for name, texts in recorded_results(recording).items() if name not in SESSION_TOOLS
    }
    assert expected and replayed == expected


def test_recorded_memory_writes_really_write(tmp_path: Path) -> None:
    recording = next(p for p in RECORDINGS if p.stem == "trip-planning")
    report = run_replay(recording, tmp_path / "ws", tmp_path / "state", context_window=WINDOW)
    assert "MEMORY.md" in report.memory_files
    assert "Peanut allergy" in (tmp_path / "ws" / "MEMORY.md").read_text(encoding="utf-8")


def test_replay_command_json_and_summary(tmp_path: Path) -> None:
    recording = next(p for p in RECORDINGS if p.stem == "study-renovation-zh")
    runner = CliRunner()
    result = runner.invoke(
        cli,
        [
            "replay",
            str(recording),
            "--context-window",
            str(WINDOW),
            "--json",
            "--workspace",
            str(tmp_path / "a"),
        ],
    )
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in result.stdout.splitlines()]
    events = [r["event"] for r in records]
    assert events[0] == "start" and events[-1] == "done"
    assert {"turn", "flush", "compaction", "memory_write", "tool_call"} <= set(events)
    assert records[-1]["compactions"] > 0

    human = runner.invoke(cli, ["replay", str(recording), "--workspace", str(tmp_path / "b")])
    assert human.exit_code == 0, human.output
    assert f"Replayed {recording}" in human.stdout
    for label in (
        "turns        15",
        "flushes",
        "compactions",
        "memory files",
        "final tokens",
        "sessions.json",
    ):
        assert label in human.stdout


def test_replay_rejects_a_file_that_is_not_a_transcript(tmp_path: Path) -> None:
    bogus = tmp_path / "notes.jsonl"
    bogus.write_text('{"hello": 1}\nnot json\n')
    with pytest.raises(TranscriptError, match="no user message"):
        load_recording(bogus)
    result = CliRunner().invoke(cli, ["replay", str(bogus), "--workspace", str(tmp_path / "w")])
    assert result.exit_code == 1
    assert "no user message to replay" in result.output


def test_a_transcript_the_runner_wrote_replays_without_its_flush_prompts(tmp_path: Path) -> None:
    recording = next(p for p in RECORDINGS if p.name == "trip-planning.jsonl")
    first = run_replay(recording, tmp_path / "a", tmp_path / "a-state", context_window=WINDOW)
    assert first.flushes > 0 and first.transcript is not None
    # The runner's transcript holds the flush turns (marked memory_flush); they are not user turns.
    # (Slash commands such as /status answer without reaching the transcript.)
    said = [t.user for t in load_recording(recording) if parse_command(t.user) is None]
    turns = load_recording(first.transcript)
    assert [t.user for t in turns] == said
    again = run_replay(first.transcript, tmp_path / "b", tmp_path / "b-state", context_window=WINDOW)
    assert again.turns == len(said)
