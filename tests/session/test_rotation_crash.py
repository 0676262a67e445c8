"""A rotation (``/new``; ``/reset``, daily and idle resets take the same path) killed at each of its steps.

A runner in a child process converses, then types ``/new`` and SIGKILLs itself at the moment named. A new
runner reopens the session key, as a restarted process would. Whatever the moment, the conversation is
never lost and never hidden: either the session goes on with it (the rotation had not happened yet), or
the new session has started and the old conversation is in the sessions folder under its own session id,
archived or not. Never the old session id with an empty transcript.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from sessionmem.config import Config
from sessionmem.hooks import HookEvent, HookRegistry, load_hooks
from sessionmem.messages import written_in_a_flush
from sessionmem.model.scripted import ScriptedModel, echo, flush_aware
from sessionmem.session.runner import SessionRunner
from sessionmem.session.stores.backend import TranscriptLog
from sessionmem.session.stores.entry import SessionEntry
from sessionmem.session.stores.sessions_json import SessionStore
from sessionmem.session.stores.transcript_folder import read_entries
from tests.scenarios.harness import make_runner, small_config, store_entry

KEY = "agent:main:main"
FACTS = [f"fact {i}: the locker code is {4000 + i}" for i in range(4)]
pytestmark = pytest.mark.timeout(120)

POINTS = [
    "after the flush",  # the gate's flush ran; nothing of the rotation yet
    "after the /new hook wrote its file",
    "after archiving the old transcript",
    "after the store names the new session",
    "after the new transcript is opened",
    "in the session:end hook",
]


def config() -> Config:
    return small_config(window=100_000)


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _converse_then_rotate(point: str, state: str, workspace: str) -> None:
    """A child: four turns, then ``/new``, killed at ``point``."""
    old_id: list[str] = []
    killer = HookRegistry()
    if point == "after the flush":
        killer.register("command:new", lambda event: die(), name="die-first")
    elif point == "after the /new hook wrote its file":
        killer.register("command:new", lambda event: die(), name="die-after-session-memory")
    elif point == "in the session:end hook":
        killer.register("session:end", lambda event: die(), name="die-on-end")
    elif point == "after archiving the old transcript":
        archive = SessionStore.archive_transcript

        def archive_then_die(self: SessionStore, transcript: TranscriptLog, when: datetime) -> Path | None:
            archive(self, transcript, when)
            die()
            raise AssertionError("unreachable")

        SessionStore.archive_transcript = archive_then_die  # type: ignore[method-assign]
    elif point == "after the store names the new session":
        update = SessionStore.update

        def update_then_die(self: SessionStore, key: str, fn: Any) -> SessionEntry | None:
            entry = update(self, key, fn)
            if old_id and entry is not None and entry.session_id != old_id[0]:
                die()
            return entry

        SessionStore.update = update_then_die  # type: ignore[method-assign]
    elif point == "after the new transcript is opened":
        open_transcript = SessionStore.open_transcript

        def open_then_die(self: SessionStore, key: str, entry: SessionEntry, *, cwd: Path) -> Any:
            transcript = open_transcript(self, key, entry, cwd=cwd)
            if old_id and entry.session_id != old_id[0]:
                die()
            return transcript

        SessionStore.open_transcript = open_then_die  # type: ignore[method-assign]
    cfg = config()
    hooks = load_hooks(cfg, Path(workspace), Path(state) / "hooks")  # the bundled session-memory hook
    if point != "after the flush":
        hooks.include(killer)  # after session-memory
    else:
        killer.include(hooks)
        hooks = killer  # before it
    runner = SessionRunner(
        ScriptedModel(responder=flush_aware(echo, slug="locker-codes")),
        config=cfg,
        workspace=Path(workspace),
        state_dir=Path(state),
        hooks=hooks,
    )
    session = runner.open(KEY)
    for fact in FACTS:
        session.run_turn_sync(fact)
    old_id.append(session.entry.session_id)
    session.run_turn_sync("/new")
    os._exit(3)  # the moment never came


def user_texts(path: Path) -> list[str]:
    return [
        str(obj["message"]["content"])
        for _, obj in read_entries(path)
        if obj.get("type") == "message"
        and obj["message"].get("role") == "user"
        and not written_in_a_flush(obj["message"])
    ]


@pytest.mark.parametrize("point", POINTS)
def test_a_rotation_killed_at_any_step_loses_and_hides_nothing(
    point: str, tmp_path: Path, workspace: Path
) -> None:
    ctx = multiprocessing.get_context("fork")
    child = ctx.Process(target=_converse_then_rotate, args=(point, str(tmp_path / "state"), str(workspace)))
    child.start()
    child.join(60)
    assert child.exitcode == -signal.SIGKILL, f"the child was not killed {point} (exit {child.exitcode})"

    runner, _ = make_runner(ScriptedModel(responder=flush_aware(echo)), tmp_path, workspace, config())
    sessions = runner.store.sessions_dir
    old_id = next(p.name.split(".")[0] for p in sessions.iterdir() if user_texts_of(p) == FACTS)
    session = runner.open(KEY)
    said = [m.content for _, m in session.context if m.role == "user" and m.content in FACTS]
    if session.entry.session_id == old_id:
        assert said == FACTS, f"killed {point}: the session kept its id but lost its conversation"
    else:
        assert session.context == [], f"killed {point}: a new session must start empty"
        kept = [p for p in sessions.iterdir() if p.name.startswith(old_id) and user_texts_of(p) == FACTS]
        assert kept, f"killed {point}: the old conversation is nowhere in {sorted(os.listdir(sessions))}"
    assert session.run_turn_sync("what was the locker code?").reply == "ok: what was the locker code?"
    assert store_entry(runner, KEY)["sessionId"] == session.entry.session_id


def user_texts_of(path: Path) -> list[str] | None:
    if not path.is_file() or ".jsonl" not in path.name:
        return None
    return user_texts(path)


def test_the_hooks_see_what_they_saw_before(tmp_path: Path, workspace: Path) -> None:
    """The order the fix changes is invisible to hooks: command:new reads the live transcript, session:end
    gets the archive, session:start the new transcript."""
    seen: dict[str, Any] = {}
    registry = HookRegistry()

    def spy(event: HookEvent) -> None:
        path = event.transcript_path
        seen[event.name] = (Path(path).name if path else None, Path(path).is_file() if path else False)

    for name in ("command:new", "session:end", "session:start"):
        registry.register(name, spy, name=f"spy-{name}")
    runner, _ = make_runner(
        ScriptedModel(responder=flush_aware(echo)), tmp_path, workspace, config(), hooks=registry
    )
    session = runner.open(KEY)
    session.run_turn_sync(FACTS[0])
    old = session.entry.session_id
    session.run_turn_sync("/new")
    assert seen["command:new"] == (f"{old}.jsonl", True)
    assert seen["session:end"][0].startswith(f"{old}.jsonl.reset.") and seen["session:end"][1]
    assert seen["session:start"] == (f"{session.entry.session_id}.jsonl", True)
