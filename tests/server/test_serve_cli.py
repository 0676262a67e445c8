"""``sessionmem serve``: what it refuses before it listens, and shutdown draining a turn in flight."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import openai
from click.testing import CliRunner

from sessionmem.cli import cli
from tests.server.gateway_support import GATEWAY_KEY, agent_context, keyword_config, running_gateway
from tests.support.openai_server import OpenAIServer, delay, text_reply


def test_serve_is_listed_in_help() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    assert "serve" in result.output and "OpenAI-compatible" in result.output


def test_a_non_loopback_host_without_a_key_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "agent.json"
    config.write_text('{"agents": {"defaults": {"model": "openai/test-model"}}}', encoding="utf-8")
    result = CliRunner().invoke(cli, ["--config", str(config), "serve", "--host", "0.0.0.0"])
    assert result.exit_code == 2
    assert "refusing to serve on 0.0.0.0" in result.stderr and "SESSIONMEM_API_KEY" in result.stderr


def test_an_agent_without_a_model_is_refused(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["--workspace", str(tmp_path / "ws"), "serve"])
    assert result.exit_code == 2
    assert "no upstream model for agent 'main'" in result.output


def test_shutdown_lets_the_turn_in_flight_finish(tmp_path: Path, openai_server: OpenAIServer) -> None:
    openai_server.chat.push(delay(1.0, text_reply("finished after the shutdown began")))
    replies: list[str] = []
    with running_gateway([agent_context(tmp_path, keyword_config())], openai_server) as gateway:
        client = openai.OpenAI(base_url=gateway.base_url, api_key=GATEWAY_KEY, max_retries=0)

        def ask() -> None:
            reply = client.chat.completions.create(model="main", messages=[{"role": "user", "content": "hi"}])
            replies.append(str(reply.choices[0].message.content))

        asking = threading.Thread(target=ask)
        asking.start()
        while not openai_server.chat.requests:  # the turn reached the upstream
            time.sleep(0.01)
    # the block's end shut the gateway down while the upstream was still answering
    asking.join(30)
    assert replies == ["finished after the shutdown began"]
    assert gateway.pool.opened() == ()  # every runner closed
    transcript = next((tmp_path / "state" / "agents" / "main" / "sessions").glob("*.jsonl"))
    assert "finished after the shutdown began" in transcript.read_text(encoding="utf-8")
