"""The ASGI app ``sessionmem serve`` runs: the gateway's routes behind the bearer-token guard.

:func:`create_app` puts together the OpenAI-compatible routes (:mod:`sessionmem.server.openai_api`), the
management API and the inspector (:mod:`sessionmem.server.inspect_api`), any other routes given, the
token guard (:class:`sessionmem.server.auth.BearerAuth`, when keys are given) and a lifespan that, at
shutdown, waits for the turns in flight and then closes the agents (:meth:`AgentPool.aclose`). Errors of any
route, a path that does not exist included, are OpenAI-style error objects.

Use::

    app = create_app(AgentPool(contexts, model_for), api_keys=("sk-...",))
    uvicorn.run(app, host="127.0.0.1", port=8080)
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute

from sessionmem.server.agents import ServedAgents
from sessionmem.server.auth import App, BearerAuth
from sessionmem.server.inspect_api import inspect_routes
from sessionmem.server.openai_api import MAX_BODY_BYTES, Gateway
from sessionmem.server.openai_errors import GatewayError


def create_app(
    agents: ServedAgents,
    *,
    api_keys: Iterable[str] = (),
    routes: Sequence[BaseRoute] = (),
    max_body_bytes: int = MAX_BODY_BYTES,
) -> App:
    """The app serving ``agents``: ``/v1/chat/completions``, ``/v1/models`` and ``routes``; every request
    needs ``Authorization: Bearer <one of api_keys>`` when any is given. At shutdown the turns in flight
    finish, then ``agents.aclose()`` runs when it has one (an :class:`AgentPool` does)."""
    gateway = Gateway(agents, max_body_bytes=max_body_bytes)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await gateway.turns.drain()
            close = getattr(agents, "aclose", None)
            if close is not None:
                await close()

    app = Starlette(
        routes=[*gateway.routes(), *inspect_routes(agents), *routes],
        lifespan=lifespan,
        exception_handlers={HTTPException: _http_error},
    )
    app.state.gateway = gateway
    keys = [key for key in api_keys if key]
    # cookies: the inspector page opened once with ?token= keeps a cookie (sessionmem.server.auth)
    return BearerAuth(app, keys, cookies=True) if keys else app


async def _http_error(request: Request, exc: Any) -> Response:
    """Starlette's own refusals (no such path, a method not allowed) as OpenAI error objects."""
    status = getattr(exc, "status_code", 500)
    detail = getattr(exc, "detail", "") or "error"
    code = {404: "not_found", 405: "method_not_allowed"}.get(status)
    error = GatewayError(status, f"{request.method} {request.url.path}: {detail}", code=code)
    return JSONResponse(error.body(), status_code=status, headers=getattr(exc, "headers", None))
