"""`sessionmem mcp`, driven by the official MCP SDK's own client: over stdio (the server is a real
child process the client starts, as a desktop assistant does) and over streamable HTTP (a real
server process on 127.0.0.1, a free port)."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import pytest

if not os.environ.get("CI"):  # in CI the extra is part of the test install: a missing SDK fails there
    pytest.importorskip("mcp", reason="the mcp extra is not installed: pip install -e '.[mcp,test]'")

from mcp import Client, MCPError, StdioServerParameters

from sessionmem.config import Config
from sessionmem.memory.index import MemoryIndex
from sessionmem.memory.search.query_bounds import MAX_QUERY_CHARS
from sessionmem.memory.tools.reading import MemoryTools, memory_get_schema, memory_search_schema

REPO_ROOT = Path(__file__).resolve().parents[2]
NOTE = "- The billing cutover from LedgerLoop to Stripe is set for 2026-12-01.\n"
SECRET = "root:x:0:0\n"
MEMORY = "# Memory\n\n- The user prefers metric units.\n"


@pytest.fixture
def home(tmp_path: Path, workspace: Path) -> Path:
    """A workspace with one dated note and MEMORY.md, and a file outside it that must stay unreadable."""
    (workspace / "memory" / "2026-11-10.md").write_text("# 2026-11-10\n\n" + NOTE)
    (workspace / "MEMORY.md").write_text(MEMORY)
    (tmp_path / "secret.md").write_text(SECRET)
    return tmp_path


def write_config(home: Path, *, write_tools: bool, scope: str = "agent") -> Path:
    config = {
        "agents": {"defaults": {"memorySearch": {"provider": "none"}}},
        "memory": {"mcp": {"writeTools": write_tools}, "scope": scope},
    }
    path = home / "config.json"
    path.write_text(json.dumps(config))
    return path


def global_options(home: Path, config: Path) -> list[str]:
    state, workspace = str(home / "state"), str(home / "workspace")
    return ["--config", str(config), "--state-dir", state, "--workspace", workspace]


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def stdio_params(home: Path, config: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "sessionmem.cli", *global_options(home, config), "mcp"],
        env=child_env(),
    )


def run(client_target: Any, body: Callable[[Client], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        with anyio.fail_after(60):
            async with Client(client_target) as client:
                return await body(client)

    return anyio.run(main)


def text_of(result: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(result.content[0].text)
    return data


# ---------------------------------------------------------------------------- stdio


def test_stdio_serves_the_agent_tools_with_their_own_schemas_and_results(home: Path) -> None:
    config = write_config(home, write_tools=False)

    async def session(client: Client) -> dict[str, Any]:
        listed = await client.list_tools()
        search = await client.call_tool("memory_search", {"query": "billing cutover", "maxResults": 3})
        window = await client.call_tool("memory_get", {"path": "memory/2026-11-10.md", "from": 3, "lines": 1})
        escape = await client.call_tool("memory_get", {"path": "../secret.md"})
        return {
            "tools": {t.name: (t.description, t.input_schema) for t in listed.tools},
            "search": search,
            "window": window,
            "escape": escape,
            "instructions": client.instructions,
        }

    got = run(stdio_params(home, config), session)

    # The same schemas as the agent tools (no restatement), and nothing that writes.
    assert set(got["tools"]) == {"memory_search", "memory_get"}
    for schema in (memory_search_schema(), memory_get_schema()):
        fn = schema["function"]
        assert got["tools"][fn["name"]] == (fn["description"], fn["parameters"])
    assert "Memory Recall" in got["instructions"]

    search = text_of(got["search"])
    assert got["search"].is_error is False
    assert [(r["path"], r["startLine"], r["endLine"]) for r in search["results"]] == [
        ("memory/2026-11-10.md", 1, 3)
    ]
    # The owner reads with no session key: citations as in a direct chat.
    assert search["results"][0]["citation"] == "memory/2026-11-10.md#L1-L3"

    # The same result the agent tool gives in process, over the index the server built.
    workspace, state = home / "workspace", home / "state"
    cfg = Config.load(config)
    with MemoryIndex.open("main", workspace, cfg.for_agent("main").memory_search, state_dir=state) as index:
        tools = MemoryTools.from_config(cfg, "main", index=index, workspace=workspace)
        in_process = tools.call_dict("memory_search", {"query": "billing cutover", "maxResults": 3})
    assert search["results"] == in_process["results"]

    assert text_of(got["window"]) == {"path": "memory/2026-11-10.md", "text": NOTE.rstrip("\n")}

    refused = text_of(got["escape"])
    assert got["escape"].is_error is True
    assert refused["text"] == "" and "escapes the workspace" in refused["error"]
    assert SECRET.strip() not in got["escape"].content[0].text


def test_with_a_memory_per_person_the_owner_still_reads_every_persons_notes(home: Path) -> None:
    # memory.scope peer keeps each person's notes from the others' sessions, not from the owner: the
    # client reads all of the agent's memory, as the command line does.
    config = write_config(home, write_tools=False, scope="peer")
    peer_note = home / "workspace" / "memory" / "peers" / "telegram~direct~42" / "2026-11-12.md"
    peer_note.parent.mkdir(parents=True)
    peer_note.write_text("# 2026-11-12\n\n- Dana's daughter starts school in Porto in January.\n")

    async def session(client: Client) -> dict[str, Any]:
        search = await client.call_tool("memory_search", {"query": "school Porto"})
        read = await client.call_tool("memory_get", {"path": "memory/peers/telegram~direct~42/2026-11-12.md"})
        return {"search": text_of(search), "read": read}

    got = run(stdio_params(home, config), session)
    assert [r["path"] for r in got["search"]["results"]] == ["memory/peers/telegram~direct~42/2026-11-12.md"]
    assert got["read"].is_error is False
    assert "starts school in Porto" in text_of(got["read"])["text"]


def test_the_owner_reads_the_notes_of_a_person_whose_id_is_not_plain_ascii(home: Path) -> None:
    # The runner writes josé's note in his own folder (memory.scope peer); the owner's client finds it
    # and reads it by the path the search gave.
    from sessionmem.model.scripted import ScriptedModel
    from sessionmem.session.runner import SessionRunner
    from tests.scenarios.harness import tool_results

    config = write_config(home, write_tools=False, scope="peer")
    runner = SessionRunner(
        ScriptedModel(), config=Config.load(config), workspace=home / "workspace", state_dir=home / "state"
    )
    (written,) = tool_results(
        runner,
        "agent:main:telegram:direct:José",
        ("memory_append_daily", {"text": "- José's quince jam recipe"}),
    )
    assert written.startswith("Appended content to memory/peers/telegram~direct~jos%c3%a9/")

    async def session(client: Client) -> dict[str, Any]:
        found = text_of(await client.call_tool("memory_search", {"query": "quince jam recipe"}))
        (path,) = [r["path"] for r in found["results"]]
        return {"path": path, "read": text_of(await client.call_tool("memory_get", {"path": path}))}

    got = run(stdio_params(home, config), session)
    assert got["path"].startswith("memory/peers/telegram~direct~jos%c3%a9/")
    assert "José's quince jam recipe" in got["read"]["text"]


def test_stdio_refuses_a_write_when_the_config_does_not_enable_it(home: Path) -> None:
    config = write_config(home, write_tools=False)

    async def session(client: Client) -> str:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("memory_append_daily", {"text": "- remember the milk"})
        with pytest.raises(MCPError):
            await client.call_tool("memory_write", {"path": "MEMORY.md", "content": "x", "mode": "replace"})
        return str(refused.value)

    message = run(stdio_params(home, config), session)
    assert "unknown tool 'memory_append_daily'" in message
    assert "available: memory_search, memory_get" in message
    assert sorted(p.name for p in (home / "workspace" / "memory").iterdir()) == ["2026-11-10.md"]
    assert (home / "workspace" / "MEMORY.md").read_text() == MEMORY


def test_the_global_options_pick_the_agent_served(home: Path) -> None:
    config = write_config(home, write_tools=False)
    params = stdio_params(home, config)
    params.args = ["-m", "sessionmem.cli", "--agent", "work", *global_options(home, config), "mcp"]

    async def session(client: Client) -> dict[str, Any]:
        status = await client.read_resource("sessionmem://status")
        data: dict[str, Any] = json.loads(status.contents[0].text)
        return data

    status = run(params, session)
    assert status["agentId"] == "work"
    assert status["store"] == str((home / "state" / "memory" / "work.sqlite").resolve())
    assert status["workspace"] == str((home / "workspace").resolve())


def test_missing_sdk_gives_the_install_command(home: Path) -> None:
    config = write_config(home, write_tools=False)
    code = (
        "import sys; sys.modules['mcp'] = None; "  # as if the extra were not installed
        "from sessionmem.cli import main; "
        f"main({[*global_options(home, config), 'mcp']!r})"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=child_env(), timeout=60
    )
    assert proc.returncode == 1
    assert "pip install 'sessionmem[mcp]'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_other_commands_do_not_import_the_sdk() -> None:
    code = "import sys, sessionmem.cli, sessionmem.cli.mcp; print('mcp' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=child_env())
    assert proc.stdout.strip() == "False"


# ---------------------------------------------------------------------------- streamable HTTP


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def run_mcp(
    home: Path, config: Path, *options: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`sessionmem mcp [options]` run to its end (a refusal, not a server that starts)."""
    return subprocess.run(
        [sys.executable, "-m", "sessionmem.cli", *global_options(home, config), "mcp", *options],
        capture_output=True,
        text=True,
        env={**child_env(), **(env or {})},
        timeout=60,
    )


@pytest.fixture
def http_server(home: Path) -> Iterator[str]:
    """A real `sessionmem mcp --http PORT` process with the write tools enabled; yields its URL."""
    with serving(home, write_config(home, write_tools=True)) as (url, _proc):
        yield url


@contextlib.contextmanager
def serving(
    home: Path, config: Path, *more: str, env: dict[str, str] | None = None
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """A real `sessionmem mcp --http PORT [more options]` process, reached on 127.0.0.1; yields its URL
    and the process (stopped on exit)."""
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sessionmem.cli",
            *global_options(home, config),
            "mcp",
            "--http",
            str(port),
            *more,
        ],
        env={**child_env(), **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"server exited {proc.returncode}: {proc.stderr.read()}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise AssertionError("server did not listen within 60 s") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp", proc
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_http_serves_search_get_writes_when_enabled_and_the_status_resource(
    home: Path, http_server: str
) -> None:
    async def session(client: Client) -> dict[str, Any]:
        names = {t.name for t in (await client.list_tools()).tools}
        first = await client.call_tool("memory_search", {"query": "billing cutover"})
        escape = await client.call_tool("memory_get", {"path": "../secret.md"})
        appended = await client.call_tool("memory_append_daily", {"text": "- The office moves to Lisbon."})
        found = await client.call_tool("memory_search", {"query": "office Lisbon"})
        resources = [str(r.uri) for r in (await client.list_resources()).resources]
        status = await client.read_resource("sessionmem://status")
        return {
            "names": names,
            "first": text_of(first),
            "escape": escape,
            "appended": appended,
            "found": text_of(found),
            "resources": resources,
            "status": json.loads(status.contents[0].text),
        }

    got = run(http_server, session)

    assert got["names"] == {"memory_search", "memory_get", "memory_append_daily", "memory_write"}
    assert [r["path"] for r in got["first"]["results"]] == ["memory/2026-11-10.md"]
    assert got["escape"].is_error is True
    assert "escapes the workspace" in text_of(got["escape"])["error"]

    # The write went to today's daily log (the machine's zone: no userTimezone configured) ...
    today = f"memory/{datetime.now().astimezone().date().isoformat()}.md"
    assert got["appended"].is_error is False
    assert got["appended"].content[0].text == f"Appended content to {today}."
    assert "- The office moves to Lisbon." in (home / "workspace" / today).read_text()
    # ... and the very next search finds it.
    assert [r["path"] for r in got["found"]["results"]] == [today]

    assert got["resources"] == ["sessionmem://status"]
    status = got["status"]
    assert status["agentId"] == "main"
    assert status["mode"] == "fts-only"
    assert status["files"] == 3  # MEMORY.md, the note, today's log
    assert status["store"] == str((home / "state" / "memory" / "main.sqlite").resolve())


def test_http_bounds_a_megabyte_query_and_names_an_unexpected_argument(home: Path, http_server: str) -> None:
    query = "billing cutover " + " ".join(f"zq{i:06d}" for i in range(125_000))  # 1 MB

    async def session(client: Client) -> dict[str, Any]:
        return {
            "long": await client.call_tool("memory_search", {"query": query}),
            "evil_search": await client.call_tool("memory_search", {"query": "billing", "evil": 1}),
            "evil_append": await client.call_tool("memory_append_daily", {"text": "- x", "evil": 1}),
        }

    got = run(http_server, session)
    long = text_of(got["long"])
    assert got["long"].is_error is False
    assert [r["path"] for r in long["results"]] == ["memory/2026-11-10.md"]
    assert long["queryCut"]["chars"] == len(query) and long["queryCut"]["charsSearched"] <= MAX_QUERY_CHARS
    assert long["queryCut"]["note"].startswith("The query was cut:")
    for name in ("evil_search", "evil_append"):
        assert got[name].is_error is True
        tool = "memory_search" if name == "evil_search" else "memory_append_daily"
        assert (
            got[name].content[0].text.startswith(f"Invalid arguments for {tool}: unexpected argument 'evil'")
        )
    assert sorted(p.name for p in (home / "workspace" / "memory").iterdir()) == ["2026-11-10.md"]


def test_http_write_tools_keep_their_rules(home: Path, http_server: str) -> None:
    async def session(client: Client) -> Any:
        return await client.call_tool("memory_write", {"path": "memory/other.md", "content": "x"})

    refused = run(http_server, session)
    assert refused.is_error is True
    assert "memory_write only writes MEMORY.md" in refused.content[0].text
    assert not (home / "workspace" / "memory" / "other.md").exists()


def test_http_on_a_taken_port_says_so_and_exits(home: Path) -> None:
    config = write_config(home, write_tools=False)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        proc = run_mcp(home, config, "--http", str(port))
    assert proc.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in proc.stderr
    assert "Traceback" not in proc.stderr


# ---------------------------------------------------------------------------- who may call over HTTP

API_KEY = "mcp-test-key-0123456789abcdef"


def post_initialize(url: str, headers: dict[str, str]) -> tuple[int, dict[str, str], str]:
    """A bare MCP ``initialize`` POST (no SDK): (status, headers, body)."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            **headers,
        },
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers), response.read(2000).decode()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read().decode()


def with_key(url: str, key: str) -> Any:
    """An MCP client transport that sends ``Authorization: Bearer <key>``."""
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    return streamable_http_client(
        url, http_client=create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
    )


def list_tool_names(target: Any) -> set[str]:
    async def session(client: Client) -> set[str]:
        return {t.name for t in (await client.list_tools()).tools}

    names: set[str] = run(target, session)
    return names


def test_http_on_an_address_other_machines_reach_is_refused_without_an_api_key(home: Path) -> None:
    config = write_config(home, write_tools=False)
    port = free_port()
    proc = run_mcp(home, config, "--http", str(port), "--host", "0.0.0.0")
    assert proc.returncode == 2
    assert "refusing to serve on 0.0.0.0" in proc.stderr and "no API key guards it" in proc.stderr
    assert "SESSIONMEM_API_KEY" in proc.stderr and "server.apiKeys" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_serve_http_refuses_an_open_address_without_a_key_in_python_too(home: Path, tmp_path: Path) -> None:
    from sessionmem.errors import ConfigError
    from sessionmem.server.mcp import MemoryServerTools, build_server, listen_tcp, serve_http

    config = Config()
    with MemoryIndex.open(
        "main", home / "workspace", config.for_agent().memory_search, state_dir=tmp_path / "st", watch=False
    ) as index:
        tools = MemoryTools.from_config(config, "main", index=index, workspace=home / "workspace")
        server = build_server(MemoryServerTools(memory=tools, status=dict))
        sock = listen_tcp(free_port(), "0.0.0.0")
        try:
            with pytest.raises(ConfigError, match=r"refusing to serve on 0\.0\.0\.0"):
                anyio.run(serve_http, server, sock)
        finally:
            sock.close()


def test_http_with_an_api_key_answers_only_requests_that_carry_it(home: Path) -> None:
    config = write_config(home, write_tools=False)
    env = {"SESSIONMEM_API_KEY": API_KEY}
    with serving(home, config, "--host", "0.0.0.0", env=env) as (url, proc):
        status, headers, body = post_initialize(url, {})
        assert status == 401 and headers.get("www-authenticate", "").startswith("Bearer")
        assert json.loads(body)["error"]["code"] == "invalid_api_key"
        assert post_initialize(url, {"Authorization": "Bearer wrong-key-0123456789abcdef"})[0] == 401
        assert post_initialize(url, {"Authorization": API_KEY})[0] == 401  # the scheme is part of it
        assert post_initialize(url, {"Authorization": f"Bearer {API_KEY}"})[0] == 200
        with pytest.raises(ExceptionGroup) as refused:  # the SDK's own client, without the key
            list_tool_names(url)
        assert refused.group_contains(MCPError, match="error response", depth=2)
        assert list_tool_names(with_key(url, API_KEY)) == {"memory_search", "memory_get"}
        proc.terminate()
        out, err = proc.communicate(timeout=30)
    assert "an API key required" in err
    assert API_KEY not in out + err


def test_a_configured_api_key_guards_loopback_too(home: Path) -> None:
    config = home / "config.json"
    config.write_text(
        json.dumps(
            {"agents": {"defaults": {"memorySearch": {"provider": "none"}}}, "server": {"apiKeys": [API_KEY]}}
        )
    )
    with serving(home, config) as (url, _proc):
        assert post_initialize(url, {})[0] == 401
        assert list_tool_names(with_key(url, API_KEY)) == {"memory_search", "memory_get"}


@pytest.mark.parametrize("where", ["config", "env"])
def test_a_weak_api_key_is_refused_naming_where_it_came_from_not_its_value(home: Path, where: str) -> None:
    weak = "hunter2-weak"
    document: dict[str, Any] = {"agents": {"defaults": {"memorySearch": {"provider": "none"}}}}
    if where == "config":
        document["server"] = {"apiKeys": [weak]}
    config = home / "config.json"
    config.write_text(json.dumps(document))
    env = {"SESSIONMEM_API_KEY": weak} if where == "env" else {}
    proc = run_mcp(home, config, "--http", str(free_port()), env=env)
    assert proc.returncode == 2
    assert ("server.apiKeys" if where == "config" else "$SESSIONMEM_API_KEY") in proc.stderr
    assert "at least 16 characters" in proc.stderr
    assert weak not in proc.stderr + proc.stdout
