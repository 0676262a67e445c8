"""Errors of the gateway as OpenAI clients expect them: a status and ``{"error": {message, type, code}}``.

Trigger: anything a request cannot get (a malformed body, an unknown agent, a session key of another
agent, an upstream that refused or timed out). Why: the official clients raise their own exception
classes from the status (``BadRequestError``, ``AuthenticationError``, ``NotFoundError``,
``RateLimitError``, ...) and show ``error.message``; a chat front end shows it to its user.
Outcome: :class:`GatewayError` carries all four; :func:`from_exception` maps sessionmem's errors:

- the upstream's rate limit -> 429 (``rate_limit_exceeded``), its being unavailable or unreachable
  -> 503 (``upstream_unavailable``), its timeout -> 504 (``upstream_timeout``), any other upstream
  failure -> 502 (``upstream_error``);
- a message that alone is over the model's window -> 400 (``context_length_exceeded``);
- a session busy past ``session.turnLockTimeoutSeconds`` -> 503 (``session_busy``);
- tool results that do not answer the pending tool calls -> 400 (``tool_call_id_mismatch``);
- a refused input (:class:`~sessionmem.errors.UsageError`) -> 400; anything else of sessionmem -> 500.
"""

from __future__ import annotations

from typing import Any

from sessionmem.errors import (
    ContextWindowExceeded,
    ModelError,
    SessionMemError,
    ToolResultsMismatch,
    TurnLockTimeout,
    UsageError,
)

INVALID_REQUEST = "invalid_request_error"
SERVER_ERROR = "server_error"

# litellm's exception classes (the ModelError's cause) by what they mean for a client
_UPSTREAM_TIMEOUT = frozenset({"Timeout", "APITimeoutError"})
_UPSTREAM_UNAVAILABLE = frozenset({"ServiceUnavailableError", "APIConnectionError", "BadGatewayError"})
_UPSTREAM_RATE_LIMIT = frozenset({"RateLimitError"})


class GatewayError(Exception):
    """One refused request: the HTTP ``status`` and OpenAI's error object."""

    def __init__(self, status: int, message: str, *, type: str = INVALID_REQUEST, code: str | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.code = code

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "code": self.code, "param": None}}


def bad_request(message: str, code: str = "invalid_request") -> GatewayError:
    return GatewayError(400, message, code=code)


def from_exception(exc: BaseException) -> GatewayError:
    """The client's view of an error raised while serving a turn (see the module docstring)."""
    if isinstance(exc, GatewayError):
        return exc
    if isinstance(exc, ContextWindowExceeded):
        return GatewayError(400, str(exc), code="context_length_exceeded")
    if isinstance(exc, ModelError):
        return _upstream(exc)
    if isinstance(exc, TurnLockTimeout):
        return GatewayError(503, str(exc), type=SERVER_ERROR, code="session_busy")
    if isinstance(exc, ToolResultsMismatch):
        return bad_request(str(exc), "tool_call_id_mismatch")
    if isinstance(exc, UsageError):
        return bad_request(str(exc))
    if isinstance(exc, SessionMemError):
        return GatewayError(500, f"{type(exc).__name__}: {exc}", type=SERVER_ERROR, code="internal_error")
    return GatewayError(
        500, "internal error (see the server's log)", type=SERVER_ERROR, code="internal_error"
    )


def _upstream(exc: ModelError) -> GatewayError:
    cause = exc.__cause__
    names = {c.__name__ for c in type(cause).__mro__} if cause is not None else set()
    status = exc.status_code
    message = f"upstream model: {exc}"
    if names & _UPSTREAM_TIMEOUT or status in (408, 504):
        return GatewayError(504, message, type=SERVER_ERROR, code="upstream_timeout")
    if names & _UPSTREAM_RATE_LIMIT or status == 429:
        return GatewayError(429, message, type="rate_limit_error", code="rate_limit_exceeded")
    if names & _UPSTREAM_UNAVAILABLE or status in (502, 503, 529):
        return GatewayError(503, message, type=SERVER_ERROR, code="upstream_unavailable")
    return GatewayError(502, message, type=SERVER_ERROR, code="upstream_error")
