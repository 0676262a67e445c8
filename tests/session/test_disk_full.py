"""A full disk, for real: the sessions folder on a tmpfs of a few hundred KB, filled up with a file.

A write that fails says "no space left on device" and names the file; it leaves no torn transcript line
and no half-written sessions.json; and once space is back the session goes on with its store reconciled
with its transcript (DESIGN 16), so a compaction whose store update failed still closes its cycle.

The disk is :mod:`tests.support.full_disk`'s ``disk`` fixture (it skips without root, fails in CI).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sessionmem.config import merge
from sessionmem.errors import SessionError, TranscriptError
from sessionmem.hooks import HookRegistry
from sessionmem.messages import Message
from sessionmem.model.base import ModelRequest
from sessionmem.model.scripted import ScriptedModel, flush_aware
from sessionmem.session.runner import SessionRunner
from sessionmem.session.stores.sessions_json import SessionStore
from sessionmem.session.stores.transcript_folder import Transcript, read_entries
from sessionmem.session.turn.events import CompactionEvent, FlushEvent
from tests.scenarios.harness import make_runner, small_config, store_entry
from tests.support.full_disk import fill, slack

KEY = "agent:main:main"


def parsed_lines(path: Path) -> int:
    raw = path.read_bytes()
    lines = [line for line in raw.split(b"\n") if line.strip()]
    assert raw.endswith(b"\n")
    assert len(list(read_entries(path))) == len(lines)  # every line parses: nothing torn
    return len(lines)


def test_an_append_that_does_not_fit_is_rolled_back_and_names_the_transcript(disk: Path) -> None:
    transcript = Transcript.open(disk / "s1.jsonl", "s1")
    transcript.append_message(Message.user("before the disk filled up"))
    fill(disk)
    size, lines = transcript.path.stat().st_size, parsed_lines(transcript.path)
    big = "x" * (slack(transcript.path) + 2000)  # part of it fits in the last page, the rest does not

    with pytest.raises(TranscriptError) as caught:
        transcript.append_message(Message.user(big))
    message = str(caught.value)
    assert "no space left on device" in message and str(transcript.path) in message
    assert "short write" not in message
    assert transcript.path.stat().st_size == size and parsed_lines(transcript.path) == lines

    (disk / "filler").unlink()
    transcript.append_message(Message.user("after space came back"))
    assert [m.content for m in transcript.messages()] == [
        "before the disk filled up",
        "after space came back",
    ]


def test_a_store_write_on_a_full_disk_names_sessions_json_and_leaves_it_whole(disk: Path) -> None:
    store = SessionStore(disk / "sessions.json")
    store.patch(KEY, session_id="s1", compaction_count=3)
    before = (disk / "sessions.json").read_bytes()
    fill(disk)

    with pytest.raises(SessionError) as caught:
        store.patch(KEY, compaction_count=4)
    message = str(caught.value)
    assert "no space left on device" in message and str(disk / "sessions.json") in message
    assert (disk / "sessions.json").read_bytes() == before
    assert [p.name for p in disk.iterdir() if p.name.endswith(".tmp")] == []  # no temp file left
    entry = store.get(KEY)
    assert entry is not None and entry.compaction_count == 3


def reply(request: ModelRequest) -> str:
    return "ok " + " ".join(f"w{i}" for i in range(20))


def test_a_compaction_whose_store_update_hit_a_full_disk_still_closes_its_cycle(
    disk: Path, tmp_path: Path, workspace: Path
) -> None:
    small = small_config(window=3000, reserve=500, floor=500, soft=800, keep=400)
    config = merge(small, {"session": {"store": str(disk / "sessions.json")}})  # transcripts there too
    first = SessionRunner(
        ScriptedModel(responder=flush_aware(reply)),
        config=config,
        workspace=workspace,
        state_dir=tmp_path / "state",
        hooks=HookRegistry(),
    )
    session = first.open(KEY)
    n = 0
    while session.entry.memory_flush_compaction_count != session.entry.compaction_count:
        session.run_turn_sync(
            f"turn {n}: " + " ".join(f"w{j}" for j in range(40))
        )  # until cycle 0 is flushed
        n += 1
        assert n < 40
    path = session.transcript.path
    assert path is not None
    while slack(path) < 1500:  # room in the transcript's last page for the compaction entry
        session.run_turn_sync(f"short {n}")
        n += 1
    fill(disk)

    with pytest.raises(SessionError) as caught:
        session.run_turn_sync("/compact")  # the compaction line fits; sessions.json needs a new page
    assert "no space left on device" in str(caught.value) and "sessions.json" in str(caught.value)
    compactions = sum(obj.get("type") == "compaction" for _, obj in read_entries(path))
    assert compactions == 1
    assert store_entry(first, KEY)["compactionCount"] == 0  # the store is one behind the transcript
    parsed_lines(path)

    (disk / "filler").unlink()
    again, recorder = make_runner(ScriptedModel(responder=flush_aware(reply)), tmp_path, workspace, config)
    reopened = again.open(KEY)
    assert store_entry(again, KEY)["compactionCount"] == 1  # reconciled with the transcript on open
    assert reopened.entry.memory_flush_compaction_count == 0  # cycle 1 is open, not flushed
    while not recorder.kinds("compaction"):
        reopened.run_turn_sync(f"turn {n}: " + " ".join(f"w{j}" for j in range(40)))
        n += 1
        assert n < 120
    order = [
        (e.kind, e.compaction_count) for e in recorder.events if isinstance(e, (FlushEvent, CompactionEvent))
    ]
    assert order == [("flush", 1), ("compaction", 2)]
