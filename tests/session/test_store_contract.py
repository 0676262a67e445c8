"""What every session store backend promises (the store seam), one suite run against each backend of
``tests.support.stores.BACKENDS``: entries created, read, listed, patched and deleted; ``update`` atomic
across real processes; the flush claimed once per cycle by two runner processes; the compaction count kept
across a reopen; a damaged store rebuilt from the transcripts, its damaged copy kept; every field of an
entry round-tripped; a whole conversation with flushes and compactions run on it. Two promises are
about transcript files and run on the file backends only (``file_store_spec``): a damaged store is
rebuilt from them, and a stored ``sessionFile`` is confined to the sessions folder; PostgreSQL keeps its
transcripts as rows (its own damaged-row test is in ``test_store_postgres.py``)."""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

import pytest

from sessionmem.config import Config
from sessionmem.errors import TranscriptError, UsageError
from sessionmem.model.scripted import ScriptedModel, flush_aware
from sessionmem.session.runner import SessionRunner
from sessionmem.session.stores.entry import SessionEntry
from sessionmem.session.stores.transcript_folder import read_entries
from sessionmem.session.turn.events import FlushEvent
from tests.scenarios.harness import flush_prompt_requests, make_runner, small_config
from tests.support.stores import corrupt, open_store, with_store

KEY = "agent:main:main"
BIG = "start" + " word" * 4800  # past the flush threshold of config(), below compaction (see below)


def config(spec: str) -> Config:
    """Window 8000, reserve 1000: compaction at 7000 tokens, the flush at 5000 (soft 2000)."""
    return with_store(small_config(soft=2000), spec)


def model() -> ScriptedModel:
    return ScriptedModel(responder=flush_aware(lambda request: "ok"))


def turn_text(name: str) -> str:
    return f"{name}:" + " word" * 1200  # four of these (and their replies) reach the flush threshold


def state_dir(tmp_path: Path) -> Path:
    return tmp_path / "state"


def compactions_in(path: Path) -> int:
    return sum(1 for _, obj in read_entries(path) if obj.get("type") == "compaction")


# --- entries ---------------------------------------------------------------------------------------


def test_entries_are_created_read_listed_patched_and_deleted(store_spec: str, tmp_path: Path) -> None:
    store = open_store(store_spec, state_dir(tmp_path))
    assert store.get(KEY) is None and store.all() == {}

    created = store.patch("Agent:Main:MAIN ", session_id="s1", total_tokens=10)  # keys are normalised
    assert created.session_id == "s1" and created.total_tokens == 10
    store.patch("agent:main:discord:group:7", session_id="s2")
    patched = store.patch(KEY, compaction_count=3)
    assert patched.session_id == "s1" and patched.total_tokens == 10 and patched.compaction_count == 3

    again = open_store(store_spec, state_dir(tmp_path))  # another object: what another process reads
    assert again.get(KEY) == patched
    assert set(again.all()) == {KEY, "agent:main:discord:group:7"}
    assert KEY in again and "agent:main:nobody" not in again

    assert again.delete("agent:main:discord:group:7") is not None
    assert again.delete("agent:main:discord:group:7") is None
    assert set(store.all()) == {KEY}


def test_update_sees_the_stored_entry_none_changes_nothing_and_a_failure_writes_nothing(
    store_spec: str, tmp_path: Path
) -> None:
    store = open_store(store_spec, state_dir(tmp_path))
    store.patch(KEY, session_id="s1", compaction_count=1)
    other = open_store(store_spec, state_dir(tmp_path))
    other.patch(KEY, compaction_count=2)  # written through another object

    seen: list[int] = []
    result = store.update(KEY, lambda current: seen.append(current.compaction_count) or None)  # type: ignore[union-attr,func-returns-value]
    assert seen == [2] and result is not None and result.compaction_count == 2

    def fail(current: SessionEntry | None) -> SessionEntry:
        raise RuntimeError("the caller's bug")

    with pytest.raises(RuntimeError):
        store.update(KEY, fail)
    with pytest.raises(UsageError, match="must return a SessionEntry or None, not dict"):
        store.update(KEY, lambda current: {"sessionId": "x"})  # type: ignore[arg-type,return-value]
    with pytest.raises(UsageError, match="without session_id"):
        store.patch("agent:main:new", total_tokens=1)
    assert open_store(store_spec, state_dir(tmp_path)).all() == {KEY: other.get(KEY)}


def test_every_field_of_an_entry_round_trips(store_spec: str, tmp_path: Path) -> None:
    values: dict[str, Any] = {
        "sessionId": "s1",
        "updatedAt": 1_790_000_000_123,
        "sessionFile": "s1.jsonl",
        "sessionKey": KEY,
        "chatType": "direct",
        "model": "gpt-x",
        "modelProvider": "openai",
        "contextTokens": 128000,
        "learnedContextTokens": {"gpt-x": 120000, "other": 8000},
        "inputTokens": 1,
        "outputTokens": 2,
        "cacheRead": 3,
        "cacheWrite": 4,
        "totalTokens": 5,
        "totalTokensFresh": False,
        "compactionCount": 6,
        "memoryFlushAt": 1_790_000_000_000,
        "memoryFlushCompactionCount": 5,
        "someGatewayField": {"nested": ["kept", 1, None, "中文"]},  # a field this class does not know
    }
    aliases = {field.alias or name for name, field in SessionEntry.model_fields.items()}
    assert aliases <= set(values), f"fields the test does not set: {aliases - set(values)}"
    entry = SessionEntry.model_validate(values)
    store = open_store(store_spec, state_dir(tmp_path))
    store.update(KEY, lambda current: entry)

    back = open_store(store_spec, state_dir(tmp_path)).get(KEY)
    assert back is not None and back.to_json_dict() == values


# --- across processes ------------------------------------------------------------------------------


def _increment(spec: str, state: str, n: int) -> None:
    store = open_store(spec, Path(state))

    def inc(entry: SessionEntry | None) -> SessionEntry:
        assert entry is not None
        return entry.with_updates(compaction_count=entry.compaction_count + 1)

    for _ in range(n):
        store.update(KEY, inc)


@pytest.mark.timeout(120)
def test_update_is_atomic_across_processes(store_spec: str, tmp_path: Path) -> None:
    store = open_store(store_spec, state_dir(tmp_path))
    store.patch(KEY, session_id="s1", compaction_count=0)
    ctx = multiprocessing.get_context("fork")
    procs = [
        ctx.Process(target=_increment, args=(store_spec, str(state_dir(tmp_path)), 150)) for _ in range(2)
    ]
    for p in procs:
        p.start()
    _increment(store_spec, state_dir(tmp_path), 150)  # and this process at the same time
    for p in procs:
        p.join(100)
        assert p.exitcode == 0
    assert open_store(store_spec, state_dir(tmp_path)).get(KEY).compaction_count == 450  # type: ignore[union-attr]


def _run_one_runner(spec: str, state: str, workspace: str, barrier: Any, out: Any) -> None:
    """A child process: open the shared key, wait for the other process, run one big turn."""
    scripted = model()
    flushes: list[int] = []
    runner = SessionRunner(
        scripted,
        config=config(spec),
        workspace=Path(workspace),
        state_dir=Path(state),
        on_event=lambda e: flushes.append(e.compaction_count) if isinstance(e, FlushEvent) else None,
    )
    session = runner.open(KEY)
    barrier.wait(30)  # both processes hold an entry that says "cycle 0, unflushed"
    session.run_turn_sync(BIG)
    out.put((len(flush_prompt_requests(scripted.calls)), flushes, session.entry.session_id))


@pytest.mark.timeout(120)
def test_two_runner_processes_flush_each_cycle_once(store_spec: str, tmp_path: Path, workspace: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    barrier, out = ctx.Barrier(2), ctx.Queue()
    args = (store_spec, str(state_dir(tmp_path)), str(workspace), barrier, out)
    procs = [ctx.Process(target=_run_one_runner, args=args) for _ in range(2)]
    for p in procs:
        p.start()
    results = [out.get(timeout=100) for _ in procs]
    for p in procs:
        p.join(100)
        assert p.exitcode == 0

    # One after the other: the first flushed cycle 0; the second saw that flush, compacted without
    # flushing cycle 0 again, and flushed cycle 1 before its own compaction. One flush per cycle.
    assert sum(prompts for prompts, _, _ in results) == 2
    assert sorted(cycle for _, flushes, _ in results for cycle in flushes) == [0, 1]
    assert len({session_id for _, _, session_id in results}) == 1
    entry = open_store(store_spec, state_dir(tmp_path)).get(KEY)
    assert entry is not None
    assert (entry.compaction_count, entry.memory_flush_compaction_count) == (2, 1)


# --- a conversation on the backend -----------------------------------------------------------------


def _converse(store_spec: str, tmp_path: Path, workspace: Path, turns: int) -> SessionRunner:
    runner, events = make_runner(model(), tmp_path, workspace, config(store_spec))
    session = runner.open(KEY)
    for i in range(turns):
        session.run_turn_sync(turn_text(f"t{i}"))
    # One compaction, its cycle flushed first (the next cycle's flush may follow the last reply, as the
    # next message would make it due).
    assert events.kinds("flush", "compaction")[:2] == ["flush", "compaction"]
    assert events.kinds("compaction") == ["compaction"]
    return runner


def test_a_conversation_flushes_and_compacts_and_its_counts_survive_a_reopen(
    store_spec: str, tmp_path: Path, workspace: Path
) -> None:
    runner = _converse(store_spec, tmp_path, workspace, turns=6)
    assert type(runner.store) is type(open_store(store_spec, state_dir(tmp_path)))
    entry = runner.store.get(KEY)
    assert entry is not None
    transcript = runner.store.open_transcript(KEY, entry, cwd=workspace)
    assert [e.type for e in transcript.entries()].count("compaction") == 1
    if runner.store.sessions_dir is not None:  # a file backend: the transcripts live beside the store
        assert entry.session_file is not None and Path(entry.session_file).parent == Path(store_spec).parent
        assert compactions_in(Path(entry.session_file)) == 1

    reopened = SessionRunner(
        model(), config=config(store_spec), workspace=workspace, state_dir=state_dir(tmp_path)
    ).open(KEY)
    assert reopened.entry.session_id == entry.session_id
    counts = (entry.compaction_count, entry.memory_flush_compaction_count)
    assert counts[0] == 1 and counts[1] in (0, 1)
    assert (reopened.entry.compaction_count, reopened.entry.memory_flush_compaction_count) == counts
    assert "t5:" in "\n".join(m.content for _, m in reopened.context)  # the context came back too


def test_a_damaged_store_is_kept_aside_and_rebuilt_from_the_transcripts(
    file_store_spec: str, tmp_path: Path, workspace: Path
) -> None:
    runner = _converse(file_store_spec, tmp_path, workspace, turns=6)
    before = runner.store.get(KEY)
    assert before is not None
    damaged = corrupt(runner.store)
    damaged_bytes = damaged.read_bytes()

    store: Any = open_store(file_store_spec, state_dir(tmp_path))
    rebuilt = store.all()
    assert set(rebuilt) == {KEY}
    entry = rebuilt[KEY]
    assert entry.session_id == before.session_id and entry.session_file == before.session_file
    counts = (before.compaction_count, before.memory_flush_compaction_count)
    assert (entry.compaction_count, entry.memory_flush_compaction_count) == counts  # flushes kept
    assert store.recovered and "corrupt" in store.issues[0] and damaged.name in store.issues[0]
    aside = list(damaged.parent.glob(f"{damaged.name}.corrupt-*"))
    assert [p.read_bytes() for p in aside if not p.name.endswith(("-wal", "-shm"))] == [damaged_bytes]
    assert open_store(file_store_spec, state_dir(tmp_path)).get(KEY) == entry  # the rebuilt store was saved


def test_an_entry_naming_a_transcript_outside_the_folder_is_refused_by_name(
    file_store_spec: str, tmp_path: Path
) -> None:
    store = open_store(file_store_spec, state_dir(tmp_path))
    entry = store.patch(KEY, session_id="s1", session_file="../elsewhere/s1.jsonl")
    with pytest.raises(TranscriptError, match=r"session agent:main:main: its sessionFile '\.\./elsewhere"):
        store.open_transcript(KEY, entry, cwd=tmp_path)
    assert not (tmp_path / "state" / "agents" / "main" / "elsewhere").exists()
