"""A turn that arrives while the memory work after the last reply runs is answered meanwhile.

Its first model call goes out at once, on the context of the last reply; its messages are written after the
work's. The model here holds the flush's calls until the test lets them go, so what happens while the work
runs is observed, not timed."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from sessionmem.errors import ContextWindowExceeded
from sessionmem.model.base import ModelRequest
from sessionmem.model.scripted import ScriptedModel, flush_aware, flush_write
from sessionmem.session.runner import SessionRunner
from tests.scenarios.harness import make_runner, small_config
from tests.session.test_replies_first import CONFIG, HeldFlush, chat_line, turns_until_work


def user_texts(request: ModelRequest) -> list[str]:
    return [m.content for m in request.messages if m.role == "user"]


def turn_calls_for(model: ScriptedModel, text: str) -> list[ModelRequest]:
    """The ordinary model calls whose prompt ends with the user's ``text``."""
    return [c for c in model.calls if c.purpose == "turn" and user_texts(c)[-1:] == [text]]


def transcript_roles(session: Any) -> list[tuple[str, str]]:
    """(role, first words) of the transcript's messages, in order."""
    out = []
    for entry in session.transcript.entries():
        message = entry.data.get("message") if isinstance(entry.data, dict) else None
        if isinstance(message, dict):
            content = message.get("content")
            text = content if isinstance(content, str) else str(content)
            out.append((str(message.get("role")), text[:12]))
    return out


async def until(condition: Any, what: str) -> None:
    for _ in range(5000):
        if condition():
            return
        await asyncio.sleep(0.001)
    raise AssertionError(f"never happened: {what}")


async def next_turn_during_flush(
    session: Any, held: HeldFlush, recorder: Any, on_partial: Any = None
) -> tuple[Any, str]:
    """Run turns until one's flush is held by the model, then start the next turn (streamed to
    ``on_partial`` when given): (its task, its text)."""
    n = await turns_until_work(session, recorder)
    await asyncio.wait_for(held.flush_started.wait(), 5)
    text = chat_line(n)
    return asyncio.create_task(session.run_turn(text, on_partial)), text


def test_the_next_turn_is_answered_while_the_flush_runs_and_written_after_it(
    tmp_path: Path, workspace: Path
) -> None:
    held = HeldFlush()
    model = ScriptedModel(responder=held)
    runner, recorder = make_runner(model, tmp_path, workspace, CONFIG)
    text = ""

    async def scenario() -> Any:
        nonlocal text
        session = runner.open()
        following, text = await next_turn_during_flush(session, held, recorder)
        # The model is asked for the next turn's answer while the flush still waits for it ...
        await until(lambda: turn_calls_for(model, text), "the next turn's model call")
        assert "flush" not in recorder.kinds()
        # ... but the answer is not given before the flush's messages are written.
        await asyncio.sleep(0.05)
        assert not following.done()
        held.release()
        result = await asyncio.wait_for(following, 5)
        assert result.reply is not None
        await runner.aclose()
        return session

    session = asyncio.run(scenario())
    (early,) = turn_calls_for(model, text)  # asked once: the early answer was used
    assert not any("memory" in t.lower() and "flush" in t.lower() for t in user_texts(early))
    flush_prompt = next(c for c in model.calls if c.purpose == "flush")
    assert user_texts(flush_prompt)[-1] not in user_texts(early)  # made on the context of the last reply
    roles = transcript_roles(session)
    said = roles.index(("user", text[:12]))
    flushed = [i for i, (role, _) in enumerate(roles) if role == "assistant" and i < said]
    assert flushed, "the flush's answer comes before the next turn's message"
    assert roles[said + 1][0] == "assistant"  # the answer right after the message, as always
    assert recorder.flush_cycles()  # every compaction closed a cycle that had its flush


def test_the_early_answer_never_anchors_the_projection(tmp_path: Path, workspace: Path) -> None:
    held = HeldFlush()
    model = ScriptedModel(responder=held)
    runner, recorder = make_runner(model, tmp_path, workspace, CONFIG)

    async def scenario() -> Any:
        session = runner.open()
        following, text = await next_turn_during_flush(session, held, recorder)
        await until(lambda: turn_calls_for(model, text), "the next turn's model call")
        held.release()
        await asyncio.wait_for(following, 5)
        return session

    session = asyncio.run(scenario())
    state = session.state
    if any(e.kind == "compaction" for e in recorder.events[-4:]):
        return  # compacted after that reply: the context holds its summary now, nothing to check
    answer_id = next(entry_id for entry_id, m in reversed(state.context) if m.role == "assistant")
    # Its usage counted a prompt without the flush's messages: the projection must not start from it.
    assert answer_id in state.stale
    runner.close()


def test_a_chained_compaction_waits_for_the_early_turns_reply(tmp_path: Path, workspace: Path) -> None:
    # A window so small that the flush's own messages take the context past the compaction threshold.
    config = small_config(window=2400, reserve=500, floor=500, soft=250, keep=500)
    held = HeldFlush()
    model = ScriptedModel(responder=held)
    runner, recorder = make_runner(model, tmp_path, workspace, config)

    async def scenario() -> None:
        session = runner.open()
        # Without a next turn waiting, the flush and its compaction run in one work.
        n = await turns_until_work(session, recorder)
        held.release()
        await session.wait_idle()
        first = recorder.kinds("memory_work_start", "flush", "compaction", "turn")
        work = first[first.index("memory_work_start") :]
        assert work[:4] == ["memory_work_start", "flush", "memory_work_start", "compaction"]  # chained
        # Next cycle: the next turn arrives while the flush runs.
        held.gate.clear()
        held.flush_started.clear()
        start = len(recorder.events)
        for _ in range(40):
            await session.run_turn(chat_line(n))
            n += 1
            await asyncio.sleep(0.005)
            if held.flush_started.is_set():
                break
        assert held.flush_started.is_set()
        following = asyncio.create_task(session.run_turn(chat_line(n)))
        await until(lambda: turn_calls_for(model, chat_line(n)), "the next turn's model call")
        held.release()
        await asyncio.wait_for(following, 5)
        await session.wait_idle()
        kinds = [e.kind for e in recorder.events[start:] if e.kind in ("flush", "compaction", "turn")]
        flush_at = kinds.index("flush")
        # The compaction of that cycle came after the next turn's reply, not between the flush and it.
        assert kinds[flush_at + 1] == "turn"
        assert "compaction" in kinds[flush_at + 2 :]
        await runner.aclose()

    asyncio.run(scenario())
    assert recorder.flush_cycles()


def test_an_early_call_that_fails_is_made_again_the_usual_way(tmp_path: Path, workspace: Path) -> None:
    held = HeldFlush()
    failed: list[str] = []

    async def respond(request: ModelRequest) -> Any:
        during_flush = held.flush_started.is_set() and not held.gate.is_set()
        if request.purpose == "turn" and during_flush and not failed:
            failed.append(user_texts(request)[-1])
            raise ContextWindowExceeded("this model's maximum context length is 2000 tokens")
        return await held(request)

    model = ScriptedModel(responder=respond)
    runner, recorder = make_runner(model, tmp_path, workspace, CONFIG)

    async def scenario() -> Any:
        session = runner.open()
        following, _ = await next_turn_during_flush(session, held, recorder)
        await until(lambda: failed, "the early call")
        held.release()
        result = await asyncio.wait_for(following, 5)
        assert result.reply is not None
        await runner.aclose()
        return session

    session = asyncio.run(scenario())
    (text,) = failed
    assert len(turn_calls_for(model, text)) == 2  # the failed early call, then the turn's own
    roles = transcript_roles(session)
    assert roles.count(("user", text[:12])) == 1  # the message written once


def fail_the_next_flush_record(runner: SessionRunner) -> dict[str, bool]:
    """Make the session store fail to record a flush once ``switch["on"]`` is set: the work fails."""
    switch = {"on": False}
    store = runner.store
    real_update = store.update

    def update(key: str, fn: Any) -> Any:
        if switch["on"] and fn.__qualname__.startswith("record_flush"):
            switch["on"] = False  # once: the store cannot record the flush
            raise OSError("the disk went away")
        return real_update(key, fn)

    store.update = update  # type: ignore[method-assign]
    return switch


def test_an_early_answer_is_dropped_when_the_work_failed_and_the_state_was_reloaded(
    tmp_path: Path, workspace: Path
) -> None:
    held = HeldFlush()
    model = ScriptedModel(responder=held)
    runner, recorder = make_runner(model, tmp_path, workspace, CONFIG)
    broken = fail_the_next_flush_record(runner)

    async def scenario() -> tuple[Any, str]:
        session = runner.open()
        following, text = await next_turn_during_flush(session, held, recorder)
        await until(lambda: turn_calls_for(model, text), "the next turn's model call")
        broken["on"] = True  # the flush cannot record itself: the work fails
        held.release()
        result = await asyncio.wait_for(following, 5)
        assert result.reply is not None
        await runner.aclose()
        return session, text

    session, text = asyncio.run(scenario())
    (end,) = [e for e in recorder.events if e.kind == "memory_work_end"][:1]
    assert end.error is not None
    # The session was rebuilt from the transcript: the early answer could not stand and was asked again.
    assert len(turn_calls_for(model, text)) == 2
    roles = transcript_roles(session)
    assert roles.count(("user", text[:12])) == 1


def test_an_early_answer_is_streamed_only_once_the_turn_holds_the_session(
    tmp_path: Path, workspace: Path
) -> None:
    held = HeldFlush()
    model = ScriptedModel(responder=held)
    runner, recorder = make_runner(model, tmp_path, workspace, CONFIG)
    shown: list[str] = []

    async def scenario() -> Any:
        following, _ = await next_turn_during_flush(runner.open(), held, recorder, shown.append)
        await until(lambda: model.streamed, "the early call, streamed")
        await asyncio.sleep(0.05)  # its whole answer has come back by now
        assert shown == []  # not shown while the flush runs: the answer might not stand
        held.release()
        return await asyncio.wait_for(following, 5)

    result = asyncio.run(scenario())
    assert len(model.streamed) == 1  # the early call's answer was the one used
    assert "".join(shown) == result.reply


def test_an_early_answer_that_cannot_stand_is_never_shown(tmp_path: Path, workspace: Path) -> None:
    held = HeldFlush()
    model = ScriptedModel(responder=held)
    runner, recorder = make_runner(model, tmp_path, workspace, CONFIG)
    broken = fail_the_next_flush_record(runner)
    shown: list[str] = []

    async def scenario() -> Any:
        following, _ = await next_turn_during_flush(runner.open(), held, recorder, shown.append)
        await until(lambda: model.streamed, "the early call, streamed")
        broken["on"] = True  # the work fails: the state is rebuilt, the early answer is asked again
        held.release()
        return await asyncio.wait_for(following, 5)

    result = asyncio.run(scenario())
    assert len(model.streamed) == 2
    assert "".join(shown) == result.reply  # the reply streamed once, not the dropped answer before it


def test_a_command_arriving_during_the_work_is_not_sent_to_the_model(tmp_path: Path, workspace: Path) -> None:
    held = HeldFlush()
    model = ScriptedModel(responder=held)
    runner, recorder = make_runner(model, tmp_path, workspace, CONFIG)

    async def scenario() -> None:
        session = runner.open()
        await turns_until_work(session, recorder)
        await asyncio.wait_for(held.flush_started.wait(), 5)
        calls = len(model.calls)
        status = asyncio.create_task(session.run_turn("/status"))
        await asyncio.sleep(0.05)
        assert len(model.calls) == calls  # no early call for a command
        held.release()
        result = await asyncio.wait_for(status, 5)
        assert result.command == "status"
        await runner.aclose()

    asyncio.run(scenario())


def test_a_blocking_caller_never_overlaps(tmp_path: Path, workspace: Path) -> None:
    inner = flush_aware(lambda r: "noted " + " ".join(f"r{i}" for i in range(30)), flush=flush_write("- x\n"))
    order: list[str] = []

    def respond(request: ModelRequest) -> Any:
        order.append(request.purpose)
        return inner(request)

    runner = SessionRunner(
        ScriptedModel(responder=respond), config=CONFIG, workspace=workspace, state_dir=tmp_path / "state"
    )
    session = runner.open()
    for n in range(25):
        session.run_turn_sync(chat_line(n))
    runner.close()
    # Each blocking call returned after its work: the flush's two calls are never split by a turn's call.
    flushes = [i for i, purpose in enumerate(order) if purpose == "flush"]
    assert flushes
    for i in flushes[::2]:
        assert order[i + 1] == "flush"
