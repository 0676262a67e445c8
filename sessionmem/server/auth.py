"""Who may call an HTTP server of sessionmem: a bearer token in front of every route.

The MCP server (``sessionmem mcp --http``) and the HTTP gateway share this piece. The tokens come from
``$SESSIONMEM_API_KEY`` and the config's ``server.apiKeys`` (:func:`api_keys`); a request without one
of them in ``Authorization: Bearer <token>`` gets 401 before it reaches any route (:class:`BearerAuth`).
With ``cookies=True`` (a server with a web page: the inspector) a browser may instead open any page once
with ``?token=<token>``: it is redirected to the same address without it and given the token in a cookie
(HttpOnly, SameSite=Strict), which then opens every route; a request other than GET or HEAD that relies on
the cookie must also carry the ``X-Sessionmem-Request`` header (which no other site can make a browser send).

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
from http.cookies import CookieError, SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlencode

from sessionmem.config import ServerConfig, api_key_problem
from sessionmem.errors import ConfigError

API_KEY_ENV = "SESSIONMEM_API_KEY"
API_KEYS_SETTING = "server.apiKeys"
TOKEN_COOKIE = "sessionmem_token"
TOKEN_PARAMETER = "token"
COOKIE_REQUEST_HEADER = b"x-sessionmem-request"  # sent by the inspector's own scripts

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

    def __init__(self, app: App, keys: Iterable[str], *, cookies: bool = False) -> None:
        self.app = app
        self._keys = [key.encode("ascii") for key in keys]
        if not self._keys:
            raise ValueError("BearerAuth needs at least one key")
        self.cookies = cookies  # also ?token= once, then the cookie (see the module docstring)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] == "http" and self._allowed(scope):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "http" and self.cookies:
            given = _query_token(scope)
            if given is not None and scope.get("method") in ("GET", "HEAD") and self._matches(given):
                await _token_to_cookie(scope, send, given)
                return
            if self._cookie_allowed(scope):
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
        return self._matches(token.strip())

    def _cookie_allowed(self, scope: Scope) -> bool:
        headers = {name.lower(): value for name, value in scope.get("headers", ())}
        if scope.get("method") not in ("GET", "HEAD") and COOKIE_REQUEST_HEADER not in headers:
            return False  # a form or script of another site cannot set that header
        cookie = SimpleCookie()
        try:
            cookie.load(headers.get(b"cookie", b"").decode("latin-1"))
        except CookieError:
            return False
        morsel = cookie.get(TOKEN_COOKIE)
        return morsel is not None and self._matches(unquote(morsel.value).encode("latin-1", "replace"))

    def _matches(self, token: bytes) -> bool:
        matched = False
        for key in self._keys:  # every key compared: the time says nothing of which one nearly matched
            matched |= hmac.compare_digest(token, key)
        return matched


def _query_token(scope: Scope) -> bytes | None:
    """The ``token`` query parameter, if the request has one."""
    for name, value in parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True):
        if name == TOKEN_PARAMETER:
            return value.encode("latin-1", "replace")
    return None


async def _token_to_cookie(scope: Scope, send: Send, token: bytes) -> None:
    """303 to the same address without ``token`` (so it stays out of the history and the logs that
    follow), setting the cookie that opens the routes from then on."""
    rest = [
        (name, value)
        for name, value in parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        if name != TOKEN_PARAMETER
    ]
    path = scope.get("root_path", "") + scope.get("path", "/")
    if not path.startswith("/") or path.startswith("//"):
        path = "/"  # never a redirect to another host
    location = path + (f"?{urlencode(rest)}" if rest else "")
    secure = "; Secure" if scope.get("scheme") == "https" else ""
    value = quote(token.decode("latin-1"), safe="")  # a key may hold ';' or '"'
    cookie = f"{TOKEN_COOKIE}={value}; Path=/; HttpOnly; SameSite=Strict{secure}"
    await send(
        {
            "type": "http.response.start",
            "status": 303,
            "headers": [
                (b"location", location.encode("latin-1", "replace")),
                (b"set-cookie", cookie.encode("latin-1")),
                (b"cache-control", b"no-store"),
                (b"content-length", b"0"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": b""})


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
