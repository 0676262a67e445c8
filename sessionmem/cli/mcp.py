"""``sessionmem mcp``: serve the agent's memory to an MCP client (a desktop or coding assistant).

The global options pick what is served: ``--agent`` the agent, ``--workspace`` its Markdown memory,
``--state-dir`` the index, ``--config`` the settings (``memory.mcp.writeTools`` offers the write
tools). The index is opened once and watched (``sync.watch``) for as long as the server runs, so
notes edited meanwhile are found.

Examples::

    sessionmem mcp                                   # stdio: the client starts this command
    sessionmem --agent work mcp --http 8765          # streamable HTTP on http://127.0.0.1:8765/mcp
    SESSIONMEM_API_KEY=... sessionmem mcp --http 8765 --host 0.0.0.0   # other machines, with a token

Over HTTP, an API key (``$SESSIONMEM_API_KEY`` or ``server.apiKeys``) is required of every request
when one is set, and must be set to listen on an address other than loopback (``server.auth``).
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING, Any

import click

from sessionmem.cli import output

if TYPE_CHECKING:
    from sessionmem.context import Context
    from sessionmem.memory.index import MemoryIndex
    from sessionmem.server.mcp import MemoryServerTools

log = logging.getLogger(__name__)


@click.command()
@click.option(
    "--http",
    "port",
    type=click.IntRange(1, 65535),
    metavar="PORT",
    help="Serve streamable HTTP on 127.0.0.1:PORT (path /mcp) instead of stdio.",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    metavar="ADDRESS",
    help="Address to listen on with --http; other than loopback only with an API key "
    "($SESSIONMEM_API_KEY or server.apiKeys).",
)
@click.pass_context
def mcp(ctx: click.Context, port: int | None, host: str) -> None:
    """Serve memory_search, memory_get (and, when enabled, the write tools) over MCP.

    Stdio by default: configure your assistant to start `sessionmem mcp`. The client is the agent's
    owner: it reads all of the agent's memory, as this command line does. Over HTTP, clients send
    `Authorization: Bearer <key>` when an API key is set ($SESSIONMEM_API_KEY or server.apiKeys);
    an address other than loopback is refused without one.

    \b
    Examples:
      sessionmem --workspace ~/notes mcp
      sessionmem --agent work mcp --http 8765
      SESSIONMEM_API_KEY=... sessionmem mcp --http 8765 --host 0.0.0.0
    """
    import anyio

    from sessionmem.assembly import open_index
    from sessionmem.server.auth import api_keys, require_guard
    from sessionmem.server.mcp import build_server, listen_tcp, require_sdk, serve_http, serve_stdio

    require_sdk()  # before anything is opened: a missing SDK says how to install it
    app = output.resolved(ctx)
    sock = None
    keys: tuple[str, ...] = ()
    if port is not None:
        keys = api_keys(app.config.server, app.env)
        require_guard(host, keys)  # before the port is taken
        try:
            sock = listen_tcp(port, host)
        except OSError as exc:
            raise output.CommandFailed(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    with open_index(app, watch=None) as index:
        tools = server_tools(app, index)
        server = build_server(tools, instructions=tools.memory.recall_section() or None)
        if sock is None:
            anyio.run(serve_stdio, server)
        else:
            shown = f"[{host}]" if ":" in host else host
            guard = "an API key required" if keys else "no API key: this machine's users only"
            url = f"http://{shown}:{port}/mcp"
            output.echo_err(f"sessionmem MCP server on {url} (agent {app.agent_id}; {guard})")
            anyio.run(functools.partial(serve_http, server, sock, api_keys=keys))


def server_tools(app: Context, index: MemoryIndex) -> MemoryServerTools:
    """The agent tools as the config asks, read as the owner (no session key): everything, whatever
    ``memory.scope``, and citations as in a direct chat."""
    from sessionmem.cli.memory import current_vector_path
    from sessionmem.memory.tools.reading import MemoryTools
    from sessionmem.server.mcp import MemoryServerTools, write_tools

    memory = MemoryTools.from_config(  # session hits are read where the index reads them
        app.config, app.agent_id, index=index, workspace=app.workspace
    )

    def status() -> dict[str, Any]:
        return output.status_json(index.status(), current_vector_path(index, warm=False), None)

    writes = []
    if app.config.memory.mcp.write_tools:

        def written(path: str, _mode: str, _chars: int) -> None:
            # Trigger: a client wrote a note and searches for it next. Why: a search on a dirty index
            # answers from what is indexed and syncs in the background, so the note would be missing
            # from that answer. Outcome: the write returns once the index has the file (a sync of one
            # changed file; runs in the tool's worker thread). A failed sync is logged: the note is safe.
            index.mark_dirty()
            try:
                index.sync(reason="mcp write")
            except Exception:
                log.warning("memory index sync after the MCP write to %s failed", path, exc_info=True)

        writes = write_tools(app.workspace, timezone_name=app.agent.user_timezone, on_write=written)
    return MemoryServerTools(memory=memory, status=status, writes=writes)
