"""Session keys, session ids and the paths they map to (reference §1.10, §3.1).

A *session key* names a routing bucket (``agent:main:main``, ``agent:main:discord:group:42``); a
*session id* names the transcript currently behind it. Keys are compared in their canonical form
(:func:`sessionmem.privacy.canonical_key`): trimmed, the agent, channel and kind markers in lower case, so
``Agent:Main:MAIN`` and ``agent:main:main`` are one session, while the id of a person is kept as written
(unless their channel ignores case): the store and the person's memory folder agree on who is who. What a key
says about privacy (direct, group, channel, or a shape not known, which counts as shared) is decided
in :mod:`sessionmem.privacy`, the one place the memory rule lives.

Everything here is pure string/path logic: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeGuard

from sessionmem.errors import UsageError
from sessionmem.memory.sync.transcript_names import is_archive_name
from sessionmem.privacy import KeyShape, ascii_lower, canonical_key, classify_key

ChatType = Literal["direct", "group", "channel"]
PromptMode = Literal["full", "minimal"]

DEFAULT_AGENT_ID = "main"
DEFAULT_MAIN_KEY = "main"
STORE_FILENAME = "sessions.json"

SESSION_ID_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,127}$", re.IGNORECASE)
_AGENT_ID_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$", re.IGNORECASE)


def normalize_key(key: str) -> str:
    """The store's form of a session key (:func:`sessionmem.privacy.canonical_key`)."""
    return canonical_key(key)


def default_key(agent_id: str = DEFAULT_AGENT_ID) -> str:
    """The agent's main session key, ``agent:<agentId>:main``."""
    return f"agent:{ascii_lower(agent_id.strip())}:{DEFAULT_MAIN_KEY}"


@dataclass(frozen=True, slots=True)
class SessionKey:
    """A parsed session key: what :func:`sessionmem.privacy.classify_key` reads from it (``shape``), and
    what the session layer asks of it besides (the system prompt's mode).

    ``agent_id`` is None for keys that do not start with ``agent:`` (legacy or hook keys).
    ``rest`` is what follows ``agent:<agentId>:`` (or the whole key when there is no agent prefix).
    ``chat_type`` is None for shapes that are neither direct, group nor channel (cron, hooks, subagents,
    unknown forms); ``private`` is true only for the main session and positively direct chats.
    """

    shape: KeyShape

    @property
    def raw(self) -> str:
        return self.shape.key

    @property
    def agent_id(self) -> str | None:
        return self.shape.agent_id

    @property
    def rest(self) -> str:
        return self.shape.rest

    @property
    def chat_type(self) -> ChatType | None:
        return self.shape.chat_type

    @property
    def private(self) -> bool:
        return self.shape.private

    @property
    def is_main(self) -> bool:
        """The agent's main session (a thread of it too), as the privacy rule counts it."""
        return self.shape.kind == "main"

    @property
    def is_subagent(self) -> bool:
        return "subagent" in self.rest.split(":")

    @property
    def is_cron(self) -> bool:
        return self.rest.split(":", 1)[0] == "cron"

    @property
    def is_hook(self) -> bool:
        return self.rest.split(":", 1)[0] == "hook"

    @property
    def prompt_mode(self) -> PromptMode:
        """Subagent and cron sessions get the "minimal" system prompt (no memory recall section)."""
        return "minimal" if (self.is_subagent or self.is_cron) else "full"


def agent_session_key(agent_id: str, key: str | None = None) -> str:
    """The key a runner of ``agent_id`` keeps the session ``key`` under (the same for ``runner.open``, the
    CLI's ``--session`` and every other way a key comes in).

    None is the agent's main session; a key without the ``agent:`` prefix (``main``,
    ``telegram:direct:42``) is taken as ``agent:<agentId>:<key>``, as OpenClaw's gateway does; a key of
    another agent is refused with a :class:`UsageError` (its sessions and memory are that agent's).
    """
    own = ascii_lower(agent_id.strip())
    if key is None:
        return default_key(own)
    shape = classify_key(key)
    if shape.agent_id is None:
        return classify_key(f"agent:{own}:{shape.key}").key
    if shape.agent_id != own:
        raise UsageError(
            f"session key {shown_key(shape.key)} belongs to agent {shape.agent_id!r}, and this runner serves "
            f"agent {own!r}: open it with a runner of agent {shape.agent_id!r} (a key without agent: is "
            "taken as this agent's)"
        )
    return shape.key


def shown_key(key: str, limit: int = 120) -> str:
    """``key`` quoted for a message, cut to ``limit`` characters (a key is outside input)."""
    return repr(key if len(key) <= limit else key[:limit] + "…")


def parse_key(key: str) -> SessionKey:
    """Parse a session key. Unusual shapes parse (and count as shared, never private); an ``agent:`` key
    without an agent id or a rest (``agent::x``, ``agent:main``) raises :class:`UsageError`."""
    return SessionKey(classify_key(key))


def is_valid_key(key: object) -> TypeGuard[str]:
    """True when ``key`` is a session key :func:`parse_key` accepts."""
    if not isinstance(key, str):
        return False
    try:
        parse_key(key)
    except UsageError:
        return False
    return True


def chat_type(key: str) -> ChatType | None:
    """``direct``, ``group`` or ``channel`` (the main session counts as direct); None for other shapes."""
    return parse_key(key).chat_type


def is_private(key: str) -> bool:
    """True only for the main session and positively direct chats, where private memory may be shown."""
    return parse_key(key).private


def recovered_key(agent_id: str, session_id: str) -> str:
    """Key given to a transcript found on disk whose session key is unknown."""
    return f"agent:{ascii_lower(agent_id.strip())}:recovered:{session_id.lower()}"


def validate_session_id(session_id: str) -> str:
    """Return ``session_id`` if it is safe as a file name stem, else raise UsageError."""
    if not isinstance(session_id, str) or not SESSION_ID_RE.match(session_id):
        raise UsageError(
            f"invalid session id {session_id!r}: must match {SESSION_ID_RE.pattern} (case-insensitive)"
        )
    return session_id


def is_valid_agent_id(agent_id: object) -> bool:
    """An agent id names files and folders (``<state>/agents/<agentId>/``, ``<agentId>.sqlite``): letters,
    digits, ``.``, ``-`` and ``_``, at most 64, starting with a letter or digit."""
    return isinstance(agent_id, str) and _AGENT_ID_RE.match(agent_id) is not None


def validate_agent_id(agent_id: str) -> str:
    if not is_valid_agent_id(agent_id):
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
