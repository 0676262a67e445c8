"""A provider's answer that is not JSON, said as it was: the status, the content type, and the body's
first characters, without a secret.

Trigger: an embedding endpoint (a proxy's error page, a base URL pointing at a web page) answers HTTP 200
with HTML. Why: the OpenAI SDK hands litellm the text, litellm fails on it and labels that HTTP 500, so
the user read "HTTP 500" about a server that said 200, and the call was retried as a server error.
Outcome: the HTTP client of the OpenAI-SDK providers checks each successful answer
(:func:`check_json_body`, an httpx response hook) and raises :class:`NotJsonAnswer`; for litellm's own
HTTP (Gemini, Voyage, Ollama) the ``JSONDecodeError`` behind its error holds the body.
:func:`not_json_answer` finds either behind an exception, and :meth:`NotJsonAnswer.describe` says it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

BODY_HEAD_CHARS = 120  # of the body, in a message
_BODY_READ_BYTES = 4096  # decoded before the head is cut, so a secret is cut out whole, never half
REDACTED = "***"


class NotJsonAnswer(Exception):
    """A success status whose body is not JSON. ``status`` None: not known (litellm's own HTTP)."""

    def __init__(self, status: int | None, content_type: str, body: bytes | str) -> None:
        super().__init__(f"HTTP {status} with a body that is not JSON")
        self.status = status
        self.content_type = content_type
        self.size = len(body)
        self.head = body[:_BODY_READ_BYTES]

    def describe(self, secrets: Iterable[str | None] = ()) -> str:
        """``answered HTTP 200 with a body that is not JSON (text/html, 5012 bytes): '<html>…'``, the
        head cut after :data:`BODY_HEAD_CHARS` characters, every secret replaced by ``***`` first."""
        head = self.head.decode("utf-8", "replace") if isinstance(self.head, bytes) else self.head
        for secret in sorted((s for s in secrets if s), key=len, reverse=True):
            head = head.replace(secret, REDACTED)
        shown = repr(head[:BODY_HEAD_CHARS]) + ("…" if self.size > BODY_HEAD_CHARS else "")
        status = f"HTTP {self.status}" if self.status is not None else "a success status"
        kind = f"{self.content_type}, " if self.content_type else ""
        return f"answered {status} with a body that is not JSON ({kind}{self.size} bytes): {shown}"


def check_json_body(response: Any) -> None:
    """httpx response hook: a 2xx answer must be JSON. One labelled JSON is left to the SDK (a broken
    one raises its ``JSONDecodeError``); another is read and parsed here, as the SDK would."""
    if not 200 <= response.status_code < 300:
        return
    content_type = response.headers.get("content-type", "")
    if content_type.split(";")[0].strip().endswith("json"):
        return
    response.read()
    try:
        json.loads(response.content)
    except ValueError:
        raise NotJsonAnswer(response.status_code, content_type, response.content) from None


def not_json_answer(exc: BaseException) -> NotJsonAnswer | None:
    """The :class:`NotJsonAnswer` behind ``exc`` (its causes and contexts), or one made from the
    ``JSONDecodeError`` there; None when the failure was something else."""
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        if isinstance(link, NotJsonAnswer):
            return link
        if isinstance(link, json.JSONDecodeError):
            return NotJsonAnswer(None, "", link.doc)
        link = link.__cause__ or link.__context__
    return None
