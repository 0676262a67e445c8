"""An agent's sessions as an operator sees them: the list, one session in full, and its removal.

The management API (``/api/sessions``), the inspector page and ``sessionmem sessions list|show|delete``
call these functions, so the three show the same thing:

- :func:`list_sessions`: the store's entries, newest first (``updatedAt``), optionally only the keys
  holding a text, one page at a time;
- :func:`show_session`: one entry with the fields the store holds (``compactionCount`` and
  ``memoryFlushCompactionCount`` included), the thresholds in force for it, its timeline (one point per
  turn, a marker per flush, compaction, ``/new`` and overflow: :mod:`sessionmem.session.timeline`) and
  a page of its transcript; the key's archived transcripts (``/new``, ``/reset``) come first, so the
  history of a chat reads across its resets;
- :func:`deletable_key`: the key a delete removes, refused when the store has no such session; the
  removal itself is ``forget`` of that chat (:meth:`SessionRunner.forget
  <sessionmem.session.runner.SessionRunner.forget>`, ``sessionmem forget``).

Inputs come from outside (a URL, a command line): keys are validated and must be the agent's own, page
sizes and filters are bounded, and every text shown is capped (the transcript keeps it whole). Reading a
session never writes: transcripts are read through the store's own listing of what it keeps
(:class:`~sessionmem.session.stores.backend.ErasableStore`), not opened for appending.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from sessionmem.config import AgentConfig
from sessionmem.errors import SessionNotFound, UsageError
from sessionmem.memory.sync.transcript_names import ARCHIVE_MARKERS
from sessionmem.session.lifecycle.forget import erasable
from sessionmem.session.stores import keys
from sessionmem.session.stores.backend import KeptTranscript, SessionBackend
from sessionmem.session.stores.entry import SessionEntry
from sessionmem.session.stores.transcript import entry_from_dict
from sessionmem.session.timeline import HistoryPart, build_timeline, shown_entry
from sessionmem.session.turn.flush import cycle_flushed, window_budget
from sessionmem.session.turn.projection import resolve_context_window, session_window

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 200
MAX_FILTER_CHARS = 200
MAX_PAGE = 1_000_000


@dataclass(frozen=True, slots=True)
class Page:
    """Which page of a list: 1-based ``page`` of ``limit`` items (both checked by :func:`page_of`)."""

    page: int = 1
    limit: int = DEFAULT_PAGE_SIZE


def page_of(page: Any = None, limit: Any = None, *, default_limit: int = DEFAULT_PAGE_SIZE) -> Page:
    """A :class:`Page` from outside values (numbers, or their text in a URL): ``page`` ≥ 1, ``limit`` in
    1..:data:`MAX_PAGE_SIZE`; anything else is a :class:`UsageError` naming the parameter."""
    return Page(
        bounded_int("page", page, 1, 1, MAX_PAGE),
        bounded_int("limit", limit, default_limit, 1, MAX_PAGE_SIZE),
    )


def bounded_int(name: str, value: Any, default: int, low: int, high: int) -> int:
    """``value`` (a number, or its text from a URL) as a whole number in ``low..high``; ``default`` when
    it is not given; else a :class:`UsageError` naming ``name``."""
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        raise UsageError(f"{name} must be a whole number from {low} to {high:,}")
    if isinstance(value, str):
        text = value.strip()
        if len(text) > 12 or not text.isascii() or not text.lstrip("-").isdigit():
            raise UsageError(f"{name} must be a whole number from {low} to {high:,}, not {value[:20]!r}")
        value = int(text)
    if not isinstance(value, int) or not low <= value <= high:
        raise UsageError(f"{name} must be a whole number from {low} to {high:,}, not {value!r}")
    return value


def session_key(agent_id: str, key: Any) -> str:
    """``key`` in the store's form for ``agent_id`` (``telegram:direct:42`` is taken as the agent's own);
    a :class:`UsageError` for what is not a session key of this agent, or is too long."""
    if not isinstance(key, str):
        raise UsageError("session key must be text")
    return keys.agent_session_key(agent_id, key)


def _filter_text(q: Any) -> str:
    if q is None:
        return ""
    if not isinstance(q, str):
        raise UsageError("the filter must be text")
    if len(q) > MAX_FILTER_CHARS:
        raise UsageError(f"the filter is too long ({len(q):,} characters; at most {MAX_FILTER_CHARS})")
    return q.strip().casefold()


# ---------------------------------------------------------------------------- the list


def entry_json(key: str, entry: SessionEntry) -> dict[str, Any]:
    """The fields the store holds for ``key`` (camelCase, as in sessions.json), ``sessionKey`` first and
    the two counters always present."""
    fields = entry.to_json_dict()
    fields.pop("sessionKey", None)
    fields.setdefault("compactionCount", entry.compaction_count)
    fields.setdefault("memoryFlushCompactionCount", entry.memory_flush_compaction_count)
    return {"sessionKey": key, **fields}


def list_sessions(store: SessionBackend, *, page: Page | None = None, q: Any = None) -> dict[str, Any]:
    """The store's sessions newest first, those whose key holds ``q`` (case-insensitive) when given, one
    page: ``{"sessions", "total", "page", "pages", "limit"}``. Each item is :func:`entry_json` with
    ``flushedThisCycle``."""
    page = page or Page()
    wanted = _filter_text(q)
    found = [(key, entry) for key, entry in store.all().items() if not wanted or wanted in key.casefold()]
    found.sort(key=lambda item: (item[1].updated_at, item[0]), reverse=True)
    start = (page.page - 1) * page.limit
    items = []
    for key, entry in found[start : start + page.limit]:
        item = entry_json(key, entry)
        item["flushedThisCycle"] = cycle_flushed(entry.to_json_dict())
        items.append(item)
    return {
        "sessions": items,
        "total": len(found),
        "page": page.page,
        "pages": max(1, math.ceil(len(found) / page.limit)),
        "limit": page.limit,
    }


# ---------------------------------------------------------------------------- one session


@dataclass(frozen=True, slots=True)
class _Named:
    """A model known by its name only (the CLI has no model object: the entry names the last one used)."""

    name: str


def thresholds(agent: AgentConfig, entry: SessionEntry, model: Any = None) -> dict[str, Any]:
    """The window and thresholds in force for the session: the runner's own rule
    (:func:`~sessionmem.session.turn.projection.session_window` of the configured window, then
    :func:`~sessionmem.session.turn.flush.window_budget`) when its ``model`` is given; without one, the
    window the entry recorded at its last call (``contextTokens``), else the config's."""
    if model is not None:
        window = session_window(resolve_context_window(agent, model), entry, model)
    else:
        named = _Named(entry.model or "")
        window = entry.context_tokens or session_window(resolve_context_window(agent, named), entry, named)
    budget = window_budget(window, agent.compaction)
    return {
        "contextWindow": budget.context_window,
        "flushThreshold": budget.flush_threshold,
        "compactionThreshold": budget.compaction_threshold,
        "reserveTokens": budget.reserve,
        "softThresholdTokens": budget.soft_threshold,
        "keepRecentTokens": budget.keep_recent,
        "flushEnabled": agent.compaction.memory_flush.enabled,
        "scaled": list(budget.scaled),
    }


def history(store: SessionBackend, key: str, entry: SessionEntry | None) -> list[HistoryPart]:
    """The transcripts of ``key``, oldest first: its archives (``/new``, ``/reset``), then the live one
    (the entry's session); deleted ones (``*.deleted.*``) left out."""
    kept = erasable(store).kept_transcripts()
    live_id = entry.session_id if entry is not None else None
    parts: list[tuple[tuple[int, str, str], HistoryPart]] = []
    for item in kept:
        if ".deleted." in item.name:
            continue
        named = keys.normalize_key(item.session_key) if item.session_key else None
        if named != key and not (named is None and live_id is not None and item.session_id == live_id):
            continue
        started, entries = _read(store, item)
        live = live_id is not None and item.session_id == live_id and not _archived(item.name)
        parts.append(
            (
                (1 if live else 0, started, item.name),
                HistoryPart(item.name, item.session_id, started, entries),
            )
        )
    parts.sort(key=lambda pair: pair[0])
    return [part for _, part in parts]


def _archived(name: str) -> bool:
    return any(marker in name for marker in ARCHIVE_MARKERS)


def _read(store: SessionBackend, kept: KeptTranscript) -> tuple[str, list[Any]]:
    """The header's timestamp and the entries of one kept transcript (torn or foreign lines skipped)."""
    started = ""
    entries = []
    for no, line in enumerate(erasable(store).transcript_lines(kept), start=1):
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(obj, dict):
            continue
        if obj.get("type") == "session":
            stamp = obj.get("timestamp")
            started = stamp if isinstance(stamp, str) else ""
            continue
        parsed = entry_from_dict(no, obj)
        if parsed is not None:
            entries.append(parsed)
    return started, entries


def _numbered(parts: Sequence[HistoryPart]) -> Iterator[tuple[int, Any, HistoryPart]]:
    number = 0
    for part in parts:
        for entry in part.entries:
            number += 1
            yield number, entry, part


def show_session(
    store: SessionBackend,
    agent: AgentConfig,
    agent_id: str,
    key: Any,
    *,
    transcript_page: Any = None,
    transcript_limit: Any = None,
    model: Any = None,
) -> dict[str, Any]:
    """One session: ``entry`` (:func:`entry_json`), ``flushedThisCycle``, ``thresholds``
    (:func:`thresholds`), ``timeline`` (:func:`~sessionmem.session.timeline.build_timeline`),
    ``transcripts`` (the names of its history, oldest first) and ``transcript``: one page of its entries
    over the whole history (``transcript_page`` 1-based, the last page when not given). A key the store
    does not hold raises :class:`~sessionmem.errors.SessionNotFound`."""
    norm = session_key(agent_id, key)
    entry = store.get(norm)
    if entry is None:
        raise SessionNotFound(f"no session {keys.shown_key(norm)} in agent {agent_id!r}")
    parts = history(store, norm, entry)
    total = sum(len(part.entries) for part in parts)
    limit = page_of(None, transcript_limit).limit
    pages = max(1, math.ceil(total / limit))
    wanted = pages if transcript_page in (None, "") else page_of(transcript_page, limit).page
    start = (wanted - 1) * limit
    items = [
        shown_entry(found, number, part)
        for number, found, part in _numbered(parts)
        if start < number <= start + limit
    ]
    return {
        "agentId": agent_id,
        "entry": entry_json(norm, entry),
        "flushedThisCycle": cycle_flushed(entry.to_json_dict()),
        "thresholds": thresholds(agent, entry, model),
        "transcripts": [part.name for part in parts],
        "timeline": build_timeline(parts).to_json(),
        "transcript": {"items": items, "total": total, "page": wanted, "pages": pages, "limit": limit},
    }


def deletable_key(store: SessionBackend, agent_id: str, key: Any) -> str:
    """The store's form of ``key`` when the store holds that session (what a delete then forgets);
    :class:`~sessionmem.errors.SessionNotFound` when it does not, :class:`UsageError` for a bad key."""
    norm = session_key(agent_id, key)
    if store.get(norm) is None:
        raise SessionNotFound(f"no session {keys.shown_key(norm)} in agent {agent_id!r}")
    return norm
