"""An app with the management API and the inspector over agents served for a test: a small
:class:`~sessionmem.server.agents.ServedAgents` (the composition root's :class:`Context`, a runner with the
scripted model and the agent's real memory index), a conversation driven through flushes and
compactions, and uvicorn serving the app on 127.0.0.1 in a thread."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.applications import Starlette

from sessionmem.assembly import build_runner, open_index
from sessionmem.context import Context, GlobalOptions, resolve
from sessionmem.errors import UsageError
from sessionmem.model.scripted import ScriptedModel, flush_aware, flush_write
from sessionmem.server.auth import BearerAuth
from sessionmem.server.inspect_api import inspect_routes
from sessionmem.session.runner import SessionRunner

KEY = "agent:main:telegram:direct:42"
FLUSH_FACT = "- The user's cat is called Mochi and the billing cutover moved to the 14th."
TURNS = 12  # enough for two flushes and two compactions in the small window below


def small_window_config(path: Path, *, memory_search: dict[str, Any] | None = None) -> Path:
    """A config file whose flush and compaction come within a few turns (tests/scenarios' numbers)."""
    defaults: dict[str, Any] = {
        "contextTokens": 8000,
        "userTimezone": "UTC",
        "loadDailyLogs": False,
        "compaction": {
            "reserveTokens": 1000,
            "reserveTokensFloor": 1000,
            "keepRecentTokens": 1500,
            "postIndexSync": "off",
            "memoryFlush": {"softThresholdTokens": 2000},
        },
        "memorySearch": memory_search or {"provider": "none"},
    }
    path.write_text(json.dumps({"agents": {"defaults": defaults}}), encoding="utf-8")
    return path


@dataclass
class ServedForTest:
    """ServedAgents for tests: each agent's context and its runner, opened up front."""

    contexts: dict[str, Context]
    runners: dict[str, SessionRunner] = field(default_factory=dict)

    def agent_ids(self) -> Sequence[str]:
        return list(self.contexts)

    def context(self, agent_id: str) -> Context:
        if agent_id not in self.contexts:
            raise UsageError(f"agent {agent_id!r} is not served")
        return self.contexts[agent_id]

    async def runner(self, agent_id: str) -> SessionRunner:
        self.context(agent_id)
        return self.runners[agent_id]


@contextlib.contextmanager
def served_agents(
    tmp_path: Path, workspace: Path, *, memory_search: dict[str, Any] | None = None
) -> Iterator[ServedForTest]:
    """Agent ``main`` with its memory index open, resolved as the CLI resolves it."""
    config = small_window_config(tmp_path / "config.json", memory_search=memory_search)
    options = GlobalOptions(config=str(config), state_dir=str(tmp_path / "state"), workspace=str(workspace))
    app = resolve(options, env={})
    with open_index(app) as index:
        model = ScriptedModel(responder=flush_aware(lambda request: "noted", flush=flush_write(FLUSH_FACT)))
        runner = build_runner(app, model, index)
        try:
            yield ServedForTest({app.agent_id: app}, {app.agent_id: runner})
        finally:
            runner.close()


def drive(runner: SessionRunner, key: str = KEY, turns: int = TURNS, words: int = 500) -> None:
    """``turns`` user turns of ``words`` words in ``key``: the context grows past the flush and compaction
    thresholds."""
    session = runner.open(key)
    for i in range(turns):
        session.run_turn_sync(f"turn {i}: " + " ".join(f"word{i}x{j}" for j in range(words)))


def make_app(agents: ServedForTest, keys: Sequence[str] = ()) -> Any:
    """The routes in a Starlette app, behind the bearer guard (with the cookie) when ``keys`` are given."""
    app: Any = Starlette(routes=inspect_routes(agents))
    return BearerAuth(app, keys, cookies=True) if keys else app


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.contextmanager
def serving(app: Any) -> Iterator[str]:
    """uvicorn serving ``app`` on 127.0.0.1 in a thread; yields its base URL."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
