"""Earlier versions of a memory file a replace overwrote, so a user can always get it back.

Trigger: ``memory_write(mode="replace")`` on MEMORY.md. Why: a replace may drop at most half of the
file, but an injected model can call it again and again, each time just over half: two calls left 0
of 40 facts, and a single ``MEMORY.md.bak`` only held the second-to-last state. Outcome: before each
replace the current text is saved as ``.memory-history/<path>/<UTC time>.md`` in the workspace; the
newest :data:`MAX_VERSIONS` are kept per file. The folder is outside ``memory/`` and hidden, so it is
never indexed nor readable by the memory tools (the history of the owner's MEMORY.md must not reach
anyone the file itself would not), and it is written like every memory file (:mod:`sessionmem.safefs`:
no symlink followed, mode 0600).
"""

from __future__ import annotations

import contextlib
import os
import re
from datetime import UTC, datetime
from pathlib import Path

from sessionmem.safefs import create_new_under, folder_under

HISTORY_DIR = ".memory-history"
MAX_VERSIONS = 20
_ORDER = re.compile(r"^(.*Z)(?:-(\d+))?\.md$")
_VERSION = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}\.\d{6}Z(?:-\d+)?\.md$")


def history_folder(rel: str) -> str:
    """Where the versions of ``rel`` (workspace-relative) are kept."""
    return f"{HISTORY_DIR}/{rel}"


def save_version(workspace: Path, rel: str, text: str, *, now: datetime | None = None) -> str:
    """Save ``text`` as the newest version of ``rel``; returns its workspace-relative path. Older
    versions beyond :data:`MAX_VERSIONS` are deleted."""
    stamp = (now or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m-%dT%H-%M-%S.%fZ")
    saved = create_new_under(workspace, history_folder(rel), stamp, text.encode("utf-8"))
    prune(workspace, rel)
    return saved


def versions(workspace: Path, rel: str) -> list[str]:
    """The saved versions of ``rel``, oldest first (names sort by time)."""
    try:
        with folder_under(workspace, history_folder(rel), create=False) as folder:
            names = os.listdir(folder)
    except FileNotFoundError:
        return []
    return sorted((n for n in names if _VERSION.match(n)), key=_order)


def prune(workspace: Path, rel: str, keep: int = MAX_VERSIONS) -> None:
    """Delete all but the newest ``keep`` versions of ``rel``."""
    old = versions(workspace, rel)[:-keep] if keep > 0 else versions(workspace, rel)
    if not old:
        return
    with folder_under(workspace, history_folder(rel), create=False) as folder:
        for name in old:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=folder)


def _order(name: str) -> tuple[str, int]:
    """``<stamp>.md`` before ``<stamp>-2.md`` (two saves within one microsecond)."""
    match = _ORDER.match(name)
    return (match.group(1), int(match.group(2) or 1)) if match else (name, 0)
