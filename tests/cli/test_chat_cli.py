"""``sessionmem chat`` end to end: litellm over HTTP to the loopback OpenAI-compatible server, piped
stdin, real sessions.json / transcripts / memory files under a temporary state folder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sessionmem.cli import cli
from sessionmem.cli.chat import event_note
from sessionmem.session.turn.events import CompactionEvent, HookErrorEvent, NewSessionEvent, event_record
from tests.support.openai_server import OpenAIServer, text_reply

FLUSH_MARKER = "Pre-compaction memory flush."
SLUG_MARKER = "Based on this conversation, generate a short"


def last_user(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else json.dumps(content)
    return ""


def route(body: dict[str, Any]) -> Any:
    """Flush turns stay silent, the slug request gets a slug; everything else falls through to echo."""
    text = last_user(body)
    if SLUG_MARKER in text:
        return text_reply("greeting-chat", prompt_tokens=80, completion_tokens=3)
    if FLUSH_MARKER in text:
        return text_reply("NO_REPLY", prompt_tokens=300, completion_tokens=2)
    return None


@pytest.fixture
def chat_args(openai_server: OpenAIServer, tmp_path: Path) -> list[str]:
    openai_server.chat.handler = route
    return [
        "--workspace",
        str(tmp_path / "ws"),
        "chat",
        "--model",
        "openai/test-model",
        "--api-base",
        openai_server.base_url,
        "--api-key",
        "sk-test",
    ]


def sessions_dir(state: Path) -> Path:
    return state / "agents" / "main" / "sessions"


def test_piped_chat_with_status_and_new(
    chat_args: list[str], openai_server: OpenAIServer, isolated_env: Path, tmp_path: Path
) -> None:
    result = CliRunner().invoke(cli, chat_args, input="hello there\n/status\n/new\n")
    assert result.exit_code == 0, result.output + str(result.exception)
    out = result.stdout
    assert "echo: hello there" in out
    assert "Tokens:" in out and "Compactions: 0" in out and "memory flush: not yet this cycle" in out
    assert "New session started" in out
    assert "· new session" in result.stderr and "memory flush" in result.stderr

    store = json.loads((sessions_dir(isolated_env) / "sessions.json").read_text(encoding="utf-8"))
    entry = store["agent:main:main"]
    assert entry["compactionCount"] == 0
    assert Path(entry["sessionFile"]).is_file()
    archived = list(sessions_dir(isolated_env).glob("*.jsonl.reset.*"))
    assert len(archived) == 1 and "hello there" in archived[0].read_text(encoding="utf-8")
    (memory,) = (tmp_path / "ws" / "memory" / "peers" / "main").glob("*-greeting-chat.md")
    body = memory.read_text(encoding="utf-8")
    assert "user: hello there" in body and "assistant: echo: hello there" in body
    assert "- **Source**: cli" in body

    first = openai_server.chat.requests[0]
    assert first.body["model"] == "test-model"
    assert first.headers["authorization"] == "Bearer sk-test"
    tool_names = {t["function"]["name"] for t in first.body.get("tools", [])}
    assert {"memory_search", "memory_get"} <= tool_names


def test_json_lines_parse(chat_args: list[str], isolated_env: Path) -> None:
    result = CliRunner().invoke(cli, [*chat_args, "--json"], input="hi\n/status\n/new\n/quit\nnever sent\n")
    assert result.exit_code == 0, result.output + str(result.exception)
    objects = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    kinds = [o["event"] for o in objects]
    # the session the chat created is announced (session_start, the session:start hook's event) first
    assert kinds[:2] == ["session_start", "turn"] and objects[1]["reply"] == "echo: hi"
    status = objects[kinds.index("status")]
    assert status["compactionCount"] == 0 and status["tokens"] > 0
    assert status["contextWindow"] >= status["compactionThreshold"] > status["flushThreshold"] > 0
    assert "flush" in kinds and "memory_write" in kinds
    new = objects[kinds.index("new")]
    assert new["reason"] == "new" and new["memoryFile"].endswith("-greeting-chat.md")
    assert kinds.index("flush") < kinds.index("memory_write") < kinds.index("new")
    assert objects[-1] == {"event": "command", "command": "new", "reply": objects[-1]["reply"]}
    assert "never sent" not in result.stdout
    # One name across the CLI: chat, demo and replay all say "event" (events carry session_key/id).
    assert all("kind" not in o for o in objects)
    assert objects[0]["sessionKey"] == "agent:main:main" and objects[0]["sessionId"]


def test_missing_model_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["--workspace", str(tmp_path / "ws"), "chat"], input="hi\n")
    assert result.exit_code == 2
    assert "No model" in result.output


def test_a_failed_turn_is_reported_and_the_chat_goes_on(
    chat_args: list[str], openai_server: OpenAIServer
) -> None:
    from tests.support.openai_server import server_error

    openai_server.chat.push(server_error(), server_error(), server_error())
    args = [*chat_args[:-2], "--api-key", "sk-test"]
    result = CliRunner().invoke(cli, [*args, "--json"], input="first\nsecond\n")
    assert result.exit_code == 1, result.output  # the chat went on; the exit status says a turn failed
    assert "1 of 2 messages failed" in result.stderr
    objects = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    assert [o["event"] for o in objects[:2]] == ["session_start", "error"]  # the chat's session, announced
    assert objects[-1]["event"] == "turn" and objects[-1]["reply"] == "echo: second"


def test_event_formatting() -> None:
    event = CompactionEvent(
        session_key="k", reason="manual", tokens_before=5000, tokens_after=900, compaction_count=1
    )
    assert event_record(event)["event"] == "compaction"
    assert event_note(event) == "· compacted (5,000 → 900 tokens, count 1)"
    new = NewSessionEvent(session_key="k", reason="daily", session_id="abc", memory_file="memory/x.md")
    assert event_note(new) == "· new session abc (daily, saved memory/x.md)"
    failed = HookErrorEvent(
        session_key="k",
        hook="audit",
        hook_event="compaction:after",
        error="hook 'audit' failed on compaction:after: RuntimeError: boom",
    )
    assert json.loads(json.dumps(event_record(failed)))["event"] == "hook_error"
    assert event_record(failed)["hookEvent"] == "compaction:after"
    assert event_note(failed) == "· hook 'audit' failed on compaction:after: RuntimeError: boom"


def test_session_option_picks_the_key(chat_args: list[str], isolated_env: Path) -> None:
    # The agent part is lowered; a name after it is kept as written (sessionmem.privacy.canonical_key).
    args = [*chat_args, "--session", "Agent:Main:Work", "--json"]
    result = CliRunner().invoke(cli, args, input="hello work\n")
    assert result.exit_code == 0, result.output
    turn = json.loads(result.stdout.splitlines()[0])
    assert turn["sessionKey"] == "agent:main:Work"
    store = json.loads((sessions_dir(isolated_env) / "sessions.json").read_text(encoding="utf-8"))
    assert list(store) == ["agent:main:Work"]
    assert "hello work" in Path(store["agent:main:Work"]["sessionFile"]).read_text(encoding="utf-8")


def test_session_option_takes_a_bare_key_as_the_agents_and_refuses_another_agents(
    chat_args: list[str], isolated_env: Path
) -> None:
    result = CliRunner().invoke(cli, [*chat_args, "--session", "telegram:direct:42", "--json"], input="hi\n")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout.splitlines()[0])["sessionKey"] == "agent:main:telegram:direct:42"
    refused = CliRunner().invoke(cli, [*chat_args, "--session", "agent:beta:main"], input="hi\n")
    assert refused.exit_code == 1 and "Traceback" not in refused.output
    assert "belongs to agent 'beta', and this runner serves agent 'main'" in refused.output
    store = json.loads((sessions_dir(isolated_env) / "sessions.json").read_text(encoding="utf-8"))
    assert list(store) == ["agent:main:telegram:direct:42"]


def test_chat_is_listed_in_help() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    assert "chat" in result.output
    result = CliRunner().invoke(cli, ["chat", "--help"])
    assert "--api-base" in result.output and "/compact" in result.output


def test_the_model_can_search_memory_during_the_chat(
    chat_args: list[str], openai_server: OpenAIServer, tmp_path: Path
) -> None:
    from tests.support.openai_server import tool_call_reply

    (tmp_path / "ws" / "memory").mkdir(parents=True)
    (tmp_path / "ws" / "MEMORY.md").write_text(
        "# Notes\n\nThe billing cutover is on Friday.\n", encoding="utf-8"
    )
    openai_server.chat.push(
        tool_call_reply([("memory_search", {"query": "billing cutover"})]), text_reply("It is on Friday.")
    )
    result = CliRunner().invoke(cli, [*chat_args, "--json"], input="when is the billing cutover?\n")
    assert result.exit_code == 0, result.output
    objects = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    (call,) = [o for o in objects if o["event"] == "tool_call"]
    assert call["name"] == "memory_search" and not call["isError"]
    assert "Friday" in call["result"] and "MEMORY.md" in call["result"]
    assert objects[-1]["event"] == "turn" and objects[-1]["reply"] == "It is on Friday."
    second = openai_server.chat.requests[1].body["messages"]
    assert any(m.get("role") == "tool" and "Friday" in str(m.get("content")) for m in second)


def test_an_index_store_that_cannot_be_opened_leaves_the_chat_without_memory(
    chat_args: list[str], tmp_path: Path
) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("", encoding="utf-8")
    config = tmp_path / "store.json"
    store = {"store": {"path": str(blocker / "index.sqlite")}}
    config.write_text(json.dumps({"agents": {"defaults": {"memorySearch": store}}}), encoding="utf-8")
    result = CliRunner().invoke(cli, ["--config", str(config), *chat_args], input="hello there\n")
    assert result.exit_code == 0, result.output
    assert "cannot open the memory index of agent 'main'" in result.stderr
    assert "chatting without memory_search" in result.stderr
    assert "hello there" in result.stdout


def test_a_terminal_gets_the_reply_streamed(
    chat_args: list[str], openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from sessionmem.cli import chat as chat_module

    # stdout is a terminal (stdin is not): the chat streams.
    monkeypatch.setattr(chat_module, "_isatty", lambda stream: stream is sys.stdout)
    openai_server.chat.push(text_reply("NO_REPLY"))
    result = CliRunner().invoke(cli, chat_args, input="be quiet\nhello there\n")
    assert result.exit_code == 0, result.output + str(result.exception)
    assert result.stdout == "echo: hello there\n"  # printed once, piece by piece; NO_REPLY shows nothing
    turns = [r.body for r in openai_server.chat.requests if FLUSH_MARKER not in last_user(r.body)]
    assert [body.get("stream") for body in turns] == [True, True]

    openai_server.chat.requests.clear()
    result = CliRunner().invoke(cli, [*chat_args, "--json"], input="hi\n")  # --json never streams
    assert json.loads(result.stdout.splitlines()[0])["reply"] == "echo: hi"
    assert all(not r.body.get("stream") for r in openai_server.chat.requests)


def test_chat_loop_prints_a_streamed_reply_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import asyncio

    from sessionmem.cli.chat import ChatPrinter, chat_loop
    from sessionmem.model.scripted import ScriptedModel
    from sessionmem.session.runner import SessionRunner

    model = ScriptedModel(["Hello there, how are you?", "NO_REPLY", "Bye."])
    runner = SessionRunner(model, workspace=tmp_path / "ws", state_dir=tmp_path / "state")
    lines = iter(["hi\n", "quiet\n", "bye\n", ""])
    asyncio.run(chat_loop(runner.open(), lambda: next(lines), ChatPrinter(False, stream=True)))
    assert capsys.readouterr().out == "Hello there, how are you?\nBye.\n"
    assert len(model.streamed) == 3


def test_piped_compact_with_instructions_then_reset(
    chat_args: list[str], openai_server: OpenAIServer, isolated_env: Path, tmp_path: Path
) -> None:
    from sessionmem.session.turn.compaction import SUMMARIZATION_SYSTEM_PROMPT

    def summarise_briefly(body: dict[str, Any]) -> Any:
        system = (body.get("messages") or [{}])[0].get("content")
        if system == SUMMARIZATION_SYSTEM_PROMPT:
            return text_reply("## Decisions\n- none yet\n## Open TODOs\n- detail0", prompt_tokens=900)
        if FLUSH_MARKER in last_user(body):  # a prompt size counted from the request, not a fixed one
            return text_reply("NO_REPLY", completion_tokens=2)
        return route(body)

    openai_server.chat.handler = summarise_briefly
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"agents": {"defaults": {"compaction": {"keepRecentTokens": 40}}}}))
    messages = [f"note {i}: " + " ".join(f"detail{i}-{j}" for j in range(40)) for i in range(4)]
    script = "\n".join([*messages, "/compact keep the open TODOs", "/reset"]) + "\n"
    result = CliRunner().invoke(cli, ["--config", str(config), *chat_args, "--json"], input=script)
    assert result.exit_code == 0, result.output + str(result.exception)
    objects = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    kinds = [o["event"] for o in objects]

    # /compact: the cycle's flush first, then a manual compaction asked with the user's instructions.
    compaction = objects[kinds.index("compaction")]
    assert compaction["reason"] == "manual" and compaction["compactionCount"] == 1
    assert 0 < compaction["tokensAfter"] < compaction["tokensBefore"]
    assert kinds.index("flush") < kinds.index("compaction")
    assert {"event": "command", "command": "compact"}.items() <= objects[
        kinds.index("compaction") + 1
    ].items()
    summary_requests = [
        r.body for r in openai_server.chat.requests if "keep the open TODOs" in json.dumps(r.body)
    ]
    assert summary_requests, "the summary request carries the /compact instructions"

    # /reset: a new session (reason reset), the old transcript archived with its compaction entry.
    new = objects[kinds.index("new")]
    assert new["reason"] == "reset" and new["previousSessionId"] != new["sessionId"]
    (archived,) = sessions_dir(isolated_env).glob("*.jsonl.reset.*")
    lines = [json.loads(line) for line in archived.read_text(encoding="utf-8").splitlines()]
    (compaction_line,) = [line for line in lines if line["type"] == "compaction"]
    assert "## Open TODOs\n- detail0" in compaction_line["summary"]
    store = json.loads((sessions_dir(isolated_env) / "sessions.json").read_text(encoding="utf-8"))
    entry = store["agent:main:main"]
    assert entry["sessionId"] == new["sessionId"] and entry["compactionCount"] == 0
    assert objects[-1]["event"] == "command" and objects[-1]["command"] == "reset"


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize("as_json", [False, True])
def test_a_chat_whose_model_calls_failed_exits_non_zero(
    tmp_path: Path, isolated_env: Path, as_json: bool
) -> None:
    nobody = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there: connection refused
    args = ["--workspace", str(tmp_path / "ws"), "chat", "--model", "openai/test-model", "--api-base", nobody]
    args += ["--api-key", "sk-test", *(["--json"] if as_json else [])]
    result = CliRunner().invoke(cli, args, input="hello\n/status\nagain\n")
    assert result.exit_code == 1, result.output
    assert "2 of 3 messages failed" in result.stderr
    assert "Traceback" not in result.output + result.stderr
    if as_json:
        kinds = [json.loads(line)["event"] for line in result.stdout.splitlines() if line.strip()]
        assert kinds == ["session_start", "error", "status", "error"]
    else:
        assert result.stderr.count("error: ModelError") == 2
