"""LiteLLMModel: the chat adapter over litellm, and the only module that imports litellm for chat.

Async (:meth:`LiteLLMModel.complete`, ``litellm.acompletion``), blocking
(:meth:`LiteLLMModel.complete_sync`, ``litellm.completion``) and streaming (:meth:`LiteLLMModel.stream`,
``acompletion(stream=True)``; the chunks are assembled by :class:`StreamAssembler` into the same response
shape) calls share the request building (:meth:`LiteLLMModel.request_kwargs`), the error mapping and the
response parsing; only the call differs.
litellm is imported inside the calling methods (it takes seconds to import), after
:func:`sessionmem.tokens.configure_litellm_environment` so it never fetches its price map.
litellm's exceptions are translated here and nowhere else: a context-window error (its own class,
or a 400 whose message talks about the context length) becomes :class:`ContextWindowExceeded`, with
the window the provider stated when its message says it (:func:`stated_window`), everything else
:class:`ModelError` with the HTTP status when there is one.
"""

from __future__ import annotations

import asyncio
import logging
import re
import sys
from collections.abc import AsyncIterator
from typing import Any

import orjson

from sessionmem.errors import ContextWindowExceeded, ModelError
from sessionmem.messages import UNPARSED_ARGUMENTS, Message, ToolCall, Usage
from sessionmem.model.base import ModelReply, ModelRequest
from sessionmem.tokens import configure_litellm_environment

_CONTEXT_RE = re.compile(
    r"context[ _-]?(length|window)|maximum context|too many tokens|prompt is too long|"
    r"input is too long|exceeds the (model'?s )?(maximum|max)",
    re.IGNORECASE,
)

# How litellm's providers state the window in a context-overflow error (litellm's exception mapping,
# ExceptionCheckers.is_error_str_context_window_exceeded, lists these messages); the group is the window.
_N = r"(\d[\d,_]*)"
_STATED_WINDOW = [
    re.compile(p, re.IGNORECASE)
    for p in (
        rf"maximum context length is {_N}",  # OpenAI, vLLM, Azure, most OpenAI-compatible servers
        rf"maximum context length of {_N}",  # "requested token count exceeds the model's maximum ..."
        rf"{_N} maximum context length",  # Mistral: "too large for model with 8192 maximum context length"
        rf"tokens > {_N} maximum",  # Anthropic: "prompt is too long: 210000 tokens > 200000 maximum"
        rf"while limit is {_N}",  # Cerebras: "Current length is X while limit is Y"
        rf"maximum input length is {_N}",
        rf"input tokens, limit is {_N}",  # "Input too long: X input tokens, limit is Y"
        rf"available context size \({_N} tokens\)",  # llama.cpp
        rf"maximum number of tokens allowed \({_N}\)",  # Gemini
        rf"configured limit of {_N}",  # OpenAI: "input tokens exceed the configured limit of N tokens"
        rf"`max_new_tokens` must be <= {_N}",  # Hugging Face TGI: inputs + max_new_tokens <= N
        rf"exceed model maximum \({_N}\)",  # Bedrock: "prompt tokens (X) exceed model maximum (Y)"
        rf"maximum context limit (?:of )?{_N}",
    )
]
MIN_STATED_WINDOW = 256  # a smaller figure is not a context window (a parse of something else)

_STOP_REASONS = {
    "stop": "stop",
    "end_turn": "stop",
    "length": "length",
    "max_tokens": "length",
    "tool_calls": "toolUse",
    "function_call": "toolUse",
    "tool_use": "toolUse",
    "content_filter": "error",
}


class LiteLLMModel:
    """A :class:`~sessionmem.model.base.Model` served by litellm (any provider it supports).

    ``model`` is litellm's model string (``openai/gpt-4o-mini``, ``anthropic/claude-…``); extra keyword
    arguments (``temperature``, ``num_retries``, ...) are passed to ``litellm.acompletion`` as given.
    """

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        extra_headers: dict[str, str] | None = None,
        timeout: float | None = None,
        **kwargs: Any,
    ) -> None:
        self.model = model
        self.api_base = api_base
        self.api_key = api_key
        self.extra_headers = dict(extra_headers or {})
        self.timeout = timeout
        self.kwargs = kwargs

    @property
    def name(self) -> str:
        return self.model

    @property
    def provider(self) -> str:
        return self.model.split("/", 1)[0] if "/" in self.model else ""

    def __repr__(self) -> str:
        return f"LiteLLMModel({self.model!r}, api_base={self.api_base!r})"

    def with_model(self, model: str) -> LiteLLMModel:
        """Another model on the same connection (endpoint, key, headers, timeout, extra arguments)."""
        return LiteLLMModel(
            model,
            api_base=self.api_base,
            api_key=self.api_key,
            extra_headers=self.extra_headers,
            timeout=self.timeout,
            **self.kwargs,
        )

    def request_kwargs(self, request: ModelRequest) -> dict[str, Any]:
        """The keyword arguments for ``litellm.acompletion`` / ``litellm.completion`` (pure; useful to
        inspect)."""
        kw: dict[str, Any] = {
            "model": self.model,
            "messages": [m.to_openai() for m in request.messages],
            **self.kwargs,
        }
        if request.tools:
            kw["tools"] = list(request.tools)
            # Trigger: litellm (1.106) imports its MCP bridge whenever ``tools`` is given, and that needs
            # the optional ``mcp`` package. Why: our tools are plain function schemas, never MCP servers.
            # Outcome: litellm's own internal flag skips the bridge, so tool calls work without ``mcp``.
            kw["_skip_mcp_handler"] = True
        if request.max_tokens is not None:
            kw["max_tokens"] = request.max_tokens
        if self.api_base is not None:
            kw["api_base"] = self.api_base
        if self.api_key is not None:
            kw["api_key"] = self.api_key
        if self.extra_headers:
            kw["extra_headers"] = self.extra_headers
        if self.timeout is not None:
            kw["timeout"] = self.timeout
        return kw

    async def complete(self, request: ModelRequest) -> ModelReply:
        litellm = _import_litellm()
        try:
            response = await litellm.acompletion(**self.request_kwargs(request))
        except Exception as exc:  # translated at this one boundary
            raise map_litellm_error(exc, self.model) from exc
        return self._reply(response)

    def complete_sync(self, request: ModelRequest) -> ModelReply:
        """Blocking :meth:`complete` (``litellm.completion``), for callers without an event loop."""
        litellm = _import_litellm()
        try:
            response = litellm.completion(**self.request_kwargs(request))
        except Exception as exc:  # translated at this one boundary
            raise map_litellm_error(exc, self.model) from exc
        return self._reply(response)

    async def stream(self, request: ModelRequest) -> AsyncIterator[str | ModelReply]:
        """Stream the reply (:class:`~sessionmem.model.base.StreamingModel`): text deltas as they arrive,
        then the whole reply with its tool calls and usage (asked for with ``include_usage``)."""
        litellm = _import_litellm()
        kwargs = {**self.request_kwargs(request), "stream": True, "stream_options": {"include_usage": True}}
        assembler = StreamAssembler()
        try:
            chunks = (await litellm.acompletion(**kwargs)).__aiter__()
        except Exception as exc:  # translated at this one boundary
            raise map_litellm_error(exc, self.model) from exc
        while True:
            try:
                chunk = await chunks.__anext__()
            except StopAsyncIteration:
                break
            except Exception as exc:  # a stream cut off mid-way
                raise map_litellm_error(exc, self.model) from exc
            text = assembler.add(chunk)
            if text:
                yield text
        yield self._reply(assembler.response())

    def _reply(self, response: Any) -> ModelReply:
        return parse_response(response, default_model=self.model, provider=self.provider)


log = logging.getLogger(__name__)

SETTLE_TIMEOUT_S = 5.0


async def settle_background_work(timeout_s: float = SETTLE_TIMEOUT_S) -> None:
    """Let litellm run the logging callbacks its calls queued on this event loop (a no-op when litellm
    was never imported; never raises).

    Trigger: a blocking call (``run_turn_sync``) runs its turn on an event loop of its own, closed when
    it returns. Why: litellm queues a logging callback per call on a process-wide worker bound to the
    loop; the loop closed with them still queued, and the next loop's first call carried them over,
    printing "LoggingWorker: event loop changed" on stderr (21 lines in 60 turns) while they piled up
    unrun. Outcome: the blocking wrappers await this before their loop closes, as a long-lived loop
    runs them anyway.
    """
    if "litellm" not in sys.modules:
        return
    try:
        from litellm.litellm_core_utils.logging_worker import GLOBAL_LOGGING_WORKER

        await asyncio.wait_for(GLOBAL_LOGGING_WORKER.flush(), timeout_s)
    except Exception as exc:  # best effort: a logging flush never fails a turn
        log.debug("litellm's logging callbacks did not settle: %s: %s", type(exc).__name__, exc)


def _import_litellm() -> Any:
    """litellm, imported on first use with the offline price map (never fetched over the network)."""
    configure_litellm_environment()
    import litellm

    return litellm


def map_litellm_error(exc: Exception, model: str = "") -> ModelError:
    """litellm's exception as a sessionmem error (ContextWindowExceeded or ModelError)."""
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) else None
    text = str(exc)
    cls_names = {c.__name__ for c in type(exc).__mro__}
    where = f" ({model})" if model else ""
    if "ContextWindowExceededError" in cls_names or (status in (400, 413, None) and _CONTEXT_RE.search(text)):
        return ContextWindowExceeded(
            f"context window exceeded{where}: {text}", status_code=status or 400, window=stated_window(text)
        )
    return ModelError(f"model call failed{where}: {type(exc).__name__}: {text}", status_code=status)


def stated_window(text: str) -> int | None:
    """The context window a provider's overflow error states ("maximum context length is 16385 tokens",
    "prompt is too long: 210000 tokens > 200000 maximum", ...), or None when it states none."""
    for pattern in _STATED_WINDOW:
        found = pattern.search(text)
        if found is not None:
            value = int(re.sub(r"[,_]", "", found.group(1)))
            return value if value >= MIN_STATED_WINDOW else None
    return None


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if obj is None:
        return default
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def parse_tool_arguments(raw: Any) -> dict[str, Any]:
    """A tool call's arguments; text that is not a JSON object comes back as ``{"_raw": text}``
    (:attr:`~sessionmem.messages.ToolCall.unparsed_arguments`), which the dispatcher reports to the model."""
    if isinstance(raw, dict):
        return raw
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}
    try:
        value = orjson.loads(raw)
    except (orjson.JSONDecodeError, TypeError):
        return {UNPARSED_ARGUMENTS: raw if isinstance(raw, str) else repr(raw)}
    return value if isinstance(value, dict) else {UNPARSED_ARGUMENTS: raw}


def parse_usage(raw: Any) -> Usage | None:
    """Usage in our terms: ``input`` excludes cached tokens, which go to ``cache_read``/``cache_write``."""
    if raw is None:
        return None
    prompt = int(_get(raw, "prompt_tokens", 0) or 0)
    completion = int(_get(raw, "completion_tokens", 0) or 0)
    cached = int(_get(_get(raw, "prompt_tokens_details"), "cached_tokens", 0) or 0)
    cached = cached or int(_get(raw, "cache_read_input_tokens", 0) or 0)
    written = int(_get(raw, "cache_creation_input_tokens", 0) or 0)
    return Usage(
        input=max(0, prompt - cached - written), output=completion, cache_read=cached, cache_write=written
    )


def parse_response(response: Any, *, default_model: str = "", provider: str = "") -> ModelReply:
    """A litellm ``ModelResponse`` (or the same shape as dicts) as a :class:`ModelReply`."""
    choices = _get(response, "choices") or []
    if not choices:
        raise ModelError("model returned no choices")
    choice = choices[0]
    message = _get(choice, "message")
    content = _get(message, "content") or ""
    if isinstance(content, list):
        content = "".join(str(_get(p, "text", "")) for p in content)
    calls = []
    for i, tc in enumerate(_get(message, "tool_calls") or []):
        fn = _get(tc, "function")
        calls.append(
            ToolCall(
                id=str(_get(tc, "id") or f"call_{i}"),
                name=str(_get(fn, "name") or ""),
                arguments=parse_tool_arguments(_get(fn, "arguments")),
            )
        )
    finish = str(_get(choice, "finish_reason") or "stop")
    stop_reason = _STOP_REASONS.get(finish, "stop")
    if calls and stop_reason == "stop":
        stop_reason = "toolUse"
    msg = Message.assistant(str(content), tool_calls=tuple(calls), usage=parse_usage(_get(response, "usage")))
    model = str(_get(response, "model") or default_model)
    return ModelReply(msg, model=model, provider=provider, stop_reason=stop_reason)


class StreamAssembler:
    """Collects streamed ``chat.completion.chunk`` objects (or dicts of that shape) into one response
    that :func:`parse_response` reads: the text, tool calls put together from their deltas by index, the
    finish reason, the usage of the ``include_usage`` chunk and the model name. Pure: no I/O."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.calls: dict[int, dict[str, str]] = {}
        self.finish_reason: str | None = None
        self.usage: Any = None
        self.model: str | None = None

    def add(self, chunk: Any) -> str:
        """Take one chunk; returns its text ('' when it carries none)."""
        self.model = _get(chunk, "model") or self.model
        if _get(chunk, "usage") is not None:
            self.usage = _get(chunk, "usage")
        text = ""
        for choice in _get(chunk, "choices") or []:
            if (_get(choice, "index", 0) or 0) != 0:  # only the first choice is ever used
                continue
            delta = _get(choice, "delta")
            piece = _get(delta, "content")
            if isinstance(piece, str):
                text += piece
            for call in _get(delta, "tool_calls") or []:
                slot = self.calls.setdefault(
                    int(_get(call, "index", 0) or 0), {"id": "", "name": "", "args": ""}
                )
                fn = _get(call, "function")
                slot["id"] = slot["id"] or str(_get(call, "id") or "")
                slot["name"] = slot["name"] or str(_get(fn, "name") or "")
                slot["args"] += str(_get(fn, "arguments") or "")
            self.finish_reason = _get(choice, "finish_reason") or self.finish_reason
        self.text.append(text)
        return text

    def response(self) -> dict[str, Any]:
        """What was streamed, in the shape of a non-streamed response."""
        calls = [
            {"id": c["id"] or None, "function": {"name": c["name"], "arguments": c["args"]}}
            for _, c in sorted(self.calls.items())
        ]
        message = {"role": "assistant", "content": "".join(self.text), "tool_calls": calls}
        return {
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish_reason or "stop"}],
            "usage": self.usage,
            "model": self.model,
        }


def context_window(model: str) -> int | None:
    """The model's input window from litellm's bundled price map, or None if unknown (never raises)."""
    configure_litellm_environment()
    try:
        import litellm

        info = litellm.get_model_info(model)
    except Exception:
        return None
    value = info.get("max_input_tokens") or info.get("max_tokens")
    return int(value) if isinstance(value, int) and value > 0 else None
