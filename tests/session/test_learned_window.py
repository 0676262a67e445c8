"""A provider that says its real window in its overflow error teaches it to the session: the session then
flushes and compacts within that window instead of overflowing every time its context grows back; the
window is kept in the session's store entry (``contextTokens``, the window in use), so a reopened session
knows it too. Through litellm against the loopback server, with the error texts of litellm's providers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sessionmem import tokens
from sessionmem.config import Config
from sessionmem.errors import ContextWindowExceeded
from sessionmem.model.litellm import LiteLLMModel, map_litellm_error, stated_window
from sessionmem.session.turn.compaction import SUMMARIZATION_SYSTEM_PROMPT
from sessionmem.session.turn.events import CompactionEvent
from tests.scenarios.harness import make_runner, store_entry
from tests.support.openai_server import (
    OpenAIServer,
    Reply,
    context_length_error,
    count_message_tokens,
    http_error,
    text_reply,
)

REAL_WINDOW = 4000  # what the provider serves; the config says nothing, so 200,000 is assumed
KEY = "agent:main:main"
SUMMARY = "## Decisions\nNone\n## Open TODOs\nNone\n## Exact identifiers\nitem0x1"


@pytest.mark.parametrize(
    ("message", "window"),
    [
        (
            "This model's maximum context length is 16385 tokens. However, your messages resulted in "
            "17000 tokens. Please reduce the length of the messages.",
            16385,
        ),
        ("prompt is too long: 210000 tokens > 200000 maximum", 200_000),
        ("Please reduce the length of the messages. Current length is 9000 while limit is 8192", 8192),
        ("Prompt contains 9000 tokens, too large for model with 8192 maximum context length", 8192),
        ("The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).", 1048576),
        ("the request exceeds the available context size (8192 tokens), try increasing it", 8192),
        ("request (9000 tokens) exceeds the available context size (8192 tokens), try increasing it", 8192),
        (
            "Input tokens exceed the configured limit of 272000 tokens. Your messages resulted in 280000",
            272_000,
        ),
        ("Requested token count exceeds the model's maximum context length of 131072 tokens.", 131_072),
        ("Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096. Given: 4000", 4096),
        ("The maximum input length is 8192 tokens. Please reduce the length of the prompt.", 8192),
        ("Input too long: 9000 input tokens, limit is 8192", 8192),
        ("prompt tokens (9000) exceed model maximum (8192)", 8192),
        ("This model's maximum context length is 32,768 tokens.", 32_768),
        ("context_length_exceeded", None),
        ("prompt is too long", None),
    ],
)
def test_the_window_is_read_from_the_forms_litellms_providers_use(message: str, window: int | None) -> None:
    assert stated_window(message) == window


def litellm_model(server: OpenAIServer) -> LiteLLMModel:
    tokens.configure_litellm_environment()
    return LiteLLMModel("openai/test-model", api_base=server.base_url, api_key="sk-test", num_retries=0)


class SmallProvider:
    """The loopback server as a provider whose real window is ``REAL_WINDOW``, saying so in its error."""

    def __init__(self, server: OpenAIServer, error: Any = context_length_error) -> None:
        self.overflows = 0
        self.error = error
        server.chat.handler = self.answer

    def answer(self, body: dict[str, Any]) -> Reply | None:
        used = count_message_tokens(body["messages"])
        if used > REAL_WINDOW:
            self.overflows += 1
            return self.error(REAL_WINDOW, used)
        if str(body["messages"][0]["content"]).startswith(SUMMARIZATION_SYSTEM_PROMPT):
            return text_reply(SUMMARY)
        return None  # the server's default: an echo, with usage


def paragraph(turn: int) -> str:
    return f"Part {turn}: " + " ".join(f"item{turn}x{i}" for i in range(150))


def converse(
    server: OpenAIServer,
    tmp_path: Path,
    workspace: Path,
    turns: int,
    error: Any = None,
    config: Config | None = None,
) -> Any:
    """A session on the small provider (saying its window in ``error``'s form) after ``turns`` turns;
    returns (provider, runner, recorder, session)."""
    provider = SmallProvider(server, error or context_length_error)
    runner, recorder = make_runner(litellm_model(server), tmp_path, workspace, config or Config())
    session = runner.open(KEY)
    assert session.context_window == 200_000
    for turn in range(turns):
        assert session.run_turn_sync(paragraph(turn)).reply == f"echo: {paragraph(turn)}"
    return provider, runner, recorder, session


def test_a_session_learns_the_real_window_and_stops_overflowing(
    tmp_path: Path, workspace: Path, openai_server: OpenAIServer
) -> None:
    provider, runner, recorder, session = converse(openai_server, tmp_path, workspace, 14)
    assert provider.overflows == 1  # once, to learn; never again as the context grew back
    assert session.context_window == REAL_WINDOW
    reasons = [e.reason for e in recorder.events if isinstance(e, CompactionEvent)]
    assert reasons[0] == "overflow" and reasons.count("threshold") >= 2, reasons
    assert store_entry(runner, KEY)["contextTokens"] == REAL_WINDOW

    again, _ = make_runner(litellm_model(openai_server), tmp_path, workspace, Config())
    reopened = again.open(KEY)
    assert reopened.context_window == REAL_WINDOW
    for turn in range(14, 20):
        reopened.run_turn_sync(paragraph(turn))
    assert provider.overflows == 1
    assert reopened.status().context_window == REAL_WINDOW


def test_thresholds_the_user_wrote_that_a_learned_window_cannot_hold_are_scaled_and_status_says_so(
    tmp_path: Path, workspace: Path, openai_server: OpenAIServer
) -> None:
    # They fit the 200,000 tokens assumed at load; the provider's 4,000 has no room for them.
    written = {"reserveTokensFloor": 3000, "memoryFlush": {"softThresholdTokens": 1000}}
    config = Config.from_dict({"agents": {"defaults": {"compaction": written}}})
    provider, _, _, session = converse(openai_server, tmp_path, workspace, 14, config=config)
    assert provider.overflows == 1 and session.context_window == REAL_WINDOW
    status = session.run_turn_sync("/status").reply or ""
    assert "flush at 2,500 · compaction at 3,000" in status
    assert (
        "Configured values scaled: they leave no room in this 4,000-token window: "
        "compaction.reserveTokensFloor, compaction.reserveTokens, compaction.memoryFlush.softThresholdTokens"
    ) in status


def anthropic_style(limit: int, used: int) -> Reply:
    message = f"prompt is too long: {used} tokens > {limit} maximum"
    return http_error(400, message, type_="invalid_request_error")


def test_the_other_forms_are_learned_through_litellm_too(
    tmp_path: Path, workspace: Path, openai_server: OpenAIServer
) -> None:
    provider, _, _, session = converse(openai_server, tmp_path, workspace, 10, anthropic_style)
    assert provider.overflows == 1 and session.context_window == REAL_WINDOW


def test_a_stated_window_is_carried_by_the_error() -> None:
    class BadRequest(Exception):
        status_code = 400

    error = map_litellm_error(BadRequest("This model's maximum context length is 4096 tokens."), "m")
    assert isinstance(error, ContextWindowExceeded) and error.window == 4096


def test_the_window_learned_for_a_model_outlives_new_but_not_a_model_change(
    tmp_path: Path, workspace: Path, openai_server: OpenAIServer
) -> None:
    provider, _, _, session = converse(openai_server, tmp_path, workspace, 5)
    session.run_turn_sync("/new")
    assert session.context_window == REAL_WINDOW  # the same model behind the same key: no new overflow
    for turn in range(5, 12):
        session.run_turn_sync(paragraph(turn))
    assert provider.overflows == 1

    other = LiteLLMModel("openai/other-model", api_base=openai_server.base_url, api_key="sk-test")
    switched, _ = make_runner(other, tmp_path, workspace, Config())
    assert switched.open(KEY).context_window == 200_000  # learned for test-model only
