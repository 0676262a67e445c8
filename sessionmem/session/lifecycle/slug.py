"""Filename slugs for session-memory files: one short model call, with a time-based fallback.

The prompt is OpenClaw's, verbatim (reference §4), so a model that names OpenClaw's files names ours
the same way. The model's answer is cleaned to ``[a-z0-9-]``, at most 30 characters; anything
unusable (no model, an error, a timeout, an empty answer) falls back to the UTC ``HHMM`` of the
event, so a memory file is always written.
"""

from __future__ import annotations

import asyncio
import logging
import re
from datetime import UTC, datetime
from typing import Any

from sessionmem.messages import Message
from sessionmem.model.base import ModelRequest

log = logging.getLogger(__name__)

SLUG_PROMPT_CHARS = 2000
SLUG_MAX_CHARS = 30
SLUG_TIMEOUT_S = 15.0

SLUG_PROMPT_TEMPLATE = (
    "Based on this conversation, generate a short 1-2 word filename slug "
    "(lowercase, hyphen-separated, no file extension).\n"
    "\n"
    "Conversation summary:\n"
    "{content}\n"
    "\n"
    'Reply with ONLY the slug, nothing else. Examples: "vendor-pitch", "api-design", "bug-fix"'
)


def slug_prompt(content: str) -> str:
    """The slug prompt for a conversation (its first 2000 characters)."""
    return SLUG_PROMPT_TEMPLATE.format(content=content[:SLUG_PROMPT_CHARS])


def clean_slug(text: str | None) -> str | None:
    """trim → lowercase → non ``[a-z0-9-]`` to ``-`` → collapse ``-`` runs → strip ``-`` → 30 chars."""
    if not text:
        return None
    slug = re.sub(r"[^a-z0-9-]", "-", text.strip().lower())
    slug = re.sub(r"-+", "-", slug).strip("-")
    # Truncating can leave a trailing dash ("api-design-" at 30); strip again so names stay tidy.
    slug = slug[:SLUG_MAX_CHARS].strip("-")
    return slug or None


def fallback_slug(when: datetime) -> str:
    """UTC ``HHMM`` of ``when`` (naive datetimes are taken as UTC)."""
    return as_utc(when).strftime("%H%M")


def as_utc(when: datetime) -> datetime:
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


async def generate_slug(model: Any, content: str, *, timeout_s: float = SLUG_TIMEOUT_S) -> str | None:
    """Ask ``model`` (a :class:`~sessionmem.model.base.Model`) for a slug; None when it gives none.

    Never raises: a slug is a nicety and must not cost the user their memory file.
    """
    if model is None or not content.strip():
        return None
    request = ModelRequest(messages=(Message.user(slug_prompt(content)),), purpose="slug")
    try:
        reply = await asyncio.wait_for(model.complete(request), timeout=timeout_s)
    except Exception as exc:  # timeouts included
        log.warning("slug generation failed, using the time instead: %s: %s", type(exc).__name__, exc)
        return None
    text = reply.message.content if reply is not None else ""
    # OpenClaw cleans the first payload text; a multi-line answer is read up to its first line.
    first = next((line for line in (text or "").splitlines() if line.strip()), "")
    return clean_slug(first)
