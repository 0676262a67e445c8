"""Token projection: reported usage when fresh + tiktoken counts of what came after, cached per entry."""

from __future__ import annotations

from pathlib import Path

from sessionmem.config import AgentConfig, ModelEntryConfig
from sessionmem.messages import Message, ToolCall, Usage
from sessionmem.model.scripted import ScriptedModel, echo, flush_aware
from sessionmem.session.turn.projection import (
    TokenCounter,
    message_tokens,
    project_tokens,
    resolve_context_window,
)
from sessionmem.tokens import count_tokens
from tests.scenarios.harness import make_runner, small_config


def convo() -> list[tuple[str | None, Message]]:
    call = ToolCall("c1", "lookup", {"q": "billing cutover"})
    return [
        ("e1", Message.user("When is the billing cutover?")),
        ("e2", Message.assistant(tool_calls=(call,), usage=Usage(input=900, output=20))),
        ("e3", Message.tool(call, "The cutover is on 2026-12-01 at 09:00 UTC.")),
        (
            "e4",
            Message.assistant("It is on December 1st.", usage=Usage(input=1000, output=8, cache_read=200)),
        ),
        ("e5", Message.user("And the rollback plan?")),
    ]


def test_without_usage_the_whole_context_is_counted() -> None:
    context = [("a", Message.user("hello there")), ("b", Message.assistant("hi"))]
    pending = Message.user("what's new?")
    projection = project_tokens(context, TokenCounter(), pending=[pending], system_prompt="Be brief.")
    expected = (
        count_tokens("Be brief.") + sum(message_tokens(m) for _, m in context) + message_tokens(pending)
    )
    assert projection.tokens == expected
    assert not projection.fresh


def test_fresh_usage_plus_counted_tail() -> None:
    context = convo()
    pending = Message.user("thanks")
    projection = project_tokens(context, TokenCounter(), pending=[pending])
    # Last call: 1000 input + 200 cache read + 8 output; after it e5 and the pending message are counted.
    assert projection.reported == 1208
    assert projection.tokens == 1208 + message_tokens(context[4][1]) + message_tokens(pending)


def test_usage_kept_through_a_compaction_is_not_trusted() -> None:
    context = convo()
    projection = project_tokens(context, TokenCounter(), stale_entry_ids={"e1", "e2", "e3", "e4"})
    assert projection.reported is None
    assert projection.tokens == sum(message_tokens(m) for _, m in context)


def test_counts_are_cached_so_a_turn_costs_only_its_new_text() -> None:
    counter = TokenCounter()
    context = [(f"e{i}", Message.user(f"message number {i}")) for i in range(50)]
    project_tokens(context, counter)
    assert counter.counted == 50
    context.append(("e50", Message.user("one more")))
    project_tokens(context, counter)
    assert counter.counted == 51


def test_context_window_resolution_order() -> None:
    model = ScriptedModel(name="acme/large")
    assert resolve_context_window(AgentConfig(), model) == 200_000
    assert resolve_context_window(AgentConfig(context_tokens=42_000), model) == 42_000
    per_model = AgentConfig(
        context_tokens=42_000, models={"acme/large": ModelEntryConfig(context_window=8_000)}
    )
    assert resolve_context_window(per_model, model) == 8_000


def test_litellm_models_use_litellms_model_map() -> None:
    from sessionmem.model.litellm import LiteLLMModel

    assert resolve_context_window(AgentConfig(), LiteLLMModel("openai/gpt-4o-mini")) == 128_000
    assert resolve_context_window(AgentConfig(), LiteLLMModel("openai/no-such-model-xyz")) == 200_000
    assert (
        resolve_context_window(AgentConfig(context_tokens=9_000), LiteLLMModel("openai/gpt-4o-mini")) == 9_000
    )


def test_a_long_session_keeps_token_counts_of_its_context_only(tmp_path: Path, workspace: Path) -> None:
    # Trigger: every turn cached the counts of its messages (by entry id, and the unsaved prompts, flush
    # prompts and summaries by identity, keeping the messages alive), up to 20,000 a session, long after
    # compaction had taken them out of the context. Why: a gateway holding many long sessions grew by
    # about 2 MB per 1,000 turns (bench_serve). Outcome: a compaction starts the cache afresh.
    runner, recorder = make_runner(
        ScriptedModel(responder=flush_aware(echo)), tmp_path, workspace, small_config(window=3000)
    )
    session = runner.open()
    for turn in range(60):
        session.run_turn_sync(f"turn {turn}: " + "tell me about the rollout plan and its risks " * 6)
    assert recorder.kinds("compaction").count("compaction") >= 3
    assert len(session.counter) <= len(session.context) + 4
