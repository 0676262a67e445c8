"""The store seam (sessionmem.session.stores.backend): the runner, the gate, rotation and the commands talk to
the store only through it, so another backend drives a whole conversation; sessions.json + JSONL keeps
its behaviour behind it; the per-key turn lock excludes other processes and other runners."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest

from sessionmem.errors import TurnLockTimeout
from sessionmem.hooks import HookRegistry
from sessionmem.messages import Message
from sessionmem.model.scripted import ScriptedModel, flush_aware
from sessionmem.session.stores import keys
from sessionmem.session.stores.backend import SessionBackend, TranscriptLog
from sessionmem.session.stores.entry import SessionEntry
from sessionmem.session.stores.sessions_json import SessionStore
from sessionmem.session.stores.transcript import Entry, context_from_entries, entry_from_dict, message_to_dict
from sessionmem.session.stores.transcript_folder import read_entries
from tests.scenarios.harness import make_runner, small_config

KEY = "agent:main:main"


# --- a backend written against the protocol only (no sessionmem base class) ----------------------


class ListTranscript:
    """A transcript kept in a list of entry dicts (as a database backend would keep rows)."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.path: Path | None = None
        self.rows: list[dict[str, Any]] = []

    def _append(self, kind: str, fields: dict[str, Any]) -> str:
        entry_id = f"{len(self.rows):08x}"
        parent = self.rows[-1]["id"] if self.rows else None
        self.rows.append({"type": kind, "id": entry_id, "parentId": parent, "timestamp": "", **fields})
        return entry_id

    def append_message(
        self,
        msg: Message,
        *,
        provider: str | None = None,
        model: str | None = None,
        stop_reason: str | None = None,
        provenance: dict[str, Any] | None = None,
    ) -> str:
        data = message_to_dict(msg, provider=provider, model=model, stop_reason=stop_reason)
        if provenance:
            data["provenance"] = provenance
        return self._append("message", {"message": data})

    def append_compaction(
        self,
        summary: str,
        first_kept_entry_id: str | None,
        tokens_before: int,
        tokens_after: int | None = None,
        *,
        details: dict[str, Any] | None = None,
    ) -> str:
        fields = {"summary": summary, "firstKeptEntryId": first_kept_entry_id, "tokensBefore": tokens_before}
        return self._append("compaction", {**fields, "tokensAfter": tokens_after})

    def entries(self) -> list[Entry]:
        return [e for no, row in enumerate(self.rows, 1) if (e := entry_from_dict(no, row)) is not None]

    def context_messages(self) -> list[tuple[str, Message]]:
        return context_from_entries(self.entries())

    def bytes_since_compaction(self) -> int:
        last = max((i for i, row in enumerate(self.rows) if row["type"] == "compaction"), default=-1)
        return sum(len(orjson.dumps(row)) + 1 for row in self.rows[last + 1 :])


class DictBackend:
    """Entries and transcripts in dicts; records what the runner asked of it."""

    def __init__(self) -> None:
        self.entries: dict[str, SessionEntry] = {}
        self.transcripts: dict[str, ListTranscript] = {}
        self.archived: list[str] = []
        self.sessions_dir: Path | None = None

    def get(self, key: str) -> SessionEntry | None:
        return self.entries.get(keys.normalize_key(key))

    def all(self) -> dict[str, SessionEntry]:
        return dict(self.entries)

    def update(self, key: str, fn: Any) -> SessionEntry | None:
        norm = keys.normalize_key(key)
        current = self.entries.get(norm)
        new = fn(current.model_copy(deep=True) if current is not None else None)
        if new is None:
            return current
        self.entries[norm] = new
        return new

    def delete(self, key: str) -> SessionEntry | None:
        return self.entries.pop(keys.normalize_key(key), None)

    def new_session_file(self, session_id: str) -> str | None:
        return None

    def open_transcript(self, key: str, entry: SessionEntry, *, cwd: Path) -> ListTranscript:
        return self.transcripts.setdefault(entry.session_id, ListTranscript(entry.session_id))

    def archive_transcript(self, transcript: TranscriptLog, when: datetime) -> Path | None:
        self.archived.append(transcript.session_id)
        return None

    def turn_lock(self, key: str, *, timeout_s: float = 1.0) -> Any:
        return asyncio.Lock()


def test_sessionmem_backends_and_a_plain_class_satisfy_the_protocol(isolated_env: Path) -> None:
    assert isinstance(SessionStore.for_agent(isolated_env, "main"), SessionBackend)
    assert isinstance(DictBackend(), SessionBackend)
    assert isinstance(ListTranscript("s"), TranscriptLog)


def test_a_whole_conversation_runs_on_another_backend(tmp_path: Path, workspace: Path) -> None:
    store = DictBackend()
    model = ScriptedModel(responder=flush_aware(lambda r: "ok " + " ".join(f"w{i}" for i in range(40))))
    config = small_config(window=3000, reserve=500, floor=500, soft=800, keep=400)
    runner, recorder = make_runner(model, tmp_path, workspace, config, store=store, hooks=HookRegistry())
    session = runner.open(KEY)
    first_id = session.entry.session_id
    for i in range(20):
        session.run_turn_sync(f"turn {i}: " + " ".join(f"w{j}" for j in range(60)))

    kinds = recorder.kinds("flush", "compaction")
    assert kinds.count("compaction") >= 2
    flush_cycles = recorder.flush_cycles()  # once per cycle, each compaction after its cycle's flush
    entry = store.entries[KEY]
    assert entry.compaction_count == kinds.count("compaction")
    assert entry.memory_flush_compaction_count == max(flush_cycles)
    rows = store.transcripts[first_id].rows
    assert sum(row["type"] == "compaction" for row in rows) == entry.compaction_count

    status = session.run_turn_sync("/status").reply or ""
    assert f"Compactions: {entry.compaction_count}" in status
    assert session.run_turn_sync("/new").command == "new"
    assert store.archived == [first_id]
    assert session.entry.session_id != first_id and session.entry.compaction_count == 0
    assert store.entries[KEY].session_id == session.entry.session_id
    assert not (tmp_path / "state" / "agents").exists()  # nothing went to a sessions folder


# --- sessions.json + JSONL behind the seam ---------------------------------------------------------


def test_the_file_backend_opens_and_archives_transcripts_in_its_folder(isolated_env: Path) -> None:
    store = SessionStore.for_agent(isolated_env, "main")
    entry = store.update(
        KEY, lambda _: SessionEntry(session_id="s1", session_file=store.new_session_file("s1"))
    )
    assert entry is not None and entry.session_file == str(store.sessions_dir / "s1.jsonl")
    transcript = store.open_transcript(KEY, entry, cwd=isolated_env)
    transcript.append_message(Message.user("hello"))
    assert transcript.path == store.sessions_dir / "s1.jsonl"
    assert [obj["type"] for _, obj in read_entries(transcript.path)] == ["session", "message"]

    when = datetime(2026, 3, 1, 10, 0, 5, 123000, tzinfo=UTC)
    archived = store.archive_transcript(transcript, when)
    assert archived == store.sessions_dir / "s1.jsonl.reset.2026-03-01T10-00-05.123Z"
    assert not (store.sessions_dir / "s1.jsonl").exists()
    again = store.open_transcript(KEY, entry, cwd=isolated_env)  # a new file, the archive untouched
    again.append_message(Message.user("second"))
    assert store.archive_transcript(again, when) == archived.with_name(archived.name + "-1")
    assert len(list(read_entries(archived))) == 2


# --- the turn lock -----------------------------------------------------------------------------------


def _hold_turn_lock(sessions_json: str, key: str, ready: Any, release: Any) -> None:
    store = SessionStore(sessions_json)
    with store.turn_lock(key, timeout_s=5):
        ready.set()
        release.wait(30)


def start_holder(store: SessionStore) -> tuple[Any, Any]:
    """A child process holding the turn lock of KEY until ``release`` is set; returns (process, release)."""
    ctx = multiprocessing.get_context("fork")
    ready, release = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold_turn_lock, args=(str(store.path), KEY, ready, release))
    holder.start()
    assert ready.wait(10)
    return holder, release


def waits_then_gets_it(take: Callable[[], Coroutine[Any, Any, None]], release: Any) -> None:
    """``take()`` (a turn lock held by another process) waits, and gets the lock once ``release``
    lets the holder go: it has not given up when the holder lets go a moment later."""
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(asyncio.run, take())
        time.sleep(0.3)  # a pause, not a measure: the waiter is in its wait
        assert not waiting.done(), waiting.exception()
        release.set()
        waiting.result(timeout=30)


def test_turn_lock_waits_for_another_process_then_says_which_session_is_busy(isolated_env: Path) -> None:
    store = SessionStore.for_agent(isolated_env, "main")
    holder, release = start_holder(store)
    try:

        async def take(key: str, timeout_s: float) -> None:
            async with store.turn_lock(key, timeout_s=timeout_s):
                pass

        with pytest.raises(TurnLockTimeout) as caught:
            asyncio.run(take(KEY, 0.4))
        assert KEY in str(caught.value) and "busy" in str(caught.value)
        assert caught.value.session_key == KEY
        asyncio.run(take("agent:main:other", 0.4))  # another key is not held up
        waits_then_gets_it(lambda: take(KEY, 30), release)
    finally:
        release.set()
        holder.join(10)
    asyncio.run(take(KEY, 0.4))  # free once the holder let go


def test_a_killed_holder_frees_the_turn_lock_at_once(isolated_env: Path) -> None:
    store = SessionStore.for_agent(isolated_env, "main")
    holder, _ = start_holder(store)
    with pytest.raises(TurnLockTimeout), store.turn_lock(KEY, timeout_s=0.1):
        pass
    assert holder.pid is not None
    os.kill(holder.pid, signal.SIGKILL)
    holder.join(10)
    with store.turn_lock(KEY, timeout_s=0.2):  # no stale lock to age out
        pass
    lock_files = sorted(path.name for path in (store.sessions_dir / "locks").iterdir())
    assert len(lock_files) == 2 and lock_files[1] == lock_files[0] + ".door"  # the lock and its door
    assert {oct(path.stat().st_mode & 0o777) for path in (store.sessions_dir / "locks").iterdir()} == {
        "0o600"
    }


def test_turns_of_one_key_in_one_process_take_the_lock_one_after_the_other(isolated_env: Path) -> None:
    store = SessionStore.for_agent(isolated_env, "main")
    other_runner_store = SessionStore(store.path)  # a second runner in the same process
    order: list[str] = []

    async def turn(backend: SessionStore, name: str) -> None:
        async with backend.turn_lock(KEY, timeout_s=5):
            order.append(f"{name} in")
            await asyncio.sleep(0.1)
            order.append(f"{name} out")

    async def both() -> None:
        await asyncio.gather(turn(store, "a"), turn(other_runner_store, "b"))

    asyncio.run(both())
    assert order in (["a in", "a out", "b in", "b out"], ["b in", "b out", "a in", "a out"])
