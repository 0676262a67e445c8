"""``sessionmem serve``: the OpenAI-compatible gateway, giving any chat client memory and compaction.

The global options pick the config, the state folder and the default agent (``--agent``; its
``--workspace`` too); every agent of ``agents.list`` is served as well, each under its own name
(``GET /v1/models``). Each agent's configured ``model`` is the upstream, called through litellm
(its API key from the environment as litellm reads it, or ``--api-key``; ``--api-base`` points at any
OpenAI-compatible server). See :mod:`sessionmem.server.chat_request` for which session a request
runs in and which of its messages are new.

Auth: ``$SESSIONMEM_API_KEY`` or the config's ``server.apiKeys`` (clients send ``Authorization:
Bearer <key>``). Without one the gateway listens on loopback only, and answers only requests whose
``Host`` is a loopback name (a web page cannot reach it by DNS rebinding); a non-loopback ``--host``
without a key is refused.

Examples::

    sessionmem serve                                   # http://127.0.0.1:8080/v1
    sessionmem --config agents.json5 serve --port 9000
    SESSIONMEM_API_KEY=... sessionmem serve --host 0.0.0.0
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from sessionmem.cli import output
from sessionmem.cli.chat import quiet_litellm
from sessionmem.context import GlobalOptions, resolve

if TYPE_CHECKING:
    from sessionmem.context import Context

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1", "[::1]")


@click.command()
@click.option(
    "--host", default="127.0.0.1", show_default=True, metavar="ADDRESS", help="Address to listen on."
)
@click.option("--port", default=8080, show_default=True, type=click.IntRange(1, 65535), help="Port.")
@click.option("--api-base", metavar="URL", help="Base URL of the upstream (an OpenAI-compatible server).")
@click.option(
    "--api-key", metavar="KEY", help="Upstream API key. Default: what litellm finds in the environment."
)
@click.option(
    "--timeout",
    default=600.0,
    show_default=True,
    type=click.FloatRange(min=1),
    help="Seconds an upstream call may take (then 504).",
)
@click.pass_context
def serve(
    ctx: click.Context, host: str, port: int, api_base: str | None, api_key: str | None, timeout: float
) -> None:
    """Serve the agents over an OpenAI-compatible API (/v1/chat/completions, /v1/models).

    \b
    Examples:
      sessionmem serve
      curl -s http://127.0.0.1:8080/v1/chat/completions -H 'content-type: application/json' \\
        -d '{"model": "main", "messages": [{"role": "user", "content": "hello"}]}'
    """
    import uvicorn

    from sessionmem.server.app import create_app
    from sessionmem.server.auth import api_keys, require_guard
    from sessionmem.server.mcp import listen_tcp, uvicorn_config
    from sessionmem.server.pool import AgentPool

    app = output.resolved(ctx)
    keys = api_keys(app.config.server, app.env)
    require_guard(host, keys)  # before the port is taken
    contexts = served_contexts(ctx, app)
    _require_models(contexts)

    def model_for(context: Context) -> Any:
        from sessionmem.model.litellm import LiteLLMModel

        return LiteLLMModel(str(context.agent.model), api_base=api_base, api_key=api_key, timeout=timeout)

    quiet_litellm()
    asgi = create_app(AgentPool(contexts, model_for), api_keys=keys)
    if not keys:
        from starlette.middleware.trustedhost import TrustedHostMiddleware

        asgi = TrustedHostMiddleware(asgi, allowed_hosts=list(LOOPBACK_NAMES))
    try:
        sock = listen_tcp(port, host)
    except OSError as exc:
        raise output.CommandFailed(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    shown = f"[{host}]" if ":" in host else host
    guard = "an API key required" if keys else "no API key: this machine's users only"
    agents = ", ".join(c.agent_id for c in contexts)
    output.echo_err(f"sessionmem gateway on http://{shown}:{port}/v1 (agents: {agents}; {guard})")
    output.echo_err(f"inspector on http://{shown}:{port}/inspect")
    uvicorn.Server(uvicorn_config(asgi, timeout_graceful_shutdown=None)).run(sockets=[sock])


def served_contexts(ctx: click.Context, first: Context) -> list[Context]:
    """The default agent's context, then one per other agent of ``agents.list`` (same config and state
    folder; each its own workspace: ``--workspace`` names the default agent's only)."""
    root = ctx.find_root()
    options = root.obj if isinstance(root.obj, GlobalOptions) else GlobalOptions()
    contexts = [first]
    for entry in first.config.agents.list:
        if entry.id and entry.id not in {c.agent_id for c in contexts}:
            other = GlobalOptions(config=options.config, state_dir=options.state_dir, agent=entry.id)
            contexts.append(resolve(other, first.env))
    return contexts


def _require_models(contexts: list[Context]) -> None:
    missing = [c.agent_id for c in contexts if not c.agent.model]
    if missing:
        names = ", ".join(repr(m) for m in missing)
        raise click.UsageError(
            f"no upstream model for agent {names}: set agents.defaults.model (or the agent's 'model' in "
            'agents.list), e.g. "openai/gpt-4o-mini"'
        )
