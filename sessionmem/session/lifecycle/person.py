"""Who ``forget`` removes: one chat, or one person on every channel (DESIGN 21).

``sessionmem forget WHO`` (and :func:`~sessionmem.session.lifecycle.forget.forget`) reads ``WHO`` as:

- a session key, ``agent:<agentId>:<rest>``: that chat and its threads and topics (``…:thread:<id>``,
  ``…:topic:<id>``, at any depth), each a chat with its own folder; a key of another agent is refused;
- a key without ``agent:`` that names a chat (``telegram:direct:42``, ``discord:group:7``, ``main``):
  the same chat of the agent ``forget`` runs for, as every other way a key comes in reads it
  (:func:`~sessionmem.session.stores.keys.agent_session_key`);
- anything else is a peer id (``42``, ``Alice``, ``+15551234567``): that person on every channel and
  account, that is every direct chat with that peer (``direct:42``, ``telegram:direct:42``,
  ``discord:acct:direct:42``, and their threads), as OpenClaw's per-peer sessions (and its identity
  links, which rewrite one person's ids to one) count one id as one person; the id is compared as each
  channel writes it (lowered where the channel ignores case). The groups they were in are not theirs
  alone: those are not removed, and where they are named is listed (:mod:`sessionmem.memory.mentions`).

Which keys belong to whom, and which folder is whose, are asked of :mod:`sessionmem.privacy`
(:func:`~sessionmem.privacy.within_chat`, :func:`~sessionmem.privacy.is_direct_chat_with`, a key's
folder), the one place the rule lives. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from sessionmem.errors import UsageError
from sessionmem.privacy import ascii_lower, classify_key, direct_parts, is_direct_chat_with, within_chat
from sessionmem.session.stores import keys

MAX_WHO_CHARS = 512


@dataclass(frozen=True, slots=True)
class Person:
    """A chat (``chat`` set) or a peer across channels (``peer`` set), of one agent."""

    given: str
    agent_id: str
    chat: str | None = None  # the chat of a key (privacy.KeyShape.chat)
    peer: str | None = None  # a peer's id, as given
    key: str | None = None  # the chat's key, with the agent's prefix: it names the chat's folder

    def owns(self, key: str) -> bool:
        """Whether the session ``key`` (as a store or a transcript names it) is theirs."""
        try:
            shape = classify_key(key)
        except UsageError:
            return False
        if shape.agent_id is not None and shape.agent_id != self.agent_id:
            return False
        if self.chat is not None:
            return within_chat(key, self.chat)
        return self.peer is not None and is_direct_chat_with(key, self.peer)

    @property
    def ids(self) -> tuple[str, ...]:
        """The id that names them in text (a direct chat's peer, or the peer given): what the listing
        of shared notes looks for, besides the names the owner gives."""
        if self.peer is not None:
            return (self.peer,)
        parts = direct_parts(self.key or "")
        return (parts[1],) if parts is not None else ()

    def describe(self) -> str:
        if self.chat is not None:
            return f"the chat {self.chat} of agent {self.agent_id}"
        return f"peer {self.peer} on every channel of agent {self.agent_id}"


def parse_person(who: str, agent_id: str) -> Person:
    """Read ``who`` (see the module docstring); raise :class:`UsageError` naming what is wrong."""
    if not isinstance(who, str) or not who.strip():
        raise UsageError("forget needs a session key or a peer id")
    text = who.strip()
    if len(text) > MAX_WHO_CHARS:
        raise UsageError(f"a session key or peer id has at most {MAX_WHO_CHARS} characters")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in text):
        raise UsageError("a session key or peer id cannot hold control characters")
    agent = ascii_lower(keys.validate_agent_id(agent_id).strip())
    given = classify_key(text)  # a malformed agent: key raises UsageError here
    if given.agent_id not in (None, agent):
        raise UsageError(
            f"session key {keys.shown_key(given.key)} belongs to agent {given.agent_id!r}, not {agent!r}: "
            f"run forget for that agent (--agent {given.agent_id})"
        )
    if given.agent_id is not None or given.kind != "other":  # a key, or a chat without the prefix
        key = keys.agent_session_key(agent, text)
        return Person(text, agent, chat=classify_key(key).chat, key=key)
    parts = direct_parts(f"direct:{text}")
    if parts is None or parts[1] != text:
        raise UsageError(
            f"{text!r} is neither a session key (agent:{agent}:<channel>:direct:<peer>) nor a peer id"
        )
    return Person(text, agent, peer=text)
