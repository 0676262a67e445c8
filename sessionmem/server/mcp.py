"""The agent's memory served over the Model Context Protocol (the official ``mcp`` SDK, low-level server).

What a client sees:

- tools ``memory_search`` and ``memory_get``: the agent tools themselves (:class:`MemoryTools`), with
  the same input schemas and the same JSON results; a result that carries ``error`` is flagged
  ``isError`` so the client's model knows to correct its call; every call goes through the runner's
  dispatcher (``session.tools.dispatch``), so arguments are checked as in a turn;
- the write tools ``memory_append_daily`` and ``memory_write`` (the runner's own, with their safety
  rules: appends never rewrite, a replace keeps the earlier text under ``.memory-history/``) only when
  the config turns them on (``memory.mcp.writeTools``); the command indexes a write before it returns,
  so the next search finds it;
- a resource ``sessionmem://status``: what ``sessionmem memory status --json`` prints.

Who the client is: the agent's owner, like the command line. It reads with no session key, so nothing
is hidden from it that the owner could read on disk (with ``memory.scope: peer`` too: every person's
notes), citations follow ``memory.citations`` for a direct chat, and it writes the root files.

The SDK is an optional extra (``pip install 'sessionmem[mcp]'``), imported only here and only when a
server is built, so ``import sessionmem`` and the other commands never load it.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sessionmem.errors import UsageError

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server

    from sessionmem.memory.tools.reading import MemoryTools
    from sessionmem.tools.define import Tool

SERVER_NAME = "sessionmem"
STATUS_URI = "sessionmem://status"
INSTALL_HINT = "the MCP server needs the mcp SDK: pip install 'sessionmem[mcp]'"


def require_sdk() -> None:
    """Raise a :class:`UsageError` with the install command when the ``mcp`` SDK is missing."""
    try:
        import mcp.server.lowlevel  # noqa: F401
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] != "mcp":
            raise
        raise UsageError(INSTALL_HINT) from None


@dataclass
class MemoryServerTools:
    """What the server offers: the reading tools, the optional write tools, and the status source."""

    memory: MemoryTools
    status: Callable[[], Mapping[str, Any]]
    writes: list[Tool] = field(default_factory=list)

    def tool_schemas(self) -> list[dict[str, Any]]:
        """``{name, description, parameters}`` of every tool, reading tools first."""
        out = [schema["function"] for schema in self.memory.schemas()]
        out.extend(tool.schema()["function"] for tool in self.writes)
        return out

    async def call(self, name: str, arguments: Mapping[str, Any]) -> tuple[str, bool]:
        """Run one tool through the runner's dispatcher: ``(result text, is_error)``; a reading tool's
        JSON that carries ``error`` is an error too. Never raises for the tool's own failures."""
        from sessionmem.memory.tools.reading import reading_tools
        from sessionmem.messages import ToolCall
        from sessionmem.tools.define import dispatch, tool_map

        tools = tool_map([*reading_tools(self.memory), *self.writes])
        outcome = await dispatch(tools, ToolCall(id=name, name=name, arguments=dict(arguments)))
        if outcome.is_error or not self.memory.handles(name):
            return outcome.content, outcome.is_error
        return outcome.content, "error" in json.loads(outcome.content)

    def has(self, name: str) -> bool:
        return self.memory.handles(name) or any(tool.name == name for tool in self.writes)


def build_server(tools: MemoryServerTools, *, instructions: str | None = None) -> Server[Any]:
    """A low-level MCP server over ``tools`` (transport-free: run it over stdio or HTTP)."""
    require_sdk()
    import mcp_types as types
    from mcp.server.lowlevel import Server
    from mcp.shared.exceptions import MCPError

    async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(name=s["name"], description=s.get("description"), input_schema=s["parameters"])
                for s in tools.tool_schemas()
            ]
        )

    async def call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if not tools.has(params.name):
            available = ", ".join(s["name"] for s in tools.tool_schemas())
            raise MCPError(types.INVALID_PARAMS, f"unknown tool {params.name!r}; available: {available}")
        text, is_error = await tools.call(params.name, params.arguments or {})
        return types.CallToolResult(content=[types.TextContent(text=text)], is_error=is_error)

    async def list_resources(_ctx: Any, _params: Any) -> types.ListResourcesResult:
        status = types.Resource(
            name="status",
            uri=STATUS_URI,
            description="The memory index: provider, mode, files, chunks, vector path and issues.",
            mime_type="application/json",
        )
        return types.ListResourcesResult(resources=[status])

    async def read_resource(_ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        if str(params.uri) != STATUS_URI:
            raise MCPError(types.INVALID_PARAMS, f"unknown resource {params.uri}; available: {STATUS_URI}")
        import anyio.to_thread

        status = await anyio.to_thread.run_sync(tools.status)
        text = json.dumps(status, ensure_ascii=False, indent=2, default=str)
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=STATUS_URI, mime_type="application/json", text=text)]
        )

    return Server(
        SERVER_NAME,
        version=_version(),
        instructions=instructions,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
    )


async def serve_stdio(server: Server[Any]) -> None:
    """Serve one client over this process's stdin and stdout until it disconnects."""
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def listen_tcp(port: int, host: str = "127.0.0.1") -> socket.socket:
    """A listening socket on ``host:port`` (IPv4 or IPv6); ``OSError`` (port taken, no permission, an
    address this machine does not have) before anything runs."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


# Trigger: a client reuses a connection idle for about as long as the server keeps it (httpx, and so the
# official openai client, keep one 5 s; uvicorn closes one after 5 s by default). Why: a request written
# as the server closes the connection is lost: the client reads a reset or an end of stream
# ("ReadError", "Server disconnected without sending a response"). Outcome: the server keeps idle
# connections far longer than clients do (nginx's default), so it is the client that closes them.
KEEP_ALIVE_SECONDS = 75


def uvicorn_config(app: Any, **options: Any) -> Any:
    """The ``uvicorn.Config`` the gateway and the MCP server run ``app`` with (``options`` added)."""
    import uvicorn

    return uvicorn.Config(
        app, log_level="warning", lifespan="on", timeout_keep_alive=KEEP_ALIVE_SECONDS, **options
    )


async def serve_http(
    server: Server[Any], sock: socket.socket, *, path: str = "/mcp", api_keys: Sequence[str] = ()
) -> None:
    """Serve streamable HTTP on ``sock`` (from :func:`listen_tcp`).

    On a loopback address the DNS-rebinding check is on, so a web page in the owner's browser cannot
    reach the memory through this port; other processes on the machine can, unless ``api_keys`` are
    given: then every request needs ``Authorization: Bearer <key>`` (``server.auth``). An address other
    machines reach is refused without a key (a ``ConfigError`` before anything is served).
    """
    import uvicorn
    from mcp.server.transport_security import TransportSecuritySettings

    from sessionmem.server.auth import BearerAuth, is_loopback, require_guard

    host = str(sock.getsockname()[0])
    require_guard(host, api_keys)
    security = None
    if is_loopback(host):  # the SDK turns the check on by itself for three spellings of loopback only
        hosts = ["127.0.0.1", "localhost", "[::1]", *([host] if ":" not in host else [])]
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=[f"{h}:*" for h in hosts],
            allowed_origins=[f"http://{h}:*" for h in hosts],
        )
    app: Any = server.streamable_http_app(streamable_http_path=path, host=host, transport_security=security)
    if api_keys:
        app = BearerAuth(app, api_keys)
    await uvicorn.Server(uvicorn_config(app)).serve(sockets=[sock])


def write_tools(
    workspace: Path, *, timezone_name: str | None, on_write: Callable[[str, str, int], None]
) -> list[Tool]:
    """The runner's everyday write tools over ``workspace`` (no second copy of their rules)."""
    from sessionmem.memory.tools.writing import MemoryWriter, memory_write_tools

    return memory_write_tools(MemoryWriter(workspace, timezone_name=timezone_name, on_write=on_write))


def _version() -> str:
    from sessionmem import __version__

    return __version__
