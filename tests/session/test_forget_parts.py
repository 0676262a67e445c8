"""The parts of ``forget`` one by one: who WHO names, each store's erasure, the dry run, what stays and is
listed, a turn running at the same time, a session held in memory elsewhere, and the command line.
(The whole of it, through every path and store: ``test_forget.py``; killed half-way:
``test_forget_crash.py``.)"""

from __future__ import annotations

import asyncio
import json
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sessionmem.cli import cli
from sessionmem.config import Config, merge
from sessionmem.errors import UsageError
from sessionmem.messages import Message, ToolCall
from sessionmem.model.base import ModelRequest
from sessionmem.model.scripted import ScriptedModel
from sessionmem.session.lifecycle.forget import forget_sync
from sessionmem.session.lifecycle.person import parse_person
from sessionmem.session.lifecycle.rotation import rotated_entry
from sessionmem.session.runner import SessionRunner
from sessionmem.session.stores.backend import ErasableStore, open_entry
from tests.session.forget_home import (
    ANA,
    ANA_HOME,
    ANA_WORD,
    BEN,
    BEN_HOME,
    BEN_WORD,
    Home,
    files_holding,
    flushing,
)
from tests.support.stores import open_store, with_store

THREAD = ANA + ":thread:7"


# ---------------------------------------------------------------------------- who


@pytest.mark.parametrize(
    ("who", "chat", "peer"),
    [
        ("agent:main:telegram:direct:42", "telegram:direct:42", None),
        ("Agent:Main:Telegram:Direct:42:thread:9", "telegram:direct:42:thread:9", None),  # a chat of its own
        ("telegram:direct:42", "telegram:direct:42", None),  # a chat without the agent prefix
        ("discord:group:7", "discord:group:7", None),
        ("main", "main", None),
        ("42", None, "42"),
        ("josé", None, "josé"),
        ("+15551234567", None, "+15551234567"),
    ],
)
def test_who_is_a_chat_or_a_peer_on_every_channel(who: str, chat: str | None, peer: str | None) -> None:
    person = parse_person(who, "main")
    assert (person.chat, person.peer) == (chat, peer)


def test_a_peer_is_every_direct_chat_with_that_id_and_a_chat_all_its_threads() -> None:
    peer, chat = parse_person("42", "main"), parse_person(ANA, "main")
    for key in ("agent:main:direct:42", ANA, THREAD, "agent:main:discord:acct:direct:42:topic:1"):
        assert peer.owns(key), key
    for key in ("agent:main:direct:420", "agent:main:discord:group:42", "agent:beta:direct:42", BEN):
        assert not peer.owns(key), key
    assert chat.owns(THREAD) and chat.owns(ANA.upper())
    assert not chat.owns("agent:main:discord:direct:42") and not chat.owns(BEN)


@pytest.mark.parametrize(
    ("who", "problem"),
    [
        ("", "needs a session key or a peer id"),
        ("   ", "needs a session key or a peer id"),
        ("agent:beta:telegram:direct:42", "belongs to agent 'beta', not 'main'"),
        ("agent::x", "malformed session key"),
        ("42:thread:1", "neither a session key"),
        ("4\x002", "control characters"),
        ("x" * 600, "at most 512 characters"),
    ],
)
def test_what_is_neither_a_key_of_this_agent_nor_a_peer_is_refused(who: str, problem: str) -> None:
    with pytest.raises(UsageError, match=problem):
        parse_person(who, "main")


# ---------------------------------------------------------------------------- each store


def test_each_store_erases_their_entries_and_every_transcript_and_keeps_the_others(
    store_spec: str, tmp_path: Path
) -> None:
    store = open_store(store_spec, tmp_path / "state")
    assert isinstance(store, ErasableStore)
    for key in (ANA, THREAD, BEN):
        entry, _ = open_entry(store, key)
        word = BEN_WORD if key == BEN else ANA_WORD
        store.open_transcript(key, entry, cwd=tmp_path).append_message(Message.user(f"I am {word}"))
    # A /new: Ana's transcript archived, a new session under her key.
    old = store.get(ANA)
    assert old is not None
    archived = store.archive_transcript(store.open_transcript(ANA, old, cwd=tmp_path), datetime.now(UTC))
    new_file = store.new_session_file("s-new")
    fresh = store.update(ANA, lambda current: rotated_entry(current or old, "s-new", new_file))
    assert fresh is not None
    store.open_transcript(ANA, fresh, cwd=tmp_path).append_message(Message.user(f"{ANA_WORD} again"))
    ben_lines = {
        t.name: list(store.transcript_lines(t)) for t in store.kept_transcripts() if t.session_key == BEN
    }

    hers = [t for t in store.kept_transcripts() if t.session_key in (ANA, THREAD)]
    assert len(hers) == 3 and (archived is None or any(t.path == archived for t in hers))
    assert store.erase([ANA, THREAD], hers) == []

    again = open_store(store_spec, tmp_path / "state")  # as another process reads it
    assert isinstance(again, ErasableStore)
    assert set(again.all()) == {BEN}
    assert {t.name: list(again.transcript_lines(t)) for t in again.kept_transcripts()} == ben_lines
    if store.sessions_dir is not None:  # the files: no byte of her, the SQLite file and its WAL included
        assert files_holding(store.sessions_dir, ANA_WORD, "direct:42") == []
    assert again.erase([ANA, THREAD], hers) == []  # done twice: nothing left, no error
    close = getattr(store, "close", None)
    if callable(close):
        close()
        again.close()  # type: ignore[attr-defined]


def test_a_store_without_erasure_is_refused_before_anything_is_done(tmp_path: Path) -> None:
    class Plain:  # the store seam alone (an outside implementer's backend)
        sessions_dir = None

        def all(self) -> dict[str, Any]:
            return {}

    with pytest.raises(UsageError, match="needs kept_transcripts"):
        forget_sync("42", store=Plain(), workspace=tmp_path, agent_id="main")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- dry run, and what stays


@pytest.fixture
def home(tmp_path: Path) -> Any:
    home = Home(tmp_path)
    yield home
    home.close()


def test_a_dry_run_lists_everything_and_changes_nothing(home: Home) -> None:
    home.everyone_talks()
    before = {p: p.read_bytes() for p in sorted(home.root.rglob("*")) if p.is_file()}
    planned = home.runner.forget_sync(ANA, dry_run=True)
    assert planned.dry_run and planned.found
    assert list(planned.session_keys) == [ANA, THREAD]
    assert planned.notes == tuple(home.files_under(ANA_HOME)) and planned.history
    assert planned.index is not None and planned.index.chunks and planned.index.done == ()
    assert {p: p.read_bytes() for p in sorted(home.root.rglob("*")) if p.is_file()} == before
    done = home.runner.forget_sync(ANA)
    assert (done.session_keys, done.notes, done.history, done.transcripts) == (
        planned.session_keys,
        planned.notes,
        planned.history,
        planned.transcripts,
    )
    assert done.index is not None and (done.index.paths, done.index.chunks) == (
        planned.index.paths,
        planned.index.chunks,
    )
    # The Discord chat is another chat of the same person: forgetting the Telegram chat keeps it.
    assert home.runner.store.get("agent:main:discord:direct:42") is not None
    again = home.runner.forget_sync(ANA)
    assert not again.found and again.issues == ()


def test_shared_notes_that_name_them_or_hold_what_they_wrote_are_listed_and_left_as_they_are(
    tmp_path: Path,
) -> None:
    # memory.scope agent (the default): a direct chat's flush writes to the agent's shared daily log.
    workspace, state = tmp_path / "workspace", tmp_path / "state"
    (workspace / "memory").mkdir(parents=True)
    (workspace / "memory" / "team.md").write_text("- Ana Lima (peer 42) runs the bakery\n- nothing else\n")
    config = merge(
        Config(), {"agents": {"defaults": {"userTimezone": "UTC", "compaction": {"keepRecentTokens": 20}}}}
    )
    runner = SessionRunner(
        ScriptedModel(responder=flushing(lambda key: "- the user keeps bees in the garden")),
        config=config,
        workspace=workspace,
        state_dir=state,
    )
    runner.open(ANA).run_turn_sync("I keep bees")
    runner.open(ANA).run_turn_sync("and three hives in the garden")
    runner.open(ANA).run_turn_sync("/compact")  # the flush writes to memory/<today>.md
    runner.open("agent:main:discord:group:7").run_turn_sync("Ana Lima says hi to the group")
    daily = next((workspace / "memory").glob("20*.md"))
    shared_before = {p.name: p.read_bytes() for p in (workspace / "memory").glob("*.md")}

    report = runner.forget_sync("42", names=["Ana Lima"])

    mentions = {m.path: m for m in report.mentions}
    assert mentions["memory/team.md"].lines == (1,) and mentions["memory/team.md"].names == ("42", "Ana Lima")
    written = mentions[f"memory/{daily.name}"]
    assert written.written == 1 and written.names == ()
    group = [m for p, m in mentions.items() if p.startswith("sessions/")]
    assert len(group) == 1 and group[0].names == ("Ana Lima",)
    assert {p.name: p.read_bytes() for p in (workspace / "memory").glob("*.md")} == shared_before
    runner.close()


def test_copies_kept_aside_after_damage_are_listed(home: Home) -> None:
    home.everyone_talks()
    sessions = home.runner.store.sessions_dir
    assert sessions is not None
    aside = sessions / "sessions.json.corrupt-1700000000000"
    aside.write_text("{}")
    report = home.runner.forget_sync("42")
    assert report.kept_aside == (str(aside),)


# ---------------------------------------------------------------------------- turns at the same time


class Gate:
    """A model whose turn waits until the test opens the gate (the flush and summary answer at once)."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.requests: list[ModelRequest] = []

    def __call__(self, request: ModelRequest) -> Any:
        self.requests.append(request)
        if request.purpose == "turn" and "wait" in str(request.messages[-1].content):
            self.entered.set()
            assert self.release.wait(30)
            return ToolCall("w", "memory_append_daily", {"text": f"- {ANA_WORD} wrote while waiting"})
        return "ok"


def test_a_turn_running_while_they_are_forgotten_ends_first_and_leaves_nothing_behind(home: Home) -> None:
    home.everyone_talks()
    gate = Gate()
    home.model.responder = gate
    home.runner.open(ANA).run_turn_sync("hello")
    finished: dict[str, Any] = {}

    def turn() -> None:
        finished["turn"] = home.runner.open(ANA).run_turn_sync("please wait for me")

    def forget() -> None:
        finished["report"] = home.runner.forget_sync("42")

    turning = threading.Thread(target=turn)
    turning.start()
    assert gate.entered.wait(30)  # the turn holds its session
    forgetting = threading.Thread(target=forget)
    forgetting.start()
    forgetting.join(0.5)
    assert forgetting.is_alive()  # forget waits for the turn...
    gate.release.set()
    turning.join(30)
    forgetting.join(60)
    assert not forgetting.is_alive() and finished["report"].issues == ()
    # ...which wrote a note and its transcript before forget removed them with the rest.
    assert not (home.workspace / ANA_HOME).exists()
    assert files_holding(home.root, ANA_WORD, "direct:42") == []
    assert home.runner.store.get(ANA) is None


def test_a_session_held_in_memory_elsewhere_starts_anew_after_they_are_forgotten(
    home: Home, store_spec: str
) -> None:
    # Another runner (another process of a gateway) holds Ana's session in memory; forget runs in this
    # one. Its next turn must not write her old transcript or old context back.
    config = with_store(home.config, store_spec)
    mine = SessionRunner(home.model, config=config, workspace=home.workspace, state_dir=home.state)
    other_model = ScriptedModel(responder=lambda request: "ok")
    other = SessionRunner(other_model, config=config, workspace=home.workspace, state_dir=home.state)
    held = other.open(ANA)
    held.run_turn_sync(f"I am {ANA_WORD}")
    old_id = held.entry.session_id

    report = mine.forget_sync(ANA)
    assert report.session_keys == (ANA,)

    held.run_turn_sync("hello again")  # a turn of the handle kept before forget
    assert held.entry.session_id != old_id
    assert all(ANA_WORD not in str(m.content) for m in other_model.calls[-1].messages)
    kept = other.store.kept_transcripts()  # type: ignore[attr-defined]
    assert old_id not in {t.session_id for t in kept}
    for store in (mine.store, other.store):
        close = getattr(store, "close", None)
        if callable(close):
            close()


# ---------------------------------------------------------------------------- the command line


def test_the_command_line_lists_forgets_and_reports_in_words_and_json(home: Home) -> None:
    home.everyone_talks()
    home.index.close()  # the command opens the index itself
    dry = CliRunner().invoke(cli, [*home.options, "forget", "42", "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert dry.output.startswith("Would forget peer 42 on every channel of agent main:")
    assert "    agent:main:telegram:direct:42\n" in dry.output and f"    {ANA_HOME}/MEMORY.md\n" in dry.output
    assert (home.workspace / ANA_HOME).exists()

    done = CliRunner().invoke(cli, [*home.options, "forget", "42", "--json"])
    assert done.exit_code == 0, done.output
    data = json.loads(done.output)
    assert data["dryRun"] is False and data["found"] is True and data["issues"] == []
    assert data["sessionKeys"] == ["agent:main:discord:direct:42", ANA, THREAD]
    assert data["index"]["chunks"] > 0 and "WAL checkpointed and truncated" in data["index"]["scrubbed"]
    assert not (home.workspace / ANA_HOME).exists() and (home.workspace / BEN_HOME).exists()

    nothing = CliRunner().invoke(cli, [*home.options, "forget", "42"])
    assert (
        nothing.exit_code == 0
        and nothing.output == "Nothing is kept of peer 42 on every channel of agent main.\n"
    )
    wrong = CliRunner().invoke(cli, [*home.options, "forget", "agent:beta:direct:42"])
    assert wrong.exit_code == 1 and "belongs to agent 'beta', not 'main'" in wrong.output
    assert "Traceback" not in wrong.output


def test_runner_forget_is_awaitable_and_refuses_inside_a_loop_when_blocking(home: Home) -> None:
    home.talk(BEN)

    async def main() -> None:
        with pytest.raises(UsageError, match="await"):
            home.runner.forget_sync(BEN)
        report = await home.runner.forget(BEN)
        assert report.session_keys == (BEN,)

    asyncio.run(main())
    assert home.runner.store.all() == {}
