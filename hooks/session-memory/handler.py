"""session-memory hook: save the ending session to memory/ on /new and /reset (see HOOK.md).

Thin on purpose: the logic lives in :mod:`sessionmem.session.lifecycle.archive`, where it is tested.
"""

from __future__ import annotations

from pathlib import Path

from sessionmem.hooks import HookEvent
from sessionmem.session.lifecycle.archive import save_session_memory


async def handle(event: HookEvent) -> Path | None:
    return await save_session_memory(event)
