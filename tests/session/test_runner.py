"""The session runner end to end with the scripted model and real files: replies, NO_REPLY, tools,
sessions.json figures, the gate on manual and overflow compaction, failures that must not lose history."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from sessionmem import tokens
from sessionmem.errors import ContextWindowExceeded, UsageError
from sessionmem.messages import ToolCall
from sessionmem.model.base import ModelRequest
from sessionmem.model.scripted import (
    ScriptedModel,
    count_request_tokens,
    flush_aware,
    flush_write,
)
from sessionmem.session.turn.events import CompactionEvent, FlushEvent, ToolCallEvent, TurnEvent
from sessionmem.tools.define import tool
from tests.scenarios.harness import (
    flush_prompt_requests,
    make_runner,
    orphan_tool_messages,
    small_config,
    store_entry,
    transcript_lines,
)

BIG = small_config(window=100_000, keep=60)


def words(n: int, tag: str = "w") -> str:
    return " ".join(f"{tag}{i}" for i in range(n))


def test_turn_reply_transcript_and_sessions_json(tmp_path: Path, workspace: Path) -> None:
    model = ScriptedModel(["Hello! How can I help?"])
    runner, _ = make_runner(model, tmp_path, workspace, BIG)
    session = runner.open()
    result = session.run_turn_sync("hi there")
    assert result.reply == "Hello! How can I help?"
    lines = transcript_lines(session.transcript.path)
    assert [line["type"] for line in lines] == ["session", "message", "message"]
    assert lines[1]["message"]["content"] == "hi there"
    assert lines[2]["message"]["content"][0]["text"] == "Hello! How can I help?"
    entry = store_entry(runner)
    prompt_tokens = count_request_tokens(model.calls[0])
    assert entry["totalTokens"] == entry["inputTokens"] == prompt_tokens == result.usage.input
    assert entry["outputTokens"] == result.usage.output > 0
    assert entry["totalTokensFresh"] is True
    assert entry["contextTokens"] == 100_000
    assert (entry["model"], entry["modelProvider"], entry["chatType"]) == ("scripted", "scripted", "direct")
    assert entry["sessionFile"] == str(session.transcript.path)


def test_no_reply_is_silent_and_a_trailing_token_is_stripped(tmp_path: Path, workspace: Path) -> None:
    runner, recorder = make_runner(
        ScriptedModel(["NO_REPLY", "Saved it.\n\nNO_REPLY"]), tmp_path, workspace, BIG
    )
    session = runner.open()
    assert session.run_turn_sync("ok, thanks").reply is None
    assert session.run_turn_sync("remember tea").reply == "Saved it."
    assert [e.reply for e in recorder.events if isinstance(e, TurnEvent)] == [None, "Saved it."]


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


@tool
def broken(x: int) -> str:
    """Always fails."""
    raise RuntimeError("database offline")


def test_tool_results_and_errors_go_back_to_the_model(tmp_path: Path, workspace: Path) -> None:
    model = ScriptedModel(
        [
            ToolCall("1", "lookup", {"q": "tea"}),
            ToolCall("2", "broken", {"x": 1}),
            ToolCall("3", "nope", {}),
            "done",
        ]
    )
    runner, recorder = make_runner(model, tmp_path, workspace, BIG, tools=[lookup, broken])
    result = runner.open().run_turn_sync("find tea")
    assert result.reply == "done"
    answers = [call.messages[-1] for call in model.calls[1:]]
    assert [(m.role, m.content, m.is_error) for m in answers[:1]] == [("tool", "found tea", False)]
    assert answers[1].is_error and "database offline" in answers[1].content
    assert answers[2].is_error and answers[2].content.startswith("Unknown tool: nope.")
    assert "lookup" in {t["function"]["name"] for t in model.calls[0].tools}
    assert [(e.name, e.is_error) for e in recorder.events if isinstance(e, ToolCallEvent)] == [
        ("lookup", False),
        ("broken", True),
        ("nope", True),
    ]


def test_tool_loop_is_bounded(tmp_path: Path, workspace: Path) -> None:
    counter = iter(range(1000))
    model = ScriptedModel(responder=lambda r: ToolCall(f"c{next(counter)}", "lookup", {"q": "again"}))
    config = small_config(window=100_000, maxToolIterations=3)
    runner, recorder = make_runner(model, tmp_path, workspace, config, tools=[lookup])
    result = runner.open().run_turn_sync("loop forever")
    assert len(model.calls) == 3
    assert result.stopped == "max_tool_iterations"
    assert result.reply == "Stopped after 3 tool iterations without a final answer (maxToolIterations = 3)."
    assert [e.stopped for e in recorder.events if isinstance(e, TurnEvent)] == ["max_tool_iterations"]


def test_sync_wrapper_refuses_a_running_loop(tmp_path: Path, workspace: Path) -> None:
    runner, _ = make_runner(ScriptedModel(["a", "b"]), tmp_path, workspace, BIG)
    session = runner.open()

    async def inside() -> None:
        with pytest.raises(UsageError, match="running event loop"):
            session.run_turn_sync("hi")
        assert (await session.run_turn("hi")).reply == "a"

    asyncio.run(inside())


def test_event_callbacks_async_and_failing(tmp_path: Path, workspace: Path, caplog: Any) -> None:
    seen: list[str] = []

    async def on_event(event: Any) -> None:
        seen.append(event.kind)
        raise ValueError("callback bug")

    runner, _ = make_runner(ScriptedModel(["fine"]), tmp_path, workspace, BIG)
    runner.on_event = on_event
    with caplog.at_level(logging.ERROR):
        assert runner.open().run_turn_sync("hi").reply == "fine"
    assert seen == ["session_start", "turn"]  # the session open() created is announced at its first turn
    assert "on_event callback failed" in caplog.text


def chat(session: Any, turns: int, size: int = 40) -> None:
    for i in range(turns):
        session.run_turn_sync(f"turn {i}: " + words(size))


def test_manual_compact_flushes_first_and_records_the_cycle(tmp_path: Path, workspace: Path) -> None:
    today = "memory/2026-11-22.md"
    model = ScriptedModel(
        responder=flush_aware(
            lambda r: "noted " + words(20), flush=flush_write("- user likes green tea\n", path=today)
        )
    )
    runner, recorder = make_runner(model, tmp_path, workspace, BIG)
    session = runner.open()
    chat(session, 6)
    from freezegun import freeze_time

    with freeze_time("2026-11-22 10:00:00"):
        result = session.compact_sync("the user's drink preferences")
    assert result.ok and result.flushed
    purposes = [c.purpose for c in model.calls]
    assert purposes[-3:] == ["flush", "flush", "compaction"]
    assert len(flush_prompt_requests(model.calls)) == 1
    assert model.calls[-1].messages[1].content.endswith("Additional focus: the user's drink preferences")
    assert (workspace / today).read_text() == "- user likes green tea\n"
    assert [(e.path, e.mode) for e in recorder.events if e.kind == "memory_write"] == [(today, "append")]
    entry = store_entry(runner)
    assert entry["compactionCount"] == 1 and entry["memoryFlushCompactionCount"] == 0
    assert isinstance(entry["memoryFlushAt"], int)
    kinds = [e.kind for e in recorder.events if e.kind in ("flush", "compaction")]
    assert kinds == ["flush", "compaction"]
    compaction = next(e for e in recorder.events if isinstance(e, CompactionEvent))
    assert entry["totalTokens"] == compaction.tokens_after < compaction.tokens_before
    assert entry["totalTokensFresh"] is True and "inputTokens" not in entry
    lines = transcript_lines(session.transcript.path)
    assert next(line for line in lines if line["type"] == "compaction")["firstKeptEntryId"] == (
        compaction.first_kept_entry_id
    )
    # The next call sees the summary first, then the kept messages.
    session.run_turn_sync("what do I like?")
    sent = model.calls[-1].messages
    assert sent[1].content.startswith("The conversation history before this point was compacted")


def test_compact_with_nothing_to_compact_keeps_the_cycles_flush(tmp_path: Path, workspace: Path) -> None:
    model = ScriptedModel(responder=flush_aware(lambda r: "ok " + words(30)))
    config = small_config(window=3000, reserve=500, floor=500, soft=300, keep=400)
    runner, recorder = make_runner(model, tmp_path, workspace, config)
    session = runner.open()
    chat(session, 1)
    assert session.run_turn_sync("/compact").reply == "Compaction skipped: nothing to compact"
    assert recorder.kinds("flush", "compaction") == []
    assert "memoryFlushCompactionCount" not in store_entry(runner)
    # The cycle's flush is still there for the compaction that does come.
    chat(session, 12)
    assert recorder.kinds("flush", "compaction")[:2] == ["flush", "compaction"]
    assert store_entry(runner)["memoryFlushCompactionCount"] == 0


def overflow_model(limit: int, today: str, *, flush_needs_compaction: bool = False) -> ScriptedModel:
    """Overflows past ``limit`` prompt tokens; with ``flush_needs_compaction`` a flush request overflows
    until the context has been compacted (even when trimmed), forcing a compaction in mid-flush."""

    def respond(request: ModelRequest) -> Any:
        if request.purpose == "compaction":
            return "## Decisions\n- keep going"
        if count_request_tokens(request) > limit:
            raise ContextWindowExceeded(f"prompt over {limit}")
        if request.purpose == "flush":
            compacted = request.messages[1].content.startswith("The conversation history before this point")
            if flush_needs_compaction and not compacted:
                raise ContextWindowExceeded("flush prompt too long until compacted")
            return flush_write("- overflow fact\n", path=today)(request)
        return "ok " + words(10)

    return ScriptedModel(responder=respond)


def run_overflowing_chat(tmp_path: Path, workspace: Path, model: ScriptedModel, turns: int = 30) -> Any:
    from freezegun import freeze_time

    runner, recorder = make_runner(model, tmp_path, workspace, small_config(window=100_000, keep=300))
    session = runner.open()
    with freeze_time("2026-11-22 10:00:00"):
        replies = [session.run_turn_sync(f"turn {i}: " + words(60)).reply for i in range(turns)]
    assert all(r and r.startswith("ok ") for r in replies)  # every user turn was answered
    flushes = [e for e in recorder.events if isinstance(e, FlushEvent)]
    compactions = [e for e in recorder.events if isinstance(e, CompactionEvent)]
    assert len(compactions) >= 3 and all(c.reason == "overflow" for c in compactions)
    assert store_entry(runner)["compactionCount"] == len(compactions)
    return recorder, flushes, compactions


def test_overflow_flushes_then_compacts_through_the_gate(tmp_path: Path, workspace: Path) -> None:
    today = "memory/2026-11-22.md"
    model = overflow_model(1500, today)
    recorder, flushes, compactions = run_overflowing_chat(tmp_path, workspace, model)
    # Every overflow cycle: the flush (on the newest half of the context, verbatim), then the compaction.
    order = recorder.kinds("flush", "compaction")
    assert order[: 2 * len(compactions)] == ["flush", "compaction"] * len(compactions)
    assert [f.compaction_count for f in flushes][: len(compactions)] == list(range(len(compactions)))
    assert all(f.error is None for f in flushes)
    trimmed = [c for c in flush_prompt_requests(model.calls) if count_request_tokens(c) <= 1500]
    assert len(trimmed) == len(flushes)  # each flush ran on the trimmed context, not on a summary
    assert all(not c.messages[1].content.startswith("The conversation history") for c in trimmed)
    assert (workspace / today).read_text().count("- overflow fact") == 1  # repeated notes not duplicated


def test_compaction_during_the_flush_does_not_skip_the_next_cycles_flush(
    tmp_path: Path, workspace: Path
) -> None:
    model = overflow_model(1500, "memory/2026-11-22.md", flush_needs_compaction=True)
    recorder, flushes, compactions = run_overflowing_chat(tmp_path, workspace, model)
    # The flush's own call overflows (also when trimmed), so it compacts mid-flush; the flush still belongs
    # to the cycle it started in, so every cycle gets its flush (OpenClaw #12590 skipped every other one).
    order = recorder.kinds("flush", "compaction")
    assert order[: 2 * len(compactions)] == ["compaction", "flush"] * len(compactions)  # events at flush end
    assert [f.compaction_count for f in flushes] == list(range(len(flushes)))
    assert len(flushes) >= len(compactions)
    assert all(f.error is None for f in flushes)


def test_a_question_over_the_window_is_a_clear_error(tmp_path: Path, workspace: Path) -> None:
    model = overflow_model(1500, "memory/2026-11-22.md")
    runner, recorder = make_runner(model, tmp_path, workspace, small_config(window=100_000, keep=100))
    session = runner.open()
    chat(session, 6)
    with pytest.raises(ContextWindowExceeded, match="does not fit the model's context window"):
        session.run_turn_sync("a question longer than the window " + words(1000))
    # The flush and a compaction keeping a quarter of the context; then, the cycle being new, its flush
    # and a compaction folding everything into the summary.
    assert recorder.kinds("flush", "compaction") == ["flush", "compaction"] * 2
    # The question that could not be sent is not left in the transcript.
    assert "a question longer than the window" not in session.transcript.path.read_text()
    fresh, _ = make_runner(overflow_model(50, "memory/2026-11-22.md"), tmp_path / "b", workspace)
    with pytest.raises(ContextWindowExceeded, match="nothing is left to compact"):
        fresh.open().run_turn_sync("hello " + words(100))


def test_failed_summary_leaves_history_untouched(tmp_path: Path, workspace: Path) -> None:
    model = ScriptedModel(responder=flush_aware(lambda r: "ok", summary=lambda r: ""))
    runner, recorder = make_runner(model, tmp_path, workspace, BIG)
    session = runner.open()
    chat(session, 5)
    before_context = list(session.context)
    result = session.compact_sync()
    assert not result.ok and "empty summary" in (result.error or "")
    assert session.context[: len(before_context)] == before_context
    assert not [line for line in transcript_lines(session.transcript.path) if line["type"] == "compaction"]
    assert store_entry(runner)["compactionCount"] == 0
    assert recorder.kinds("compaction", "compaction_failed") == ["compaction_failed"]
    assert session.run_turn_sync("still there?").reply == "ok"


def test_flush_output_never_reaches_the_user(tmp_path: Path, workspace: Path) -> None:
    model = ScriptedModel(
        responder=flush_aware(lambda r: "answer " + words(30), flush="I saved your notes! FLUSH-TEXT")
    )
    runner, recorder = make_runner(
        model, tmp_path, workspace, small_config(window=3000, reserve=500, floor=500, soft=300, keep=400)
    )
    session = runner.open()
    results = [session.run_turn_sync(f"q{i} " + words(50)) for i in range(25)]
    assert flush_prompt_requests(model.calls), "the scenario must reach the flush"
    assert all("FLUSH-TEXT" not in (r.reply or "") for r in results)
    assert all("FLUSH-TEXT" not in (e.reply or "") for e in recorder.events if isinstance(e, TurnEvent))
    # The transcript records the flush turn (prompt + answer), as OpenClaw does.
    text = session.transcript.path.read_text()
    assert "Pre-compaction memory flush." in text and "FLUSH-TEXT" in text


def test_tool_pairs_survive_compaction(tmp_path: Path, workspace: Path) -> None:
    ids = iter(range(10_000))

    def respond(request: ModelRequest) -> Any:
        last = request.messages[-1]
        if last.role == "user":
            return [  # a long result, so the recent budget's edge falls inside the tool exchange
                ToolCall(f"t{next(ids)}", "lookup", {"q": words(120)}),
                ToolCall(f"t{next(ids)}", "lookup", {"q": "x"}),
            ]
        return "answer " + words(100)

    model = ScriptedModel(responder=flush_aware(respond))
    config = small_config(window=5000, reserve=1500, floor=1500, soft=200, keep=300)
    runner, recorder = make_runner(model, tmp_path, workspace, config, tools=[lookup])
    session = runner.open()
    recorder.check_each_compaction(session)
    chat(session, 30, size=30)
    assert len(recorder.kinds("compaction")) >= 2
    assert recorder.kept_problems == []  # in the transcript, before any request-time repair
    first = next(i for i, c in enumerate(model.calls) if c.purpose == "compaction")
    after = [c for c in model.calls[first + 1 :] if c.purpose != "compaction"]
    assert after and all(orphan_tool_messages(c) == [] for c in after)
    assert all(count_request_tokens(c) <= 5000 for c in model.calls)


def test_memory_tools_and_memory_md_only_in_private_sessions(tmp_path: Path, workspace: Path) -> None:
    (workspace / "MEMORY.md").write_text("# Memory\n- the user's cat is called Miso\n")
    model = ScriptedModel(["a", "b"])
    runner, _ = make_runner(model, tmp_path, workspace, BIG)
    runner.open().run_turn_sync("hi")
    runner.open("agent:main:discord:group:42").run_turn_sync("hi all")
    private, group = model.calls
    private_tools = {t["function"]["name"] for t in private.tools}
    group_tools = {t["function"]["name"] for t in group.tools}
    assert {"memory_append_daily", "memory_write", "memory_get"} <= private_tools
    assert "memory_write" not in group_tools and "memory_get" in group_tools
    assert "Miso" in private.messages[0].content and "Miso" not in group.messages[0].content
    assert "## Silent Replies" in group.messages[0].content
    store = json.loads(runner.store.path.read_text())
    assert store["agent:main:discord:group:42"]["chatType"] == "group"


# ---------------------------------------------------------------------------- system prompt


def test_memory_md_is_truncated_head_and_tail(tmp_path: Path, workspace: Path) -> None:
    body = "".join(f"line {i:05d} " + "x" * 40 + "\n" for i in range(700))  # ~36k chars
    (workspace / "MEMORY.md").write_text(body)
    model = ScriptedModel(["ok"])
    runner, _ = make_runner(model, tmp_path, workspace, BIG)
    runner.open().run_turn_sync("hi")
    system = model.calls[0].messages[0].content
    assert body[:14_000] in system and body[-4_000:] in system
    assert body[14_000:14_100] not in system
    assert "[...truncated, read MEMORY.md for full content...]" in system
    assert f"…(truncated MEMORY.md: kept 14000+4000 chars of {len(body)})…" in system


def test_todays_and_yesterdays_logs_are_loaded_at_session_start(tmp_path: Path, workspace: Path) -> None:
    from freezegun import freeze_time

    for day, fact in (
        ("2026-11-20", "OLD-FACT"),
        ("2026-11-21", "YESTERDAY-FACT"),
        ("2026-11-22", "TODAY-FACT"),
    ):
        (workspace / "memory" / f"{day}.md").write_text(f"- {fact}\n")
    model = ScriptedModel(["ok"])
    runner, _ = make_runner(model, tmp_path, workspace, BIG)
    with freeze_time("2026-11-22 12:00:00"):
        runner.open().run_turn_sync("hi")
    system = model.calls[0].messages[0].content
    assert "## memory/2026-11-21.md\n- YESTERDAY-FACT" in system and "TODAY-FACT" in system
    assert "OLD-FACT" not in system
    assert "Current time: Sunday, November 22nd, 2026 — 12:00 PM (UTC) / 2026-11-22 12:00 UTC" in system


def test_cron_sessions_get_the_minimal_prompt(tmp_path: Path, workspace: Path) -> None:
    (workspace / "MEMORY.md").write_text("- SECRET-PREFERENCE\n")
    model = ScriptedModel(["ok", "ok"])
    runner, _ = make_runner(model, tmp_path, workspace, BIG)
    runner.open().run_turn_sync("hi")
    runner.open("agent:main:cron:nightly").run_turn_sync("run the job")
    main, cron = (c.messages[0].content for c in model.calls)
    assert "## Memory Recall" in main and "SECRET-PREFERENCE" in main
    assert "## Memory Recall" not in cron and "SECRET-PREFERENCE" not in cron


# ---------------------------------------------------------------------------- guardrails and plumbing


def test_heartbeat_runs_skip_the_flush_with_an_event(tmp_path: Path, workspace: Path) -> None:
    model = ScriptedModel(responder=flush_aware(lambda r: "ok " + words(30)))
    config = small_config(window=3000, reserve=500, floor=500, soft=300, keep=400)
    runner, recorder = make_runner(model, tmp_path, workspace, config, heartbeat=True)
    chat(runner.open(), 20)
    assert not flush_prompt_requests(model.calls)
    assert "flush_skipped" in recorder.kinds()
    assert {e.reason for e in recorder.events if e.kind == "flush_skipped"} >= {"heartbeat run"}


def test_a_heartbeat_turn_over_the_threshold_leaves_compaction_to_the_next_real_turn(
    tmp_path: Path, workspace: Path
) -> None:
    model = ScriptedModel(responder=flush_aware(lambda r: "ok " + words(30)))
    config = small_config(window=3000, reserve=500, floor=500, soft=300, keep=400)
    real, recorder = make_runner(model, tmp_path, workspace, config)
    chat(real.open(), 4)  # below the flush threshold (2200 tokens)
    assert recorder.kinds("flush", "compaction") == []
    heartbeat, beats = make_runner(model, tmp_path, workspace, config, heartbeat=True)
    heartbeat.open().run_turn_sync("heartbeat check: " + words(760))  # now over the threshold (2500)
    # No flush, and no compaction that would summarise this cycle's turns before they were saved.
    assert beats.kinds("flush", "compaction") == []
    assert heartbeat.open().projection().tokens >= 2500
    assert store_entry(heartbeat).get("compactionCount", 0) == 0
    # The next real turn flushes the cycle, then compacts, before it runs.
    again, after = make_runner(model, tmp_path, workspace, config)
    assert again.open().run_turn_sync("and now a real question").reply is not None
    assert after.kinds("flush", "compaction", "turn")[:3] == ["flush", "compaction", "turn"]
    first_flush = next(e for e in after.events if isinstance(e, FlushEvent))
    assert first_flush.compaction_count == 0


def test_overflow_with_compaction_disabled_is_raised(tmp_path: Path, workspace: Path) -> None:
    model = ScriptedModel([ContextWindowExceeded("too long")])
    config = small_config(window=100_000, compaction={"enabled": False})
    runner, recorder = make_runner(model, tmp_path, workspace, config)
    with pytest.raises(ContextWindowExceeded, match="too long"):
        runner.open().run_turn_sync("hi")
    assert recorder.kinds("flush", "compaction") == []


def test_one_session_object_per_key_and_state_survives_reopening(tmp_path: Path, workspace: Path) -> None:
    model = ScriptedModel(["first", "second"])
    runner, _ = make_runner(model, tmp_path, workspace, BIG)
    assert runner.open("agent:main:main") is runner.open(" Agent:Main:MAIN ")
    runner.open().run_turn_sync("one")
    again, _ = make_runner(model, tmp_path, workspace, BIG)  # a new process, same state dir
    again.open().run_turn_sync("two")
    assert [m.content for m in model.calls[1].messages[1:]] == ["one", "first", "two"]


def test_tool_decorator_builds_a_schema() -> None:
    @tool
    def schedule(title: str, minutes: int = 30, tags: list[str] | None = None) -> dict:
        """Schedule a meeting."""
        return {"ok": True}

    assert schedule.description == "Schedule a meeting."
    assert schedule.parameters == {
        "type": "object",
        "properties": {
            "title": {"type": "string"},
            "minutes": {"type": "integer"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["title"],
    }


@pytest.mark.parametrize(("slack", "flushes"), [(0, 1), (1, 0)])
def test_flush_threshold_is_inclusive_in_a_real_turn(
    tmp_path: Path, workspace: Path, slack: int, flushes: int
) -> None:
    from sessionmem.messages import Message

    model = ScriptedModel(responder=flush_aware(lambda r: "ok " + words(20)))
    first, _ = make_runner(model, tmp_path, workspace, BIG)
    first.open().run_turn_sync("hello " + words(50))
    text = "and then " + words(40)
    projected = first.open().projection([Message.user(text)]).tokens
    # A window where the flush threshold (window - reserve 400 - soft 200) is exactly the projection.
    config = small_config(window=projected + 600 + slack, reserve=400, floor=400, soft=200, keep=60)
    again, _ = make_runner(model, tmp_path, workspace, config)
    before = len(model.calls)
    again.open().run_turn_sync(text)
    # Flushes before the turn's own model call (the preflight's); the reply itself may make one due after.
    turn_call = next(i for i, c in enumerate(model.calls) if i >= before and c.purpose == "turn")
    assert len(flush_prompt_requests(model.calls[before:turn_call])) == flushes


def test_provider_that_owns_compaction_gets_neither_flush_nor_compaction(
    tmp_path: Path, workspace: Path
) -> None:
    model = ScriptedModel(responder=flush_aware(lambda r: "ok " + words(30)))
    config = small_config(
        window=3000, reserve=500, floor=500, soft=300, keep=400, models={"scripted": {"ownsCompaction": True}}
    )
    runner, recorder = make_runner(model, tmp_path, workspace, config)
    chat(runner.open(), 20)
    assert recorder.kinds("flush", "compaction") == []
    assert {e.reason for e in recorder.events if e.kind == "flush_skipped"} == {"provider owns compaction"}
    assert [c.purpose for c in model.calls] == ["turn"] * 20


def test_flush_cannot_write_elsewhere_and_sees_only_memory_tools(tmp_path: Path, workspace: Path) -> None:
    from freezegun import freeze_time

    (workspace / "MEMORY.md").write_text("# Memory\n- keep me\n")
    model = ScriptedModel(
        responder=flush_aware(lambda r: "ok", flush=flush_write("overwritten", path="MEMORY.md"))
    )
    runner, _ = make_runner(model, tmp_path, workspace, BIG, tools=[lookup])
    session = runner.open()
    chat(session, 3)
    with freeze_time("2026-11-22 23:59:00"):
        session.compact_sync()
    flush_calls = [c for c in model.calls if c.purpose == "flush"]
    assert {t["function"]["name"] for t in flush_calls[0].tools} == {
        "memory_get",
        "memory_search",
        "write",
        "memory_append_daily",
    } - ({"memory_search"} if runner.memory_index is None else set())
    refusal = flush_calls[1].messages[-1]
    assert refusal.is_error
    assert (
        refusal.content == "Memory flush writes are restricted to memory/2026-11-22.md; use that path only."
    )
    assert (workspace / "MEMORY.md").read_text() == "# Memory\n- keep me\n"
    assert "memory/2026-11-22.md" in flush_calls[0].messages[0].content  # the flush system prompt


# ---------------------------------------------------------------------------- litellm over real HTTP


def test_litellm_session_recovers_from_a_provider_context_overflow(
    tmp_path: Path, workspace: Path, openai_server: Any
) -> None:
    from freezegun import freeze_time

    from sessionmem.model.litellm import LiteLLMModel
    from sessionmem.session.turn.compaction import SUMMARIZATION_SYSTEM_PROMPT
    from tests.support.openai_server import context_length_error, text_reply, tool_call_reply

    tokens.configure_litellm_environment()
    today = "memory/2026-11-22.md"

    def handler(body: dict[str, Any]) -> Any:
        messages = body["messages"]
        if messages[0]["content"] == SUMMARIZATION_SYSTEM_PROMPT:
            return text_reply("## Decisions\n- ship on Friday")
        if any("Pre-compaction memory flush." in str(m.get("content")) for m in messages[-1:]):
            return tool_call_reply([("write", {"path": today, "content": "- ship date: Friday\n"})])
        if messages[-1]["role"] == "tool" and messages[-1]["tool_call_id"] == "call_0_write":
            return text_reply("NO_REPLY")
        return text_reply("Got it: " + str(messages[-1]["content"])[:40])

    openai_server.chat.handler = handler
    model = LiteLLMModel(
        "openai/test-model", api_base=openai_server.base_url, api_key="sk-test", num_retries=0
    )
    runner, recorder = make_runner(model, tmp_path, workspace, small_config(window=100_000, keep=40))
    session = runner.open()
    # Trigger: freezegun swaps datetime.datetime for a fake class in every module imported while the clock
    # is frozen, and litellm imports pydantic models (which cannot take the fake) on its first call.
    # Outcome: the first turns run on the real clock; only the one that flushes needs the frozen date.
    for i in range(4):
        text = f"note {i}: " + words(30)
        assert session.run_turn_sync(text).reply == "Got it: " + text[:40]
    with freeze_time("2026-11-22 10:00:00"):
        openai_server.chat.push(context_length_error(limit=900, used=1200))
        result = session.run_turn_sync("we ship on Friday")
    assert result.reply == "Got it: we ship on Friday"
    assert recorder.kinds("flush", "compaction") == ["flush", "compaction"]
    assert (workspace / today).read_text() == "- ship date: Friday\n"
    entry = store_entry(runner)
    last_prompt = openai_server.chat.requests[-1].body["messages"]
    assert last_prompt[1]["content"].startswith("The conversation history before this point was compacted")
    assert entry["compactionCount"] == 1 and entry["memoryFlushCompactionCount"] == 0
    assert entry["model"] == "openai/test-model" and entry["modelProvider"] == "openai"
    assert entry["totalTokens"] == entry["inputTokens"] > 0 and entry["totalTokensFresh"] is True


def test_config_switches_memory_write_tools_and_rejects_a_bad_timezone(
    tmp_path: Path, workspace: Path
) -> None:
    from sessionmem.errors import ConfigError

    model = ScriptedModel(["a", "b"])
    off, _ = make_runner(model, tmp_path, workspace, small_config(window=100_000, memoryTools=False))
    off.open().run_turn_sync("hi")
    on, _ = make_runner(model, tmp_path / "b", workspace, small_config(window=100_000, memoryTools=True))
    on.open("agent:main:discord:group:7").run_turn_sync("hi")
    names = [{t["function"]["name"] for t in c.tools} for c in model.calls]
    assert "memory_write" not in names[0] and "memory_write" in names[1]
    with pytest.raises(ConfigError, match="Mars/Olympus"):
        make_runner(model, tmp_path, workspace, small_config(timezone="Mars/Olympus"))


def test_without_memory_search_the_agent_reads_memory_with_memory_read(
    tmp_path: Path, workspace: Path
) -> None:
    (workspace / "memory" / "notes.md").write_text("- the wifi password is on the fridge\n")
    model = ScriptedModel(
        [ToolCall("r1", "memory_read", {"path": "memory/notes.md"}), "It is on the fridge."]
    )
    config = small_config(window=100_000, memorySearch={"enabled": False})
    runner, _ = make_runner(model, tmp_path, workspace, config)
    assert runner.open().run_turn_sync("where is the wifi password?").reply == "It is on the fridge."
    names = {t["function"]["name"] for t in model.calls[0].tools}
    assert "memory_read" in names and not names & {"memory_get", "memory_search"}
    assert "## Memory Recall" not in model.calls[0].messages[0].content
    assert model.calls[1].messages[-1].content == "- the wifi password is on the fridge\n"


def test_failing_summaries_on_the_threshold_path_never_break_a_turn(tmp_path: Path, workspace: Path) -> None:
    from sessionmem.errors import ModelError

    def summary(request: ModelRequest) -> str:
        raise ModelError("summariser is down")

    model = ScriptedModel(responder=flush_aware(lambda r: "ok " + words(20), summary=summary))
    config = small_config(window=3000, reserve=500, floor=500, soft=300, keep=400)
    runner, recorder = make_runner(model, tmp_path, workspace, config)
    session = runner.open()
    results = [session.run_turn_sync(f"q{i} " + words(40)) for i in range(22)]
    assert all(r.reply and r.reply.startswith("ok ") for r in results)
    failures = [e for e in recorder.events if e.kind == "compaction_failed"]
    assert failures and all("summariser is down" in e.error for e in failures)
    assert "compaction" not in recorder.kinds()
    assert store_entry(runner)["compactionCount"] == 0
    assert len(flush_prompt_requests(model.calls)) == 1  # still one flush for the (unfinished) cycle


# ---------------------------------------------------------------------------- one token measure


def test_without_reported_usage_the_projection_counts_the_tool_schemas(
    tmp_path: Path, workspace: Path
) -> None:
    from sessionmem.messages import Message
    from sessionmem.session.turn.projection import MESSAGE_OVERHEAD_TOKENS

    model = ScriptedModel(["hello"])
    runner, _ = make_runner(model, tmp_path, workspace, BIG, tools=[lookup])
    session = runner.open()
    text = "what can you look up? " + words(30)
    projected = session.projection([Message.user(text)])
    assert not projected.fresh
    session.run_turn_sync(text)
    request = model.calls[0]
    assert request.tools  # memory tools and lookup: their schemas are part of every prompt
    # The scripted model counts exactly what the provider would: messages and tool schemas (the system
    # prompt is a message there, with its few tokens of role markup).
    assert count_request_tokens(request) - projected.tokens == MESSAGE_OVERHEAD_TOKENS
    assert session.projection().fresh  # from now on the reported figure anchors it


def test_compaction_figures_are_the_projection_before_and_after(tmp_path: Path, workspace: Path) -> None:
    from sessionmem.config import merge
    from sessionmem.messages import Message
    from sessionmem.session.turn.projection import MESSAGE_OVERHEAD_TOKENS

    model = ScriptedModel(responder=flush_aware(lambda r: "ok " + words(30)))
    config = merge(BIG, {"agents": {"defaults": {"compaction": {"memoryFlush": {"enabled": False}}}}})
    runner, recorder = make_runner(model, tmp_path, workspace, config)
    session = runner.open()
    chat(session, 6)
    before = session.projection().tokens  # anchored on the last reply's reported usage
    result = session.compact_sync()
    assert result.ok and not result.flushed
    compaction = next(e for e in recorder.events if isinstance(e, CompactionEvent))
    assert result.tokens_before == compaction.tokens_before == before
    assert result.tokens_after == compaction.tokens_after == session.projection().tokens < before
    assert store_entry(runner)["totalTokens"] == compaction.tokens_after
    lines = transcript_lines(session.transcript.path)
    entry = next(line for line in lines if line["type"] == "compaction")
    assert (entry["tokensBefore"], entry["tokensAfter"]) == (before, compaction.tokens_after)
    # The next call's reported prompt continues from the "after" figure, with no jump by the schemas.
    text = "and next " + words(10)
    pending = session.counter.count(Message.user(text))
    session.run_turn_sync(text)
    assert (
        count_request_tokens(model.calls[-1]) - (compaction.tokens_after + pending) == MESSAGE_OVERHEAD_TOKENS
    )


def test_a_runner_keeps_only_its_own_agents_sessions(tmp_path: Path, workspace: Path) -> None:
    model = ScriptedModel(responder=lambda request: "ok")
    runner, _ = make_runner(model, tmp_path, workspace, BIG, agent_id="alpha")
    # Another agent's key is refused, and nothing is stored for it.
    with pytest.raises(UsageError, match=r"belongs to agent 'beta', and this runner serves agent 'alpha'"):
        runner.open("agent:beta:telegram:direct:42")
    # A key without "agent:" is this agent's: the same session as its full form.
    bare = runner.open("telegram:direct:42")
    assert bare.key == "agent:alpha:telegram:direct:42"
    bare.run_turn_sync("hi")
    assert runner.open("agent:alpha:telegram:direct:42") is bare
    assert runner.open("main").key == runner.open().key == "agent:alpha:main"
    assert set(runner.store.all()) == {"agent:alpha:telegram:direct:42", "agent:alpha:main"}
    header = transcript_lines(bare.transcript.path)[0]
    assert header["sessionKey"] == "agent:alpha:telegram:direct:42"


def test_sessions_an_earlier_release_stored_under_other_spellings(
    tmp_path: Path, workspace: Path, caplog: Any
) -> None:
    model = ScriptedModel(responder=lambda request: "ok")
    runner, _ = make_runner(model, tmp_path, workspace, BIG, agent_id="alpha")
    # An earlier release stored a bare key as it was, and lowered every key.
    for key, session_id in (("discord:group:7", "bare-one"), ("agent:alpha:matrix:direct:alice", "lowered")):
        runner.store.patch(key, session_id=session_id, session_file=runner.store.new_session_file(session_id))
    # The bare key's session is this agent's: it goes on under the full key.
    moved = runner.open("discord:group:7")
    assert moved.key == "agent:alpha:discord:group:7" and moved.entry.session_id == "bare-one"
    assert runner.store.get("discord:group:7") is None
    # A lowered key may be another person's: it stays, a warning names both, a new session starts.
    with caplog.at_level(logging.WARNING, logger="sessionmem.session.earlier_keys"):
        alice = runner.open("agent:alpha:matrix:direct:Alice")
    assert alice.entry.session_id != "lowered"
    assert runner.store.get("agent:alpha:matrix:direct:alice").session_id == "lowered"  # type: ignore[union-attr]
    (warning,) = [r.getMessage() for r in caplog.records if r.name == "sessionmem.session.earlier_keys"]
    assert "'agent:alpha:matrix:direct:Alice'" in warning and "'agent:alpha:matrix:direct:alice'" in warning
