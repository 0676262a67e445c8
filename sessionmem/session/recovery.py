"""Rebuilding store entries from the transcripts, the record written first (sessions.json is corrupt).

:func:`entries_from_transcripts` makes one entry per live ``*.jsonl`` of a sessions folder, keyed by the
header's ``sessionKey`` when present, else ``agent:<agentId>:recovered:<sessionId>``, with the figures
the runner would have recorded from that transcript (:func:`replay_transcript`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sessionmem.messages import written_in_a_flush
from sessionmem.session import keys
from sessionmem.session.entry import SessionEntry, aliased_fields, call_figures, compaction_figures
from sessionmem.session.transcript import message_from_dict, ms_from_iso, read_entries


def entries_from_transcripts(folder: Path, agent_id: str) -> dict[str, SessionEntry]:
    """An entry per live transcript in ``folder`` (archives left out); for one key, the newest wins."""
    entries: dict[str, SessionEntry] = {}
    if not folder.is_dir():
        return entries
    for file in sorted(folder.glob("*.jsonl")):
        if keys.is_archive_name(file.name):
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
    """A transcript's header and the figures the runner would have recorded from it (camelCase).

    Replays the runner's own rules in file order, with its own helpers: an assistant message with usage
    sets :func:`call_figures`; a compaction adds one to ``compactionCount`` and sets
    :func:`compaction_figures` of its ``tokensAfter``. ``model``/``modelProvider`` come from the last
    assistant message that names them. ``contextTokens`` is not in the file.

    The last flush: its prompt is the user message the runner marks ``provenance: {"kind":
    "memory_flush"}``; ``memoryFlushAt`` is that message's timestamp and ``memoryFlushCompactionCount``
    the compactions before it, less those the flush itself caused. Why less: the gate records a flush
    against the cycle it *started* in, and the prompt is appended only once the model accepts it, so a
    compaction in mid-flush (its call overflowed) lands just before the prompt. Such a compaction
    follows the previous message directly and is stamped no earlier than the prompt (created before the
    flush's first call); counting it would mark the next cycle flushed and skip its flush.
    """
    header: dict[str, Any] = {}
    figures: dict[str, Any] = {"compactionCount": 0}
    since_message: list[int | None] = []  # times of the compactions after the latest message
    for _, obj in read_entries(file):
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
            if message.role == "user" and written_in_a_flush(raw):
                at = raw.get("timestamp")
                if not isinstance(at, int) or isinstance(at, bool):  # not the runner's: no time to compare
                    at = None
                during = sum(1 for t in compacted_just_before if t is not None and at is not None and t >= at)
                figures["memoryFlushCompactionCount"] = figures["compactionCount"] - during
                stamp = obj.get("timestamp")
                figures["memoryFlushAt"] = at if at is not None else ms_from_iso(str(stamp or ""))
                continue
            if message.role != "assistant":
                continue
            for alias, name in (("model", "model"), ("modelProvider", "provider")):
                if isinstance(raw.get(name), str) and raw[name]:
                    figures[alias] = raw[name]
            if (usage := message.usage) is not None:
                figures.update(aliased_fields(call_figures(usage)))
    return header, figures
