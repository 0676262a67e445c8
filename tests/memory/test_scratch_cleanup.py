"""A forced rebuild killed mid-way leaves ``<db>.tmp-<uuid>`` (and -wal/-shm); the next open or sync
removes the scratch files of writers that are gone. Proved with a real SIGKILL of a child process that
is rebuilding with the real GGUF model. A scratch file whose opening failed goes at once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from sessionmem.config import MemorySearchConfig
from sessionmem.memory.index import MemoryIndex
from sessionmem.memory.search.records import SearchRequest

REPO_ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import sys
from pathlib import Path
from sessionmem.config import MemorySearchConfig
from sessionmem.memory.embed.local_gguf import LocalEmbedder
from sessionmem.memory.embed.embedder import EmbedderSelection
from sessionmem.memory.index import MemoryIndex

workspace, state, model = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
selection = EmbedderSelection(LocalEmbedder(model), "local")
settings = MemorySearchConfig.model_validate({"cache": {"enabled": False}})
index = MemoryIndex.open("main", workspace, settings, state_dir=state, selection=selection, watch=False)
index.sync(force=True)
index.close()
print("finished", flush=True)
"""


def scratch(db: Path) -> list[str]:
    return sorted(p.name for p in db.parent.glob(f"{db.name}.tmp-*"))


def test_scratch_files_of_a_killed_rebuild_are_removed_by_the_next_open(
    workspace: Path, tmp_path: Path, gguf_model: Path
) -> None:
    for i in range(120):
        words = " ".join(f"topic{i}-{j} harbour crane rope anchor tide" for j in range(30))
        (workspace / "memory" / f"2026-01-{i % 28 + 1:02d}-{i}.md").write_text(f"# Note {i}\n\n{words}\n")
    state = tmp_path / "state"
    settings = MemorySearchConfig.model_validate({"provider": "none"})
    db = state / "memory" / "main.sqlite"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(workspace), str(state), str(gguf_model)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not scratch(db) and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert scratch(db), f"no rebuild in progress seen (child exit status: {child.poll()})"
        time.sleep(0.3)  # let it write into the scratch file for a moment
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
    assert scratch(db), "the killed rebuild left its scratch file behind (the situation to clean up)"
    with MemoryIndex.open("main", workspace, settings, state_dir=state, watch=False) as index:
        assert scratch(db) == []
        index.sync()
        assert index.search(SearchRequest("harbour crane")).results


def test_a_rebuild_running_in_another_process_keeps_its_scratch_file(workspace: Path, tmp_path: Path) -> None:
    """Cleanup waits for the index lock, which a live rebuild holds: only dead writers' files go."""
    state = tmp_path / "state"
    settings = MemorySearchConfig.model_validate({"provider": "none"})
    (workspace / "memory" / "note.md").write_text("- the tide table is in the drawer\n")
    with MemoryIndex.open("main", workspace, settings, state_dir=state, watch=False) as index:
        db = index.path
        live = db.with_name(f"{db.name}.tmp-{'a' * 32}")
        with index.sync_lock():  # what a rebuild holds while it writes its scratch file
            live.write_bytes(b"")
            opener = subprocess.Popen(
                [sys.executable, "-c", OPEN_ONLY, str(workspace), str(state)],
                env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
            )
            time.sleep(1.0)
            assert opener.poll() is None and live.exists()  # waiting for the lock, file untouched
        assert opener.wait(timeout=60) == 0
        assert not live.exists()  # the writer released the lock without removing it: a dead writer's


OPEN_ONLY = """
import sys
from pathlib import Path
from sessionmem.config import MemorySearchConfig
from sessionmem.memory.index import MemoryIndex

settings = MemorySearchConfig.model_validate({"provider": "none"})
MemoryIndex.open("main", Path(sys.argv[1]), settings, state_dir=Path(sys.argv[2]), watch=False).close()
"""


def test_a_scratch_file_whose_opening_failed_is_removed_at_once(tmp_path: Path) -> None:
    """A full disk can refuse the scratch index's schema after its file was made (the forced rebuild of
    tests/memory/test_index_disk_full.py left it behind now and then, until the next sync)."""
    from sessionmem.memory.store.database import connect
    from sessionmem.memory.store.rebuild import scratch_index

    live = tmp_path / "main.sqlite"

    def refused(path: Path) -> Any:
        conn, _ = connect(path)  # the file is made...
        conn.close()
        raise OSError(28, "No space left on device")  # ...and its setup refused

    with pytest.raises(OSError, match="No space left"), scratch_index(live, refused):
        pass
    assert scratch(live) == []
