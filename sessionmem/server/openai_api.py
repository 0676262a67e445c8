"""The OpenAI-compatible routes: ``POST /v1/chat/completions`` and ``GET /v1/models``.

A chat completion is one turn of the agent's session runner (:mod:`sessionmem.server.chat_request`
says which agent, which session and which text): the runner does token projection, the silent
flush, compaction, the transcript and the memory tools server-side; the client gets the reply, never
a flush turn, a tool call of the agent's own or ``NO_REPLY``. When the model calls one of the client's
own tools the response carries those calls (``finish_reason: "tool_calls"``), and a request whose new
messages are their results continues the same turn (``Session.submit_tool_results``).

Streaming (``stream: true``): server-sent events with OpenAI's chunks, then ``data: [DONE]``. The
response starts when the first piece of text is ready (or the turn ended), so an error before any text
(the upstream's rate limit, an unknown session) is an ordinary HTTP error with its status; an error
after the stream started is an event carrying the error object (the official clients raise it).

Each turn runs in a task of its own (:class:`TurnTasks`): a client that disconnects does not cut a turn
short (the transcript and memory stay whole), and shutdown waits for the turns in flight.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Coroutine
from typing import TYPE_CHECKING, Any

import orjson
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from sessionmem.server import chat_response
from sessionmem.server.chat_request import SESSION_HEADER, ChatRequest, parse_chat_request, session_key
from sessionmem.server.openai_errors import GatewayError, bad_request, from_exception

if TYPE_CHECKING:
    from sessionmem.server.agents import ServedAgents
    from sessionmem.session.runner import Session
    from sessionmem.session.turn.events import TurnResult
    from sessionmem.session.turn.streaming import PartialCallback

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 8 * 1024 * 1024  # a long chat resent whole fits; a runaway body does not


class TurnTasks:
    """The turns in flight, each a task the request awaits (shielded: a disconnect does not cancel it)."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def start(self, work: Coroutine[Any, Any, TurnResult]) -> asyncio.Task[TurnResult]:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def __len__(self) -> int:
        return len(self._tasks)

    async def drain(self) -> None:
        """Wait for every turn in flight (their errors were the requests' to report)."""
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)


class Gateway:
    """The ``/v1`` routes over ``agents``."""

    def __init__(self, agents: ServedAgents, *, max_body_bytes: int = MAX_BODY_BYTES) -> None:
        self.agents = agents
        self.turns = TurnTasks()
        self.max_body_bytes = max_body_bytes

    def routes(self) -> list[Route]:
        return [
            Route("/v1/chat/completions", self.chat_completions, methods=["POST"]),
            Route("/v1/models", self.list_models, methods=["GET"]),
        ]

    async def list_models(self, request: Request) -> Response:
        return JSONResponse(chat_response.models(self.agents.agent_ids()))

    async def chat_completions(self, request: Request) -> Response:
        try:
            body = await read_json(request, self.max_body_bytes)
            chat = parse_chat_request(body)
            if chat.agent_id not in self.agents.agent_ids():
                served = ", ".join(self.agents.agent_ids())
                raise GatewayError(
                    404,
                    f"no agent {chat.agent_id!r} here (GET /v1/models; served: {served})",
                    code="model_not_found",
                )
            key = session_key(chat.agent_id, request.headers.get(SESSION_HEADER), chat.user)
            runner = await self.agents.runner(chat.agent_id)
            session = runner.open(key)
            headers = {"X-Session-Key": session.key}
            if chat.stream:
                return await self._stream(session, chat, headers)
            result = await asyncio.shield(self.turns.start(turn_of(session, chat)))
        except Exception as exc:
            return error_response(exc)
        body = chat_response.completion(chat.model, result.reply, result.usage, tool_calls=result.tool_calls)
        return JSONResponse(body, headers=headers)

    async def _stream(self, session: Session, chat: ChatRequest, headers: dict[str, str]) -> Response:
        pieces = Pieces()
        task = self.turns.start(turn_of(session, chat, pieces.put))
        await pieces.wait(task)
        if task.done() and task.exception() is not None and not pieces:
            return error_response(task.exception())  # nothing sent yet: an ordinary HTTP error
        events = _events(pieces, task, chat.model, chat.include_usage)
        return StreamingResponse(events, media_type="text/event-stream", headers=headers)


def turn_of(
    session: Session, chat: ChatRequest, on_partial: PartialCallback | None = None
) -> Coroutine[Any, Any, TurnResult]:
    """The runner's work for ``chat``: a new turn of its text, or its tool results continuing the turn."""
    if chat.tool_results:
        return session.submit_tool_results(chat.tool_results, on_partial, tools=chat.tools)
    return session.run_turn(chat.text, on_partial, tools=chat.tools)


class Pieces:
    """The streamed reply's pieces not sent yet: the turn adds them (``put``), the response takes them."""

    def __init__(self) -> None:
        self._pending: list[str] = []
        self._added = asyncio.Event()

    def put(self, piece: str) -> None:
        self._pending.append(piece)
        self._added.set()

    def __bool__(self) -> bool:
        return bool(self._pending)

    def take(self) -> list[str]:
        taken, self._pending = self._pending, []
        self._added.clear()
        return taken

    async def wait(self, task: asyncio.Task[Any]) -> None:
        """Until a piece is waiting or the turn ended."""
        if self._pending or task.done():
            return
        added = asyncio.ensure_future(self._added.wait())
        try:
            await asyncio.wait({added, task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            added.cancel()


async def _events(
    pieces: Pieces, task: asyncio.Task[TurnResult], model: str, include_usage: bool
) -> AsyncIterator[bytes]:
    cid, created = chat_response.completion_id(), int(time.time())
    yield chat_response.sse(chat_response.chunk(cid, model, created, {"role": "assistant", "content": ""}))
    sent: list[str] = []
    while True:
        for piece in pieces.take():
            sent.append(piece)
            yield chat_response.sse(chat_response.chunk(cid, model, created, {"content": piece}))
        if task.done():
            break
        await pieces.wait(task)
    try:
        result = task.result()
    except Exception as exc:
        log.info("a streamed turn failed after it started: %s", exc)
        yield chat_response.sse(from_exception(exc).body())
        yield chat_response.DONE
        return
    streamed, reply = "".join(sent), result.reply or ""
    if reply.startswith(streamed) and len(reply) > len(streamed):  # not streamed: a command, a stop note
        yield chat_response.sse(chat_response.chunk(cid, model, created, {"content": reply[len(streamed) :]}))
    for delta in chat_response.tool_call_deltas(result.tool_calls):
        yield chat_response.sse(chat_response.chunk(cid, model, created, delta))
    finish = chat_response.finish_reason(result.tool_calls)
    yield chat_response.sse(
        chat_response.chunk(cid, model, created, {}, finish_reason=finish, usage=result.usage)
    )
    if include_usage:
        yield chat_response.sse(chat_response.usage_chunk(cid, model, created, result.usage))
    yield chat_response.DONE


async def read_json(request: Request, limit: int) -> Any:
    """The request's JSON body, read up to ``limit`` bytes: 413 beyond it, 400 when it is not JSON."""
    kind = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if kind != "application/json":
        # a web page can send a form or text/plain without asking (no CORS preflight); it cannot send JSON
        raise GatewayError(
            415, "send the body as JSON with 'Content-Type: application/json'", code="unsupported_media_type"
        )
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    data = bytearray()
    async for piece in request.stream():
        data += piece
        if len(data) > limit:
            raise _too_large(limit)
    if not data:
        raise bad_request("the request has no body: send a JSON object")
    try:
        return orjson.loads(bytes(data))
    except orjson.JSONDecodeError as exc:
        raise bad_request(f"the request body is not valid JSON: {exc}", "invalid_json") from None


def _too_large(limit: int) -> GatewayError:
    return GatewayError(413, f"the request body is over {limit:,} bytes", code="request_too_large")


def error_response(exc: BaseException | None) -> JSONResponse:
    """``exc`` as the status and error object an OpenAI client expects (unexpected ones logged)."""
    error = from_exception(exc) if exc is not None else from_exception(RuntimeError())
    if error.status >= 500 and not isinstance(exc, GatewayError):
        log.warning("request failed: %s", exc, exc_info=error.code == "internal_error")
    return JSONResponse(error.body(), status_code=error.status)
