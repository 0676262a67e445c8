"""Who may see which memory: the one rule (DESIGN decision 14), decided here and applied everywhere.

Every memory file and every transcript has an *audience label*; every reader (a session, or the
owner at the command line) has a :class:`Visibility`, the set of labels it may see. The prompt,
``memory_get``, ``memory_search`` (as a filter inside the query), ``memory_read``, the write tools, the
``/new`` hook and the index all ask this module, so the rule lives once.

Labels:

- ``owner``: ``MEMORY.md`` (and ``memory.md``) at the workspace root, the owner's long-term memory; and
  a transcript whose header names no session key (it may be a direct chat: fail closed).
- ``peer:<folder>``: everything of one chat: the files under ``memory/peers/<folder>/`` and the
  transcripts of the session keys that map to ``<folder>`` (:func:`chat_folder_name`). The ``/new`` hook
  saves an ending conversation there: an excerpt of a transcript is as private as the transcript.
- ``shared``: every other Markdown file (``memory/*.md`` outside ``memory/peers/``, extra paths).

Readers (``memory.scope``):

- ``agent`` (the default, one memory per agent): a direct chat or the main session sees everything; a
  group, a channel or any session whose key is not positively direct sees ``shared`` and its own chat
  (its transcripts and its ``/new`` files), never another chat's. Everyone writes the root files.
- ``peer`` (a memory per person): each session sees ``shared`` and its own chat folder, where its
  ``MEMORY.md``, daily logs and ``/new`` files live; the main session also sees the root ``MEMORY.md``.
- no session (the command line, ``MemoryIndex.search`` without a visibility): the owner, everything.

Session keys (OpenClaw's shapes, ``src/routing/session-key.ts``): only keys that are positively
private count as private: ``agent:<id>:main`` and direct chats (``direct:<peer>``,
``<channel>:direct:<peer>``, ``<channel>:<account>:direct:<peer>``; ``dm`` as ``direct``). A key with a
``group`` or ``channel`` marker anywhere, a WhatsApp group id (``…@g.us``), and every shape not known
(cron, hooks, subagents, ``discord:acc-1:guild-123:channel-456``) are shared. ``agent:`` keys without
an agent id or a rest (``agent::x``, ``agent:main``) are refused with a clear error.

Pure string logic, no I/O; imported by both layers (like ``sessionmem.messages``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Literal

from sessionmem.errors import UsageError

KeyKind = Literal["main", "direct", "group", "channel", "other"]
MemoryScope = Literal["agent", "peer"]

MAIN_KEY = "main"
OWNER = "owner"
SHARED = "shared"
PEER_PREFIX = "peer:"
PEERS_FOLDER = "memory/peers"
ROOT_MEMORY_FILES = ("memory.md",)  # compared lowercased: MEMORY.md and memory.md

_KIND_TOKENS: dict[str, KeyKind] = {
    "direct": "direct",
    "dm": "direct",
    "group": "group",
    "channel": "channel",
}
_THREAD_MARKERS = (":thread:", ":topic:")
_OTHER_FIRST_TOKENS = frozenset({"cron", "hook", "subagent", "acp", "recovered", "global", "unknown"})
_FOLDER_SAFE = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_-@+=.")
_FOLDER_MAX = 120  # longer names end in "%%" + a hash, a form no encoded name can take


@dataclass(frozen=True, slots=True)
class KeyShape:
    """What a session key says about privacy.

    ``chat`` is the key after ``agent:<id>:`` without a thread or topic suffix: the chat the session
    belongs to, which names its folder and its audience label.
    """

    key: str  # trimmed and lowercased, as the session store keys it
    agent_id: str | None  # None for keys without the ``agent:`` prefix (legacy, hooks)
    rest: str
    kind: KeyKind
    chat: str

    @property
    def private(self) -> bool:
        """Only the main session and positively direct chats are private."""
        return self.kind in ("main", "direct")

    @property
    def chat_type(self) -> Literal["direct", "group", "channel"] | None:
        """OpenClaw's ``chatType``: the main session counts as direct; None for unknown shapes."""
        if self.kind == "main":
            return "direct"
        return None if self.kind == "other" else self.kind

    @property
    def folder(self) -> str:
        """Workspace-relative folder of this chat: ``memory/peers/<name>`` (:func:`chat_folder_name`)."""
        return f"{PEERS_FOLDER}/{chat_folder_name(self.chat)}"

    @property
    def label(self) -> str:
        """The audience label of everything of this chat: ``peer:<name>``."""
        return PEER_PREFIX + chat_folder_name(self.chat)


def classify_key(key: str) -> KeyShape:
    """Parse ``key``; raise :class:`UsageError` for an empty key or a malformed ``agent:`` key."""
    if not isinstance(key, str) or not key.strip():
        raise UsageError("session key is empty")
    norm = key.strip().lower()
    parts = norm.split(":")
    agent_id: str | None = None
    rest = norm
    if parts[0] == "agent" and len(parts) > 1:
        if len(parts) < 3 or not parts[1].strip() or not ":".join(parts[2:]).strip():
            raise UsageError(
                f"malformed session key {key.strip()!r}: expected agent:<agentId>:<rest> "
                "(e.g. agent:main:main, agent:main:telegram:direct:42)"
            )
        agent_id = parts[1]
        rest = ":".join(parts[2:])
    chat = _without_thread(rest)
    return KeyShape(key=norm, agent_id=agent_id, rest=rest, kind=_kind(chat), chat=chat)


def _without_thread(rest: str) -> str:
    for marker in _THREAD_MARKERS:
        at = rest.find(marker)
        if at > 0:
            rest = rest[:at]
    return rest


def _kind(chat: str) -> KeyKind:
    if chat == MAIN_KEY:
        return "main"
    if chat.endswith("@g.us") or "@g.us:" in chat:
        return "group"  # a WhatsApp group id
    parts = chat.split(":")
    if parts[0] in _OTHER_FIRST_TOKENS or "subagent" in parts:
        return "other"
    # Trigger: a group or channel marker anywhere. Why: "agent:main:group:direct:1" could be read
    # either way, and reading a group as direct would give it private memory. Outcome: shared.
    for part in parts:
        kind = _KIND_TOKENS.get(part)
        if kind in ("group", "channel"):
            return kind
    # Direct only in the known shapes: direct:<peer>, <channel>:direct:<peer>,
    # <channel>:<account>:direct:<peer>, with a non-empty peer after the marker.
    for at, part in enumerate(parts[:3]):
        if _KIND_TOKENS.get(part) == "direct":
            return "direct" if any(parts[at + 1 :]) and all(parts[:at]) else "other"
    return "other"


# ---------------------------------------------------------------------------- folders and labels


def chat_folder_name(chat: str) -> str:
    """The folder of one chat under ``memory/peers/``: ``telegram:direct:42`` -> ``telegram~direct~42``.

    One name per chat and one chat per name (no two chats can share a folder): ``:`` becomes ``~``,
    letters, digits and ``_-@+=`` stay, a ``.`` stays unless it starts the name, everything else
    (``~`` and ``%`` included) is percent-encoded. Names longer than 120 characters keep their head
    and end in ``%%`` plus a hash, which no encoded name contains.
    """
    out: list[str] = []
    for at, ch in enumerate(chat):
        if ch == ":":
            out.append("~")
        elif ch in _FOLDER_SAFE and not (ch == "." and at == 0):
            out.append(ch)
        else:
            out.extend(f"%{byte:02X}" for byte in ch.encode("utf-8"))
    name = "".join(out)
    if len(name) > _FOLDER_MAX:
        digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:24]
        name = name[:80] + "%%" + digest
    return name


def chat_folder(key: str) -> str:
    """Workspace-relative folder of the chat behind ``key``: ``memory/peers/<name>``."""
    return classify_key(key).folder


def chat_label(key: str) -> str:
    """The audience label of everything of the chat behind ``key``."""
    return classify_key(key).label


def markdown_label(rel_path: str) -> str:
    """The audience of a Markdown memory file, from its workspace-relative path (lowercased, so a
    case-insensitive file system cannot spell a private file another way)."""
    norm = rel_path.strip().replace("\\", "/").lower()
    while norm.startswith("./"):
        norm = norm[2:]
    if norm in ROOT_MEMORY_FILES:
        return OWNER
    prefix = PEERS_FOLDER + "/"
    if norm.startswith(prefix):
        parts = norm[len(prefix) :].split("/")
        # A file directly in memory/peers/ belongs to no chat: fail closed (the owner's).
        return PEER_PREFIX + parts[0] if len(parts) > 1 and parts[0] else OWNER
    return SHARED


def transcript_label(session_key: object) -> str:
    """The audience of a transcript, from the session key its header names; the owner's when it names
    none or a malformed one (fail closed: it may be a direct chat)."""
    if not isinstance(session_key, str) or not session_key.strip():
        return OWNER
    try:
        return chat_label(session_key)
    except UsageError:
        return OWNER


# ---------------------------------------------------------------------------- readers


@dataclass(frozen=True, slots=True)
class Visibility:
    """What one reader may see: the audience labels, or everything (``labels`` None: the owner)."""

    labels: frozenset[str] | None
    reader: str = "the owner"  # for messages: "a group session", "a direct chat"

    @property
    def everything(self) -> bool:
        return self.labels is None

    def allows(self, label: str) -> bool:
        return self.labels is None or label in self.labels


EVERYTHING = Visibility(None)


@dataclass(frozen=True, slots=True)
class MemoryHome:
    """Where one session's own memory lives: the long-term file and the folder of its daily logs."""

    memory_file: str  # "MEMORY.md", or "memory/peers/<name>/MEMORY.md" with scope peer
    daily_folder: str  # "memory", or "memory/peers/<name>" with scope peer

    def daily_log(self, stamp: str) -> str:
        """``<daily_folder>/YYYY-MM-DD.md``."""
        return f"{self.daily_folder}/{stamp}.md"


AGENT_HOME = MemoryHome("MEMORY.md", "memory")


def check_scope(scope: str) -> MemoryScope:
    if scope not in ("agent", "peer"):
        raise UsageError(f"memory.scope must be 'agent' or 'peer', not {scope!r}")
    return "agent" if scope == "agent" else "peer"


def reader_visibility(key: str | None, scope: str = "agent") -> Visibility:
    """What the session ``key`` may see under ``memory.scope`` (None: the owner, everything)."""
    scope = check_scope(scope)
    if key is None:
        return EVERYTHING
    shape = classify_key(key)
    own = shape.label
    reader = "a direct chat" if shape.private else f"a {shape.chat_type or 'shared'} session"
    if scope == "agent":
        return EVERYTHING if shape.private else Visibility(frozenset({SHARED, own}), reader)
    if shape.kind == "main":
        return Visibility(frozenset({SHARED, OWNER, own}), "the main session")
    return Visibility(frozenset({SHARED, own}), reader)


def home_for(key: str, scope: str = "agent") -> MemoryHome:
    """Where the session ``key`` writes its memory (the write tools and the flush) under ``scope``."""
    if check_scope(scope) == "agent":
        return AGENT_HOME
    shape = classify_key(key)
    if shape.kind == "main":
        return MemoryHome("MEMORY.md", shape.folder)  # the owner keeps the root MEMORY.md
    return MemoryHome(f"{shape.folder}/MEMORY.md", shape.folder)


def refusal(visibility: Visibility) -> str:
    """Why a path is refused to this reader (the same whether or not the file exists)."""
    return f"private to another chat or to the owner, not visible from {visibility.reader}"


def direct_peer(key: str) -> str | None:
    """The peer id of a direct chat's key (``telegram:direct:42`` and ``agent:main:direct:42:thread:9``
    -> ``42``), as the key is normalised; None for every other kind of key (and a malformed one).
    The same peer id on several channels or accounts counts as one person, as OpenClaw's per-peer
    sessions (and its identity links, which rewrite a person's ids to one) treat it."""
    try:
        shape = classify_key(key)
    except UsageError:
        return None
    if shape.kind != "direct":
        return None
    parts = shape.chat.split(":")
    for at, part in enumerate(parts[:3]):
        if _KIND_TOKENS.get(part) == "direct":
            return ":".join(parts[at + 1 :])
    return None
