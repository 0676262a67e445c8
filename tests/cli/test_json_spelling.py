"""One spelling in every JSON output: keys are camelCase (``sessionKey``, ``tokensBefore``), as in the
config, sessions.json and ``memory status --json``. Each command's ``--json`` output is read as a user's
script would; only the values a model or a user chose (a tool call's ``arguments``) keep their own keys.
It caught ``chat --json``'s ``turn`` saying ``session_key`` while its ``status`` said ``sessionKey``."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from sessionmem.cli import cli
from tests.cli.test_chat_cli import route
from tests.support.openai_server import OpenAIServer, tool_call_reply

REPO = Path(__file__).resolve().parents[2]
CAMEL = re.compile(r"^[a-z][a-zA-Z0-9]*$")
FREE_FORM = {"arguments"}  # a tool call's arguments: named by the tool's schema, not by sessionmem


def off_spelling(value: Any, where: str = "") -> list[str]:
    """Every key path in ``value`` whose key is not camelCase."""
    found = []
    if isinstance(value, dict):
        for key, item in value.items():
            path = f"{where}.{key}" if where else str(key)
            if not CAMEL.match(str(key)):
                found.append(path)
            if key not in FREE_FORM:
                found += off_spelling(item, path)
    elif isinstance(value, list):
        for item in value:
            found += off_spelling(item, f"{where}[]")
    return found


def json_objects(stdout: str) -> list[Any]:
    """The JSON document a command printed, or its JSON lines."""
    try:
        return [json.loads(stdout)]
    except ValueError:
        return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def run_json(*args: str, stdin: str | None = None) -> list[Any]:
    result = CliRunner().invoke(cli, list(args), input=stdin)
    assert result.exit_code == 0, result.output + str(result.exception)
    return json_objects(result.stdout)


def test_every_json_output_spells_its_keys_in_camel_case(
    tmp_path: Path, openai_server: OpenAIServer, isolated_env: Path
) -> None:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "2026-01-05.md").write_text("- The billing cutover is on Friday.\n", encoding="utf-8")
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"agents": {"defaults": {"memorySearch": {"provider": "none"}}}}))
    base = ["--config", str(config), "--workspace", str(ws)]
    openai_server.chat.handler = route
    openai_server.chat.push(
        tool_call_reply([("memory_search", {"query": "billing cutover", "max_results": 2})])
    )
    chat = [*base, "chat", "--model", "openai/test-model", "--api-base", openai_server.base_url]
    chat += ["--api-key", "sk-test", "--json"]
    outputs = {
        "chat": run_json(*chat, stdin="when is the cutover?\nhello\n/status\n/new\n"),
        "memory index": run_json(*base, "memory", "index", "--json"),
        "memory status": run_json(*base, "memory", "status", "--deep", "--json"),
        "memory search": run_json(*base, "memory", "search", "billing", "--explain", "--json"),
        "sessions export": run_json(*base, "sessions", "export", "--to", "sqlite", "--json"),
        "demo": run_json(
            "--state-dir",
            str(tmp_path / "demo-state"),
            "demo",
            "--json",
            "--workspace",
            str(tmp_path / "demo"),
        ),
        "replay": run_json(
            "--state-dir",
            str(tmp_path / "replay-state"),
            "replay",
            str(REPO / "transcripts" / "trip-planning.jsonl"),
            "--json",
            "--workspace",
            str(tmp_path / "replay"),
        ),
    }
    assert {name: off_spelling(objects) for name, objects in outputs.items()} == {
        name: [] for name in outputs
    }
    chat_events = {o["event"]: o for o in outputs["chat"]}
    assert {"turn", "status", "tool_call", "command", "new", "flush", "memory_write"} <= set(chat_events)
    assert chat_events["turn"]["sessionKey"] == chat_events["status"]["sessionKey"] == "agent:main:main"
    assert chat_events["tool_call"]["arguments"] == {"query": "billing cutover", "max_results": 2}
