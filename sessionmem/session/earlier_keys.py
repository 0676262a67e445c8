"""Sessions an earlier release stored under another spelling of a key, looked for when a key is new.

Earlier releases kept a key without ``agent:`` as it was (``telegram:direct:42``), and lowered whole keys
(``…:direct:Alice`` became ``…:direct:alice``). Now a bare key is taken as ``agent:<agentId>:<key>`` and
the id of a person keeps its capitals unless their channel ignores case
(:func:`sessionmem.privacy.canonical_key`). When a key has no session yet:

- a session stored under its bare form is this agent's session of the same chat (same folder, same
  audience): it is moved under the full key and goes on;
- a session stored under its lowered form may be another person's (``alice`` and ``Alice`` were one
  key), so it is left where it is, with its folder, and a warning names both keys: the owner moves or
  forgets it.
"""

from __future__ import annotations

import logging

from sessionmem.privacy import classify_key
from sessionmem.session.stores.backend import SessionBackend
from sessionmem.session.stores.entry import SessionEntry
from sessionmem.session.stores.keys import shown_key

log = logging.getLogger(__name__)


def earlier_spellings(key: str) -> list[tuple[str, bool]]:
    """``(spelling, same chat)`` for each key an earlier release may have stored ``key``'s session under."""
    shape = classify_key(key)
    found = [(shape.rest, True)]
    for lowered in (key.lower(), shape.rest.lower()):
        if lowered != key and lowered != shape.rest and (lowered, False) not in found:
            found.append((lowered, False))
    return found


def adopt_earlier_session(store: SessionBackend, key: str) -> SessionEntry | None:
    """The session ``key`` continues from an earlier spelling (moved under ``key``), or None."""
    for spelling, same_chat in earlier_spellings(key):
        earlier = store.get(spelling)
        if earlier is None:
            continue
        if same_chat:
            return _moved(store, spelling, key, earlier)
        log.warning(
            "session key %s has no session yet, and the store holds one under %s, its spelling in an "
            "earlier release (which lowered whole keys); it may be another person's, so it stays there "
            "with its memory folder and a new session starts. Move or forget it if it is this chat's.",
            shown_key(key),
            shown_key(spelling),
        )
    return None


def _moved(store: SessionBackend, spelling: str, key: str, earlier: SessionEntry) -> SessionEntry | None:
    """``earlier`` moved from ``spelling`` to ``key`` (unless ``key`` got a session meanwhile)."""
    carried = earlier.touched(session_key=key)
    moved = store.update(key, lambda current: current or carried)
    if moved is not None and moved.session_id == earlier.session_id:
        store.delete(spelling)
        log.info("session %s: moved from its earlier key %s", shown_key(key), shown_key(spelling))
    return moved
