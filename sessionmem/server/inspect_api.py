"""The management API and the inspector page: an operator's view of the agents a server serves.

:func:`inspect_routes` gives the routes; the server's app mounts them beside the gateway's, behind the
same token (:class:`~sessionmem.server.auth.BearerAuth` with ``cookies=True``, so the page opened once
with ``?token=`` keeps working from a cookie)::

    GET    /api/agents                          the agents served, the default one first
    GET    /api/sessions?agent=&page=&limit=&q= the agent's sessions, newest first (q: key holds)
    GET    /api/sessions/{key}?agent=&page=&limit=
                                                one session: entry, thresholds, timeline, a transcript page
    DELETE /api/sessions/{key}?agent=           forget that chat (the report of ``sessionmem forget``)
    GET    /api/memory/search?q=&agent=&limit=  the agent's memory search, every hit with its scores
    GET    /api/memory/files?agent=             the agent's memory files
    GET    /api/memory/files/{path}?agent=&from=&lines=
                                                one memory file, through memory_get's path rules
    GET    /inspect                             the page (its files: /inspect/static/...)

The views are :mod:`sessionmem.session.overview`'s, as ``sessionmem sessions list|show|delete`` prints
them; blocking reads run in a worker thread. Errors are JSON ``{"error": {"message", "type"}}``: 400
for a bad parameter or path, 404 for an agent, session or file that is not there, 409 when a session
stays busy past the turn lock's timeout.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from sessionmem.errors import (
    MemoryPathError,
    SessionMemError,
    SessionNotFound,
    TurnLockTimeout,
    UsageError,
)
from sessionmem.memory.search.query_bounds import MAX_QUERY_CHARS
from sessionmem.server.agents import ServedAgents

if TYPE_CHECKING:
    from sessionmem.memory.sync.transcript_names import TranscriptShelf

PAGE_FOLDER = Path(__file__).resolve().parent / "inspector"
MAX_RESULTS = 50
MAX_LINE = 100_000_000


class NotFound(SessionMemError):
    """An agent or a memory file the request names is not there (404)."""


Handler = Callable[[Request], Awaitable[Any]]


def inspect_routes(agents: ServedAgents) -> list[BaseRoute]:
    """The management API's and the inspector's routes over ``agents`` (see the module docstring)."""
    api = _Api(agents)
    return [
        Route("/api/agents", _json(api.agents), methods=["GET"]),
        Route("/api/sessions", _json(api.sessions), methods=["GET"]),
        Route("/api/sessions/{key:path}", _json(api.session), methods=["GET"]),
        Route("/api/sessions/{key:path}", _json(api.delete), methods=["DELETE"]),
        Route("/api/memory/search", _json(api.search), methods=["GET"]),
        Route("/api/memory/files", _json(api.files), methods=["GET"]),
        Route("/api/memory/files/{path:path}", _json(api.file), methods=["GET"]),
        Route("/inspect", _page, methods=["GET"]),
        Mount("/inspect/static", app=StaticFiles(directory=PAGE_FOLDER), name="inspector"),
    ]


def error_response(status: int, message: str, kind: str) -> JSONResponse:
    """The API's error body: ``{"error": {"message", "type"}}``."""
    return JSONResponse({"error": {"message": message, "type": kind}}, status_code=status)


def _json(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """``handler``'s answer as JSON; sessionmem's errors as the API's error bodies."""

    async def endpoint(request: Request) -> Response:
        try:
            return JSONResponse(await handler(request))
        except (SessionNotFound, NotFound) as exc:
            return error_response(404, str(exc), "not_found_error")
        except (UsageError, MemoryPathError) as exc:
            return error_response(400, str(exc), "invalid_request_error")
        except TurnLockTimeout as exc:
            return error_response(409, str(exc), "conflict_error")
        except SessionMemError as exc:
            return error_response(500, str(exc), "server_error")

    return endpoint


async def _page(request: Request) -> Response:
    response = FileResponse(PAGE_FOLDER / "index.html", media_type="text/html")
    # the page runs only its own files: no inline script, nothing from elsewhere
    response.headers["content-security-policy"] = (
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
        "frame-ancestors 'none'"
    )
    response.headers["cache-control"] = "no-store"
    return response


def _param(request: Request, name: str) -> str | None:
    return request.query_params.get(name)


class _Api:
    """The handlers, bound to the agents served."""

    def __init__(self, agents: ServedAgents) -> None:
        self.served = agents

    def _agent_id(self, request: Request) -> str:
        served = list(self.served.agent_ids())
        wanted = request.query_params.get("agent")
        if not wanted:
            if not served:
                raise NotFound("this server serves no agent")
            return served[0]
        if wanted not in served:
            shown = wanted if len(wanted) <= 64 else wanted[:64] + "…"
            raise NotFound(f"unknown agent {shown!r}: this server serves {', '.join(served)}")
        return wanted

    async def agents(self, request: Request) -> dict[str, Any]:
        return {"agents": list(self.served.agent_ids())}

    async def sessions(self, request: Request) -> dict[str, Any]:
        from sessionmem.session.overview import list_sessions, page_of

        agent_id = self._agent_id(request)
        page = page_of(_param(request, "page"), _param(request, "limit"))
        runner = await self.served.runner(agent_id)
        listed = await asyncio.to_thread(list_sessions, runner.store, page=page, q=_param(request, "q"))
        return {"agentId": agent_id, **listed}

    async def session(self, request: Request) -> dict[str, Any]:
        from sessionmem.session.overview import show_session

        agent_id = self._agent_id(request)
        runner = await self.served.runner(agent_id)
        return await asyncio.to_thread(
            show_session,
            runner.store,
            runner.agent,
            agent_id,
            request.path_params["key"],
            transcript_page=_param(request, "page"),
            transcript_limit=_param(request, "limit"),
            model=runner.model,
        )

    async def delete(self, request: Request) -> dict[str, Any]:
        from sessionmem.session.overview import deletable_key

        agent_id = self._agent_id(request)
        runner = await self.served.runner(agent_id)
        key = await asyncio.to_thread(deletable_key, runner.store, agent_id, request.path_params["key"])
        report = await runner.forget(key)
        return {"agentId": agent_id, "deleted": key, **report.to_json()}

    async def search(self, request: Request) -> dict[str, Any]:
        from sessionmem.memory.search.records import SearchRequest
        from sessionmem.session.overview import page_of

        agent_id = self._agent_id(request)
        query = (request.query_params.get("q") or "").strip()
        if not query:
            raise UsageError("q (the search query) is required")
        if len(query) > MAX_QUERY_CHARS:
            raise UsageError(f"q is too long ({len(query):,} characters; at most {MAX_QUERY_CHARS:,})")
        limit = page_of(None, _param(request, "limit"), default_limit=10).limit
        runner = await self.served.runner(agent_id)
        index = runner.memory_index
        if index is None:
            raise UsageError(f"memory search is off for agent {agent_id!r} (memorySearch.enabled)")
        wanted = SearchRequest(query=query, max_results=min(limit, MAX_RESULTS), explain=True)
        response = await asyncio.to_thread(index.search, wanted)
        return {"agentId": agent_id, "query": query, **response.to_json()}

    async def files(self, request: Request) -> dict[str, Any]:
        from sessionmem.memory.sync.sources import list_memory_files

        agent_id = self._agent_id(request)
        app = self.served.context(agent_id)
        found = await asyncio.to_thread(list_memory_files, app.workspace, app.agent.memory_search.extra_paths)
        return {
            "agentId": agent_id,
            "files": [
                {"path": f.rel_path, "size": f.size, "mtimeMs": f.mtime_ns // 1_000_000} for f in found
            ],
        }

    async def file(self, request: Request) -> dict[str, Any]:
        from sessionmem.session.stores.backend import transcript_shelf

        shelf = None  # a transcript is read where the agent's store keeps it (files, or PostgreSQL rows)
        if "sessions/" in request.path_params["path"]:
            shelf = transcript_shelf((await self.served.runner(self._agent_id(request))).store)
        return await asyncio.to_thread(self._read_file, request, shelf)

    def _read_file(self, request: Request, shelf: TranscriptShelf | None) -> dict[str, Any]:
        from sessionmem.memory.tools.paths import resolve_memory_target, target_exists
        from sessionmem.memory.tools.reading import handle_memory_get
        from sessionmem.session.overview import bounded_int

        agent_id = self._agent_id(request)
        app = self.served.context(agent_id)
        path = request.path_params["path"]
        extra = app.agent.memory_search.extra_paths
        target = resolve_memory_target(app.workspace, path, extra, transcripts=shelf)
        if not target_exists(target):
            raise NotFound(f"no memory file {target.display}")
        args: dict[str, Any] = {"path": path}
        for name in ("from", "lines"):  # the first line (1-based) and how many: memory_get's own caps apply
            value = _param(request, name)
            if value:
                args[name] = bounded_int(name, value, 1, 1, MAX_LINE)
        got = handle_memory_get(app.workspace, args, extra_paths=extra, transcripts=shelf)
        if got.get("disabled"):
            raise UsageError(str(got.get("error") or "cannot read that file"))
        return {"agentId": agent_id, **got}
