"""Every error sessionmem raises on purpose derives from :class:`SessionMemError`.

SessionMemError
├── ConfigError                 a config file or value is invalid (names the key)
├── UsageError                  the API was called the wrong way
│   ├── ToolSchemaError         a @tool function's types have no JSON schema (session.tool_schema)
│   └── ToolResultsMismatch     submitted tool results do not answer the pending client tool calls
├── UnsafeWriteError            a write would follow a symlink or a hard link out of its folder
├── FileWriteError              a file could not be written (a full disk): names it; also an OSError
├── ModelError                  the chat model failed (after mapping litellm's errors)
│   └── ContextWindowExceeded   the provider said the prompt is over its context window
├── SessionError
│   ├── SessionNotFound
│   ├── TranscriptError         a transcript cannot be read or written
│   ├── StoreLockTimeout        sessions.json stayed locked past the timeout
│   ├── TurnLockTimeout         earlier turns of the session (here or in another process) ran past the timeout
│   └── CorruptStore            sessions.json cannot be parsed; internal: the store recovers (session.store)
├── MemoryIndexError            the memory index cannot be built or queried
│   ├── EmbedderUnavailable     no embedding provider could be created (reason attached)
│   ├── EmbeddingError          a provider call failed (after retries) or returned bad vectors
│   │   ├── UnusableVectorsError    some inputs got no usable vector, the others did (memory.embed_remote)
│   │   └── VectorWidthChanged      the provider's vectors changed width (memory.indexer)
│   ├── IndexDiskFull           the disk holding the index is full (names the index); the index is unchanged
│   ├── MemoryPathError         a memory path is outside the allowed files (memory_get)
│   └── NotMarkdownError        a memory file is not text (memory.files)
├── CompactionFailed            the summary call failed; nothing was changed (session.compaction)
├── ToolError                   raised by a tool to send the model a clean error (session.tools)
└── ScriptExhausted             a ScriptedModel ran out of steps (model.scripted)

Tool arguments the model got wrong raise ``ArgumentError`` (a ``ValueError``) inside the tool layers; it
never leaves them: it becomes the tool's error result.
"""

from __future__ import annotations

import errno


class SessionMemError(Exception):
    """Root of sessionmem's errors."""


class ConfigError(SessionMemError):
    """A configuration file or value is invalid."""


class UsageError(SessionMemError):
    """The API was used incorrectly (a bug in the caller, not a runtime failure)."""


class ToolResultsMismatch(UsageError):
    """Tool results were submitted that do not answer the session's pending client tool calls (ids
    unknown, missing or given twice, or no call pending at all)."""


class UnsafeWriteError(SessionMemError):
    """A write was refused: the file or a folder on its way is a symlink, a hard link or not a file."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"refusing to write {path}: {reason}")
        self.path = path
        self.reason = reason


class FileWriteError(SessionMemError, OSError):
    """A file could not be written, said in words with the file's name ("cannot write memory/x.md: no
    space left on device"); nothing half-written is left. An :class:`OSError` too (``errno`` kept), so
    code that catches those still does."""

    def __init__(self, path: str, reason: str, *, error_number: int | None = None, detail: str = "") -> None:
        message = f"cannot write {path}: {reason}" + (f" ({detail})" if detail else "")
        OSError.__init__(self, error_number, message)
        self.path = path
        self.reason = reason
        self.detail = detail
        self.message = message

    def __str__(self) -> str:
        return self.message


class ModelError(SessionMemError):
    """A chat model call failed."""

    def __init__(self, message: str, *, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class ContextWindowExceeded(ModelError):
    """The provider rejected the request because the prompt exceeds the model's context window;
    ``window`` is the window the provider stated in its error, when it stated one."""

    def __init__(self, message: str, *, status_code: int | None = None, window: int | None = None) -> None:
        super().__init__(message, status_code=status_code)
        self.window = window


class SessionError(SessionMemError):
    """A session could not be loaded or saved."""


class SessionNotFound(SessionError):
    pass


class TranscriptError(SessionError):
    pass


class StoreLockTimeout(SessionError):
    def __init__(self, path: str, timeout_s: float) -> None:
        super().__init__(f"timeout waiting for session store lock: {path} (after {timeout_s:g}s)")
        self.path = path
        self.timeout_s = timeout_s


class TurnLockTimeout(SessionError):
    """A turn waited past the timeout for the turns before it on the same session: queued in this process
    (``path`` None), or the store's turn lock held by another runner or process (``path`` the lock)."""

    def __init__(self, session_key: str, path: str | None, timeout_s: float) -> None:
        if path is None:
            where = f"earlier turns of it in this process were still running after {timeout_s:g}s"
        else:
            where = (
                f"another runner or process is running a turn of it (turn lock {path} still held "
                f"after {timeout_s:g}s)"
            )
        super().__init__(f"session {session_key} is busy: {where}")
        self.session_key = session_key
        self.path = path
        self.timeout_s = timeout_s


def os_error_reason(exc: OSError) -> str:
    """Why a file operation failed, in words: ``no space left on device`` for ENOSPC (``disk quota
    exceeded`` for EDQUOT), else the system's message. Callers name the file themselves."""
    if exc.errno == errno.ENOSPC:
        return "no space left on device"
    if exc.errno == getattr(errno, "EDQUOT", None):
        return "disk quota exceeded"
    return exc.strerror or str(exc)


class MemoryIndexError(SessionMemError):
    """The memory index could not be built, opened or queried."""


class EmbedderUnavailable(MemoryIndexError):
    """No embedding provider could be created; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class EmbeddingError(MemoryIndexError):
    """An embedding call failed after retries, or returned unusable vectors."""


class IndexDiskFull(MemoryIndexError):
    """A sync could not write the index: the disk holding it is full. The sync was rolled back (the index
    answers from what it held) and the next one, once there is space, completes it."""

    def __init__(self, path: str, reason: str = "no space left on device") -> None:
        super().__init__(
            f"the disk holding the memory index {path} is full ({reason}): the index is unchanged; "
            "free some space and sync again"
        )
        self.path = path
        self.reason = reason


class MemoryPathError(MemoryIndexError):
    """A path given to memory_get (or a memory writer) is not an allowed memory file."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{reason}: {path}")
        self.path = path
        self.reason = reason
