"""A separate model for the housekeeping calls (OpenClaw's keys): ``compaction.model`` summarises and
names the ``/new`` memory file, ``compaction.memoryFlush.model`` runs the silent flush; the user's turns
stay on the agent's model. A failing compaction model falls back to the agent's; the flush model does
not (a flush must not silently run on the expensive model). Through litellm over real HTTP."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sessionmem import tokens
from sessionmem.model.litellm import LiteLLMModel
from sessionmem.model.routing import model_for
from sessionmem.session.turn.compaction import SUMMARIZATION_SYSTEM_PROMPT
from tests.scenarios.harness import make_runner, small_config
from tests.support.openai_server import server_error, text_reply, tool_call_reply


def agent_model(server: Any) -> LiteLLMModel:
    tokens.configure_litellm_environment()
    return LiteLLMModel("openai/test-model", api_base=server.base_url, api_key="sk-test", num_retries=0)


def housekeeping_config(**compaction: Any) -> Any:
    return small_config(
        window=8000,
        compaction={
            "model": "openai/summary-model",
            "memoryFlush": {"model": "openai/flush-model"},
            **compaction,
        },
    )


def handler(failing: set[str]) -> Any:
    def answer(body: dict[str, Any]) -> Any:
        if body["model"] in failing:
            return server_error(503, f"{body['model']} is down")
        messages = body["messages"]
        if messages[0]["content"] == SUMMARIZATION_SYSTEM_PROMPT:
            return text_reply("## Decisions\n- ship on Friday")
        if "filename slug" in str(messages[-1]["content"]):
            return text_reply("shipping-plan")
        if body["model"] == "flush-model" and messages[-1]["role"] == "user":
            (write,) = [t["function"] for t in body["tools"] if t["function"]["name"] == "write"]
            path = write["parameters"]["properties"]["path"]["enum"][0]
            return tool_call_reply([("write", {"path": path, "content": "- ship on Friday\n"})])
        if body["model"] == "flush-model":
            return text_reply("NO_REPLY")
        return text_reply("Noted. " + " ".join(f"w{i}" for i in range(80)))

    return answer


def models_by_purpose(server: Any) -> dict[str, set[str]]:
    seen: dict[str, set[str]] = {}
    for request in server.chat.requests:
        body = request.body
        messages = body["messages"]
        if messages[0]["content"] == SUMMARIZATION_SYSTEM_PROMPT:
            purpose = "compaction"
        elif "filename slug" in str(messages[-1]["content"]):
            purpose = "slug"
        elif "Pre-compaction memory flush turn." in messages[0]["content"]:  # the flush's system prompt
            purpose = "flush"
        else:
            purpose = "turn"
        seen.setdefault(purpose, set()).add(body["model"])
    return seen


def chat_until_compaction(server: Any, tmp_path: Path, workspace: Path) -> tuple[Any, Any]:
    runner, recorder = make_runner(agent_model(server), tmp_path, workspace, housekeeping_config())
    session = runner.open()
    for turn in range(30):
        session.run_turn_sync(f"turn {turn}: " + " ".join(f"fact{turn}-{i}" for i in range(60)))
        if recorder.kinds("compaction"):
            break
    return session, recorder


def test_flush_compaction_and_slug_use_their_configured_models(
    tmp_path: Path, workspace: Path, openai_server: Any
) -> None:
    openai_server.chat.handler = handler(set())
    session, _ = chat_until_compaction(openai_server, tmp_path, workspace)
    session.run_turn_sync("/new")
    assert models_by_purpose(openai_server) == {
        "turn": {"test-model"},
        "flush": {"flush-model"},
        "compaction": {"summary-model"},
        "slug": {"summary-model"},
    }
    assert list((workspace / "memory" / "peers" / "main").glob("*-shipping-plan.md"))  # the chat's folder
    # The housekeeping models reach the agent's server with its key: same provider, same connection.
    assert {r.headers["authorization"] for r in openai_server.chat.requests} == {"Bearer sk-test"}


def test_a_failing_compaction_model_falls_back_to_the_agents_model_and_the_flush_model_does_not(
    tmp_path: Path, workspace: Path, openai_server: Any
) -> None:
    openai_server.chat.handler = handler({"summary-model", "flush-model"})
    _, recorder = chat_until_compaction(openai_server, tmp_path, workspace)
    assert recorder.kinds("compaction") == ["compaction"]  # summarised by test-model after the 503
    flush = next(e for e in recorder.events if e.kind == "flush")
    assert "flush-model is down" in (flush.error or "")
    assert models_by_purpose(openai_server)["compaction"] == {"summary-model", "test-model"}
    assert models_by_purpose(openai_server)["flush"] == {"flush-model"}


def test_without_configured_models_every_call_uses_the_agents_model() -> None:
    main = LiteLLMModel("openai/test-model")
    agent = small_config().for_agent("main")
    assert all(model_for(main, agent, p) is main for p in ("turn", "flush", "compaction", "slug"))
    other = LiteLLMModel("anthropic/claude", api_base="http://proxy")
    chosen = model_for(other, housekeeping_config().for_agent("main"), "compaction")
    assert isinstance(chosen, LiteLLMModel) and chosen.name == "openai/summary-model"
    assert chosen.api_base is None  # another provider: not the agent's endpoint
