"""Transcripts live only in the sessions folder, named by session id. A stored ``sessionFile`` is used
only when it names such a file (a relative value resolved against the folder); after the state folder
moved, the runner finds the transcript in the current folder; anything else is refused with a clear
message and never written to."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from sessionmem.errors import TranscriptError
from sessionmem.hooks import HookRegistry
from sessionmem.model.scripted import ScriptedModel
from sessionmem.session.runner import SessionRunner
from sessionmem.session.stores.sessions_json import SessionStore
from tests.scenarios.harness import transcript_lines

KEY = "agent:main:main"
SID = "3f0c9a52-5d7e-4b1a-9c33-2a1e8b7d6f10"


@pytest.fixture(autouse=True)
def cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A current directory two levels into the test's folder: a relative sessionFile used as given would
    land here or one level up (never in the repository the tests run from)."""
    here = tmp_path / "cwd" / "here"
    here.mkdir(parents=True)
    monkeypatch.chdir(here)
    return here


def runner_at(state: Path, workspace: Path) -> SessionRunner:
    model = ScriptedModel(responder=lambda request: "noted")
    return SessionRunner(model, workspace=workspace, state_dir=state, hooks=HookRegistry())


def store_with(state: Path, session_file: str | None) -> SessionStore:
    store = SessionStore.for_agent(state, "main")
    store.patch(KEY, session_id=SID, session_file=session_file, session_key=KEY)
    return store


def test_a_stored_session_file_outside_the_folder_gets_nothing_appended(
    tmp_path: Path, workspace: Path
) -> None:
    victim = tmp_path / "outside" / "notes.txt"
    victim.parent.mkdir()
    victim.write_text("precious\n")
    state = tmp_path / "state"
    store = store_with(state, str(victim))
    runner = runner_at(state, workspace)
    with pytest.raises(TranscriptError) as caught:
        runner.open(KEY).run_turn_sync("hello")
    message = str(caught.value)
    assert str(victim) in message and str(store.sessions_dir) in message and KEY in message
    assert "refusing" in message
    assert victim.read_text() == "precious\n"
    assert store.get(KEY).session_file == str(victim)  # the entry is left for the user to fix


@pytest.mark.parametrize(
    "stored",
    [
        "../escape.jsonl",  # relative, out of the folder
        f"../{SID}.jsonl",  # the right name, out of the folder
        f"sub/{SID}.jsonl",  # a subfolder is not the sessions folder
        "sessions.json",  # the store itself
        "other-session.jsonl",  # another session's transcript
    ],
)
def test_other_stored_values_are_refused_and_nothing_is_created(
    tmp_path: Path, workspace: Path, cwd: Path, stored: str
) -> None:
    state = tmp_path / "state"
    store = store_with(state, stored)
    before = store.path.read_bytes()
    with pytest.raises(TranscriptError, match="refusing"):
        runner_at(state, workspace).open(KEY)
    assert store.path.read_bytes() == before
    assert sorted(p.name for p in store.sessions_dir.iterdir()) == ["sessions.json", "sessions.json.lock"]
    assert not (store.sessions_dir.parent / "escape.jsonl").exists()
    assert not (store.sessions_dir.parent / f"{SID}.jsonl").exists()
    assert list(cwd.iterdir()) == [] and list(cwd.parent.iterdir()) == [cwd]


def test_a_relative_session_file_is_resolved_against_the_folder_not_the_current_directory(
    tmp_path: Path, workspace: Path, cwd: Path
) -> None:
    state = tmp_path / "state"
    store = store_with(state, f"{SID}.jsonl")
    session = runner_at(state, workspace).open(KEY)
    session.run_turn_sync("hello")
    assert session.transcript.path == store.sessions_dir / f"{SID}.jsonl"
    assert [line.get("message", {}).get("role") for line in transcript_lines(session.transcript.path)][
        1:
    ] == [
        "user",
        "assistant",
    ]
    assert list(cwd.iterdir()) == []


def test_a_session_file_named_for_its_session_outside_the_folder_is_followed_into_it(
    tmp_path: Path, workspace: Path
) -> None:
    decoy = tmp_path / "outside" / f"{SID}.jsonl"
    decoy.parent.mkdir()
    decoy.write_text("not ours\n")
    state = tmp_path / "state"
    store = store_with(state, str(decoy))
    session = runner_at(state, workspace).open(KEY)
    session.run_turn_sync("hello")
    assert decoy.read_text() == "not ours\n"
    assert session.transcript.path == store.sessions_dir / f"{SID}.jsonl"
    assert store.get(KEY).session_file == str(store.sessions_dir / f"{SID}.jsonl")


def test_a_moved_state_folder_is_followed_and_the_history_kept(tmp_path: Path, workspace: Path) -> None:
    old_state, new_state = tmp_path / "old-state", tmp_path / "new-state"
    first = runner_at(old_state, workspace).open(KEY)
    first.run_turn_sync("remember the blue door")
    old_file = first.transcript.path
    assert old_file is not None and old_file.parent.is_relative_to(old_state)
    shutil.move(old_state, new_state)

    session = runner_at(new_state, workspace).open(KEY)
    assert "remember the blue door" in [m.content for _, m in session.context]
    session.run_turn_sync("and the red one")
    assert not old_state.exists()  # the old folder is not recreated
    assert session.transcript.path == new_state / old_file.relative_to(old_state)
    roles = [
        line["message"]["role"] for line in transcript_lines(session.transcript.path) if "message" in line
    ]
    assert roles == ["user", "assistant", "user", "assistant"]
    stored = json.loads((new_state / "agents/main/sessions/sessions.json").read_text())[KEY]
    assert stored["sessionFile"] == str(session.transcript.path)


@pytest.mark.parametrize("stored", [f"{SID}.jsonl", None])
def test_a_transcript_that_is_a_symlink_out_of_the_folder_is_refused(
    tmp_path: Path, workspace: Path, stored: str | None
) -> None:
    target = tmp_path / "outside" / "target.log"
    target.parent.mkdir()
    target.write_text("system file\n")
    state = tmp_path / "state"
    store = store_with(state, stored)
    os.symlink(target, store.sessions_dir / f"{SID}.jsonl")
    with pytest.raises(TranscriptError, match=r"is a symlink to .*target\.log"):
        runner_at(state, workspace).open(KEY)
    assert target.read_text() == "system file\n"


def test_openclaw_topic_transcripts_are_accepted(tmp_path: Path, workspace: Path) -> None:
    state = tmp_path / "state"
    store = store_with(
        state, str(SessionStore.for_agent(state, "main").sessions_dir / f"{SID}-topic-42.jsonl")
    )
    session = runner_at(state, workspace).open(KEY)
    assert session.transcript.path == store.sessions_dir / f"{SID}-topic-42.jsonl"
