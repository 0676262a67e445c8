"""A memory index whose disk fills up during a sync, for real (the state folder on a 512 KB tmpfs,
:mod:`tests.support.full_disk`; the workspace elsewhere).

The sync raises sessionmem's :class:`~sessionmem.errors.IndexDiskFull` naming the index file, not SQLite's
bare "database or disk is full"; the index keeps answering from what it held; no scratch file is left;
and once space is back the next sync completes and finds everything.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sessionmem.config import MemorySearchConfig
from sessionmem.errors import IndexDiskFull, MemoryIndexError
from sessionmem.memory.index import MemoryIndex
from sessionmem.memory.search.records import SearchRequest
from tests.memory.support import FTS_ONLY
from tests.support.full_disk import fill

NEW_NOTES = 3


def paths_found(index: MemoryIndex, query: str) -> list[str]:
    return [hit.path for hit in index.search(SearchRequest(query, max_results=3)).results]


@pytest.mark.parametrize("force", [False, True], ids=["sync", "forced rebuild"])
def test_a_sync_on_a_full_disk_names_the_index_and_leaves_it_usable(
    disk: Path, tmp_path: Path, force: bool
) -> None:
    workspace = tmp_path / "workspace"
    (workspace / "memory").mkdir(parents=True)
    (workspace / "memory" / "anchor.md").write_text("- the spare anchor is in the blue locker\n")
    settings = MemorySearchConfig.model_validate({"provider": "none", "sync": {"watch": False}})
    with MemoryIndex.open(
        "main", workspace, settings, state_dir=disk / "state", selection=FTS_ONLY, watch=False
    ) as index:
        index.sync()
        folder = Path(str(index.path)).parent
        before = sorted(p.name for p in folder.iterdir())
        filler = fill(disk)
        for i in range(NEW_NOTES):
            (workspace / "memory" / f"n{i:03d}.md").write_text(f"- marker{i} " + f"word{i} " * 5 + "\n")

        with pytest.raises(IndexDiskFull) as caught:
            index.sync(force=force)
        message = str(caught.value)
        assert isinstance(caught.value, MemoryIndexError)
        assert f"the disk holding the memory index {index.path} is full" in message, message
        assert "OperationalError" not in message
        assert caught.value.path == str(index.path)
        # Usable: it answers from what it held, says what went wrong, and left nothing behind
        assert paths_found(index, "spare anchor") == ["memory/anchor.md"]
        assert any("is full" in issue for issue in index.status().issues), index.status().issues
        assert sorted(p.name for p in folder.iterdir()) == before

        filler.unlink()
        report = index.sync()
        assert report.files_indexed == NEW_NOTES
        assert paths_found(index, "marker2") == ["memory/n002.md"]
        assert paths_found(index, "spare anchor") == ["memory/anchor.md"]
        assert not any("is full" in issue for issue in index.status().issues)
