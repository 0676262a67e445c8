"""The silent-reply token ``NO_REPLY`` (reference §1.9).

A model that has nothing to say answers with exactly ``NO_REPLY``; the runner then delivers nothing.
Three small rules, kept identical to OpenClaw's so transcripts and prompts behave the same:

- :func:`is_silent`: the whole reply is the token (surrounding whitespace allowed). "NO_REPLY but ..."
  is a real reply (OpenClaw #19537).
- :func:`strip_silent_token`: a real reply that *ends* with the token loses it ("Done.\\n\\nNO_REPLY" ->
  "Done."); a leading token or one glued to punctuation ("interject.NO_REPLY") stays.
- :func:`is_silent_prefix`: while streaming, a partial that may still become the token is held back
  ("NO", "NO_RE"); "N" and "No" are released because ordinary replies start that way.

:class:`PartialReleaser` applies these rules to a streamed reply (DESIGN: never show a piece of a
reply that turns out silent): it holds back all of it while it may still be exactly the token, and a
tail that may still become a trailing token (which the final reply loses), so the pieces shown add up
to the delivered reply.
"""

from __future__ import annotations

import re

SILENT_REPLY_TOKEN = "NO_REPLY"
HEARTBEAT_TOKEN = "HEARTBEAT_OK"

_SILENT = re.compile(r"^\s*" + SILENT_REPLY_TOKEN + r"\s*$")
_TRAILING = re.compile(r"(?:^|\s+|\*+)" + SILENT_REPLY_TOKEN + r"\s*$")
_UPPER = re.compile(r"^[A-Z_]+$")


def is_silent(text: str | None) -> bool:
    """True when ``text`` is exactly the silent token, give or take surrounding whitespace."""
    return bool(text) and _SILENT.match(text or "") is not None


def strip_silent_token(text: str) -> str:
    """Remove one trailing silent token (after whitespace, asterisks or at the start), then trim."""
    return _TRAILING.sub("", text).strip()


def is_silent_prefix(text: str | None, token: str = SILENT_REPLY_TOKEN) -> bool:
    """True when a streamed partial could still turn into ``token`` and must be held back.

    Upper-case ``[A-Z_]`` only, at least two characters, a prefix of the token; accepted once it
    contains ``_`` or, for NO_REPLY only, when it is exactly ``"NO"``.
    """
    if not text:
        return False
    partial = text.lstrip()
    if len(partial) < 2 or not _UPPER.match(partial) or not token.startswith(partial):
        return False
    return "_" in partial or (token == SILENT_REPLY_TOKEN and partial == "NO")


_TAIL = re.compile(r"[\s*]+([A-Z_]*)\s*$")


def releasable_length(text: str) -> int:
    """How many characters of a streamed partial may be shown now.

    None while the whole text may still be the token: :func:`is_silent_prefix`, and also a lone "N"
    (shown at once it would be a piece of an exact NO_REPLY reply). Otherwise all but a tail of
    whitespace/asterisks plus a possible start of the token ("Done. NO_RE", trailing blanks), which
    the final reply may drop; it is released as soon as the text goes on differently.
    """
    if SILENT_REPLY_TOKEN.startswith(text.strip()) or is_silent_prefix(text):
        return 0
    tail = _TAIL.search(text, max(0, len(text) - 64))
    if tail is not None and SILENT_REPLY_TOKEN.startswith(tail.group(1)):
        return tail.start()
    return len(text)


class PartialReleaser:
    """What of a streamed reply may be shown so far: :meth:`feed` each delta and show what it returns;
    :meth:`finish` with the delivered reply returns the rest of it. Pure: no I/O."""

    def __init__(self) -> None:
        self.text = ""  # everything streamed so far
        self.shown = ""  # what has been released (leading whitespace never is)

    def feed(self, delta: str) -> str:
        self.text += delta
        visible = self.text[: releasable_length(self.text)].lstrip()
        return self._release(visible)

    def finish(self, final: str | None) -> str:
        """The rest of ``final`` (the deliverable reply; None when silent) not shown yet."""
        return self._release(final or "")

    def _release(self, visible: str) -> str:
        if len(visible) <= len(self.shown) or not visible.startswith(self.shown):
            return ""
        out, self.shown = visible[len(self.shown) :], visible
        return out


def deliverable_reply(text: str | None) -> str | None:
    """What the user should see for a final reply: None when silent or empty after stripping."""
    if text is None or is_silent(text):
        return None
    stripped = strip_silent_token(text)
    return stripped or None
