"""Who may see which memory: the one rule (DESIGN decision 14), decided here and applied everywhere.

Every memory file and every transcript has an *audience label*; every reader (a session, or the
owner at the command line) has a :class:`Visibility`, the set of labels it may see. The prompt,
``memory_get``, ``memory_search`` (as a filter inside the query), ``memory_read``, the write tools, the
``/new`` hook and the index all ask this module, so the rule lives once.

Labels:

- ``owner``: ``MEMORY.md`` (and ``memory.md``) at the workspace root, the owner's long-term memory; and
  a transcript whose header names no session key (it may be a direct chat: fail closed).
- ``peer:<folder>``: everything of one chat: the files under ``memory/peers/<folder>/`` and the
  transcripts of its session key. The folder's name is a function of the chat alone, one to one
  (:func:`chat_folder_name`), and a path's label comes from that name (:func:`folder_label`), so what
  a session writes in its folder is always its own to read (DESIGN 21). The ``/new`` hook saves an
  ending conversation there: an excerpt of a transcript is as private as the transcript.
- ``shared``: every other Markdown file (``memory/*.md`` outside ``memory/peers/``, extra paths).

Readers (``memory.scope``):

- ``agent`` (the default, one memory per agent): a direct chat or the main session sees everything; a
  group, a channel or any session whose key is not positively direct sees ``shared`` and its own chat
  (its transcripts and its ``/new`` files), never another chat's. Everyone writes the root files.
- ``peer`` (a memory per person): each session sees ``shared`` and its own chat folder, where its
  ``MEMORY.md``, daily logs and ``/new`` files live; the main session also sees the root ``MEMORY.md``.
- no session (the command line, ``MemoryIndex.search`` without a visibility): the owner, everything.

Session keys (OpenClaw's shapes, ``src/routing/session-key.ts``) are read in their canonical form
(:func:`canonical_key`: the agent and the markers in lower case, the id of a person or a group as written
unless their channel ignores case). Who is who: the chat is everything after ``agent:<id>:``, a thread or
topic included (``…:direct:alice:thread:9`` is a chat of its own, with its own folder). Only keys that are
positively private count as private: ``agent:<id>:main`` and direct chats (``direct:<peer>``,
``<channel>:direct:<peer>``, ``<channel>:<account>:direct:<peer>``; ``dm`` as ``direct``), their threads
too. A key with a ``group`` or ``channel`` marker anywhere (a thread's part included), a WhatsApp group
id (``…@g.us``), and every shape not known (cron, hooks, subagents, ``discord:acc-1:guild-123:channel-456``)
are shared. ``agent:`` keys without an agent id or a rest (``agent::x``, ``agent:main``) and keys over
1,024 characters are refused with a clear error.

Pure string logic, no I/O; imported by both layers (like ``sessionmem.messages``).
"""

from __future__ import annotations

import hashlib
import string
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
ROOT_MEMORY_FILES = ("memory.md",)  # compared case-folded: MEMORY.md and memory.md

_KIND_TOKENS: dict[str, KeyKind] = {
    "direct": "direct",
    "dm": "direct",
    "group": "group",
    "channel": "channel",
}
_THREAD_TOKENS = frozenset({"thread", "topic"})
_OTHER_FIRST_TOKENS = frozenset({"cron", "hook", "subagent", "acp", "recovered", "global", "unknown"})
# Channels whose own ids ignore ASCII case or have only one: Telegram and Discord ids are numbers
# (Telegram's usernames ignore case, Discord's are lower case), Slack's are upper case (U024BE7LH),
# WhatsApp's and Signal's are phone numbers, JIDs and UUIDs, iMessage's phone numbers and e-mail
# addresses. Lowering their ASCII letters joins no two people. Every other channel's ids are kept as written.
CASE_FOLDING_CHANNELS = frozenset({"telegram", "discord", "slack", "whatsapp", "signal", "imessage"})
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)
_FOLDER_SAFE = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_-@+=.")
MAX_KEY_CHARS = 1024  # a key names a store entry and a folder: outside input, bounded
_FOLDER_MAX = 120  # longer names end in "%%" + a hash, a form no encoded name can take


@dataclass(frozen=True, slots=True)
class KeyShape:
    """What a session key says about privacy.

    ``chat`` is the key after ``agent:<id>:`` (the whole key without that prefix), a thread or topic
    suffix included: a thread is a chat of its own. It names the chat's folder and audience label.
    """

    key: str  # the canonical key (canonical_key), as the session store keys it
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
        """The audience label of everything of this chat: the label of its folder (:func:`folder_label`)."""
        return folder_label(chat_folder_name(self.chat))


def ascii_lower(text: str) -> str:
    """``text`` with the ASCII letters A-Z lowered and every other character as it is (``str.lower``
    would also turn the Kelvin sign U+212A into ``k``)."""
    return text.translate(_ASCII_LOWER)


def canonical_key(key: str) -> str:
    """The one spelling of a session key: the session store keys sessions by it, and the chat in it
    names the chat's folder, so the store and the folder agree on who is who.

    Trimmed; ``agent``, the agent id, a known first token (``main``, ``cron``, ...) and everything up to
    and including the kind marker (the channel, the account, ``direct``/``dm``/``group``/``channel``) in
    ASCII lower case; what follows the marker (the id of a person, a group, a thread) as written, except
    in :data:`CASE_FOLDING_CHANNELS`, where its ASCII letters are lowered. Never a Unicode case folding
    or normalisation. Pure and idempotent; never raises (:func:`classify_key` judges the result).
    """
    parts = key.strip().split(":")
    head: list[str] = []
    if len(parts) > 1 and ascii_lower(parts[0]) == "agent":
        head, parts = ["agent", ascii_lower(parts[1])], parts[2:]
    lowered = [ascii_lower(part) for part in parts]
    marker = next((at for at, token in enumerate(lowered[:3]) if token in _KIND_TOKENS), None)
    if marker is not None:
        folds = marker > 0 and lowered[0] in CASE_FOLDING_CHANNELS
        parts = [*lowered[: marker + 1], *(lowered if folds else parts)[marker + 1 :]]
    elif lowered and (lowered[0] == MAIN_KEY or lowered[0] in _OTHER_FIRST_TOKENS):
        parts = [lowered[0], *parts[1:]]
    return ":".join([*head, *parts])


def classify_key(key: str) -> KeyShape:
    """Parse ``key`` (in its :func:`canonical_key` form); raise :class:`UsageError` for an empty key or a
    malformed ``agent:`` key."""
    if not isinstance(key, str) or not key.strip():
        raise UsageError("session key is empty")
    if len(key) > MAX_KEY_CHARS:
        raise UsageError(f"session key is too long ({len(key):,} characters; at most {MAX_KEY_CHARS:,})")
    norm = canonical_key(key)
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
    return KeyShape(key=norm, agent_id=agent_id, rest=rest, kind=_kind(rest), chat=rest)


def _without_thread(tokens: list[str]) -> list[str]:
    """The tokens before the first ``thread:<id>`` or ``topic:<id>`` (the chat a thread is in)."""
    for at, token in enumerate(tokens[1:-1], start=1):
        if token in _THREAD_TOKENS:
            return tokens[:at]
    return tokens


def _kind(rest: str) -> KeyKind:
    tokens = ascii_lower(rest).split(":")
    # Trigger: a group or channel marker anywhere, a thread's or topic's part included. Why:
    # "agent:main:group:direct:1" or "…:direct:1:thread:group:5" could be read either way, and reading a
    # group as direct would give it private memory. Outcome: shared.
    if any(token.endswith("@g.us") for token in tokens):
        return "group"  # a WhatsApp group id
    for token in tokens:
        kind = _KIND_TOKENS.get(token)
        if kind in ("group", "channel"):
            return kind
    chat = _without_thread(tokens)
    if chat == [MAIN_KEY]:
        return "main"
    if tokens[0] in _OTHER_FIRST_TOKENS or "subagent" in tokens:
        return "other"
    # Direct only in the known shapes: direct:<peer>, <channel>:direct:<peer>,
    # <channel>:<account>:direct:<peer>, with a non-empty peer after the marker.
    for at, token in enumerate(chat[:3]):
        if _KIND_TOKENS.get(token) == "direct":
            return "direct" if any(chat[at + 1 :]) and all(chat[:at]) else "other"
    return "other"


# ---------------------------------------------------------------------------- folders and labels


def chat_folder_name(chat: str) -> str:
    """The folder of one chat under ``memory/peers/``: ``telegram:direct:42`` -> ``telegram~direct~42``.

    One name per chat and one chat per name (DESIGN 21), and a name that every file system keeps apart
    from every other: only lower-case ASCII. ``:`` becomes ``~``; lower-case letters, digits and
    ``_-@+=`` stay, and a ``.`` unless it starts the name; every other character (capitals, ``~``, ``%``,
    ``/``, ``\\``, anything not ASCII) is percent-encoded as UTF-8 bytes in lower-case hex
    (``josé`` -> ``jos%c3%a9``, ``Alice`` -> ``%41lice``). Names longer than 120 characters keep their head
    and end in ``%%`` plus a hash, which no encoded name contains.
    """
    out: list[str] = []
    for at, ch in enumerate(chat):
        if ch == ":":
            out.append("~")
        elif ch in _FOLDER_SAFE and not (ch == "." and at == 0):
            out.append(ch)
        else:
            out.extend(f"%{byte:02x}" for byte in ch.encode("utf-8", "surrogatepass"))
    name = "".join(out)
    if len(name) > _FOLDER_MAX:
        digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:24]
        name = name[:80] + "%%" + digest
    return name


def folder_label(name: str) -> str:
    """The audience label of ``memory/peers/<name>/``: ``peer:`` and the name case-folded, so that a
    path spelling a chat's folder in other capitals (one folder on a case-insensitive file system) is
    that chat's. A name :func:`chat_folder_name` made is its own case-folded form: a chat's label is
    ``peer:`` and its folder's name."""
    return PEER_PREFIX + name.casefold()


def chat_folder(key: str) -> str:
    """Workspace-relative folder of the chat behind ``key``: ``memory/peers/<name>``."""
    return classify_key(key).folder


def chat_label(key: str) -> str:
    """The audience label of everything of the chat behind ``key``."""
    return classify_key(key).label


def markdown_label(rel_path: str) -> str:
    """The audience of a Markdown memory file, from its workspace-relative path (case-folded, so a
    case-insensitive file system cannot spell a private file another way); a file under
    ``memory/peers/<name>/`` has the label of that folder (:func:`folder_label`)."""
    norm = rel_path.strip().replace("\\", "/").casefold()
    while norm.startswith("./"):
        norm = norm[2:]
    if norm in ROOT_MEMORY_FILES:
        return OWNER
    prefix = PEERS_FOLDER + "/"
    if norm.startswith(prefix):
        parts = norm[len(prefix) :].split("/")
        # A file directly in memory/peers/ belongs to no chat: fail closed (the owner's).
        return folder_label(parts[0]) if len(parts) > 1 and parts[0] else OWNER
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


# ---------------------------------------------------------------------------- who a key is (forget)


def within_chat(key: str, chat: str) -> bool:
    """Whether the session ``key`` is of the chat ``chat`` (a :attr:`KeyShape.chat`): that chat, or one of
    its threads or topics, at any depth (``…:direct:42:thread:9`` is within ``…:direct:42``)."""
    try:
        rest = classify_key(key).chat
    except UsageError:
        return False
    if rest == chat:
        return True
    tokens, parent = rest.split(":"), chat.split(":")
    return (
        len(tokens) > len(parent) + 1
        and tokens[: len(parent)] == parent
        and ascii_lower(tokens[len(parent)]) in _THREAD_TOKENS
    )


def direct_parts(key: str) -> tuple[str, str] | None:
    """A direct chat's key as (its chat up to and including the ``direct`` marker, the peer's id), a
    thread or topic left out: ``agent:main:telegram:direct:42:thread:9`` -> (``telegram:direct``,
    ``42``); None for every other kind of key (and a malformed one). The id is as the canonical key
    holds it (:func:`canonical_key`: lowered on channels that ignore case)."""
    try:
        shape = classify_key(key)
    except UsageError:
        return None
    if shape.kind != "direct":
        return None
    tokens = shape.chat.split(":")
    chat = _without_thread([ascii_lower(token) for token in tokens])
    for at, token in enumerate(chat[:3]):
        if _KIND_TOKENS.get(token) == "direct":
            return ":".join(tokens[: at + 1]), ":".join(tokens[at + 1 : len(chat)])
    return None


def is_direct_chat_with(key: str, peer: str) -> bool:
    """Whether ``key`` is a direct chat (or a thread of one) with the peer whose id is ``peer``, on any
    channel or account, the id compared as that channel writes it (``Alice`` is ``alice`` on Telegram,
    which ignores case, and not on a channel that keeps it). The same id on several channels counts as
    one person, as OpenClaw's per-peer sessions (and its identity links, which rewrite a person's ids to
    one) count it."""
    parts = direct_parts(key)
    if parts is None:
        return False
    head, theirs = parts
    written = direct_parts(f"{head}:{peer}")
    return written is not None and written[1] == theirs
