"""What a ``POST /v1/chat/completions`` asks for: the agent, the session, and the new message.

Pure: a parsed JSON body and two header values in, a :class:`ChatRequest` out, or a
:class:`~sessionmem.server.openai_errors.GatewayError` (400, 403) naming what is wrong.

The rules (the README's "Gateway" section says the same):

- ``model`` names an agent: ``main`` or ``sessionmem/main``. The agent's own ``model`` in the config is
  the upstream the gateway calls.
- The session: the ``X-Session-Key`` header (a full key such as ``agent:main:telegram:direct:42``; a key
  without ``agent:`` is taken as the agent's own), else the ``user`` field (a direct chat with that user,
  ``agent:<agent>:openai:direct:<user>``), else the agent's main session ``agent:<agent>:main``. A key of
  another agent than ``model`` is refused (403).
- The gateway keeps the session, so only the new messages are taken from ``messages``: those after the
  last ``assistant`` message (all of them when there is none). A client that sends only its new
  message and one that resends the whole history each time are both served. When the new messages are
  ``tool`` results, they answer the tool calls of the client's own tools the last reply returned, and
  the same turn goes on (:meth:`~sessionmem.session.runner.Session.submit_tool_results`; their
  ``tool_call_id`` must answer exactly the pending calls, else 400); a user message beside them is
  refused. Otherwise the new ``user`` messages make the turn (several are joined with a blank line).
  ``system`` and ``developer`` messages are left out (the agent's own system prompt is used). There must
  be at least one user message or tool result.
- The client's own tools (``tools``, functions as OpenAI declares them) are offered to the model beside
  the agent's own, which run server-side and are never shown; a tool named like one of the agent's is
  refused. ``tool_choice: "none"`` leaves them out; other choices are the model's to make (not enforced).
  The legacy ``functions`` and ``function`` messages are refused: use ``tools``.
- Text only: a content given as parts must be ``text`` parts.
- ``stream`` streams the reply as server-sent events; ``temperature``, ``max_tokens`` and the other
  sampling fields are left to the agent's configuration and ignored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sessionmem.errors import UsageError
from sessionmem.privacy import classify_key
from sessionmem.server.openai_errors import GatewayError, bad_request
from sessionmem.session.stores.keys import agent_session_key, default_key
from sessionmem.tools.client import MAX_CLIENT_TOOLS, ClientTool, ToolResult

MODEL_PREFIX = "sessionmem/"
USER_CHANNEL = "openai"  # the channel of a session picked by the request's ``user``
MAX_USER_CHARS = 128
MAX_MESSAGES = 10_000
SESSION_HEADER = "x-session-key"
MAX_CALL_ID_CHARS = 256
LEGACY_FUNCTIONS = "the legacy 'functions' and 'function' messages are not supported: use 'tools'"


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """One chat completion asked of an agent."""

    model: str  # as the client wrote it (echoed in the response)
    agent_id: str
    text: str  # the new user message(s), one turn ("" when the request gives tool results)
    tools: tuple[ClientTool, ...] = ()  # the client's own tools
    tool_results: tuple[ToolResult, ...] = ()  # results of the client's tool calls: the turn goes on
    stream: bool = False
    include_usage: bool = False  # stream_options.include_usage: a last chunk with the usage alone
    user: Any = None  # the request's ``user`` field, as given (see session_key)


def agent_of(model: Any) -> str:
    """The agent a ``model`` field names (``main`` or ``sessionmem/main``)."""
    if not isinstance(model, str) or not model.strip():
        raise bad_request("'model' must name an agent, e.g. 'main' or 'sessionmem/main'", "invalid_model")
    name = model.strip()
    return name[len(MODEL_PREFIX) :] if name.startswith(MODEL_PREFIX) else name


def parse_chat_request(body: Any) -> ChatRequest:
    """The request in ``body`` (a parsed JSON document); 400 naming the first problem found."""
    if not isinstance(body, dict):
        raise bad_request("the request body must be a JSON object")
    agent_id = agent_of(body.get("model"))
    if body.get("functions"):
        raise bad_request(LEGACY_FUNCTIONS, "functions_not_supported")
    stream = body.get("stream", False)
    if not isinstance(stream, bool) and stream is not None:
        raise bad_request("'stream' must be true or false")
    n = body.get("n")
    if n not in (None, 1):
        raise bad_request("'n' must be 1: the gateway gives one reply per turn")
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise bad_request("'stream_options' must be an object")
    text, results = new_input(body.get("messages"))
    tools = client_tools(body.get("tools"))
    if body.get("tool_choice") == "none":
        tools = ()
    return ChatRequest(
        model=str(body["model"]),
        agent_id=agent_id,
        text=text,
        tools=tools,
        tool_results=results,
        stream=bool(stream),
        include_usage=options.get("include_usage") is True,
        user=body.get("user"),
    )


def client_tools(tools: Any) -> tuple[ClientTool, ...]:
    """The client's own tools as the request declares them (``{"type": "function", "function": {...}}``)."""
    if tools is None:
        return ()
    if not isinstance(tools, list):
        raise bad_request("'tools' must be an array of tools")
    if len(tools) > MAX_CLIENT_TOOLS:
        raise bad_request(f"'tools' holds {len(tools):,} tools; at most {MAX_CLIENT_TOOLS}")
    found = []
    for at, spec in enumerate(tools):
        function = spec.get("function") if isinstance(spec, dict) else None
        if not isinstance(spec, dict) or spec.get("type") != "function" or not isinstance(function, dict):
            raise bad_request(
                f"tools[{at}] must be {{'type': 'function', 'function': {{...}}}}", "invalid_tool"
            )
        name = function.get("name")
        if not isinstance(name, str):
            raise bad_request(f"tools[{at}].function.name must be the tool's name", "invalid_tool")
        try:
            found.append(
                ClientTool(
                    name,
                    function.get("description") or "",
                    function.get("parameters") or {"type": "object", "properties": {}},
                )
            )
        except UsageError as exc:
            raise bad_request(f"tools[{at}]: {exc}", "invalid_tool") from None
    return tuple(found)


def new_input(messages: Any) -> tuple[str, tuple[ToolResult, ...]]:
    """The turn's text, or the tool results that continue it: the messages after the last assistant
    message (see the module docstring)."""
    if not isinstance(messages, list) or not messages:
        raise bad_request("'messages' must be a non-empty array of messages")
    if len(messages) > MAX_MESSAGES:
        raise bad_request(f"'messages' holds {len(messages):,} messages; at most {MAX_MESSAGES:,}")
    start = 0
    for at, message in enumerate(messages):
        role = _role(message, at)
        if role == "function":
            raise bad_request(LEGACY_FUNCTIONS, "functions_not_supported")
        if role == "assistant":
            start = at + 1
    new = list(enumerate(messages[start:], start))
    results = tuple(_result(message, at) for at, message in new if message["role"] == "tool")
    texts = [_text(message, at) for at, message in new if message["role"] == "user"]
    texts = [text for text in texts if text.strip()]
    if results and texts:
        raise bad_request(
            "tool results and a new user message in one request: send the tool results first, then the "
            "user message once the reply to them has come",
            "tool_results_with_user_message",
        )
    if not texts and not results:
        raise bad_request(
            "no new user message: the gateway takes the user messages (or tool results) after the last "
            "assistant message"
        )
    return "\n\n".join(texts), results


def _result(message: dict[str, Any], at: int) -> ToolResult:
    call_id = message.get("tool_call_id")
    if not isinstance(call_id, str) or not call_id or len(call_id) > MAX_CALL_ID_CHARS:
        raise bad_request(
            f"messages[{at}].tool_call_id must name the tool call it answers (at most {MAX_CALL_ID_CHARS} "
            "characters)"
        )
    return ToolResult(call_id, _text(message, at))


def _role(message: Any, at: int) -> str:
    if not isinstance(message, dict):
        raise bad_request(f"messages[{at}] must be an object with 'role' and 'content'")
    role = message.get("role")
    if role not in ("system", "developer", "user", "assistant", "tool", "function"):
        raise bad_request(f"messages[{at}].role must be system, developer, user, assistant or tool")
    return str(role)


def _text(message: dict[str, Any], at: int) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        pieces = []
        for part in content:
            if (
                not isinstance(part, dict)
                or part.get("type") != "text"
                or not isinstance(part.get("text"), str)
            ):
                raise bad_request(
                    f"messages[{at}].content: only text parts are supported", "unsupported_content"
                )
            pieces.append(part["text"])
        return "\n".join(pieces)
    raise bad_request(f"messages[{at}].content must be a string or an array of text parts")


def session_key(agent_id: str, header: str | None, user: Any) -> str:
    """The session a request runs in (see the module docstring): 400 for a malformed key or user,
    403 for a key of another agent."""
    if header is not None and header.strip():
        try:
            classify_key(header)  # empty, too long or malformed: 400
        except UsageError as exc:
            raise bad_request(f"X-Session-Key: {exc}", "invalid_session_key") from None
        try:
            return agent_session_key(agent_id, header)
        except UsageError as exc:
            raise GatewayError(403, f"X-Session-Key: {exc}", code="session_key_of_another_agent") from None
    if user is not None:
        return _user_key(agent_id, user)
    return default_key(agent_id)


def _user_key(agent_id: str, user: Any) -> str:
    if not isinstance(user, str) or not user.strip():
        raise bad_request("'user' must be a non-empty string", "invalid_user")
    name = user.strip()
    if len(name) > MAX_USER_CHARS:
        raise bad_request(
            f"'user' is {len(name):,} characters long; at most {MAX_USER_CHARS}", "invalid_user"
        )
    if ":" in name or any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in name):
        raise bad_request("'user' cannot hold ':', spaces or control characters", "invalid_user")
    key = agent_session_key(agent_id, f"{USER_CHANNEL}:direct:{name}")
    if classify_key(key).kind != "direct":  # e.g. a user id read as a group marker
        raise bad_request(f"'user' {name!r} does not name a direct chat", "invalid_user")
    return key
