"""Paths as the user gives them, made absolute once, when they are given.

Trigger: ``SessionRunner(..., workspace="rel/ws", state_dir="rel/st")``, a relative ``session.store``,
``MemoryIndex.open("main", "notes", ...)``. Why: a relative path kept as given means another place after
a ``chdir``, and a relative ``sessionFile`` written to the store no longer names a file in the sessions
folder (every first turn failed). Outcome: every path that enters (the runner, the index, the session
stores, the config's store and model paths) goes through :func:`given_path`, against the current folder
of that moment; ``~`` is expanded and symlinks are kept as they are (a workspace may be one).
"""

from __future__ import annotations

import os
from pathlib import Path


def given_path(value: str | os.PathLike[str]) -> Path:
    """``value`` with ``~`` expanded, absolute (against the current folder now) and normalised
    (``a/../b`` is ``b``), without resolving symlinks."""
    return Path(os.path.abspath(os.path.expanduser(os.fspath(value))))
