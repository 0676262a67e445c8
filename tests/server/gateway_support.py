"""A gateway for tests: ``create_app`` over an :class:`AgentPool` served by uvicorn on 127.0.0.1 (a free
port, in a thread), its agents' upstream the loopback OpenAI-compatible server of the test."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sessionmem.config import Config
from sessionmem.context import Context
from sessionmem.server.app import create_app
from sessionmem.server.mcp import listen_tcp, uvicorn_config
from sessionmem.server.pool import AgentPool
from tests.support.openai_server import OpenAIServer, text_reply, tool_call_reply

GATEWAY_KEY = "sk-gateway-test"
UPSTREAM_MODEL = "openai/test-model"
FLUSH_MARKER = "Pre-compaction memory flush."


@dataclass
class RunningGateway:
    url: str  # http://127.0.0.1:<port>
    pool: AgentPool

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"


def agent_context(home: Path, config: Config, agent_id: str = "main") -> Context:
    """The resolved context of ``agent_id`` under ``home`` (workspace and state folder apart)."""
    return Context(
        config=config,
        agent=config.for_agent(agent_id),
        agent_id=agent_id,
        workspace=home / f"workspace-{agent_id}",
        state_dir=home / "state",
        env={},
    )


def keyword_config(**defaults: Any) -> Config:
    """An agent whose upstream is the test server, with keyword-only memory search (no embedder)."""
    return Config.from_dict(
        {"agents": {"defaults": {"model": UPSTREAM_MODEL, "memorySearch": {"provider": "none"}, **defaults}}}
    )


@contextmanager
def running_gateway(
    contexts: Sequence[Context],
    upstream: OpenAIServer,
    *,
    api_keys: Sequence[str] = (GATEWAY_KEY,),
    **model_kwargs: Any,
) -> Iterator[RunningGateway]:
    """The gateway serving ``contexts`` until the block ends (then shut down as uvicorn does: the
    turns in flight finish, the agents close)."""
    import uvicorn

    from sessionmem.model.litellm import LiteLLMModel

    def model_for(context: Context) -> LiteLLMModel:
        model_kwargs.setdefault("max_retries", 0)
        return LiteLLMModel(
            str(context.agent.model), api_base=upstream.base_url, api_key="sk-up", **model_kwargs
        )

    pool = AgentPool(contexts, model_for)
    app = create_app(pool, api_keys=api_keys)
    sock = listen_tcp(0, "127.0.0.1")
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn_config(app))  # as `sessionmem serve` runs it
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError("the gateway did not start")
            thread.join(0.01)
        yield RunningGateway(f"http://127.0.0.1:{port}", pool)
    finally:
        server.should_exit = True
        thread.join(60)
        sock.close()


def last_user(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else json.dumps(content)
    return ""


def after_last_user(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The messages after the request's last user message (the tool loop so far)."""
    messages = body.get("messages") or []
    for at in range(len(messages) - 1, -1, -1):
        if messages[at].get("role") == "user":
            return messages[at + 1 :]
    return []


def flush_target(body: dict[str, Any]) -> str:
    """The daily log a flush request may write: the ``path`` enum of its ``write`` tool."""
    for tool in body.get("tools") or []:
        function = tool.get("function", {})
        if function.get("name") == "write":
            return str(function["parameters"]["properties"]["path"]["enum"][0])
    raise AssertionError("the flush request offers no write tool")


def flushing_upstream(fact: str) -> Any:
    """An upstream handler: each flush writes ``fact`` to today's log (then NO_REPLY); the rest echoes."""

    def route(body: dict[str, Any]) -> Any:
        if FLUSH_MARKER not in last_user(body):
            return None
        if any(m.get("role") == "tool" for m in after_last_user(body)):
            return text_reply("NO_REPLY", completion_tokens=2)
        return tool_call_reply([("write", {"path": flush_target(body), "content": fact})])

    return route
