"""Compaction planning (cut points that keep tool pairs together) and the summary request."""

from __future__ import annotations

import asyncio

import pytest

from sessionmem.errors import ModelError
from sessionmem.messages import Message, ToolCall
from sessionmem.model.scripted import ScriptedModel
from sessionmem.session.stores.transcript import compaction_summary_text
from sessionmem.session.turn.compaction import (
    CompactionFailed,
    is_clean_cut,
    plan_compaction,
    previous_summary_of,
    repair_tool_pairs,
    serialize_conversation,
    summarize,
    summary_request,
)
from sessionmem.session.turn.projection import TokenCounter


def tool_turn(i: int, size: int = 30) -> list[tuple[str, Message]]:
    call = ToolCall(f"call{i}", "lookup", {"q": f"item {i}"})
    return [
        (f"u{i}", Message.user(f"question {i} " + "word " * size)),
        (f"a{i}", Message.assistant(tool_calls=(call,))),
        (f"t{i}", Message.tool(call, f"result {i} " + "data " * size)),
        (f"r{i}", Message.assistant(f"answer {i} " + "text " * size)),
    ]


def history(turns: int) -> list[tuple[str, Message]]:
    return [item for i in range(turns) for item in tool_turn(i)]


@pytest.mark.parametrize("keep", [1, 20, 45, 80, 150, 300, 600])
def test_cut_never_separates_a_tool_call_from_its_result(keep: int) -> None:
    context = history(8)
    plan = plan_compaction(context, TokenCounter(), keep)
    assert plan is not None
    kept = [m for _, m in plan.kept]
    assert kept[0].role in ("user", "assistant")
    kept_calls = {c.id for m in kept for c in m.tool_calls}
    kept_results = {m.tool_call_id for m in kept if m.role == "tool"}
    assert kept_calls == kept_results
    assert len(plan.summarize) + len(plan.kept) == len(context)


def test_keeps_at_least_keep_recent_tokens() -> None:
    counter = TokenCounter()
    context = history(8)
    plan = plan_compaction(context, counter, 300)
    assert plan is not None
    assert counter.count_all(plan.kept) >= 300
    assert plan.first_kept_entry_id == plan.kept[0][0]


def test_nothing_to_summarise_when_everything_fits() -> None:
    assert plan_compaction(history(1), TokenCounter(), 100_000) is None
    assert plan_compaction([("x", Message.user("hi"))], TokenCounter(), 1) is None


def test_a_cut_inside_a_tool_exchange_is_not_clean() -> None:
    body = history(2)
    assert is_clean_cut(body, 4)  # the second user message
    assert is_clean_cut(body, 3)  # the final answer after the tool result
    assert not is_clean_cut(body, 2)  # the tool result itself
    parallel = ToolCall("p1", "a", {}), ToolCall("p2", "b", {})
    body = [
        ("u", Message.user("go")),
        ("a", Message.assistant(tool_calls=parallel)),
        ("t1", Message.tool(parallel[0], "one")),
        ("x", Message.assistant("interim")),  # malformed: text between two results of one call
        ("t2", Message.tool(parallel[1], "two")),
    ]
    assert not is_clean_cut(body, 3)


def test_previous_summary_is_carried_into_the_update() -> None:
    context = [("c1", Message.user(compaction_summary_text("## Decisions\n- use Postgres"))), *history(4)]
    assert previous_summary_of(context) == "## Decisions\n- use Postgres"
    plan = plan_compaction(context, TokenCounter(), 100)
    assert plan is not None and plan.previous_summary == "## Decisions\n- use Postgres"
    assert all(entry_id != "c1" for entry_id, _ in plan.summarize + plan.kept)
    text = summary_request(plan).messages[1].content
    assert "<previous-summary>\n## Decisions\n- use Postgres\n</previous-summary>" in text


def test_summary_request_structure_and_focus() -> None:
    plan = plan_compaction(history(4), TokenCounter(), 100)
    assert plan is not None
    request = summary_request(plan, instructions="the deploy dates", reserve_tokens=1000)
    assert request.purpose == "compaction" and request.tools == () and request.max_tokens == 800
    assert (
        request.messages[0].role == "system"
        and "Do NOT continue the conversation" in request.messages[0].content
    )
    text = request.messages[1].content
    assert text.startswith("<conversation>\n[User]: question 0")
    for heading in (
        "## Decisions",
        "## Open TODOs",
        "## Constraints/Rules",
        "## Pending user asks",
        "## Exact identifiers",
    ):
        assert heading in text
    assert "preserve literal values exactly as seen" in text
    assert text.endswith("\n\nAdditional focus: the deploy dates")


def test_serialisation_truncates_long_tool_results() -> None:
    call = ToolCall("c", "read", {"path": "a.txt"})
    text = serialize_conversation(
        [Message.user("hi"), Message.assistant("ok", tool_calls=(call,)), Message.tool(call, "x" * 2500)]
    )
    assert text.split("\n\n")[:3] == [
        "[User]: hi",
        "[Assistant]: ok",
        '[Assistant tool calls]: read(path="a.txt")',
    ]
    assert "[Tool result]: " + "x" * 2000 + "\n\n[... 500 more characters truncated]" in text


def test_repair_drops_orphans_both_ways() -> None:
    call, lost = ToolCall("c1", "a", {}), ToolCall("c2", "b", {})
    messages = [
        Message.tool(ToolCall("gone", "a", {}), "orphan result"),
        Message.user("hi"),
        Message.assistant("checking", tool_calls=(call, lost)),
        Message.tool(call, "done"),
    ]
    repaired = repair_tool_pairs(messages)
    assert [m.role for m in repaired] == ["user", "assistant", "tool"]
    assert repaired[1].tool_calls == (call,) and repaired[1].content == "checking"


def test_failed_or_empty_summary_raises_compaction_failed() -> None:
    plan = plan_compaction(history(4), TokenCounter(), 100)
    assert plan is not None
    with pytest.raises(CompactionFailed, match="ModelError"):
        asyncio.run(summarize(ScriptedModel([ModelError("provider down")]), plan))
    with pytest.raises(CompactionFailed, match="empty"):
        asyncio.run(summarize(ScriptedModel(["   "]), plan))
    assert asyncio.run(summarize(ScriptedModel(["## Decisions\nNone"]), plan)) == "## Decisions\nNone"


def test_an_overflowing_summary_request_is_split_and_chained() -> None:
    from sessionmem.errors import ContextWindowExceeded
    from sessionmem.model.base import ModelRequest
    from sessionmem.model.scripted import count_request_tokens

    plan = plan_compaction(history(8), TokenCounter(), 100)
    assert plan is not None

    def respond(request: ModelRequest) -> str:
        if count_request_tokens(request) > 700:
            raise ContextWindowExceeded("too long for the summariser")
        text = request.messages[1].content
        earlier = text.split("<previous-summary>\n")[1].split("\n")[0] if "<previous-summary>" in text else ""
        first = text.split("[User]: question ")[1].split(" ")[0] if "[User]: question " in text else "-"
        return f"{earlier}|{first}".strip("|")

    model = ScriptedModel(responder=respond)
    summary = asyncio.run(summarize(model, plan))
    assert len(model.calls) > 2  # the first request overflowed, its halves did not
    assert summary.startswith("0|")  # the chain starts with the oldest part
    with pytest.raises(CompactionFailed, match="over the context window"):
        asyncio.run(summarize(ScriptedModel(responder=lambda r: _raise()), plan))


def _raise() -> str:
    from sessionmem.errors import ContextWindowExceeded

    raise ContextWindowExceeded("always too long")


def test_reused_tool_call_ids_pair_with_the_nearest_call() -> None:
    # Some providers (and scripted flushes) reuse ids like "call_0" every turn.
    body = [item for i in range(6) for item in tool_turn(0)]
    body = [(f"{entry}-{n}", message) for n, (entry, message) in enumerate(body)]
    assert is_clean_cut(body, 4) and is_clean_cut(body, 8)
    plan = plan_compaction(body, TokenCounter(), 100)
    assert plan is not None and len(plan.kept) <= 8  # the reused id does not drag the cut back


def test_recent_within_keeps_the_newest_clean_tail() -> None:
    from sessionmem.session.turn.compaction import recent_within

    counter = TokenCounter()
    context = history(8)
    tail = recent_within(context, counter, 200)
    assert counter.count_all(tail) <= 200
    assert tail[-1] == context[-1] and tail[0][1].role in ("user", "assistant")
    assert recent_within(context, counter, 10**6) == context
