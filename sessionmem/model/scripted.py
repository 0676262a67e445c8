"""ScriptedModel: a deterministic chat model for tests and simulations of long conversations.

It works through a queue of *steps*; each step is one of

- a ``str``: the assistant's text reply;
- a :class:`Message` (role assistant) or a :class:`ModelReply`: used as given;
- a :class:`ToolCall` or a list of them: an assistant message calling those tools;
- an exception instance (or class): raised, e.g. ``ContextWindowExceeded("too long")``;
- a callable ``(request) -> any of the above`` (sync or async): decided when the call arrives.

When the steps run out, ``responder`` (same kinds of return values) answers; without one the call
raises :class:`ScriptExhausted`. Every request is recorded in ``.calls``.

Usage is deterministic: when a step gives none, ``input`` is the tiktoken count of the whole request
(system + messages + tool schemas, see :func:`count_request_tokens`) and ``output`` the count of the
reply, so a long scripted conversation crosses the same thresholds on the same turn on every run.
With ``context_window`` (alias ``overflow_at``) the model raises :class:`ContextWindowExceeded` when
that counted prompt is over it, *without* consuming a step, so the runner's overflow recovery can
retry the same step after compacting.

It can also stream (:class:`~sessionmem.model.base.StreamingModel`): :meth:`ScriptedModel.stream` answers
like :meth:`ScriptedModel.complete`, then yields the reply's text in pieces of ``stream_chunk_chars``
characters and the reply last. Streamed requests are also recorded in ``.streamed``.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from functools import lru_cache
from itertools import count
from typing import Any

import orjson

from sessionmem.errors import ContextWindowExceeded, SessionMemError
from sessionmem.messages import Message, ToolCall, Usage
from sessionmem.model.base import ModelReply, ModelRequest
from sessionmem.model.noreply import SILENT_REPLY_TOKEN as NO_REPLY
from sessionmem.tokens import count_tokens

MESSAGE_OVERHEAD_TOKENS = 4  # role and separators, as chat formats add per message

StepValue = str | Message | ModelReply | ToolCall | Sequence[ToolCall] | BaseException | type[BaseException]
Step = StepValue | Callable[[ModelRequest], Any]
Responder = Callable[[ModelRequest], Any]

_FLUSH_WRITES = count(1)  # flush_write's tool-call ids


class ScriptExhausted(SessionMemError):
    """The scripted model was called more times than it has steps, and has no responder."""


@lru_cache(maxsize=16384)
def _count(text: str) -> int:
    return count_tokens(text)


def message_tokens(msg: Message) -> int:
    """Tokens one message occupies in a scripted prompt (content, tool calls, fixed overhead)."""
    n = MESSAGE_OVERHEAD_TOKENS + _count(msg.content)
    for call in msg.tool_calls:
        n += _count(call.name) + _count(orjson.dumps(call.arguments, option=orjson.OPT_SORT_KEYS).decode())
    if msg.tool_call_id:
        n += _count(msg.tool_call_id)
    return n


def count_request_tokens(request: ModelRequest) -> int:
    """Deterministic prompt size of ``request``: every message plus the tool schemas."""
    total = sum(message_tokens(m) for m in request.messages)
    if request.tools:
        total += _count(orjson.dumps(list(request.tools), option=orjson.OPT_SORT_KEYS).decode())
    return total


class ScriptedModel:
    """A :class:`~sessionmem.model.base.Model` that replays a script. See the module docstring."""

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        steps: Iterable[Step] = (),
        *,
        responder: Responder | None = None,
        name: str = "scripted",
        provider: str = "scripted",
        context_window: int | None = None,
        overflow_at: int | None = None,
        stream_chunk_chars: int = 3,
    ) -> None:
        self._steps: list[Step] = list(steps)
        self.stream_chunk_chars = max(1, stream_chunk_chars)
        self.streamed: list[ModelRequest] = []
        self._next = 0
        self.responder = responder
        self._name = name
        self.provider = provider
        self.context_window = overflow_at if overflow_at is not None else context_window
        self.calls: list[ModelRequest] = []

    @property
    def name(self) -> str:
        return self._name

    @property
    def remaining(self) -> int:
        """Steps not yet used."""
        return len(self._steps) - self._next

    def add_steps(self, *steps: Step) -> None:
        self._steps.extend(steps)

    def assert_complete(self) -> None:
        """Raise AssertionError unless every step has been used."""
        if self.remaining:
            raise AssertionError(
                f"scripted model: {self.remaining} of {len(self._steps)} steps were never used"
            )

    @property
    def last_request(self) -> ModelRequest:
        if not self.calls:
            raise AssertionError("scripted model was never called")
        return self.calls[-1]

    async def complete(self, request: ModelRequest) -> ModelReply:
        self.calls.append(request)
        prompt_tokens = count_request_tokens(request)
        if self.context_window is not None and prompt_tokens > self.context_window:
            raise ContextWindowExceeded(
                f"scripted model: prompt of {prompt_tokens} tokens exceeds the context window of "
                f"{self.context_window} tokens",
                status_code=400,
            )
        if self._next < len(self._steps):
            step = self._steps[self._next]
            self._next += 1
        elif self.responder is not None:
            step = self.responder
        else:
            raise ScriptExhausted(
                f"scripted model ran out of steps after {len(self._steps)} "
                f"(call #{len(self.calls)}, purpose {request.purpose!r}) and has no responder"
            )
        value = await _resolve(step, request)
        return self._reply(value, prompt_tokens)

    async def stream(self, request: ModelRequest) -> AsyncIterator[str | ModelReply]:
        """:meth:`complete`, streamed: the reply's text in small pieces, then the reply itself."""
        self.streamed.append(request)
        reply = await self.complete(request)
        text, size = reply.message.content, self.stream_chunk_chars
        for start in range(0, len(text), size):
            yield text[start : start + size]
        yield reply

    def complete_sync(self, request: ModelRequest) -> ModelReply:
        """Blocking :meth:`complete`, for callers outside an event loop."""
        import asyncio

        return asyncio.run(self.complete(request))

    def _reply(self, value: Any, prompt_tokens: int) -> ModelReply:
        if isinstance(value, ModelReply):
            reply = value
        elif isinstance(value, Message):
            if value.role != "assistant":
                raise SessionMemError(f"scripted step returned a {value.role!r} message; expected assistant")
            reply = ModelReply(value, stop_reason="toolUse" if value.tool_calls else "stop")
        elif isinstance(value, str):
            reply = ModelReply(Message.assistant(value))
        elif isinstance(value, ToolCall):
            reply = ModelReply(Message.assistant(tool_calls=(value,)), stop_reason="toolUse")
        elif isinstance(value, (list, tuple)) and value and all(isinstance(v, ToolCall) for v in value):
            reply = ModelReply(Message.assistant(tool_calls=tuple(value)), stop_reason="toolUse")
        else:
            raise SessionMemError(f"scripted step gave an unusable value: {value!r}")
        msg = reply.message
        if msg.usage is None:
            msg = Message(
                "assistant",
                msg.content,
                tool_calls=msg.tool_calls,
                usage=Usage(input=prompt_tokens, output=message_tokens(msg) - MESSAGE_OVERHEAD_TOKENS),
                timestamp=msg.timestamp,
            )
        return ModelReply(
            msg,
            model=reply.model or self._name,
            provider=reply.provider or self.provider,
            stop_reason=reply.stop_reason,
        )


async def _resolve(step: Any, request: ModelRequest) -> Any:
    """Call callables (awaiting coroutines) until a value remains; raise exceptions."""
    for _ in range(8):  # a responder may return another responder, but not forever
        if isinstance(step, BaseException):
            raise step
        if isinstance(step, type) and issubclass(step, BaseException):
            raise step("raised by scripted model")
        if callable(step) and not isinstance(step, (ToolCall, Message, ModelReply)):
            step = step(request)
            if inspect.isawaitable(step):
                step = await step
            continue
        return step
    raise SessionMemError("scripted step: callables nested too deeply")


# --- Helper responders ---------------------------------------------------------------------------


def last_user_text(request: ModelRequest) -> str:
    for m in reversed(request.messages):
        if m.role == "user":
            return m.content
    return ""


def default_summary(request: ModelRequest) -> str:
    """A deterministic compaction summary: the count of messages and the last user line."""
    convo = [m for m in request.messages if m.role in ("user", "assistant", "tool")]
    return f"Summary of {len(convo)} earlier messages. Last topic: {last_user_text(request)[:200]}"


def echo(request: ModelRequest) -> str:
    """Reply ``"ok: <last user text>"``."""
    return f"ok: {last_user_text(request)}"


def flush_write_target(request: ModelRequest, tool_name: str = "write", path_arg: str = "path") -> str | None:
    """The daily log a flush request allows writing: the ``path`` enum of its ``write`` tool, which the
    runner sets to today's ``memory/YYYY-MM-DD.md`` in the user's time zone (a frozen clock included)."""
    for schema in request.tools:
        function = schema.get("function", {})
        if function.get("name") == tool_name:
            allowed = function.get("parameters", {}).get("properties", {}).get(path_arg, {}).get("enum")
            if allowed:
                return str(allowed[0])
    return None


def written_this_turn(request: ModelRequest) -> bool:
    """True when a tool result follows the request's last user message (the turn already called a tool)."""
    for message in reversed(request.messages):
        if message.role == "tool":
            return True
        if message.role == "user":
            return False
    return False


def flush_write(
    content: str | Callable[[ModelRequest], str],
    *,
    path: str | None = None,
    tool_name: str = "write",
    path_arg: str = "path",
    content_arg: str = "content",
) -> Responder:
    """A flush handler that writes ``content`` (or ``content(request)``) with one ``tool_name`` call, then
    says NO_REPLY; in every flush, each call with its own id.

    The file is ``path`` when given, else the one the flush may write: today's daily log in the user's
    time zone (:func:`flush_write_target`), so a test under a frozen clock writes the frozen day's log.
    """

    def respond(request: ModelRequest) -> Any:
        if written_this_turn(request):
            return NO_REPLY
        target = path or flush_write_target(request, tool_name, path_arg)
        if target is None:
            raise SessionMemError(
                f"flush_write: the request offers no {tool_name!r} tool with a {path_arg!r} to write "
                f"(purpose {request.purpose!r}); pass path= or use it for flush requests only"
            )
        text = content(request) if callable(content) else content
        call_id = f"flush-write-{next(_FLUSH_WRITES)}"  # unique in the process, even across handlers
        return ToolCall(call_id, tool_name, {path_arg: target, content_arg: text})

    return respond


def overflow_on_turn(turn: int, responder: Responder = echo) -> Responder:
    """``responder``, except that the first model call of ordinary turn number ``turn`` (1-based) raises
    the provider's context overflow, once: the runner then compacts through the gate and retries."""
    seen = count(1)
    fired = False

    def respond(request: ModelRequest) -> Any:
        nonlocal fired
        new_turn = (
            request.purpose == "turn" and bool(request.messages) and request.messages[-1].role == "user"
        )
        if not fired and new_turn and next(seen) == turn:
            fired = True
            return ContextWindowExceeded(f"scripted overflow on turn {turn}", status_code=400)
        return responder(request)

    return respond


def flush_aware(
    responder: Responder = echo,
    *,
    flush: Any = NO_REPLY,
    summary: str | Callable[[ModelRequest], str] = default_summary,
    slug: str | Callable[[ModelRequest], str] | None = None,
) -> Callable[[ModelRequest], Awaitable[Any] | Any]:
    """Route by ``request.purpose``: flush turns get ``flush`` (NO_REPLY by default, or e.g.
    :func:`flush_write`), compaction turns get ``summary``, the ``/new`` file name request gets ``slug``
    (when given), everything else goes to ``responder``."""

    def respond(request: ModelRequest) -> Any:
        if request.purpose == "flush":
            return flush
        if request.purpose == "compaction":
            return summary(request) if callable(summary) else summary
        if request.purpose == "slug" and slug is not None:
            return slug(request) if callable(slug) else slug
        return responder(request)

    return respond
