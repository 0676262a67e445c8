"""sessionmem: agent-conversation middleware with persistent Markdown memory.

Importing this package is cheap (a few milliseconds): the config models (and pydantic), the runner,
the index and the models load on first use, and litellm and llama_cpp are imported only when a model
is called.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from sessionmem.errors import (
    ConfigError,
    ContextWindowExceeded,
    EmbedderUnavailable,
    MemoryIndexError,
    ModelError,
    SessionError,
    SessionMemError,
    UsageError,
)

if TYPE_CHECKING:
    from sessionmem.config import Config
    from sessionmem.hooks import HookEvent, HookRegistry
    from sessionmem.memory.index import MemoryIndex
    from sessionmem.memory.search.records import SearchRequest, SearchResponse, SearchResult
    from sessionmem.memory.tools.reading import MemoryTools
    from sessionmem.messages import Message, ToolCall, Usage
    from sessionmem.model.litellm import LiteLLMModel
    from sessionmem.model.scripted import ScriptedModel
    from sessionmem.session.runner import Session, SessionRunner
    from sessionmem.tools.define import Tool, tool

__version__ = "0.1.0"

# name -> module that defines it; imported on first attribute access
_LAZY = {
    "Config": "sessionmem.config",  # pydantic's import alone costs ~70 ms
    "HookEvent": "sessionmem.hooks",
    "HookRegistry": "sessionmem.hooks",
    "LiteLLMModel": "sessionmem.model.litellm",
    "MemoryIndex": "sessionmem.memory.index",
    "MemoryTools": "sessionmem.memory.tools.reading",
    "Message": "sessionmem.messages",
    "ScriptedModel": "sessionmem.model.scripted",
    "SearchRequest": "sessionmem.memory.search.records",
    "SearchResponse": "sessionmem.memory.search.records",
    "SearchResult": "sessionmem.memory.search.records",
    "Session": "sessionmem.session.runner",
    "SessionRunner": "sessionmem.session.runner",
    "Tool": "sessionmem.tools.define",
    "ToolCall": "sessionmem.messages",
    "Usage": "sessionmem.messages",
    "tool": "sessionmem.tools.define",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'sessionmem' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "Config",
    "ConfigError",
    "ContextWindowExceeded",
    "EmbedderUnavailable",
    "HookEvent",
    "HookRegistry",
    "LiteLLMModel",
    "MemoryIndex",
    "MemoryIndexError",
    "MemoryTools",
    "Message",
    "ModelError",
    "ScriptedModel",
    "SearchRequest",
    "SearchResponse",
    "SearchResult",
    "Session",
    "SessionError",
    "SessionMemError",
    "SessionRunner",
    "Tool",
    "ToolCall",
    "Usage",
    "UsageError",
    "__version__",
    "tool",
]
