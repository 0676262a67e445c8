"""Who ``forget`` removes: one chat, or one person on every channel (DESIGN 21).

``sessionmem forget WHO`` (and :func:`~sessionmem.session.forget.forget`) reads ``WHO`` as:

- a session key, ``agent:<agentId>:<rest>``: that chat, with every session key of it: the key itself
  and its threads and topics (``…:thread:<id>``, ``…:topic:<id>``: a thread is part of its chat), in any
  case, each with the folder :func:`sessionmem.privacy.chat_folder` gives it. A key of another agent is
  refused;
- a key without ``agent:`` that names a chat (``telegram:direct:42``, ``discord:group:7``, ``main``):
  the same chat of the agent ``forget`` runs for;
- anything else is a peer id (``42``, ``alice``, ``+15551234567``): that person on every channel and
  account, that is every direct chat whose peer is that id (``direct:42``, ``telegram:direct:42``,
  ``discord:acct:direct:42``, and their threads), as OpenClaw's per-peer sessions (and its identity
  links, which rewrite one person's ids to one) count one id as one person. The groups they were in are
  not theirs alone: those are not removed, and where they are named is listed
  (:mod:`sessionmem.memory.mentions`).

Which keys belong to whom, and which folder is whose, are asked of :mod:`sessionmem.privacy` (its
``chat`` of a key and :func:`~sessionmem.privacy.direct_peer`), the one place the rule lives.
Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from sessionmem.errors import UsageError
from sessionmem.privacy import classify_key, direct_peer
from sessionmem.session import keys

MAX_WHO_CHARS = 512


@dataclass(frozen=True, slots=True)
class Person:
    """A chat (``chat`` set) or a peer across channels (``peer`` set), of one agent."""

    given: str
    agent_id: str
    chat: str | None = None  # the chat of a key (privacy.KeyShape.chat)
    peer: str | None = None  # a peer id as keys hold it (privacy.direct_peer)
    key: str | None = None  # the key given, with the agent's prefix: it names the chat's folder

    def owns(self, key: str) -> bool:
        """Whether the session ``key`` (as a store or a transcript names it) is theirs."""
        try:
            shape = classify_key(key)
        except UsageError:
            return False
        if shape.agent_id is not None and shape.agent_id != self.agent_id:
            return False
        if self.chat is not None:
            return shape.chat == self.chat
        return direct_peer(key) == self.peer

    @property
    def ids(self) -> tuple[str, ...]:
        """The id that names them in text (a direct chat's peer, or the peer given): what the listing
        of shared notes looks for, besides the names the owner gives."""
        peer = self.peer if self.peer is not None else direct_peer(self.key or "")
        return (peer,) if peer else ()

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
    agent = keys.normalize_key(keys.validate_agent_id(agent_id))
    if text.lower().startswith("agent:"):
        shape = classify_key(text)  # a malformed agent: key raises UsageError here
        if shape.agent_id != agent:
            raise UsageError(
                f"session key {text!r} is a key of agent {shape.agent_id}, not {agent}: "
                f"run forget for that agent (--agent {shape.agent_id})"
            )
        return Person(text, agent, chat=shape.chat, key=shape.key)
    bare = classify_key(text)
    if bare.kind != "other":  # telegram:direct:42, discord:group:7, main: a chat without the prefix
        key = f"agent:{agent}:{bare.rest}"
        return Person(text, agent, chat=classify_key(key).chat, key=key)
    as_direct = classify_key(f"direct:{text}")
    peer = direct_peer(as_direct.key)
    if peer is None or as_direct.rest != as_direct.chat:
        raise UsageError(
            f"{text!r} is neither a session key (agent:{agent}:<channel>:direct:<peer>) nor a peer id"
        )
    return Person(text, agent, peer=peer)
