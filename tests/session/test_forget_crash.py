"""``forget`` killed half-way (a real SIGKILL of a child process) leaves nothing half-usable, and running
it again finishes the job.

The child runs forget on a copy of one agent (two people, Ana with a few hundred notes and dozens of
transcripts, so each step takes a while) and says on stdout when it starts each step (the index rows, each
folder, the store), pausing a moment there. The parent kills it at each step in turn, a random moment
after it starts, then checks what a user would: the index opens and searches, sessions.json (or the
SQLite store) reads whole, Ben's notes and session are untouched and his next turn runs; then it runs
forget again and checks that nothing of Ana is left in any file.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sessionmem.config import Config
from sessionmem.dsn import is_postgres_dsn
from sessionmem.memory.index import MemoryIndex
from sessionmem.memory.search.records import SearchRequest
from sessionmem.model.scripted import ScriptedModel
from sessionmem.session.lifecycle.forget import forget_sync
from sessionmem.session.runner import SessionRunner
from sessionmem.session.stores.opening import open_session_store
from sessionmem.session.stores.transcript import new_header
from tests.memory.stores import rows, store_under_test
from tests.session.forget_home import ANA, ANA_HOME, ANA_WORD, BEN, BEN_HOME, BEN_WORD, Home, files_holding
from tests.support.postgres import scratch_schema
from tests.support.stores import spec_for

REPO_ROOT = Path(__file__).resolve().parents[2]
STEPS = 8  # the index rows; the notes and earlier versions of three chats (six folders); the store
PAUSE_S = 0.05

CHILD = """
import sys, time
from pathlib import Path
root, pause = Path(sys.argv[1]), float(sys.argv[2])
from sessionmem.config import Config
from sessionmem.dsn import is_postgres_dsn
from sessionmem.memory.index import MemoryIndex
from sessionmem.session.lifecycle import forget as forgetting
from sessionmem.session.stores.opening import open_session_store

def announced(name, fn):
    def step(*args, **kwargs):
        if not kwargs.get("dry_run"):  # finding what to remove is not a step
            print("step", name, flush=True)
            time.sleep(pause)
        return fn(*args, **kwargs)
    return step

config = Config.load(root / "config.json")
store = open_session_store(config.session.store, state_dir=root / "state", agent_id="main")
type(store).erase = announced("store", type(store).erase)
MemoryIndex.erase = announced("index", MemoryIndex.erase)
forgetting.remove_tree_under = announced("folder", forgetting.remove_tree_under)
index = MemoryIndex.open("main", root / "workspace", config.for_agent("main").memory_search,
                         state_dir=root / "state", watch=False, sessions_dir=store.sessions_dir)
print("ready", flush=True)
forgetting.forget_sync("42", store=store, workspace=root / "workspace", agent_id="main", memory_index=index)
print("done", flush=True)
"""


def build(root: Path, session_store: str, index_path: str | None, notes: int) -> None:
    """The agent: both people through every path, then many more notes (and, with transcript files,
    archived transcripts) of Ana."""
    home = Home(root, session_store=session_store, index_path=index_path)
    try:
        home.everyone_talks()
        for n in range(notes):
            (home.workspace / ANA_HOME / f"2026-01-{n:04d}.md").write_text(
                f"- day {n}: {ANA_WORD} walked\n" * 20
            )
        sessions = home.runner.store.sessions_dir
        for n in range(40 if sessions is not None else 0):
            name = f"ana-{n:02d}.jsonl.reset.2026-01-01T00-00-{n:02d}.000Z"
            lines = [new_header(f"ana-{n:02d}", None, session_key=ANA), {"type": "message", "text": ANA_WORD}]
            (sessions / name).write_text("".join(json.dumps(line) + "\n" for line in lines))
        home.index.sync()
    finally:
        home.close()


@contextlib.contextmanager
def agent(root: Path) -> Iterator[tuple[Config, Any, MemoryIndex]]:
    """The agent's config, session store and index, opened as a new process would, closed on exit."""
    config = Config.load(root / "config.json")
    store = open_session_store(config.session.store, state_dir=root / "state", agent_id="main")
    settings = config.for_agent("main").memory_search
    index = MemoryIndex.open(
        "main",
        root / "workspace",
        settings,
        state_dir=root / "state",
        watch=False,
        sessions_dir=store.sessions_dir,
    )
    try:
        yield config, store, index
    finally:
        index.close()
        close = getattr(store, "close", None)
        if callable(close):
            close()


def check_usable(root: Path, ben_notes: dict[str, bytes]) -> None:
    """What a user would check after the kill: everything opens, reads whole, and Ben is all there."""
    with agent(root) as (config, store, index):
        assert BEN in store.all()  # sessions.json parses (or the database reads), whole
        if str(config.session.store).endswith(".json"):
            json.loads(Path(str(config.session.store)).read_text())
        assert notes_of(root, BEN_HOME) == ben_notes
        hits = index.search(SearchRequest(BEN_WORD, max_results=20, min_score=0.0)).results
        assert any(hit.path.startswith(BEN_HOME) for hit in hits)
        if isinstance(index.path, Path):
            assert rows(index, "PRAGMA integrity_check") == [("ok",)]
        model = ScriptedModel(responder=lambda r: "ok")
        runner = SessionRunner(
            model, config=config, workspace=root / "workspace", state_dir=root / "state", store=store
        )
        assert runner.open(BEN).run_turn_sync("still here?").reply == "ok"
        runner.close()


def finish(root: Path) -> None:
    """Run forget again, as the user would, and check nothing of Ana is left: in the files, in the index
    (as SQL sees it), in a PostgreSQL store."""
    with agent(root) as (config, store, index):
        report = forget_sync(
            "42", store=store, workspace=root / "workspace", agent_id="main", memory_index=index
        )
        assert report.issues == ()
        assert not any(hit.path.startswith(ANA_HOME) for hit in index.search(SearchRequest(ANA_WORD)).results)
        for table in ("chunks", "files"):
            assert rows(index, f"SELECT COUNT(*) FROM {table} WHERE path LIKE ?", "%~direct~42%") == [(0,)]
        assert rows(index, "SELECT COUNT(*) FROM chunks WHERE text LIKE ?", f"%{ANA_WORD}%") == [(0,)]
        assert BEN in store.all() and not any(key.endswith(":42") for key in store.all())
        assert not any(t.session_key and "direct:42" in t.session_key for t in store.kept_transcripts())
        if is_postgres_dsn(str(config.session.store)):
            import psycopg

            with psycopg.connect(str(config.session.store)) as conn:
                found = conn.execute(
                    "SELECT count(*) FROM sessionmem_transcript_entries e WHERE e::text LIKE %s",
                    (f"%{ANA_WORD}%",),
                ).fetchone()
            assert found == (0,)
    assert files_holding(root, ANA_WORD, "~direct~42", "direct:42") == []


def notes_of(root: Path, folder: str) -> dict[str, bytes]:
    workspace = root / "workspace"
    return {str(p.relative_to(workspace)): p.read_bytes() for p in sorted((workspace / folder).rglob("*"))}


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


@pytest.mark.timeout(900)
@pytest.mark.parametrize("backend", ["sessions.json", "sqlite", "postgresql"])
def test_forget_killed_at_every_step_leaves_everything_usable_and_a_second_run_finishes(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    root, template = tmp_path / "agent", tmp_path / "template"
    pg = backend == "postgresql"
    rounds = 1 if pg else 2  # a PostgreSQL agent is built anew for each kill (its state is in schemas)
    rng = random.Random(21)
    kills: list[tuple[int, str, str]] = []
    with contextlib.ExitStack() as schemas:

        def prepare() -> None:
            shutil.rmtree(root, ignore_errors=True)
            if pg:
                request.getfixturevalue("pg_dsn")  # skips (or fails in CI) without a server
                session_dsn = schemas.enter_context(scratch_schema())
                index = schemas.enter_context(store_under_test("postgresql"))
                build(root, session_dsn, index.path, notes=300)
            elif template.exists():
                shutil.copytree(template, root)  # the same paths: sessions.json names its transcripts by path
            else:
                build(
                    root, spec_for(backend, root / "state" / "agents" / "main" / "sessions"), None, notes=1500
                )
                shutil.copytree(root, template)

        for round_ in range(rounds):
            for step in range(STEPS):
                prepare()
                ben_notes = notes_of(root, BEN_HOME)
                child = subprocess.Popen(
                    [sys.executable, "-c", CHILD, str(root), str(PAUSE_S)],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    env=child_env(),
                )
                assert child.stdout is not None
                seen = []
                while len(seen) <= step:
                    line = child.stdout.readline()
                    assert line, (
                        f"the child ended before step {step}: {child.stderr.read() if child.stderr else ''}"
                    )
                    if line.startswith("step "):
                        seen.append(line.split()[1])
                # Round 0: in the pause before the step starts; round 1 (and PostgreSQL): into the step.
                late = round_ == 1 or pg
                time.sleep(rng.uniform(PAUSE_S, PAUSE_S + 0.06) if late else rng.uniform(0, PAUSE_S))
                child.send_signal(signal.SIGKILL)
                child.wait(30)
                kills.append((step, seen[-1], "killed" if child.returncode == -signal.SIGKILL else "ended"))
                check_usable(root, ben_notes)
                finish(root)
                check_usable(root, ben_notes)
    assert sum(1 for *_, how in kills if how == "killed") >= STEPS, kills
    assert [name for _, name, _ in kills[:STEPS]] == ["index", *["folder"] * 6, "store"]
