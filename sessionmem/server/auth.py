"""Who may call an HTTP server of sessionmem: a bearer token in front of every route.

The MCP server (``sessionmem mcp --http``) and the HTTP gateway share this piece. The tokens come from
``$SESSIONMEM_API_KEY`` and the config's ``server.apiKeys`` (:func:`api_keys`); a request without one
of them in ``Authorization: Bearer <token>`` gets 401 before it reaches any route (:class:`BearerAuth`).

Trigger: a server asked to listen on an address other machines can reach (``0.0.0.0``, a LAN address).
Why: it would hand every person's notes to anyone on the network, and the MCP SDK's DNS-rebinding
check is on only for loopback hosts. Outcome: :func:`require_guard` refuses it unless a token guards
it, naming both ways to set one. On loopback a token is optional, and required once one is set.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping
from typing import Any

from sessionmem.config import ServerConfig, api_key_problem
from sessionmem.errors import ConfigError

API_KEY_ENV = "SESSIONMEM_API_KEY"
API_KEYS_SETTING = "server.apiKeys"

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


def api_keys(settings: ServerConfig, env: Mapping[str, str]) -> tuple[str, ...]:
    """The tokens that open the servers: ``$SESSIONMEM_API_KEY`` (when set) and the config's
    ``server.apiKeys`` (checked when the config loaded). A bad environment value is a ConfigError
    that names the variable, never its value."""
    keys = [key.get_secret_value() for key in settings.api_keys]
    from_env = env.get(API_KEY_ENV, "").strip()
    if from_env:
        problem = api_key_problem(from_env)
        if problem is not None:
            raise ConfigError(f"${API_KEY_ENV}: {problem}")
        keys.insert(0, from_env)
    return tuple(dict.fromkeys(keys))


def is_loopback(host: str) -> bool:
    """True for an address only this machine reaches (127.0.0.0/8, ::1, ``localhost``)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def require_guard(host: str, keys: Iterable[str]) -> None:
    """Refuse to serve on ``host`` when other machines reach it and no token guards it."""
    if is_loopback(host) or any(keys):
        return
    raise ConfigError(
        f"refusing to serve on {host}: other machines can reach that address and no API key guards it. "
        f"Set ${API_KEY_ENV} or {API_KEYS_SETTING} in the config (clients then send "
        "'Authorization: Bearer <key>'), or listen on 127.0.0.1"
    )


class BearerAuth:
    """ASGI middleware: an HTTP request passes only with ``Authorization: Bearer <one of keys>``
    (compared in constant time); any other gets 401 with an OpenAI-style error body. Lifespan events
    pass; anything else (a websocket) is refused."""

    def __init__(self, app: App, keys: Iterable[str]) -> None:
        self.app = app
        self._keys = [key.encode("ascii") for key in keys]
        if not self._keys:
            raise ValueError("BearerAuth needs at least one key")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] == "http" and self._allowed(scope):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "http":
            await _unauthorized(send)
        # a websocket (or another kind) is not accepted: returning without accepting closes it

    def _allowed(self, scope: Scope) -> bool:
        given = b""
        for name, value in scope.get("headers", ()):
            if name.lower() == b"authorization":
                given = value
                break
        scheme, _, token = given.partition(b" ")
        if scheme.lower() != b"bearer":
            return False
        token = token.strip()
        matched = False
        for key in self._keys:  # every key compared: the time says nothing of which one nearly matched
            matched |= hmac.compare_digest(token, key)
        return matched


async def _unauthorized(send: Send) -> None:
    body = json.dumps(
        {
            "error": {
                "message": "missing or wrong API key: send 'Authorization: Bearer <key>'",
                "type": "authentication_error",
                "code": "invalid_api_key",
            }
        }
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"www-authenticate", b'Bearer realm="sessionmem"'),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
