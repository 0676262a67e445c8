"""The ``sessions`` memory source over transcripts kept in PostgreSQL, against the real server: a runner on
a :class:`PostgresSessionStore` whose memory index reads the store's shelf. What a user checks: a fact said
in a conversation is found by ``memory_search`` once the transcript grew past the delta thresholds (not
before), ``memory_get`` on the hit gives the same lines a file transcript would, secrets stay redacted, a
conversation ended by ``/new`` stays searchable under its archive name, a forgotten person's conversation
and a deleted session leave search, and a path with ``..`` is refused as for files.

Each test runs in a schema of its own (the ``pg_dsn`` fixture, tests/support/postgres.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sessionmem.config import Config, merge
from sessionmem.memory.index import MemoryIndex
from sessionmem.memory.search.records import SearchRequest
from sessionmem.memory.sync.session_text import flatten_lines
from sessionmem.memory.tools.reading import MemoryTools
from sessionmem.model.scripted import ScriptedModel, echo, flush_aware
from sessionmem.session.runner import SessionRunner
from tests.memory.support import make_config
from tests.support.postgres import import_psycopg

psycopg = import_psycopg()  # before the store, which needs it: skips (fails in CI) without the extra

from sessionmem.session.stores.sessions_postgres import PostgresSessionStore  # noqa: E402

MAIN = "agent:main:main"
ANA = "agent:main:telegram:direct:ana"
SECRET = "sk-proj-9f8e7d6c5b4a39281706f5e4d3c2b1a0ZZ"


@pytest.fixture
def store(pg_dsn: str) -> Iterator[PostgresSessionStore]:
    with PostgresSessionStore.connect(pg_dsn, agent_id="main") as opened:
        yield opened


def open_runner(
    store: PostgresSessionStore, tmp_path: Path, workspace: Path, config: Config
) -> SessionRunner:
    """A runner on ``store`` over an index reading the store's transcripts (as ``open_runner`` has it)."""
    index = MemoryIndex.open(
        "main",
        workspace,
        config.for_agent("main").memory_search,
        state_dir=tmp_path / "state",
        watch=False,
        transcripts=store.transcript_shelf(),
    )
    return SessionRunner(
        ScriptedModel(responder=flush_aware(echo)),
        config=config,
        workspace=workspace,
        state_dir=tmp_path / "state",
        store=store,
        memory_index=index,
    )


def session_hits(runner: SessionRunner, query: str, key: str = MAIN) -> list[dict[str, Any]]:
    found = json.loads(runner.open(key).tools.memory.call("memory_search", {"query": query}))
    return [r for r in found["results"] if r["path"].startswith("sessions/")]


def owner_paths(index: MemoryIndex, query: str) -> set[str]:
    return {r.path for r in index.search(SearchRequest(query=query)).results if r.source == "sessions"}


def memory_get(runner: SessionRunner, args: dict[str, Any], key: str = MAIN) -> dict[str, Any]:
    answer: dict[str, Any] = json.loads(runner.open(key).tools.memory.call("memory_get", args))
    return answer


def jsonl_lines(store: PostgresSessionStore, session_id: str) -> list[bytes]:
    """The transcript as an export writes it: the JSONL lines, header first."""
    kept = next(k for k in store.kept_transcripts() if k.session_id == session_id)
    return list(store.transcript_lines(kept))


def test_a_fact_said_in_a_postgresql_conversation_is_found_after_the_delta_thresholds_and_read_back(
    store: PostgresSessionStore, tmp_path: Path, workspace: Path
) -> None:
    config = make_config(delta_messages=6, tokens=400, overlap=0)
    runner = open_runner(store, tmp_path, workspace, config)
    index = runner.memory_index
    assert isinstance(index, MemoryIndex)
    session = runner.open(MAIN)
    session.run_turn_sync("hello there")  # two messages: below deltaMessages 6
    index.sync()  # the transcript is indexed as it is now
    assert index.wait_idle(10)
    session.run_turn_sync(f"the harbour code is 4471 and my deploy token is {SECRET}")
    assert index.wait_idle(10)
    assert session_hits(runner, "harbour code 4471") == []  # 2 new lines: not indexed yet
    for n in range(2):  # 4 more lines: 6 pending, the threshold, and the delta sync indexes them
        session.run_turn_sync(f"small talk {n}")
    assert index.wait_idle(10)
    assert index.session_delta is not None and index.session_delta.checks >= 2

    hits = session_hits(runner, "harbour code 4471")
    name = f"{session.entry.session_id}.jsonl"
    assert hits and hits[0]["path"] == f"sessions/{name}"
    hit = hits[0]
    count = hit["endLine"] - hit["startLine"] + 1
    got = memory_get(runner, {"path": hit["path"], "from": hit["startLine"], "lines": count})
    assert got["path"] == hit["path"]
    # The same lines a file transcript with these JSONL lines gives: the line numbers count the header
    lines = jsonl_lines(store, session.entry.session_id)[hit["startLine"] - 1 : hit["endLine"]]
    expected, _, _ = flatten_lines(lines, first_line=hit["startLine"])
    assert got["text"].splitlines() == expected
    assert any("harbour code is 4471" in line for line in expected)
    assert SECRET not in got["text"] and "redacted" in got["text"].lower()
    for query in (SECRET, "deploy token"):  # nor can search find the secret
        assert all(SECRET not in r["snippet"] for r in session_hits(runner, query))

    # Traversal and made-up names are refused as for files; a name the store does not keep is empty
    for bad in (f"sessions/../{name}", "sessions/x/../../MEMORY.md", f"sessions/{name}.deleted.2026"):
        refused = memory_get(runner, {"path": bad})
        assert refused.get("disabled") and refused["text"] == "", bad
    assert memory_get(runner, {"path": "sessions/nobody.jsonl"})["text"] == ""
    runner.close()


def test_a_conversation_ended_by_new_stays_found_under_its_archive_name(
    store: PostgresSessionStore, tmp_path: Path, workspace: Path
) -> None:
    config = make_config(delta_messages=2)
    runner = open_runner(store, tmp_path, workspace, config)
    index = runner.memory_index
    assert isinstance(index, MemoryIndex)
    session = runner.open(MAIN)
    first = session.entry.session_id
    session.run_turn_sync("the lighthouse keeper is named Ansel")
    assert index.wait_idle(10)
    assert [h["path"] for h in session_hits(runner, "lighthouse keeper Ansel")] == [f"sessions/{first}.jsonl"]
    session.run_turn_sync("/new")
    assert index.wait_idle(10)
    assert index.sync().files_renamed == 1  # the live rows moved to the archive name: nothing read anew
    archived = store.archived_at(first)
    assert archived is not None
    paths = {h["path"] for h in session_hits(runner, "lighthouse keeper Ansel")}
    assert len(paths) == 1
    (path,) = paths
    assert path.startswith(f"sessions/{first}.jsonl.reset.")  # the file store's archive name
    got = memory_get(runner, {"path": path})
    assert "User: the lighthouse keeper is named Ansel" in got["text"]
    assert memory_get(runner, {"path": f"sessions/{first}.jsonl"})["text"] == ""  # no longer live
    runner.close()


def test_a_forgotten_person_and_a_deleted_session_leave_search(
    store: PostgresSessionStore, tmp_path: Path, workspace: Path
) -> None:
    config = merge(make_config(delta_messages=2), {"memory": {"scope": "peer"}})  # chats see their own
    runner = open_runner(store, tmp_path, workspace, config)
    index = runner.memory_index
    assert isinstance(index, MemoryIndex)
    runner.open(ANA).run_turn_sync("my cat Pimento sleeps in the violin case")
    runner.open(MAIN).run_turn_sync("the violin case is under the stairs")
    assert index.wait_idle(10)
    index.sync()
    owner = owner_paths(index, "violin case")  # the owner (no session: the CLI's view) sees both chats
    assert len(owner) == 2
    ana_path = f"sessions/{store.get(ANA).session_id}.jsonl"  # type: ignore[union-attr]
    assert ana_path in owner
    # Ana's own chat sees her conversation; another peer's chat does not (memory.scope "peer")
    stranger = "agent:main:telegram:direct:zed"
    assert ana_path in {h["path"] for h in session_hits(runner, "Pimento", key=ANA)}
    assert session_hits(runner, "Pimento", key=stranger) == []

    runner.forget_sync(ANA)  # what `sessionmem sessions delete` and `sessionmem forget` run
    assert store.get(ANA) is None
    assert ana_path not in owner_paths(index, "Pimento violin case")
    assert owner_paths(index, "Pimento") == set()
    index.sync()  # a later sync does not bring her back
    assert owner_paths(index, "Pimento") == set()
    owner_tools = MemoryTools(index=index, workspace=workspace, transcripts=index.transcripts)
    gone = json.loads(owner_tools.call("memory_get", {"path": ana_path}))
    assert gone["text"] == "" and not gone.get("disabled")  # as a deleted file: nothing there
    # the main session is still found
    assert owner_paths(index, "stairs") == {
        f"sessions/{store.get(MAIN).session_id}.jsonl"  # type: ignore[union-attr]
    }
    runner.close()
