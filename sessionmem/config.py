"""Configuration: pydantic models with OpenClaw-compatible camelCase keys.

Every default from the seeds lives here, once. A config file looks like::

    {"agents": {"defaults": {"workspace": "~/agent",
                             "memorySearch": {"query": {"hybrid": {"vectorWeight": 0.7}}},
                             "compaction": {"memoryFlush": {"softThresholdTokens": 4000}}},
                "list": [{"id": "work", "workspace": "~/work-agent"}]},
     "memory": {"citations": "auto"}}

Python code builds the same objects directly (``Config()`` is all defaults) or overrides with
``config.model_copy(update=...)`` / :func:`merge`. ``Config.for_agent(agent_id)`` resolves the
per-agent entry over the defaults. Reading files and the environment happens only in the CLI.

Every model knows which of its values the user wrote (``user_set``, pydantic's ``model_fields_set``);
``for_agent`` and :func:`merge` keep that knowledge through their layering. Values the user wrote are
honoured as written; only defaults adapt to a small window (:meth:`CompactionConfig.budget`, DESIGN 22).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    AliasChoices,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from sessionmem.config_base import (  # deep_merge, parse_byte_size, camel_case: importable from here too
    CamelModel,
    camel_case,
    deep_merge,
    file_path,
    parse_byte_size,
    validation_message,
)
from sessionmem.errors import ConfigError
from sessionmem.pathnames import given_path

DEFAULT_AGENT_ID = "main"
DEFAULT_CONTEXT_TOKENS = 200_000
DEFAULT_LOCAL_MODEL = "hf:ggml-org/embeddinggemma-300M-GGUF/embeddinggemma-300M-Q8_0.gguf"


# ---------------------------------------------------------------------------- memory search


class LocalEmbeddingConfig(CamelModel):
    model_path: str | None = None  # a GGUF path or an hf:owner/repo/file.gguf URI
    model_cache_dir: str | None = None
    # Unset: chosen per call by measurement (memory/embed/threads.py); set: llama.cpp's threads, exactly.
    n_threads: int | None = Field(None, ge=1)

    _paths = field_validator("model_path", "model_cache_dir")(file_path)
    # Longer texts are embedded in windows of this many tokens, averaged (never past the model's context).
    window_tokens: int = Field(256, ge=16)


class RemoteBatchConfig(CamelModel):
    enabled: bool = False
    wait: bool = True
    concurrency: int = 2
    poll_interval_ms: int = 2000
    timeout_minutes: int = 60


class RemoteEmbeddingConfig(CamelModel):
    base_url: str | None = None
    api_key: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    batch: RemoteBatchConfig = RemoteBatchConfig()
    # Per request (§8): a search's query embedding waits less than an indexing batch.
    timeout_seconds: float = Field(60.0, gt=0)  # query
    batch_timeout_seconds: float = Field(120.0, gt=0)  # documents, while indexing


class VectorStoreConfig(CamelModel):
    enabled: bool = True
    extension_path: str | None = None

    _paths = field_validator("extension_path")(file_path)


class FtsStoreConfig(CamelModel):
    # "porter": unicode61 with English stemming (measured best, see bench/README.md); "unicode61" exact
    # words; "trigram" substrings.
    tokenizer: Literal["porter", "unicode61", "trigram"] = "porter"


class StoreConfig(CamelModel):
    path: str | None = None  # may contain {agentId}; default <state-dir>/memory/{agentId}.sqlite
    vector: VectorStoreConfig = VectorStoreConfig()
    fts: FtsStoreConfig = FtsStoreConfig()

    _paths = field_validator("path")(file_path)


class ChunkingConfig(CamelModel):
    tokens: int = Field(400, ge=1)
    overlap: int = Field(80, ge=0)

    @model_validator(mode="after")
    def _clamp_overlap(self) -> ChunkingConfig:
        if self.overlap >= self.tokens:
            object.__setattr__(self, "overlap", self.tokens - 1)
        return self


class MmrConfig(CamelModel):
    # On: LoCoMo R@6 keyword 0.919 -> 0.924, MiniLM 0.930 -> 0.934, MRR unchanged (bench/README.md).
    enabled: bool = True
    lambda_: float = Field(0.7, ge=0.0, le=1.0, alias="lambda")


class SecondStageConfig(CamelModel):
    # On: the best keyword hits ordered again by where they hold the query's words (search/second_stage.py;
    # LoCoMo figures in bench/README.md, "Recall II").
    enabled: bool = True


class TemporalDecayConfig(CamelModel):
    enabled: bool = False
    half_life_days: float = Field(30.0, ge=1.0)


class HybridConfig(CamelModel):
    enabled: bool = True
    vector_weight: float = Field(0.5, ge=0.0, le=1.0)
    text_weight: float = Field(0.5, ge=0.0, le=1.0)
    candidate_multiplier: int = Field(4, ge=1, le=20)
    mmr: MmrConfig = MmrConfig()
    second_stage: SecondStageConfig = SecondStageConfig()
    temporal_decay: TemporalDecayConfig = TemporalDecayConfig()

    def normalized_weights(self) -> tuple[float, float]:
        """(vector, text) weights summing to 1; both zero falls back to 0.5 / 0.5."""
        total = self.vector_weight + self.text_weight
        if total <= 0:
            return 0.5, 0.5
        return self.vector_weight / total, self.text_weight / total


class QueryConfig(CamelModel):
    max_results: int = Field(6, ge=1)
    min_score: float = Field(0.35, ge=0.0, le=1.0)
    hybrid: HybridConfig = HybridConfig()


class SessionSyncConfig(CamelModel):
    delta_bytes: int = 100_000
    delta_messages: int = 50
    post_compaction_force: bool = True
    debounce_ms: int = 5000


class SyncConfig(CamelModel):
    on_session_start: bool = True
    on_search: bool = True
    watch: bool = True
    watch_debounce_ms: int = 1500
    interval_minutes: float = 0
    sessions: SessionSyncConfig = SessionSyncConfig()


class CacheConfig(CamelModel):
    enabled: bool = True
    max_entries: int | None = None


class ExperimentalConfig(CamelModel):
    session_memory: bool = False


Source = Literal["memory", "sessions"]
ProviderName = Literal["auto", "local", "openai", "gemini", "voyage", "mistral", "ollama", "none"]


class MemorySearchConfig(CamelModel):
    enabled: bool = True
    provider: ProviderName = "auto"
    fallback: ProviderName = "none"
    model: str | None = None  # provider's default when unset
    local: LocalEmbeddingConfig = LocalEmbeddingConfig()
    remote: RemoteEmbeddingConfig = RemoteEmbeddingConfig()
    sources: tuple[Source, ...] = ("memory",)
    extra_paths: tuple[str, ...] = ()
    store: StoreConfig = StoreConfig()
    chunking: ChunkingConfig = ChunkingConfig()
    query: QueryConfig = QueryConfig()
    sync: SyncConfig = SyncConfig()
    cache: CacheConfig = CacheConfig()
    experimental: ExperimentalConfig = ExperimentalConfig()

    @field_validator("sources")
    @classmethod
    def _dedupe_sources(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            return ("memory",)
        return tuple(sorted(set(value)))


# ---------------------------------------------------------------------------- compaction and flush


class MemoryFlushConfig(CamelModel):
    """The silent pre-compaction flush. It runs once per compaction cycle, when the projected prompt
    reaches ``contextWindow - reserve - softThresholdTokens``, or when the transcript growth since the
    last compaction (since the session started, before the first) reaches ``forceFlushTranscriptBytes``
    (a size such as ``"2mb"`` or a byte count; 0 disables the size trigger)."""

    enabled: bool = True
    soft_threshold_tokens: int = Field(4000, ge=0)
    force_flush_transcript_bytes: int = Field(2 * 1024 * 1024, ge=0)  # growth since the last compaction
    prompt: str | None = None  # None or blank -> the default prompt
    system_prompt: str | None = None
    model: str | None = None  # the flush's model (litellm name); None -> the agent's model

    @field_validator("force_flush_transcript_bytes", mode="before")
    @classmethod
    def _parse_byte_size(cls, value: Any) -> Any:
        return parse_byte_size(value) if isinstance(value, str) else value


@dataclass(frozen=True, slots=True)
class WindowBudget:
    """How a context window is shared out: the reserve (room for the reply and the next prompt), the
    soft threshold (how much earlier than compaction the flush runs) and what compaction keeps verbatim.

    ``scaled`` names the settings cut to fit this window (``compaction.reserveTokensFloor``, ...): in a
    small window (the reserve and the soft threshold together over half of it) the ones left at their
    defaults are cut to at most a quarter and an eighth of it, so the flush runs at 5/8 of it and
    compaction at 3/4 instead of never (the formula would give 0 for both). Values the user wrote are
    kept as written; ``forced`` marks the one exception, a window found at run time (a provider's stated
    window) too small for them, where they are cut too. A configured window they do not fit is refused
    when the config loads (:meth:`CompactionConfig.room_problem`).
    """

    context_window: int
    reserve: int
    soft_threshold: int
    keep_recent: int
    scaled: tuple[str, ...] = ()
    forced: bool = False

    @property
    def compaction_threshold(self) -> int:
        """Projected tokens at which the runner compacts: ``contextWindow − reserve``."""
        return max(0, self.context_window - self.reserve)

    @property
    def flush_threshold(self) -> int:
        """``contextWindow − reserve − softThresholdTokens``, never below 0 (0 = never flush)."""
        return max(0, self.context_window - self.reserve - self.soft_threshold)


RESERVE_FLOOR_KEY = "compaction.reserveTokensFloor"
RESERVE_KEY = "compaction.reserveTokens"
SOFT_THRESHOLD_KEY = "compaction.memoryFlush.softThresholdTokens"


class CompactionConfig(CamelModel):
    enabled: bool = True
    reserve_tokens: int = Field(16_384, ge=0)
    reserve_tokens_floor: int = Field(20_000, ge=0)  # 0 disables the floor
    keep_recent_tokens: int = Field(20_000, ge=1)
    post_index_sync: Literal["off", "async", "await"] = "async"
    model: str | None = None  # the summary's and the /new slug's model (litellm name); None -> the agent's
    memory_flush: MemoryFlushConfig = MemoryFlushConfig()

    def effective_reserve_tokens(self) -> int:
        """DESIGN decision 3: one reserve for both the flush threshold and compaction."""
        return max(self.reserve_tokens, self.reserve_tokens_floor)

    def budget(self, context_window: int) -> WindowBudget:
        """The reserve, soft threshold and kept-recent budget for ``context_window`` (see
        :class:`WindowBudget`). The reserve is the effective one (DESIGN 3), of the values after scaling:
        a written floor stays a floor. Compaction keeps at most half of what fits under its threshold:
        keeping more would leave almost nothing to summarise, and the next turn would compact again."""
        window = max(0, int(context_window))
        parts = self._budget_parts(window)
        small = max(parts[0][1], parts[1][1]) + parts[2][1] > window // 2
        cut = [key for key, value, written, share in parts if small and not written and value > share]
        reserve, soft = _scaled(parts, cut)
        forced = window - reserve - soft <= 0
        if forced:  # a window found at run time too small for what the user wrote: cut those too
            cut = [key for key, value, _, share in parts if value > share]
            reserve, soft = _scaled(parts, cut)
        keep = min(self.keep_recent_tokens, max(1, (window - reserve) // 2))
        # a reserve setting cut under the other one's value changed nothing: not named
        scaled = tuple(k for k, v, _, _ in parts if k in cut and (k == SOFT_THRESHOLD_KEY or v > reserve))
        return WindowBudget(window, reserve, soft, keep, scaled, forced and bool(scaled))

    def _budget_parts(self, window: int) -> list[tuple[str, int, bool, int]]:
        """(key, value, written by the user, its share of a small window) of the reserve's two settings
        and the soft threshold."""
        flush = self.memory_flush
        return [
            (
                RESERVE_FLOOR_KEY,
                self.reserve_tokens_floor,
                self.user_set("reserve_tokens_floor"),
                window // 4,
            ),
            (RESERVE_KEY, self.reserve_tokens, self.user_set("reserve_tokens"), window // 4),
            (
                SOFT_THRESHOLD_KEY,
                flush.soft_threshold_tokens,
                flush.user_set("soft_threshold_tokens"),
                window // 8,
            ),
        ]

    def room_problem(self, context_window: int) -> str | None:
        """Why the values the user wrote leave no room in ``context_window`` (the flush would come at 0
        or below: ``contextWindow − reserve − softThresholdTokens``), or None."""
        budget = self.budget(context_window)
        if not budget.forced:
            return None
        written = [
            f"{key} {value:,}"
            for key, value, was_written, _ in self._budget_parts(budget.context_window)
            if was_written and key in budget.scaled
        ]
        return (
            f"{' + '.join(written)} leave{'s' if len(written) == 1 else ''} no room for the memory flush "
            "(it comes at the window − reserve − softThresholdTokens): lower them, or leave them unset to "
            "have them scaled to a small window"
        )


def _scaled(parts: list[tuple[str, int, bool, int]], cut: list[str]) -> tuple[int, int]:
    """(reserve, soft threshold) with the ``cut`` settings at their share: the reserve the larger of its
    two settings (DESIGN 3)."""
    floor, reserve, soft = (share if key in cut else value for key, value, _, share in parts)
    return max(floor, reserve), soft


class ModelEntryConfig(CamelModel):
    context_window: int | None = Field(None, ge=1)
    owns_compaction: bool = False


class AgentConfig(CamelModel):
    """Settings of one agent; ``agents.defaults`` and each ``agents.list`` entry share this shape."""

    id: str | None = None
    workspace: str | None = None
    model: str | None = None
    context_tokens: int | None = Field(None, ge=1)
    models: dict[str, ModelEntryConfig] = Field(default_factory=dict)
    user_timezone: str | None = None  # IANA name; None -> the machine's local zone
    bootstrap_max_chars: int = 20_000
    load_daily_logs: bool = True
    memory_tools: bool | None = None  # write tools; None -> on in private sessions
    max_tool_iterations: int = 20
    # The answer that means "nothing to say" (any case; also as {"action": token}); the prompt teaches it.
    silent_reply_token: str = Field("NO_REPLY", pattern=r"^[A-Za-z][A-Za-z0-9_]{1,63}$")
    compaction: CompactionConfig = CompactionConfig()
    memory_search: MemorySearchConfig = Field(
        default_factory=MemorySearchConfig,
        validation_alias=AliasChoices("memorySearch", "memory_search", "memory.search"),
    )


class AgentsConfig(CamelModel):
    defaults: AgentConfig = AgentConfig()
    list: tuple[AgentConfig, ...] = ()


class McpConfig(CamelModel):
    """``sessionmem mcp``: the write tools are offered to MCP clients only when this says so."""

    write_tools: bool = False


class MemoryConfig(CamelModel):
    citations: Literal["on", "off", "auto"] = "auto"
    mcp: McpConfig = McpConfig()
    # "agent": one memory per agent; "peer": a memory per person (sessionmem.privacy, DESIGN 14)
    scope: Literal["agent", "peer"] = "agent"


class ResetConfig(CamelModel):
    mode: Literal["off", "daily", "idle"] = "off"
    at_hour: int = Field(4, ge=0, le=23)
    idle_minutes: int | None = Field(None, ge=1)


SessionCommand = Literal["/compact", "/status", "/new", "/reset"]


class SessionConfig(CamelModel):
    reset_triggers: tuple[str, ...] = ("/new", "/reset")
    # The slash commands end users may run; any other is an ordinary message. /new covers every reset
    # trigger but those spelled /reset.
    commands: tuple[SessionCommand, ...] = ("/compact", "/status", "/new", "/reset")
    reset: ResetConfig = ResetConfig()
    store: str | None = None  # sessions.json path (~ and {agentId} expanded); transcripts live beside it
    # How long a turn waits for the turns before it on the same session key (this process's queue, then
    # the store's turn lock held by another runner or process) before TurnLockTimeout.
    turn_lock_timeout_seconds: float = Field(120.0, gt=0)
    # Sessions a runner keeps in memory while no turn runs in them; beyond it the least recently used
    # are dropped (open() reloads them from the store and transcript).
    max_idle_sessions: int = Field(256, ge=0)

    _paths = field_validator("store")(file_path)


class HookEntryConfig(CamelModel):
    model_config = ConfigDict(populate_by_name=True, extra="allow", frozen=True, alias_generator=camel_case)
    enabled: bool | None = None


class InternalHooksConfig(CamelModel):
    enabled: bool = True
    entries: dict[str, HookEntryConfig] = Field(default_factory=dict)
    extra_dirs: tuple[str, ...] = ()


class HooksConfig(CamelModel):
    internal: InternalHooksConfig = InternalHooksConfig()


MIN_API_KEY_CHARS = 16


def api_key_problem(key: str) -> str | None:
    """Why ``key`` cannot guard an HTTP server (None: it can); the reason never quotes the key."""
    if len(key) < MIN_API_KEY_CHARS:
        return f"an API key must be at least {MIN_API_KEY_CHARS} characters long"
    if not key.isascii() or not key.isprintable() or " " in key:
        return "an API key must be printable ASCII without spaces (it travels in an HTTP header)"
    return None


class ServerConfig(CamelModel):
    """sessionmem's HTTP servers (``sessionmem mcp --http``, the gateway): ``apiKeys`` are the bearer
    tokens that open them (``sessionmem.server.auth``), kept out of every repr and dump."""

    api_keys: tuple[SecretStr, ...] = ()

    @field_validator("api_keys")
    @classmethod
    def _usable_keys(cls, keys: tuple[SecretStr, ...]) -> tuple[SecretStr, ...]:
        for key in keys:
            problem = api_key_problem(key.get_secret_value())
            if problem is not None:
                raise ValueError(problem)
        return keys


def _rendered_store(raw: str, agent_id: str) -> str:
    """Where ``memorySearch.store.path`` puts ``agent_id``'s index: a file, or a PostgreSQL database and
    schema (``memory.pg_store``; its default schema contains the agent id)."""
    from sessionmem.dsn import is_postgres_dsn

    if is_postgres_dsn(raw):
        from sessionmem.dsn import pg_target

        return pg_target(raw, agent_id).display
    return str(given_path(raw.replace("{agentId}", agent_id)))


class Config(CamelModel):
    agents: AgentsConfig = AgentsConfig()
    memory: MemoryConfig = MemoryConfig()
    session: SessionConfig = SessionConfig()
    hooks: HooksConfig = HooksConfig()
    server: ServerConfig = ServerConfig()

    @model_validator(mode="after")
    def _room_in_each_window(self) -> Config:
        """A window the config states (``contextTokens``, ``models.<name>.contextWindow``) must hold the
        reserve and soft threshold the user wrote (defaults are scaled to it instead)."""
        agents: list[tuple[str | None, AgentConfig]] = [(None, self.agents.defaults)]
        agents += [(entry.id, self.for_agent(entry.id)) for entry in self.agents.list if entry.id]
        for agent_id, agent in agents:
            windows = [("contextTokens", agent.context_tokens)]
            windows += [
                (f"models.{name}.contextWindow", e.context_window) for name, e in agent.models.items()
            ]
            for key, window in windows:
                problem = agent.compaction.room_problem(window) if window else None
                if problem is not None:
                    where = "agents.defaults" if agent_id is None else f"agent {agent_id!r}"
                    raise ConfigError(f"{where}: {key} {window:,}: {problem}")
        return self

    @model_validator(mode="after")
    def _one_index_per_agent(self) -> Config:
        """Two agents must never share one index file (one's search would return the other's notes)."""
        if len(self.agents.list) < 2:
            return self
        owners: dict[str, str] = {}
        for agent_id in (entry.id for entry in self.agents.list if entry.id):
            raw = self.for_agent(agent_id).memory_search.store.path
            if not raw:
                continue  # the default, <state-dir>/memory/<agentId>.sqlite, is one file per agent
            rendered = _rendered_store(raw, agent_id)
            other = owners.setdefault(rendered, agent_id)
            if other != agent_id:
                raise ConfigError(
                    f"memorySearch.store.path {raw!r} gives agents {other!r} and {agent_id!r} one index "
                    f"({rendered}): put {{agentId}} in it (e.g. ~/.sessionmem/memory/{{agentId}}.sqlite) or "
                    "give each agent its own path"
                )
        return self

    def for_agent(self, agent_id: str = DEFAULT_AGENT_ID) -> AgentConfig:
        """The agent's settings: its ``agents.list`` entry laid over ``agents.defaults``."""
        base = self.agents.defaults.model_dump(by_alias=True, exclude_unset=True)  # what the user wrote
        for entry in self.agents.list:
            if entry.id == agent_id:
                base = deep_merge(base, entry.model_dump(by_alias=True, exclude_unset=True))
        base["id"] = agent_id
        return AgentConfig.model_validate(base)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Config:
        """Validate a parsed config document; errors name the offending key."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(validation_message(exc)) from exc

    @classmethod
    def load(cls, path: str | Path) -> Config:
        """Read a JSON or JSON5 config file."""
        import json5

        path = Path(path).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from exc
        except UnicodeDecodeError as exc:
            raise ConfigError(
                f"config file {path} is not valid UTF-8 (byte {exc.start} is 0x{exc.object[exc.start]:02x}); "
                "save it as UTF-8"
            ) from exc
        try:
            data = json5.loads(text)
        except ValueError as exc:
            raise ConfigError(f"config file {path} is not valid JSON/JSON5: {exc}") from exc
        if not isinstance(data, dict):
            raise ConfigError(f"config file {path} must contain an object at the top level")
        return cls.from_dict(data)


def merge(config: Config, overrides: dict[str, Any]) -> Config:
    """Lay a nested dict of overrides (camelCase or snake_case keys) over ``config`` (what the user
    wrote stays written, see ``user_set``)."""
    merged = deep_merge(config.model_dump(by_alias=True, exclude_unset=True), overrides)
    return Config.from_dict(merged)
