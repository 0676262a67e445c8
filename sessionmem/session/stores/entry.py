"""A session's record in the store (:class:`SessionEntry`) and the figures a turn writes into it.

The record is the same whatever the backend: sessions.json stores it as one JSON object per session key
(camelCase, OpenClaw's field names; reference §1.10), and every other backend stores the same object.
Pure: no I/O here.
"""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sessionmem.messages import Usage, now_ms


class SessionEntry(BaseModel):
    """One session's record. camelCase on disk; fields this class does not know round-trip untouched."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, validate_assignment=True)

    session_id: str = Field(alias="sessionId")
    updated_at: int = Field(default_factory=now_ms, alias="updatedAt")
    session_file: str | None = Field(default=None, alias="sessionFile")
    session_key: str | None = Field(default=None, alias="sessionKey")  # the key it is stored under
    chat_type: str | None = Field(default=None, alias="chatType")
    model: str | None = None
    model_provider: str | None = Field(default=None, alias="modelProvider")
    context_tokens: int | None = Field(default=None, alias="contextTokens")  # the window in use
    # The windows providers stated in overflow errors, by model name (sessionmem's own field; kept
    # across /new: it is the model's, not the conversation's).
    learned_context_tokens: dict[str, int] | None = Field(default=None, alias="learnedContextTokens")
    input_tokens: int | None = Field(default=None, alias="inputTokens")
    output_tokens: int | None = Field(default=None, alias="outputTokens")
    cache_read: int | None = Field(default=None, alias="cacheRead")
    cache_write: int | None = Field(default=None, alias="cacheWrite")
    total_tokens: int | None = Field(default=None, alias="totalTokens")
    total_tokens_fresh: bool | None = Field(default=None, alias="totalTokensFresh")
    compaction_count: int = Field(default=0, alias="compactionCount")
    memory_flush_at: int | None = Field(default=None, alias="memoryFlushAt")
    memory_flush_compaction_count: int | None = Field(default=None, alias="memoryFlushCompactionCount")

    def to_json_dict(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_none=True)

    def with_updates(self, **fields: Any) -> SessionEntry:
        """A validated copy with ``fields`` (snake_case or camelCase names) replaced."""
        data = self.to_json_dict()
        data.update(aliased_fields(fields))
        return SessionEntry.model_validate(data)

    def touched(self, **fields: Any) -> SessionEntry:
        """:meth:`with_updates`, and ``updatedAt`` = ``max(its value, now)`` unless ``fields`` give it."""
        given = aliased_fields(fields)
        given.setdefault("updatedAt", max(self.updated_at, now_ms()))
        return self.with_updates(**given)


def entry_from_json(value: str | bytes | dict[str, Any]) -> SessionEntry:
    """The entry a store holds (its JSON text, or the object already parsed). Raises ``ValueError``
    saying what is wrong: not JSON, not an object, or the first invalid field and why."""
    if isinstance(value, (str, bytes)):
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError as exc:
            raise ValueError(f"not valid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise ValueError(f"not a JSON object but {type(value).__name__}")
    try:
        return SessionEntry.model_validate(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first.get("loc", ())) or "entry"
        raise ValueError(f"{where}: {first.get('msg')}") from None


_ALIAS_OF = {name: (f.alias or name) for name, f in SessionEntry.model_fields.items()}


def call_figures(usage: Usage) -> dict[str, Any]:
    """What a model call sets in its entry: its usage; ``totalTokens`` = its prompt tokens (no output)."""
    return {
        "input_tokens": usage.input,
        "output_tokens": usage.output,
        "cache_read": usage.cache_read,
        "cache_write": usage.cache_write,
        "total_tokens": usage.prompt_tokens,
        "total_tokens_fresh": True,
    }


def compaction_figures(tokens_after: int | None) -> dict[str, Any]:
    """What a compaction sets in its entry: the new context's size; the last call's figures cleared."""
    return {
        "total_tokens": tokens_after,
        "total_tokens_fresh": True if tokens_after is not None else None,
        "input_tokens": None,
        "output_tokens": None,
        "cache_read": None,
        "cache_write": None,
    }


def aliased_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """``fields`` with snake_case names of :class:`SessionEntry` turned into their camelCase aliases."""
    return {_ALIAS_OF.get(k, k): v for k, v in fields.items()}
