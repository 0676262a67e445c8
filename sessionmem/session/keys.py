"""Session keys, session ids and the paths they map to (reference §1.10, §3.1).

A *session key* names a routing bucket (``agent:main:main``, ``agent:main:discord:group:42``); a
*session id* names the transcript currently behind it. Keys are compared after trim + lowercase,
as OpenClaw's store does, so ``Agent:Main:MAIN`` and ``agent:main:main`` are one session.

Everything here is pure string/path logic: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from sessionmem.errors import UsageError

ChatType = Literal["direct", "group", "channel"]
PromptMode = Literal["full", "minimal"]

DEFAULT_AGENT_ID = "main"
DEFAULT_MAIN_KEY = "main"
STORE_FILENAME = "sessions.json"

SESSION_ID_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,127}$", re.IGNORECASE)
_AGENT_ID_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$", re.IGNORECASE)

_DIRECT_TOKENS = frozenset({"direct", "dm"})


def normalize_key(key: str) -> str:
    """The store's form of a session key: surrounding whitespace trimmed, lowercased."""
    return key.strip().lower()


def default_key(agent_id: str = DEFAULT_AGENT_ID) -> str:
    """The agent's main session key, ``agent:<agentId>:main``."""
    return f"agent:{normalize_key(agent_id)}:{DEFAULT_MAIN_KEY}"


@dataclass(frozen=True, slots=True)
class SessionKey:
    """A parsed session key.

    ``agent_id`` is None for keys that do not start with ``agent:`` (legacy or hook keys).
    ``rest`` is what follows ``agent:<agentId>:`` (or the whole key when there is no agent prefix).
    """

    raw: str
    agent_id: str | None
    rest: str
    chat_type: ChatType
    is_subagent: bool
    is_cron: bool
    is_hook: bool

    @property
    def is_main(self) -> bool:
        return self.rest == DEFAULT_MAIN_KEY

    @property
    def prompt_mode(self) -> PromptMode:
        """Subagent and cron sessions get the "minimal" system prompt (no memory recall section)."""
        return "minimal" if (self.is_subagent or self.is_cron) else "full"


def parse_key(key: str) -> SessionKey:
    """Parse a session key; never fails on unusual shapes (they count as direct chats)."""
    norm = normalize_key(key)
    if not norm:
        raise UsageError("session key is empty")
    parts = norm.split(":")
    agent_id: str | None = None
    rest_parts = parts
    if len(parts) >= 3 and parts[0] == "agent" and parts[1]:
        agent_id = parts[1]
        rest_parts = parts[2:]
    rest = ":".join(rest_parts)
    return SessionKey(
        raw=norm,
        agent_id=agent_id,
        rest=rest,
        chat_type=_chat_type(rest_parts),
        is_subagent="subagent" in rest_parts,
        is_cron=bool(rest_parts) and rest_parts[0] == "cron",
        is_hook=bool(rest_parts) and rest_parts[0] == "hook",
    )


def _chat_type(rest_parts: list[str]) -> ChatType:
    # Shapes: <channel>:direct:<peer>, <channel>:<account>:direct:<peer>, <channel>:group:<id>,
    # <channel>:channel:<id>. The marker is never the first part (that is the channel's name).
    for part in rest_parts[1:]:
        if part == "group":
            return "group"
        if part == "channel":
            return "channel"
        if part in _DIRECT_TOKENS:
            return "direct"
    return "direct"


def chat_type(key: str) -> ChatType:
    """``direct``, ``group`` or ``channel``; the main session counts as direct."""
    return parse_key(key).chat_type


def is_private(key: str) -> bool:
    """True for direct (one-to-one) sessions, where long-term memory may be loaded."""
    return chat_type(key) == "direct"


def agent_id_of(key: str, default: str = DEFAULT_AGENT_ID) -> str:
    return parse_key(key).agent_id or default


def recovered_key(agent_id: str, session_id: str) -> str:
    """Key given to a transcript found on disk whose session key is unknown."""
    return f"agent:{normalize_key(agent_id)}:recovered:{session_id.lower()}"


def validate_session_id(session_id: str) -> str:
    """Return ``session_id`` if it is safe as a file name stem, else raise UsageError."""
    if not isinstance(session_id, str) or not SESSION_ID_RE.match(session_id):
        raise UsageError(
            f"invalid session id {session_id!r}: must match {SESSION_ID_RE.pattern} (case-insensitive)"
        )
    return session_id


def validate_agent_id(agent_id: str) -> str:
    if not isinstance(agent_id, str) or not _AGENT_ID_RE.match(agent_id):
        raise UsageError(
            f"invalid agent id {agent_id!r}: must match {_AGENT_ID_RE.pattern} (case-insensitive)"
        )
    return agent_id


def sessions_dir(state_dir: str | Path, agent_id: str) -> Path:
    """``<state>/agents/<agentId>/sessions``."""
    return Path(state_dir) / "agents" / validate_agent_id(agent_id) / "sessions"


def store_path(state_dir: str | Path, agent_id: str, store: str | Path | None = None) -> Path:
    """sessions.json: ``store`` (the ``session.store`` setting) with ``{agentId}`` replaced and ``~``
    expanded, a relative path taken from the current folder (as OpenClaw does); else
    ``<sessions_dir>/sessions.json``. The agent's transcripts live in the same folder as its store."""
    if store:
        templated = str(store).replace("{agentId}", validate_agent_id(agent_id))
        return Path(templated).expanduser().absolute()
    return sessions_dir(state_dir, agent_id) / STORE_FILENAME


def is_archive_name(name: str) -> bool:
    """True for rotated transcripts (``<file>.reset.<ts>``, ``<file>.deleted.<ts>``)."""
    return ".reset." in name or ".deleted." in name


def is_transcript_name(name: str, session_id: str) -> bool:
    """True for the names a transcript of ``session_id`` may have in the sessions folder:
    ``<sessionId>.jsonl`` and OpenClaw's thread variant ``<sessionId>-topic-<topic>.jsonl``."""
    if name == f"{session_id}.jsonl":
        return True
    topic = name.removeprefix(f"{session_id}-topic-").removesuffix(".jsonl")
    return (
        name.startswith(f"{session_id}-topic-")
        and name.endswith(".jsonl")
        and bool(topic)
        and not is_archive_name(name)
        and "/" not in name
        and "\\" not in name
    )
