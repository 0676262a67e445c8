"""The transcript is the record (DESIGN 16): store entries rebuilt from it, or reconciled with it.

The runner writes a session's transcript first and its store entry second, so a process stopped between
the two (killed, out of disk) leaves the store behind the transcript. Two uses of one replay
(:func:`replay_entries`: the figures the runner would have recorded from a transcript's entries):

- :func:`entries_from_transcripts` rebuilds a whole corrupt sessions.json: one entry per live ``*.jsonl``
  of a sessions folder, keyed by the header's ``sessionKey`` when present, else
  ``agent:<agentId>:recovered:<sessionId>``;
- :func:`reconciled` brings one stored entry in line with its transcript (``compactionCount``, the last
  flush's cycle). The session calls it through the store seam's ``update(key, fn)`` with the entries of
  its ``TranscriptLog`` when it loads its state (on open, and after taking the turn lock when another
  runner or a failed turn left it behind), so every backend gets it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sessionmem.memory.sync.transcript_names import is_archive_name
from sessionmem.messages import flush_cycle, flush_write_failed, written_in_a_flush
from sessionmem.session.stores import keys
from sessionmem.session.stores.entry import SessionEntry, aliased_fields, call_figures, compaction_figures
from sessionmem.session.stores.transcript import message_from_dict, ms_from_iso
from sessionmem.session.stores.transcript_folder import read_entries

log = logging.getLogger(__name__)


def entries_from_transcripts(folder: Path, agent_id: str) -> dict[str, SessionEntry]:
    """An entry per live transcript in ``folder`` (archives left out); for one key, the newest wins."""
    entries: dict[str, SessionEntry] = {}
    if not folder.is_dir():
        return entries
    for file in sorted(folder.glob("*.jsonl")):
        if is_archive_name(file.name):
            continue
        header, figures = replay_transcript(file)
        found = header.get("id")
        session_id = found if isinstance(found, str) and keys.SESSION_ID_RE.match(found) else file.stem
        key = header.get("sessionKey")
        if not keys.is_valid_key(key):  # none, or malformed (agent::x): recovered under a new key
            key = keys.recovered_key(agent_id, session_id)
        entry = SessionEntry.model_validate(
            {
                **figures,
                "sessionId": session_id,
                "updatedAt": int(file.stat().st_mtime * 1000),
                "sessionFile": str(file),
                "sessionKey": keys.normalize_key(key),
                "chatType": keys.chat_type(key),
            }
        )
        norm = keys.normalize_key(key)
        if norm not in entries or entry.updated_at >= entries[norm].updated_at:
            entries[norm] = entry
    return entries


def replay_transcript(file: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """A transcript file's header and the figures the runner would have recorded (:func:`replay_entries`)."""
    return replay_entries(obj for _, obj in read_entries(file))


def replay_entries(lines: Iterable[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A transcript's header and the figures the runner would have recorded from it (camelCase).

    ``lines``: the transcript's JSON objects in order (a file's lines, or a backend's rows; the header is
    optional). Replays the runner's own rules in order, with its own helpers: an assistant message with
    usage sets :func:`call_figures`; a compaction adds one to ``compactionCount`` and sets
    :func:`compaction_figures` of its ``tokensAfter``. ``model``/``modelProvider`` come from the last
    assistant message that names them. ``contextTokens`` is not in the transcript.

    The last flush (DESIGN 16): the flush turn's messages carry ``provenance: {"kind": "memory_flush",
    "cycle": N}``. A flush counts once its turn *completed*: its prompt, then an assistant message with no
    tool calls (the answer that ends the turn). A flush cut short (a crash in mid-flush) does not count,
    so it runs again; nor does one whose answer is marked ``writeFailed`` (its note did not reach the
    disk). ``memoryFlushCompactionCount`` is the completed flush's ``cycle``, the compaction count when it
    started (DESIGN 2), and ``memoryFlushAt`` its prompt's time.

    Transcripts written before the cycle was recorded: the cycle is the compactions before the prompt,
    less those the flush itself caused. Why less: the prompt is appended only once the model accepts it,
    so a compaction in mid-flush (its call overflowed) lands just before the prompt. Such a compaction
    follows the previous message directly and is stamped no earlier than the prompt (created before the
    flush's first call); counting it would mark the next cycle flushed and skip its flush.
    """
    header: dict[str, Any] = {}
    figures: dict[str, Any] = {"compactionCount": 0}
    since_message: list[int | None] = []  # times of the compactions after the latest message
    started: tuple[int, int | None] | None = None  # (cycle, time) of a flush prompt not yet answered
    for obj in lines:
        kind = obj.get("type")
        if kind == "session":
            header = header or obj
        elif kind == "compaction":
            stamp = obj.get("timestamp")
            since_message.append(ms_from_iso(stamp) if isinstance(stamp, str) else None)
            after = obj.get("tokensAfter")
            known = isinstance(after, int) and not isinstance(after, bool)
            figures.update(aliased_fields(compaction_figures(after if known else None)))
            figures["compactionCount"] += 1
        elif kind == "message" and isinstance(raw := obj.get("message"), dict):
            compacted_just_before, since_message = since_message, []
            message = message_from_dict(raw)
            if message is None:
                continue
            if written_in_a_flush(raw):
                if message.role == "user":
                    started = _flush_start(obj, raw, figures["compactionCount"], compacted_just_before)
                elif message.role == "assistant" and not message.tool_calls and started is not None:
                    if not flush_write_failed(raw):  # a flush whose note was not written does not count
                        figures["memoryFlushCompactionCount"], figures["memoryFlushAt"] = started
                    started = None
            if message.role != "assistant":
                continue
            for alias, name in (("model", "model"), ("modelProvider", "provider")):
                if isinstance(raw.get(name), str) and raw[name]:
                    figures[alias] = raw[name]
            if (usage := message.usage) is not None:
                figures.update(aliased_fields(call_figures(usage)))
    return header, figures


def _flush_start(
    obj: dict[str, Any], raw: dict[str, Any], compactions: int, compacted_just_before: list[int | None]
) -> tuple[int, int | None]:
    """(cycle, time) of the flush whose prompt ``raw`` is (see :func:`replay_entries`)."""
    at = raw.get("timestamp")
    if not isinstance(at, int) or isinstance(at, bool):  # not the runner's: no time to compare
        at = None
    cycle = flush_cycle(raw)
    if cycle is None:
        cycle = compactions - sum(
            1 for t in compacted_just_before if t is not None and at is not None and t >= at
        )
    if at is None:
        stamp = obj.get("timestamp")
        at = ms_from_iso(str(stamp or ""))
    return cycle, at


# ---------------------------------------------------------------------------- reconciliation


# The count, and the figures a compaction sets (they describe the context after the latest one).
RECONCILED_FIGURES = ("compactionCount", *aliased_fields(compaction_figures(None)))


def reconciled(stored: SessionEntry, figures: dict[str, Any]) -> SessionEntry | None:
    """``stored`` brought in line with its transcript's ``figures`` (:func:`replay_entries`), or None
    when they agree (DESIGN 16: the transcript is written first and is the record).

    - ``compactionCount`` is the transcript's count of compaction entries. When it differs (a process
      stopped between appending a compaction and updating the store), the token figures are the
      transcript's too: they describe the context after that compaction.
    - The last flush: the transcript's last completed flush, unless the store records a later cycle that
      still exists (at most the count): a flush whose failure was caught and reported is recorded in the
      store only (nothing in the transcript says it ended), and still counts for its cycle. A flush the
      store records for a cycle past the transcript's count belongs to compactions that never happened,
      and is dropped.
    """
    count = int(figures["compactionCount"])
    flush, flush_at = figures.get("memoryFlushCompactionCount"), figures.get("memoryFlushAt")
    recorded = stored.memory_flush_compaction_count
    if recorded is not None and recorded <= count and (flush is None or recorded > flush):
        flush, flush_at = recorded, stored.memory_flush_at
    changes: dict[str, Any] = {}
    if stored.compaction_count != count:
        changes.update({name: figures.get(name) for name in RECONCILED_FIGURES})
    if recorded != flush:
        changes.update(memoryFlushCompactionCount=flush, memoryFlushAt=flush_at)
    if not changes:
        return None
    log.warning(
        "session %s: the store said compactionCount %d, memoryFlushCompactionCount %s; its transcript "
        "says %d, %s (a process stopped between writing the transcript and the store): reconciled",
        stored.session_key or stored.session_id,
        stored.compaction_count,
        recorded,
        count,
        flush,
    )
    return stored.with_updates(**changes)
