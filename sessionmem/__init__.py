"""sessionmem: agent-conversation middleware with persistent Markdown memory.

Importing this package is cheap (a few milliseconds): the config models (and pydantic), the runner,
the index and the models load on first use (:mod:`sessionmem.lazy`), and litellm and llama_cpp are
imported only when a model is called. The session stores are public in :mod:`sessionmem.session`, the
testing kit in :mod:`sessionmem.testing`; ``tests/test_exported_members.py`` pins all three.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sessionmem.errors import (
    ConfigError,
    ContextWindowExceeded,
    EmbedderUnavailable,
    MemoryIndexError,
    ModelError,
    SessionError,
    SessionMemError,
    ToolResultsMismatch,
    UsageError,
)
from sessionmem.lazy import lazy_names

if TYPE_CHECKING:
    from sessionmem.config import Config
    from sessionmem.hooks import HookEvent, HookRegistry
    from sessionmem.memory.index import MemoryIndex
    from sessionmem.memory.search.records import SearchRequest, SearchResponse, SearchResult
    from sessionmem.memory.tools.reading import MemoryTools
    from sessionmem.messages import Message, ToolCall, Usage
    from sessionmem.model.base import Model, ModelReply, ModelRequest, StreamingModel
    from sessionmem.model.litellm import LiteLLMModel
    from sessionmem.model.scripted import ScriptedModel
    from sessionmem.session.runner import Session, SessionRunner
    from sessionmem.session.turn.events import (
        CommandEvent,
        CompactionEvent,
        CompactionFailedEvent,
        CompactionResult,
        CompactionStartEvent,
        Event,
        FlushEvent,
        FlushSkippedEvent,
        HookErrorEvent,
        MemoryWorkEndEvent,
        MemoryWorkStartEvent,
        MemoryWriteEvent,
        NewSessionEvent,
        SessionEndEvent,
        SessionStartEvent,
        ToolCallEvent,
        TurnEvent,
        TurnResult,
    )
    from sessionmem.tools.client import ClientTool, ToolResult
    from sessionmem.tools.define import Tool, tool

__version__ = "0.1.0"

__getattr__, __dir__ = lazy_names(
    __name__,
    {
        "sessionmem.config": ["Config"],  # pydantic's import alone costs ~70 ms
        "sessionmem.hooks": ["HookEvent", "HookRegistry"],
        "sessionmem.memory.index": ["MemoryIndex"],
        "sessionmem.memory.search.records": ["SearchRequest", "SearchResponse", "SearchResult"],
        "sessionmem.memory.tools.reading": ["MemoryTools"],
        "sessionmem.messages": ["Message", "ToolCall", "Usage"],
        "sessionmem.model.base": ["Model", "ModelReply", "ModelRequest", "StreamingModel"],
        "sessionmem.model.litellm": ["LiteLLMModel"],
        "sessionmem.model.scripted": ["ScriptedModel"],
        "sessionmem.session.runner": ["Session", "SessionRunner"],
        "sessionmem.session.turn.events": [
            "CommandEvent",
            "CompactionEvent",
            "CompactionFailedEvent",
            "CompactionResult",
            "CompactionStartEvent",
            "Event",
            "FlushEvent",
            "FlushSkippedEvent",
            "HookErrorEvent",
            "MemoryWorkEndEvent",
            "MemoryWorkStartEvent",
            "MemoryWriteEvent",
            "NewSessionEvent",
            "SessionEndEvent",
            "SessionStartEvent",
            "ToolCallEvent",
            "TurnEvent",
            "TurnResult",
        ],
        "sessionmem.tools.client": ["ClientTool", "ToolResult"],
        "sessionmem.tools.define": ["Tool", "tool"],
    },
)

__all__ = [
    "ClientTool",
    "CommandEvent",
    "CompactionEvent",
    "CompactionFailedEvent",
    "CompactionResult",
    "CompactionStartEvent",
    "Config",
    "ConfigError",
    "ContextWindowExceeded",
    "EmbedderUnavailable",
    "Event",
    "FlushEvent",
    "FlushSkippedEvent",
    "HookErrorEvent",
    "HookEvent",
    "HookRegistry",
    "LiteLLMModel",
    "MemoryIndex",
    "MemoryIndexError",
    "MemoryTools",
    "MemoryWorkEndEvent",
    "MemoryWorkStartEvent",
    "MemoryWriteEvent",
    "Message",
    "Model",
    "ModelError",
    "ModelReply",
    "ModelRequest",
    "NewSessionEvent",
    "ScriptedModel",
    "SearchRequest",
    "SearchResponse",
    "SearchResult",
    "Session",
    "SessionEndEvent",
    "SessionError",
    "SessionMemError",
    "SessionRunner",
    "SessionStartEvent",
    "StreamingModel",
    "Tool",
    "ToolCall",
    "ToolCallEvent",
    "ToolResult",
    "ToolResultsMismatch",
    "TurnEvent",
    "TurnResult",
    "Usage",
    "UsageError",
    "__version__",
    "tool",
]
