"""Sessions: transcripts, the store seam and its sessions.json backend, session keys, and the runner.

Names are loaded lazily (module ``__getattr__``) so importing one submodule stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sessionmem.session.stores.backend import (
        SessionBackend,
        SessionBackendABC,
        TranscriptLog,
        VersionedTranscript,
    )
    from sessionmem.session.stores.entry import SessionEntry
    from sessionmem.session.stores.keys import default_key, parse_key
    from sessionmem.session.stores.sessions_json import SessionStore
    from sessionmem.session.stores.transcript import Entry
    from sessionmem.session.stores.transcript_folder import Transcript, read_messages

_LAZY = {
    "SessionBackend": "sessionmem.session.stores.backend",
    "SessionBackendABC": "sessionmem.session.stores.backend",
    "TranscriptLog": "sessionmem.session.stores.backend",
    "VersionedTranscript": "sessionmem.session.stores.backend",
    "Entry": "sessionmem.session.stores.transcript",
    "Transcript": "sessionmem.session.stores.transcript_folder",
    "read_messages": "sessionmem.session.stores.transcript_folder",
    "SessionEntry": "sessionmem.session.stores.entry",
    "SessionStore": "sessionmem.session.stores.sessions_json",
    "default_key": "sessionmem.session.stores.keys",
    "parse_key": "sessionmem.session.stores.keys",
}

__all__ = [
    "Entry",
    "SessionBackend",
    "SessionBackendABC",
    "SessionEntry",
    "SessionStore",
    "Transcript",
    "TranscriptLog",
    "VersionedTranscript",
    "default_key",
    "parse_key",
    "read_messages",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
