"""sessionmem: agent-conversation middleware with persistent Markdown memory.

Importing this package is cheap: litellm and llama_cpp are imported only when a model is called.
"""

from sessionmem.config import Config
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

__version__ = "0.1.0"

__all__ = [
    "Config",
    "ConfigError",
    "ContextWindowExceeded",
    "EmbedderUnavailable",
    "MemoryIndexError",
    "ModelError",
    "SessionError",
    "SessionMemError",
    "UsageError",
    "__version__",
]
