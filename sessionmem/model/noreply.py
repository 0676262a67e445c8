"""The silent-reply token ``NO_REPLY`` (reference §1.9, and OpenClaw's current tests).

A model that has nothing to say answers ``NO_REPLY``; the runner then delivers nothing. The rules:

- :func:`is_silent`: the whole reply is the token, in any case, give or take surrounding whitespace
  (``no_reply``), or the single-key JSON envelope ``{"action":"NO_REPLY"}``. "NO_REPLY but ..." is a
  real reply (OpenClaw #19537), and so is an envelope with any other key.
- :func:`strip_leading_silent_token`: a token glued to the text after it ("NO_REPLYThe user is saying
  hello") is dropped and the rest delivered; a token followed by a space or punctuation stays.
- :func:`strip_silent_token`: a real reply that *ends* with the token loses it ("Done.\\n\\nNO_REPLY" ->
  "Done."); a token glued to punctuation before it ("interject.NO_REPLY") stays.
- :func:`is_silent_prefix`: OpenClaw's test for a streamed partial that may still become the token.

Reasoning blocks (``<think>…</think>``, :mod:`sessionmem.model.reasoning`) are removed first, so
``<think>…</think>NO_REPLY`` is silence and only the answer after a block is delivered.

The token is configurable (``silentReplyToken``), and heartbeat runs also take ``HEARTBEAT_OK`` as
silence (:func:`silent_tokens`); every function takes the token(s) to apply.

:class:`PartialReleaser` applies these rules to a streamed reply (DESIGN: never show a piece of a
reply that turns out silent): it holds back all of it while it may still be a token (in any case) or a
JSON envelope, and a tail that may still become a trailing token (which the final reply loses), so the
pieces shown add up to the delivered reply.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

import orjson

from sessionmem.model.reasoning import strip_reasoning

SILENT_REPLY_TOKEN = "NO_REPLY"
HEARTBEAT_TOKEN = "HEARTBEAT_OK"
ENVELOPE_MAX_CHARS = 64  # a longer reply starting with "{" cannot be a single-key envelope

_UPPER = re.compile(r"^[A-Z_]+$")


def silent_tokens(token: str = SILENT_REPLY_TOKEN, *, heartbeat: bool = False) -> tuple[str, ...]:
    """The tokens that mean silence: the configured one, and ``HEARTBEAT_OK`` in heartbeat runs."""
    return (token, HEARTBEAT_TOKEN) if heartbeat and token.upper() != HEARTBEAT_TOKEN else (token,)


@lru_cache(maxsize=32)
def _patterns(token: str) -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    escaped = re.escape(token)
    exact = re.compile(rf"^\s*{escaped}\s*$", re.IGNORECASE)
    trailing = re.compile(rf"(?:^|\s+|\*+){escaped}\s*$")
    glued = re.compile(rf"^\s*{escaped}(?=[^\W\d_])", re.IGNORECASE)  # followed by a letter
    return exact, trailing, glued


def is_silent(text: str | None, token: str = SILENT_REPLY_TOKEN) -> bool:
    """True when ``text`` is the silent token (any case, surrounding whitespace allowed) or the JSON
    envelope ``{"action": "<token>"}`` with no other key."""
    if not text:
        return False
    return _patterns(token)[0].match(text) is not None or is_silent_envelope(text, token)


def is_silent_envelope(text: str, token: str = SILENT_REPLY_TOKEN) -> bool:
    """True for ``{"action":"NO_REPLY"}`` (any spacing, the token in any case) and nothing else."""
    body = text.strip()
    if not (body.startswith("{") and body.endswith("}")) or len(body) > ENVELOPE_MAX_CHARS:
        return False
    try:
        data = orjson.loads(body)
    except ValueError:
        return False
    if not isinstance(data, dict) or list(data) != ["action"] or not isinstance(data["action"], str):
        return False
    return data["action"].strip().upper() == token.upper()


def strip_leading_silent_token(text: str, token: str = SILENT_REPLY_TOKEN) -> str:
    """Drop a token glued to the letter after it ("NO_REPLYThe user ..." -> "The user ...")."""
    return _patterns(token)[2].sub("", text, count=1)


def strip_silent_token(text: str, token: str = SILENT_REPLY_TOKEN) -> str:
    """Remove one trailing silent token (after whitespace, asterisks or at the start), then trim."""
    return _patterns(token)[1].sub("", text).strip()


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


_TAIL = re.compile(r"[\s*]+([A-Za-z_]*)\s*$")


def releasable_length(text: str, tokens: Sequence[str] = (SILENT_REPLY_TOKEN,)) -> int:
    """How many characters of a streamed partial may be shown now.

    None while the whole text may still be a token, in any case (a lone "N" or "no" included: shown
    at once, it would be a piece of a silent reply), or a JSON envelope (it starts with "{" and is
    short). Otherwise all but a tail of whitespace/asterisks plus a possible start of a token
    ("Done. NO_RE", trailing blanks), which the final reply may drop; it is released as soon as the
    text goes on differently.
    """
    head = text.strip()
    if any(token.upper().startswith(head.upper()) or is_silent_prefix(text, token) for token in tokens):
        return 0
    if head.startswith("{") and len(head) <= ENVELOPE_MAX_CHARS:
        return 0
    cut = len(text)
    tail = _TAIL.search(text, max(0, len(text) - 64))
    if tail is not None and any(token.startswith(tail.group(1)) for token in tokens):
        cut = tail.start()
    return cut


class PartialReleaser:
    """What of a streamed reply may be shown so far: :meth:`feed` each delta and show what it returns;
    :meth:`finish` with the delivered reply returns the rest of it. Pure: no I/O."""

    def __init__(self, tokens: Sequence[str] = (SILENT_REPLY_TOKEN,)) -> None:
        self.tokens = tuple(tokens)
        self.text = ""  # everything streamed so far
        self.shown = ""  # what has been released (leading whitespace never is)

    def feed(self, delta: str) -> str:
        self.text += delta
        visible = strip_reasoning(self.text, final=False)  # an open reasoning block is held back whole
        visible = visible[: releasable_length(visible, self.tokens)]
        for token in self.tokens:
            visible = strip_leading_silent_token(visible, token)
        return self._release(visible.lstrip())

    def finish(self, final: str | None) -> str:
        """The rest of ``final`` (the deliverable reply; None when silent) not shown yet."""
        return self._release(final or "")

    def _release(self, visible: str) -> str:
        if len(visible) <= len(self.shown) or not visible.startswith(self.shown):
            return ""
        out, self.shown = visible[len(self.shown) :], visible
        return out


def deliverable_reply(text: str | None, tokens: Sequence[str] = (SILENT_REPLY_TOKEN,)) -> str | None:
    """What the user should see for a final reply: its reasoning blocks removed
    (:func:`~sessionmem.model.reasoning.strip_reasoning`), then None when silent, or empty once the
    tokens glued to its start or ending it are removed."""
    if text is None:
        return None
    text = strip_reasoning(text)
    if any(is_silent(text, token) for token in tokens):
        return None
    for token in tokens:
        text = strip_silent_token(strip_leading_silent_token(text, token), token)
    return text.strip() or None
