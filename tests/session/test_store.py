"""sessions.json: locked read-modify-write across processes, stale locks, corruption recovery."""

from __future__ import annotations

import fcntl
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from sessionmem.errors import ContextWindowExceeded, StoreLockTimeout, UsageError
from sessionmem.messages import Message, ToolCall, Usage, now_ms
from sessionmem.model.scripted import count_request_tokens
from sessionmem.session.stores import filelock as filelock_module
from sessionmem.session.stores import keys
from sessionmem.session.stores import sessions_json as store_module
from sessionmem.session.stores.recovery import replay_transcript
from sessionmem.session.stores.sessions_json import SessionEntry, SessionStore, atomic_write_bytes
from sessionmem.session.stores.transcript_folder import Transcript
from sessionmem.testing import ScriptedModel, flush_aware
from tests.scenarios.harness import make_runner, small_config, store_entry, transcript_lines


@pytest.fixture
def store(isolated_env: Path) -> SessionStore:
    return SessionStore.for_agent(isolated_env, "main")


def test_patch_creates_and_get_reads_with_camel_case_on_disk(store: SessionStore) -> None:
    entry = store.patch(
        "agent:main:main",
        session_id="abc",
        total_tokens=1234,
        memory_flush_compaction_count=2,
        sessionFile="f",
    )
    assert entry.session_id == "abc" and entry.total_tokens == 1234
    on_disk = orjson.loads(store.path.read_bytes())
    assert on_disk["agent:main:main"]["sessionId"] == "abc"
    assert on_disk["agent:main:main"]["totalTokens"] == 1234
    assert on_disk["agent:main:main"]["memoryFlushCompactionCount"] == 2
    assert on_disk["agent:main:main"]["sessionFile"] == "f"  # camelCase names are accepted too
    assert "inputTokens" not in on_disk["agent:main:main"]  # unset fields are not written as null
    cleared = store.patch("agent:main:main", total_tokens=None)
    assert cleared.total_tokens is None
    assert "totalTokens" not in orjson.loads(store.path.read_bytes())["agent:main:main"]
    assert store.get("agent:main:main") == cleared
    assert store.path == keys.store_path(store.path.parents[3], "main")


def test_keys_are_normalised(store: SessionStore) -> None:
    store.patch("  Agent:Main:MAIN ", session_id="abc")
    assert list(store.all()) == ["agent:main:main"]
    assert store.get("AGENT:main:main") is not None


def test_unknown_fields_round_trip(store: SessionStore) -> None:
    store.path.parent.mkdir(parents=True)
    store.path.write_bytes(
        orjson.dumps(
            {
                "agent:main:main": {
                    "sessionId": "x",
                    "updatedAt": 1,
                    "thinkingLevel": "high",
                    "origin": {"a": 1},
                }
            }
        )
    )
    store.patch("agent:main:main", compaction_count=3)
    data = orjson.loads(store.path.read_bytes())["agent:main:main"]
    assert data["thinkingLevel"] == "high" and data["origin"] == {"a": 1} and data["compactionCount"] == 3


def test_mixed_case_legacy_duplicates_merge_newest_wins(store: SessionStore) -> None:
    store.path.parent.mkdir(parents=True)
    store.path.write_bytes(
        orjson.dumps(
            {
                "Agent:Main:Main": {"sessionId": "new", "updatedAt": 200},
                "agent:main:main": {"sessionId": "old", "updatedAt": 100},
            }
        )
    )
    assert store.get("agent:main:main").session_id == "new"  # type: ignore[union-attr]
    store.patch("agent:main:main", model="m")
    assert list(orjson.loads(store.path.read_bytes())) == ["agent:main:main"]


def test_update_sees_current_entry_and_none_means_no_change(store: SessionStore) -> None:
    assert store.update("agent:main:main", lambda e: None) is None
    assert not store.path.exists()
    store.patch("agent:main:main", session_id="s", compaction_count=1)

    def bump(e: SessionEntry | None) -> SessionEntry:
        assert e is not None
        e.compaction_count += 1
        return e

    assert store.update("agent:main:main", bump).compaction_count == 2  # type: ignore[union-attr]
    assert store.update("agent:main:main", lambda e: None).compaction_count == 2  # type: ignore[union-attr]
    assert store.delete("agent:main:main") is not None
    assert store.get("agent:main:main") is None


def test_patch_without_session_id_on_a_new_key_is_a_usage_error(store: SessionStore) -> None:
    with pytest.raises(UsageError, match="session_id"):
        store.patch("agent:main:other", total_tokens=3)


def test_failed_update_writes_nothing(store: SessionStore) -> None:
    store.patch("agent:main:main", session_id="s", total_tokens=1)
    before = store.path.read_bytes()

    def boom(e: SessionEntry | None) -> SessionEntry:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        store.update("agent:main:main", boom)
    assert store.path.read_bytes() == before
    assert _lock_is_free(store)  # the lock was released


def _lock_is_free(store: SessionStore) -> bool:
    """Whether another holder could take the store's lock now (a new descriptor conflicts with ours)."""
    fd = os.open(store._lock.path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


def _increment_many(path: str, n: int) -> None:
    s = SessionStore(path)

    def inc(e: SessionEntry | None) -> SessionEntry:
        assert e is not None
        e.compaction_count += 1
        return e

    for _ in range(n):
        s.update("agent:main:main", inc)


@pytest.mark.timeout(120)
def test_two_processes_lose_no_update(store: SessionStore) -> None:
    store.patch("agent:main:main", session_id="s", compaction_count=0)
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_increment_many, args=(str(store.path), 200)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(100)
        assert p.exitcode == 0
    assert store.get("agent:main:main").compaction_count == 400  # type: ignore[union-attr]
    assert _lock_is_free(store)
    assert not list(store.path.parent.glob("*.tmp"))


def test_threads_in_one_process_lose_no_update(store: SessionStore) -> None:
    store.patch("agent:main:main", session_id="s")

    def inc(e: SessionEntry | None) -> SessionEntry:
        assert e is not None
        e.compaction_count += 1
        return e

    def work() -> None:
        other = SessionStore(store.path)  # a second instance shares the in-process lock
        for _ in range(50):
            other.update("agent:main:main", inc)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store.get("agent:main:main").compaction_count == 150  # type: ignore[union-attr]


def test_lock_is_reentrant_within_a_thread(store: SessionStore) -> None:
    with store.transaction() as entries:
        entries["agent:main:a"] = SessionEntry.model_validate({"sessionId": "a"})
        store.patch("agent:main:b", session_id="b")  # nested: same thread, no deadlock
    assert set(store.all()) == {"agent:main:a", "agent:main:b"}  # the nested write was not lost


def test_two_store_objects_for_one_file_nest_without_stealing_the_lock(store: SessionStore) -> None:
    other = SessionStore(store.path)
    with store.transaction() as entries:
        entries["agent:main:a"] = SessionEntry.model_validate({"sessionId": "a"})
        other.patch("agent:main:b", session_id="b")
        assert not _lock_is_free(store)  # still held by the outer transaction
    assert _lock_is_free(store)
    assert set(other.all()) == {"agent:main:a", "agent:main:b"}


def _dead_pid() -> int:
    proc = multiprocessing.get_context("fork").Process(target=lambda: None)
    proc.start()
    proc.join()
    return proc.pid  # type: ignore[return-value]


@pytest.mark.parametrize(
    "left_behind",
    [
        pytest.param(lambda: {"pid": _dead_pid(), "createdAt": int(time.time() * 1000)}, id="dead-pid"),
        pytest.param(lambda: {"pid": os.getppid(), "createdAt": int(time.time() * 1000)}, id="live-pid"),
        pytest.param(lambda: {"pid": os.getppid(), "createdAt": int(time.time() * 1000) - 31_000}, id="old"),
        pytest.param(lambda: None, id="empty"),  # killed between creating the file and writing its body
    ],
)
def test_a_lock_file_nobody_holds_never_blocks_whatever_it_contains(
    isolated_env: Path, left_behind: Callable[[], dict[str, int] | None]
) -> None:
    # Lock files as the O_EXCL protocol (ours before, OpenClaw's) leaves them. Only a live flock blocks.
    store = SessionStore(keys.store_path(isolated_env, "main"), lock_timeout_s=1)
    store.path.parent.mkdir(parents=True)
    body = left_behind()
    store._lock.path.write_bytes(orjson.dumps(body) if body is not None else b"")
    store.patch("agent:main:main", session_id="s")  # a held lock would raise StoreLockTimeout after 1 s
    assert store.get("agent:main:main") is not None
    assert _lock_is_free(store)


def _hold_the_lock(path: str, holding: Any, release: Any) -> None:
    with SessionStore(path).transaction():
        holding.set()
        release.wait(30)


@pytest.mark.timeout(60)
def test_a_live_holder_makes_waiters_time_out_with_a_named_error(isolated_env: Path) -> None:
    store = SessionStore(keys.store_path(isolated_env, "main"), lock_timeout_s=0.3)
    ctx = multiprocessing.get_context("fork")
    holding, release = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold_the_lock, args=(str(store.path), holding, release))
    holder.start()
    try:
        assert holding.wait(10)
        with pytest.raises(StoreLockTimeout, match="timeout waiting for session store lock"):
            store.patch("agent:main:main", session_id="s")
    finally:
        release.set()
        holder.join(10)
    assert holder.exitcode == 0
    store.patch("agent:main:main", session_id="s")  # free once the holder let go


def test_without_fcntl_the_lock_falls_back_to_filelock(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(filelock_module, "fcntl", None)  # as on Windows
    with store.transaction() as entries:
        entries["agent:main:a"] = SessionEntry.model_validate({"sessionId": "a"})
        SessionStore(store.path).patch("agent:main:b", session_id="b")
        assert not _lock_is_free(store)  # filelock flocks the same file on POSIX
    assert set(store.all()) == {"agent:main:a", "agent:main:b"}
    assert _lock_is_free(store)


def test_corrupt_store_is_moved_aside_and_rebuilt_from_transcripts(store: SessionStore) -> None:
    sessions = store.sessions_dir
    t = Transcript.open(sessions / "s1.jsonl", "s1", session_key="agent:main:discord:group:42")
    t.append_message(Message.user("hi"))
    Transcript.open(sessions / "s2.jsonl", "s2").append_message(Message.user("yo"))
    Transcript.open(sessions / "s3.jsonl.reset.2026-11-01T10-00-00.000Z", "s3")  # archives are ignored
    (sessions / "old.jsonl.deleted.2026-11-01T10-00-00.000Z").write_text("")
    store.path.write_text('{"agent:main:main": {"sessionId": "s1", "updatedAt": ')  # torn by hand

    entries = store.all()
    assert set(entries) == {"agent:main:discord:group:42", "agent:main:recovered:s2"}
    assert entries["agent:main:discord:group:42"].session_id == "s1"
    assert entries["agent:main:discord:group:42"].chat_type == "group"
    assert entries["agent:main:recovered:s2"].session_file == str(sessions / "s2.jsonl")
    assert entries["agent:main:recovered:s2"].session_key == "agent:main:recovered:s2"
    assert store.recovered and "corrupt" in store.issues[0]
    aside = list(sessions.glob("sessions.json.corrupt-*"))
    assert len(aside) == 1 and aside[0].read_text().startswith('{"agent:main:main"')
    assert set(orjson.loads(store.path.read_bytes())) == set(entries)  # the rebuilt store is saved


def test_wrong_shape_counts_as_corrupt(store: SessionStore) -> None:
    store.path.parent.mkdir(parents=True)
    store.path.write_text('["not", "a", "map"]')
    assert store.all() == {}
    assert store.recovered
    assert list(store.sessions_dir.glob("sessions.json.corrupt-*"))


def test_atomic_write_leaves_old_or_new_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "sessions.json"
    target.write_bytes(b"old")

    class Boom(Exception):
        pass

    # A failure before the replace leaves the old file and no temp file behind.
    def failing_replace(src: object, dst: object) -> None:
        raise Boom

    with monkeypatch.context() as m:
        m.setattr(os, "replace", failing_replace)
        with pytest.raises(Boom):
            atomic_write_bytes(target, b"new")
    assert target.read_bytes() == b"old"
    assert list(tmp_path.iterdir()) == [target]

    atomic_write_bytes(target, b"new")
    assert target.read_bytes() == b"new"
    assert oct(target.stat().st_mode & 0o777) == oct(0o600)


def _write_forever(path: str) -> None:
    big = [{"sessionId": f"s{i}", "updatedAt": i, "label": "z" * 200} for i in range(200)]
    i = 0
    while True:
        i += 1
        payload = orjson.dumps({f"agent:main:k{j}": {**e, "n": i} for j, e in enumerate(big)})
        atomic_write_bytes(Path(path), payload)


@pytest.mark.timeout(60)
def test_readers_never_see_a_partial_file_while_a_writer_is_killed(tmp_path: Path) -> None:
    target = tmp_path / "sessions.json"
    atomic_write_bytes(target, b"{}")
    ctx = multiprocessing.get_context("fork")
    proc = ctx.Process(target=_write_forever, args=(str(target),))
    proc.start()
    try:
        deadline = time.monotonic() + 0.5
        reads = 0
        while time.monotonic() < deadline:
            data = orjson.loads(target.read_bytes())  # never raises: old or new, never half
            assert isinstance(data, dict)
            reads += 1
    finally:
        os.kill(proc.pid, 9)  # type: ignore[arg-type]
        proc.join(10)
    assert reads > 0
    assert isinstance(orjson.loads(target.read_bytes()), dict)


# --- an empty store is a corrupt store ------------------------------------------------------------


def test_an_empty_store_is_moved_aside_and_rebuilt_so_the_session_keeps_its_context(
    tmp_path: Path, workspace: Path
) -> None:
    config = small_config(window=100_000)
    model = ScriptedModel(["Noted: the cutover is on the 14th."])
    runner, _ = make_runner(model, tmp_path, workspace, config)
    session = runner.open()
    session.run_turn_sync("remember: the billing cutover is on the 14th")
    old_id = session.entry.session_id
    runner.store.path.write_bytes(b"")  # truncated to 0 bytes

    fresh = SessionStore(runner.store.path)
    entry = fresh.get("agent:main:main")
    assert entry is not None and entry.session_id == old_id
    assert fresh.recovered and "empty" in fresh.issues[0]
    aside = list(fresh.sessions_dir.glob("sessions.json.corrupt-*"))
    assert len(aside) == 1 and aside[0].read_bytes() == b""
    assert set(orjson.loads(fresh.path.read_bytes())) == {"agent:main:main"}  # the rebuilt store is saved

    # Whitespace only counts as empty too, and a new runner opens the old session with its context.
    runner.store.path.write_bytes(b"  \n")
    model = ScriptedModel(["The 14th."])
    again, _ = make_runner(model, tmp_path, workspace, config)
    reopened = again.open()
    assert reopened.entry.session_id == old_id
    assert reopened.transcript.path == session.transcript.path
    assert again.store.recovered
    reopened.run_turn_sync("when is the cutover?")
    sent = [m.content for m in model.calls[0].messages]
    assert "remember: the billing cutover is on the 14th" in sent
    assert "Noted: the cutover is on the 14th." in sent


def test_an_empty_store_without_transcripts_is_reported_and_rewritten(store: SessionStore) -> None:
    store.path.parent.mkdir(parents=True)
    store.path.write_bytes(b"")
    assert store.all() == {}
    assert store.recovered and "empty" in store.issues[0]
    assert orjson.loads(store.path.read_bytes()) == {}
    assert list(store.sessions_dir.glob("sessions.json.corrupt-*"))


# --- the lock: no stale-lock race, one lock per real file -------------------------------------------


def _inc_slowly(path: str, inside: Any = None, hold_s: float = 0.0) -> None:
    def inc(e: SessionEntry | None) -> SessionEntry:
        assert e is not None
        if inside is not None:
            inside.set()
        time.sleep(hold_s)
        e.compaction_count += 1
        return e

    SessionStore(path, lock_timeout_s=10).update("agent:main:main", inc)


def _late_stale_breaker(path: str, lock_path: str, judged: Any, rival_in: Any) -> None:
    # Widen the window between "judged the lock stale" and "removed it" until a rival is inside.
    real_unlink = os.unlink
    fired = False

    def unlink(p: Any, *args: Any, **kwargs: Any) -> None:
        nonlocal fired
        if not fired and os.fspath(p) == lock_path:
            fired = True
            judged.set()
            rival_in.wait(5)
        real_unlink(p, *args, **kwargs)

    os.unlink = unlink  # type: ignore[assignment]  # a forked child: the parent is untouched
    _inc_slowly(path)


@pytest.mark.timeout(60)
def test_two_waiters_breaking_one_stale_lock_never_both_hold_it(store: SessionStore) -> None:
    store.patch("agent:main:main", session_id="s", compaction_count=0)
    store._lock.path.write_bytes(orjson.dumps({"pid": _dead_pid(), "createdAt": int(time.time() * 1000)}))
    ctx = multiprocessing.get_context("fork")
    judged, rival_in = ctx.Event(), ctx.Event()
    late = ctx.Process(
        target=_late_stale_breaker, args=(str(store.path), str(store._lock.path), judged, rival_in)
    )
    late.start()
    judged.wait(1)  # the late breaker has judged the lock stale (or, with flock, nothing was stale)
    rival = ctx.Process(target=_inc_slowly, args=(str(store.path), rival_in, 1.0))
    rival.start()
    for p in (late, rival):
        p.join(30)
        assert p.exitcode == 0
    assert store.get("agent:main:main").compaction_count == 2  # type: ignore[union-attr]


def test_stores_reached_through_a_symlink_share_the_lock_and_the_transaction(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real, target_is_directory=True)
    direct = SessionStore(real / "sessions.json", lock_timeout_s=1)
    linked = SessionStore(tmp_path / "link" / "sessions.json", lock_timeout_s=1)
    with direct.transaction() as entries:
        entries["agent:main:a"] = SessionEntry.model_validate({"sessionId": "a"})
        linked.patch("agent:main:b", session_id="b")  # nested through the other path: no self-deadlock
    assert set(direct.all()) == {"agent:main:a", "agent:main:b"}  # and the nested write was not lost


# --- rebuilding keeps the counters -----------------------------------------------------------------


def test_rebuilt_entries_keep_compactions_model_and_last_usage(store: SessionStore) -> None:
    sessions = store.sessions_dir
    t = Transcript.open(sessions / "s1.jsonl", "s1", session_key="agent:main:main")
    t.append_message(Message.user("hi"))
    t.append_message(
        Message("assistant", "a", usage=Usage(input=1000, output=50, cache_read=200)),
        provider="openai",
        model="gpt-4o-mini",
    )
    t.append_compaction("summary one", None, 5000, 1200)
    t.append_message(Message.user("more"))
    t.append_message(
        Message("assistant", "b", usage=Usage(input=1500, output=40, cache_write=10)),
        provider="anthropic",
        model="claude-x",
    )
    t.append_message(Message("assistant", "stopped"))  # no usage, no model: does not count
    t.append_custom("memory-flush", {"compactionCount": 1})
    # Ends on a compaction: the runner then records its tokensAfter and clears the call's figures.
    ended = Transcript.open(sessions / "s2.jsonl", "s2", session_key="agent:main:telegram:direct:42")
    ended.append_message(Message("assistant", "c", usage=Usage(input=900, output=9)), provider="p", model="m")
    ended.append_compaction("one", None, 4000, 800)
    ended.append_compaction("two", None, 3000, 700)
    Transcript.open(sessions / "s3.jsonl", "s3").append_message(Message.user("never answered"))
    store.path.write_text("{torn")

    entries = store.all()
    first = entries["agent:main:main"]
    assert first.compaction_count == 1
    assert (first.model, first.model_provider) == ("claude-x", "anthropic")
    assert (first.input_tokens, first.output_tokens, first.cache_read, first.cache_write) == (1500, 40, 0, 10)
    assert first.total_tokens == 1510 and first.total_tokens_fresh  # prompt tokens, as the runner records
    second = entries["agent:main:telegram:direct:42"]
    assert second.compaction_count == 2 and (second.model, second.model_provider) == ("m", "p")
    assert second.total_tokens == 700 and second.total_tokens_fresh
    assert second.input_tokens is second.output_tokens is None
    third = entries["agent:main:recovered:s3"]
    assert third.compaction_count == 0 and third.model is None and third.total_tokens is None
    assert orjson.loads(store.path.read_bytes())["agent:main:main"]["compactionCount"] == 1


def test_a_store_rebuilt_after_a_long_conversation_has_the_runners_figures(
    tmp_path: Path, workspace: Path
) -> None:
    model = ScriptedModel(responder=flush_aware(lambda r: "ok " + " ".join(f"w{i}" for i in range(30))))
    config = small_config(window=3000, reserve=500, floor=500, soft=300, keep=400)
    runner, recorder = make_runner(model, tmp_path, workspace, config)
    session = runner.open()
    for i in range(25):
        session.run_turn_sync(f"q{i} " + " ".join(f"w{j}" for j in range(50)))
    assert len(recorder.kinds("compaction")) >= 2
    figures = (
        "sessionId",
        "sessionFile",
        "compactionCount",
        "model",
        "modelProvider",
        "inputTokens",
        "outputTokens",
        "cacheRead",
        "cacheWrite",
        "totalTokens",
        "totalTokensFresh",
    )
    before = orjson.loads(runner.store.path.read_bytes())["agent:main:main"]
    runner.store.path.write_bytes(b"")

    rebuilt = SessionStore(runner.store.path).get("agent:main:main")
    assert rebuilt is not None
    after = rebuilt.to_json_dict()
    assert {k: after.get(k) for k in figures} == {k: before.get(k) for k in figures}


# --- a writer killed mid-update --------------------------------------------------------------------


def _update_forever(path: str, inside: Any, hang: bool) -> None:
    store = SessionStore(path)

    def inc(e: SessionEntry | None) -> SessionEntry:
        assert e is not None
        inside.set()
        if hang:  # killed holding the lock, between its read and its write
            time.sleep(60)
        e.compaction_count += 1
        return e

    while True:
        store.update("agent:main:main", inc)


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("hang", "run_s"), [(True, 0.0), (False, 0.0), (False, 0.05), (False, 0.3)])
def test_a_process_killed_in_update_leaves_a_readable_store_and_a_free_lock(
    store: SessionStore, hang: bool, run_s: float
) -> None:
    store.patch("agent:main:main", session_id="s", compaction_count=0)
    ctx = multiprocessing.get_context("fork")
    inside = ctx.Event()
    proc = ctx.Process(target=_update_forever, args=(str(store.path), inside, hang))
    proc.start()
    try:
        assert inside.wait(10)  # inside the lock at least once
        time.sleep(run_s)  # then killed wherever its loop happens to be
    finally:
        os.kill(proc.pid, signal.SIGKILL)  # type: ignore[arg-type]
        proc.join(10)
    count = orjson.loads(store.path.read_bytes())["agent:main:main"]["compactionCount"]
    if hang:
        assert count == 0  # its read-modify-write never reached the file

    after = SessionStore(store.path, lock_timeout_s=2)
    after.patch("agent:main:main", model="m")  # a lock left held would raise StoreLockTimeout
    entry = orjson.loads(store.path.read_bytes())["agent:main:main"]
    assert entry["model"] == "m" and entry["compactionCount"] == count
    assert not after.recovered


# --- temp files of writers that died before renaming -----------------------------------------------


def _hold_the_lock_mid_write(path: str, tmp_name: str, holding: Any) -> None:
    """A writer that has created its temp file and is still writing it, holding the lock."""
    store = SessionStore(path)
    with store.transaction():
        (Path(path).parent / tmp_name).write_bytes(b'{"agent:main:main": {"sessio')
        holding.set()
        time.sleep(60)


@pytest.mark.timeout(60)
def test_a_temp_file_left_by_a_dead_writer_is_removed_and_a_live_writers_never(store: SessionStore) -> None:
    store.patch("agent:main:main", session_id="s")
    folder = store.sessions_dir
    orphan = folder / f"sessions.json.{'ab' * 16}.tmp"
    orphan.write_bytes(b'{"half')
    others = [  # not names atomic_write_bytes gives this store's temp files
        folder / "sessions.json.corrupt-1795338000000",
        folder / "sessions.json.abc.tmp",
        folder / f"other.json.{'cd' * 16}.tmp",
        folder / f"sessions.json.{'EF' * 16}.tmp",
    ]
    for other in others:
        other.write_bytes(b"x")

    later = SessionStore(store.path)  # a later process, say
    later.patch("agent:main:main", model="m")
    assert not orphan.exists()
    assert all(other.exists() for other in others)
    assert later.get("agent:main:main").model == "m"  # type: ignore[union-attr]

    # A live writer holds the lock from creating its temp file to renaming it: waiters never reach the
    # sweep meanwhile. Killed there, it frees the lock and the next store object removes its file.
    live_tmp = folder / f"sessions.json.{'12' * 16}.tmp"
    ctx = multiprocessing.get_context("fork")
    holding = ctx.Event()
    proc = ctx.Process(target=_hold_the_lock_mid_write, args=(str(store.path), live_tmp.name, holding))
    proc.start()
    try:
        assert holding.wait(10)
        waiter = SessionStore(store.path, lock_timeout_s=0.3)
        with pytest.raises(StoreLockTimeout):
            waiter.patch("agent:main:main", model="m2")
        assert SessionStore(store.path).get("agent:main:main") is not None  # reads take no lock
        assert live_tmp.exists()
    finally:
        os.kill(proc.pid, signal.SIGKILL)  # type: ignore[arg-type]
        proc.join(10)
    assert live_tmp.exists()
    SessionStore(store.path).patch("agent:main:main", model="m3")
    assert not live_tmp.exists()
    assert not list(folder.glob(f"sessions.json.{'[0-9a-f]' * 32}.tmp"))
    assert all(other.exists() for other in others)


def test_the_folder_is_listed_once_per_store_object_not_every_update(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    listed: list[object] = []
    real_scandir = os.scandir

    def counting_scandir(path: Any) -> Any:
        listed.append(path)
        return real_scandir(path)

    monkeypatch.setattr(store_module.os, "scandir", counting_scandir)
    for i in range(5):
        store.patch("agent:main:main", session_id="s", total_tokens=i)
    assert len(listed) == 1
    SessionStore(store.path).patch("agent:main:main", total_tokens=9)
    assert len(listed) == 2


# --- rebuilding keeps the last flush ---------------------------------------------------------------


def _flush_prompts(path: Path) -> list[dict[str, Any]]:
    return [
        obj["message"]
        for obj in transcript_lines(path)
        if obj["type"] == "message"
        and obj["message"]["role"] == "user"
        and obj["message"].get("provenance", {}).get("kind") == "memory_flush"
    ]


def test_a_rebuilt_store_keeps_the_cycles_flush_so_it_does_not_run_again(
    tmp_path: Path, workspace: Path
) -> None:
    model = ScriptedModel(responder=flush_aware(lambda r: "ok " + " ".join(f"w{i}" for i in range(30))))
    config = small_config(window=3000, reserve=500, floor=500, soft=800, keep=400)  # flush turns early
    runner, recorder = make_runner(model, tmp_path, workspace, config)
    session = runner.open()
    turn = 0

    def chat() -> None:
        nonlocal turn
        session.run_turn_sync(f"q{turn} " + " ".join(f"w{j}" for j in range(50)))
        turn += 1

    # Until the flush threshold's flush has run in a cycle after the first compaction.
    def flushed_this_cycle() -> bool:
        entry = store_entry(runner)
        return 0 < entry.get("memoryFlushCompactionCount", -1) == entry["compactionCount"]

    while not flushed_this_cycle():
        chat()
        assert turn < 60, recorder.kinds("flush", "compaction")
    before = store_entry(runner)
    cycle = before["compactionCount"]
    prompt = _flush_prompts(session.transcript.path)[-1]
    assert before["memoryFlushAt"] <= prompt["timestamp"] < before["memoryFlushAt"] + 5_000
    runner.store.path.write_bytes(b"")

    rebuilt = SessionStore(runner.store.path).get("agent:main:main")
    assert rebuilt is not None and rebuilt.compaction_count == cycle
    assert rebuilt.memory_flush_compaction_count == cycle
    assert rebuilt.memory_flush_at == prompt["timestamp"]

    # A new runner goes on with the rebuilt entry: no second flush in this cycle; the next cycle's comes.
    runner, recorder = make_runner(model, tmp_path, workspace, config)
    session = runner.open()
    while not recorder.kinds("flush"):
        chat()
        assert turn < 120, recorder.kinds("flush", "compaction")
    assert recorder.kinds("flush", "compaction")[0] == "compaction"
    flushed = store_entry(runner)["memoryFlushCompactionCount"]
    assert flushed > cycle and [e.compaction_count for e in recorder.events if e.kind == "flush"] == [flushed]


def _overflowing_flush_model(limit: int) -> ScriptedModel:
    """Overflows past ``limit`` prompt tokens, and a flush overflows until the context was compacted
    (trimmed too), so every flush compacts in mid-flush: its prompt lands after that compaction."""

    def respond(request: Any) -> Any:
        if request.purpose == "compaction":
            return "## Decisions\n- keep going"
        if count_request_tokens(request) > limit:
            raise ContextWindowExceeded(f"prompt over {limit}")
        if request.purpose == "flush":
            if not request.messages[1].content.startswith("The conversation history before this point"):
                raise ContextWindowExceeded("flush prompt too long until compacted")
            return "NO_REPLY"
        return "ok " + " ".join(f"w{i}" for i in range(10))

    return ScriptedModel(responder=respond)


@pytest.mark.parametrize("mid_flush", [False, True])
def test_the_rebuilt_flush_cycle_is_the_one_the_runner_recorded_after_every_turn(
    tmp_path: Path, workspace: Path, mid_flush: bool
) -> None:
    if mid_flush:  # the flush belongs to the cycle it started in, not the one its compaction began
        model = _overflowing_flush_model(1500)
        config = small_config(window=100_000, keep=300)
    else:
        model = ScriptedModel(responder=flush_aware(lambda r: "ok " + " ".join(f"w{i}" for i in range(30))))
        config = small_config(window=3000, reserve=500, floor=500, soft=800, keep=400)
    runner, recorder = make_runner(model, tmp_path, workspace, config)
    session = runner.open()
    seen = []
    for i in range(30):
        session.run_turn_sync(f"turn {i}: " + " ".join(f"w{j}" for j in range(60)))
        stored = store_entry(runner)
        _, figures = replay_transcript(session.transcript.path)
        assert figures["compactionCount"] == stored["compactionCount"]
        assert figures.get("memoryFlushCompactionCount") == stored.get("memoryFlushCompactionCount"), i
        seen.append((stored["compactionCount"], stored.get("memoryFlushCompactionCount")))
    assert len(recorder.kinds("flush")) >= 3 and len(recorder.kinds("compaction")) >= 3
    if mid_flush:
        assert recorder.kinds("flush", "compaction")[:4] == ["compaction", "flush"] * 2  # events at flush end
        assert any(flushed is not None and count == flushed + 1 for count, flushed in seen)  # next, unflushed


def test_a_flush_prompt_right_after_a_compaction_counts_it_unless_stamped_before_it(
    store: SessionStore,
) -> None:
    """Transcripts written before flush messages recorded their cycle: it is found from the prompt's
    place and time (a compaction stamped after the prompt's creation happened in mid-flush)."""
    sessions = store.sessions_dir
    flush = {"kind": "memory_flush"}
    t = Transcript.open(sessions / "s1.jsonl", "s1", session_key="agent:main:main")
    t.append_message(Message.user("hi"))
    t.append_compaction("one", None, 5000, 1200)
    t.append_message(Message.user("more"))
    t.append_compaction("two", None, 5000, 1200)
    later = now_ms() + 60_000  # stamped after compaction "two": that one came before the flush
    t.append_message(Message("user", "flush now", timestamp=later), provenance=flush)
    t.append_message(Message("assistant", "NO_REPLY"), provenance=flush)
    # A compaction in mid-flush: written after the flush prompt was created, appended before it.
    mid = Transcript.open(sessions / "s2.jsonl", "s2", session_key="agent:main:telegram:direct:42")
    mid.append_message(Message.user("hi"))
    mid.append_compaction("one", None, 5000, 1200)
    mid.append_message(Message.user("more"))
    created = now_ms() - 60_000
    mid.append_compaction("two", None, 5000, 1200)
    mid.append_message(Message("user", "flush now", timestamp=created), provenance=flush)
    mid.append_message(Message("assistant", "NO_REPLY"), provenance=flush)
    # Not the runner's flush prompts: no provenance, or an assistant message.
    plain = Transcript.open(sessions / "s3.jsonl", "s3")
    plain.append_message(Message.user("Pre-compaction memory flush."))
    plain.append_message(Message("assistant", "x"), provenance=flush)
    store.path.write_text("{torn")

    entries = store.all()
    first = entries["agent:main:main"]
    assert (first.compaction_count, first.memory_flush_compaction_count) == (2, 2)
    assert first.memory_flush_at == later
    second = entries["agent:main:telegram:direct:42"]
    assert (second.compaction_count, second.memory_flush_compaction_count) == (2, 1)
    assert second.memory_flush_at == created
    third = entries["agent:main:recovered:s3"]
    assert third.memory_flush_compaction_count is None and third.memory_flush_at is None


def test_a_flush_counts_once_its_turn_ended_with_the_cycle_it_recorded(store: SessionStore) -> None:
    """DESIGN 16: a flush whose turn never ended (the process died in it) does not count, so the rebuilt
    store lets it run again; one that ended counts for the cycle its messages record."""
    sessions = store.sessions_dir
    t = Transcript.open(sessions / "s1.jsonl", "s1", session_key="agent:main:main")
    t.append_message(Message.user("hi"))
    t.append_compaction("one", None, 5000, 1200)
    t.append_message(Message.user("flush now"), provenance={"kind": "memory_flush", "cycle": 1})
    call = ToolCall("c1", "memory_append_daily", {"text": "- a fact"})
    t.append_message(Message.assistant(tool_calls=(call,)), provenance={"kind": "memory_flush", "cycle": 1})
    t.append_message(Message.tool(call, "appended"), provenance={"kind": "memory_flush", "cycle": 1})
    t.append_message(Message("assistant", "NO_REPLY"), provenance={"kind": "memory_flush", "cycle": 1})
    t.append_message(Message.user("more"))
    t.append_compaction("two", None, 5000, 1200)
    later = Message("user", "flush again", timestamp=now_ms() + 60_000)  # well after compaction "two"
    t.append_message(later, provenance={"kind": "memory_flush", "cycle": 2})
    t.append_message(Message.assistant(tool_calls=(call,)), provenance={"kind": "memory_flush", "cycle": 2})
    store.path.write_text("{torn")  # killed there: the second flush called a tool and never answered

    entry = store.get("agent:main:main")
    assert entry is not None
    assert (entry.compaction_count, entry.memory_flush_compaction_count) == (2, 1)
