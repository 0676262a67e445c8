"""The silent-reply token ``NO_REPLY`` (reference §1.9).

A model that has nothing to say answers with exactly ``NO_REPLY``; the runner then delivers nothing.
Three small rules, kept identical to OpenClaw's so transcripts and prompts behave the same:

- :func:`is_silent`: the whole reply is the token (surrounding whitespace allowed). "NO_REPLY but ..."
  is a real reply (OpenClaw #19537).
- :func:`strip_silent_token`: a real reply that *ends* with the token loses it ("Done.\\n\\nNO_REPLY" ->
  "Done."); a leading token or one glued to punctuation ("interject.NO_REPLY") stays.
- :func:`is_silent_prefix`: while streaming, a partial that may still become the token is held back
  ("NO", "NO_RE"); "N" and "No" are released because ordinary replies start that way.
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


def deliverable_reply(text: str | None) -> str | None:
    """What the user should see for a final reply: None when silent or empty after stripping."""
    if text is None or is_silent(text):
        return None
    stripped = strip_silent_token(text)
    return stripped or None
