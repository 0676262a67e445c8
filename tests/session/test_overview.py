"""The operator's view of sessions (sessionmem.session.overview, .timeline): the list newest first and
filtered, one session with its store fields, thresholds, a timeline read from the transcript (a point
per turn, a marker per flush, compaction, /new and overflow, each with what it kept) and a transcript
page; hostile keys and page sizes refused with a reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from sessionmem.errors import SessionNotFound, UsageError
from sessionmem.model.scripted import ScriptedModel, flush_aware, flush_write, overflow_on_turn
from sessionmem.session.overview import deletable_key, list_sessions, page_of, show_session
from sessionmem.session.runner import SessionRunner
from tests.scenarios.harness import small_config, transcript_lines

KEY = "agent:main:telegram:direct:42"
FACT = "- The user's cat is called Mochi."


def long_turn(i: int) -> str:
    return f"turn {i}: " + " ".join(f"word{i}x{j}" for j in range(500))


@pytest.fixture
def runner(tmp_path: Path, workspace: Path) -> SessionRunner:
    return SessionRunner(
        ScriptedModel(responder=flush_aware(lambda request: "noted", flush=flush_write(FACT))),
        config=small_config(soft=2000),
        workspace=workspace,
        state_dir=tmp_path / "state",
    )


def show(runner: SessionRunner, key: str = KEY, **options: object) -> dict:
    return show_session(runner.store, runner.agent, "main", key, model=runner.model, **options)


def test_timeline_has_a_point_per_turn_and_a_marker_per_flush_and_compaction(runner: SessionRunner) -> None:
    session = runner.open(KEY)
    for i in range(12):
        session.run_turn_sync(long_turn(i))
    shown = show(runner)
    entry = runner.store.get(KEY)
    assert entry is not None and entry.compaction_count >= 2

    assert shown["entry"]["sessionKey"] == KEY
    assert shown["entry"]["compactionCount"] == entry.compaction_count
    assert shown["entry"]["memoryFlushCompactionCount"] == entry.memory_flush_compaction_count
    limits = shown["thresholds"]
    assert (limits["contextWindow"], limits["compactionThreshold"], limits["flushThreshold"]) == (
        8000,
        7000,
        5000,
    )

    timeline = shown["timeline"]
    assert timeline["turns"] == 12 and [p["turn"] for p in timeline["points"]] == list(range(1, 13))
    assert all(isinstance(p["tokens"], int) and p["tokens"] > 0 for p in timeline["points"])
    lines = transcript_lines(Path(entry.session_file or ""))
    compactions = [line for line in lines if line.get("type") == "compaction"]
    flush_cycles = {
        line["message"]["provenance"]["cycle"]
        for line in lines
        if line.get("type") == "message" and "provenance" in line["message"]
    }
    flushes = [m for m in timeline["markers"] if m["kind"] == "flush"]
    compacted = [m for m in timeline["markers"] if m["kind"] == "compaction"]
    assert len(compacted) == len(compactions) == entry.compaction_count
    # every cycle flushed once: each compacted one, and the current one when its flush came after the last
    # reply (replies first)
    assert [m["cycle"] for m in flushes] == sorted(flush_cycles) == list(range(len(flushes)))
    assert len(flushes) == entry.memory_flush_compaction_count + 1 in (len(compactions), len(compactions) + 1)
    for flush in flushes:  # what each flush wrote, and that it was saved
        assert flush["ended"] and [w["text"] for w in flush["writes"]] == [FACT]
        assert flush["writes"][0]["ok"] is True and flush["writes"][0]["path"].startswith("memory/")
    for marker, line in zip(compacted, compactions, strict=True):  # what each summary kept
        assert marker["summary"] == line["summary"] and marker["reason"] == "threshold"
        assert marker["tokensBefore"] > limits["flushThreshold"] > marker["tokensAfter"]
    # each compaction came after its cycle's flush, on the turn axis and in order
    order = [m["kind"] for m in timeline["markers"]]
    assert order[:4] == ["flush", "compaction", "flush", "compaction"]
    # the flush ran once the context neared the flush threshold, the compaction a turn or more later
    first = flushes[0]
    assert (
        first["tokens"] > limits["flushThreshold"] - 1000 and first["afterTurn"] <= compacted[0]["afterTurn"]
    )


def test_transcript_page_sets_flush_turns_and_summaries_apart(runner: SessionRunner) -> None:
    session = runner.open(KEY)
    for i in range(8):
        session.run_turn_sync(long_turn(i))
    last = show(runner, transcript_limit=5)
    page = last["transcript"]
    assert page["page"] == page["pages"] and len(page["items"]) <= 5  # the newest page by default
    assert page["items"][-1]["n"] == page["total"]
    whole = show(runner, transcript_page=1, transcript_limit=200)["transcript"]["items"]
    assert [item["n"] for item in whole] == list(range(1, len(whole) + 1))
    kinds = {item["kind"] for item in whole}
    assert {"message", "flush", "compaction"} <= kinds
    flush_calls = [c for item in whole if item["kind"] == "flush" for c in item.get("toolCalls", ())]
    assert flush_calls and flush_calls[0]["arguments"]["content"] == FACT
    summary = next(item for item in whole if item["kind"] == "compaction")
    assert summary["summary"] and summary["tokensBefore"] > summary["tokensAfter"]


def test_new_and_overflow_markers(tmp_path: Path, workspace: Path) -> None:
    model = ScriptedModel(
        responder=flush_aware(overflow_on_turn(3, lambda request: "ok"), flush=flush_write(FACT))
    )
    runner = SessionRunner(
        model, config=small_config(soft=2000), workspace=workspace, state_dir=tmp_path / "s"
    )
    session = runner.open(KEY)
    for i in range(3):
        session.run_turn_sync(f"short turn {i}")
    session.run_turn_sync("/new")
    runner.open(KEY).run_turn_sync("after the reset")
    shown = show(runner)
    kinds = [m["kind"] for m in shown["timeline"]["markers"]]
    assert "overflow" in kinds and "new" in kinds
    new = next(m for m in shown["timeline"]["markers"] if m["kind"] == "new")
    assert new["afterTurn"] == 3 and new["sessionId"] == runner.store.get(KEY).session_id
    assert shown["timeline"]["turns"] == 4  # the turns of the archived transcript count too
    assert len(shown["transcripts"]) == 2 and ".reset." in shown["transcripts"][0]


def test_list_is_newest_first_paged_and_filtered(runner: SessionRunner) -> None:
    keys = [f"agent:main:telegram:direct:{n}" for n in range(5)]
    for key in keys:
        runner.open(key).run_turn_sync("hello")
    listed = list_sessions(runner.store, page=page_of(1, 2))
    assert [s["sessionKey"] for s in listed["sessions"]] == keys[::-1][:2]
    assert (listed["total"], listed["pages"]) == (5, 3)
    assert all("compactionCount" in s and "memoryFlushCompactionCount" in s for s in listed["sessions"])
    third = list_sessions(runner.store, page=page_of("3", "2"))
    assert [s["sessionKey"] for s in third["sessions"]] == [keys[0]]
    only = list_sessions(runner.store, q="DIRECT:3")
    assert [s["sessionKey"] for s in only["sessions"]] == [keys[3]]


@pytest.mark.parametrize(
    ("page", "limit", "named"),
    [
        ("0", None, "page"),
        (None, "1000", "limit"),
        ("x", None, "page"),
        ("-1", None, "page"),
        (None, "9" * 40, "limit"),
    ],
)
def test_bad_page_values_are_named(page: object, limit: object, named: str) -> None:
    with pytest.raises(UsageError, match=named):
        page_of(page, limit)


def test_hostile_keys_are_refused(runner: SessionRunner) -> None:
    runner.open(KEY).run_turn_sync("hello")
    with pytest.raises(UsageError, match="belongs to agent 'other'"):
        show(runner, "agent:other:main")
    with pytest.raises(UsageError, match="too long"):
        show(runner, "agent:main:" + "x" * 100_000)
    with pytest.raises(UsageError, match="malformed"):
        show(runner, "agent::x")
    with pytest.raises(SessionNotFound, match="no session"):
        show(runner, "telegram:direct:404")
    with pytest.raises(UsageError, match="too long"):
        list_sessions(runner.store, q="x" * 1000)
    assert show(runner, "telegram:direct:42")["entry"]["sessionKey"] == KEY  # the agent's own, short
    assert deletable_key(runner.store, "main", "telegram:direct:42") == KEY
    with pytest.raises(SessionNotFound):
        deletable_key(runner.store, "main", "telegram:direct:43")
