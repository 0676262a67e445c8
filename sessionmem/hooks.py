"""Lifecycle events and the hooks that react to them.

The session runner emits a :class:`HookEvent` at the points a user may want to act on (``/new``,
``/reset``, session start and end, around compaction, after a memory flush). Hooks are plain
callables, sync or async, registered on a :class:`HookRegistry` in code or discovered on disk by
:func:`load_hooks` from folders that each hold a ``HOOK.md`` (front matter: ``name``,
``description``, ``events``, ``enabled``) and a ``handler.py`` with ``handle(event)``.

Hooks fail open: an exception or a timeout in one hook is logged and reported in its
:class:`HookOutcome`; it never reaches the caller's turn and never stops the other hooks.

Discovery order (a later folder overrides an earlier one with the same hook name):

1. the hooks bundled with sessionmem (top-level ``hooks/`` of the source tree, shipped in the wheel
   as the ``sessionmem._bundled_hooks`` package);
2. the workspace's ``hooks/``;
3. the user's folder (``<state_dir>/hooks``, passed as ``user_dir``) and then each of
   ``hooks.internal.extraDirs``.

``hooks.internal.entries[<name>].enabled`` overrides the ``enabled`` default from ``HOOK.md``;
``hooks.internal.enabled = false`` turns discovered hooks off altogether. Hooks given in code
(``SessionRunner(hooks=registry)``) are added after the discovered ones (:meth:`HookRegistry.include`)
and replace a discovered hook of the same name.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import inspect
import json
import logging
import re
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from sessionmem.config import Config
from sessionmem.errors import UsageError

log = logging.getLogger("sessionmem.hooks")

# The one vocabulary of what happens in a session: the kind of the runner's event (``on_event``,
# sessionmem.session.turn.events) -> the name of the hook event emitted with it. Every hook point has its
# event; the hook names are OpenClaw's, kept as users' hooks know them.
HOOK_NAMES: dict[str, str] = {
    "command_new": "command:new",  # /new, and the daily and idle resets
    "command_reset": "command:reset",  # /reset
    "session_end": "session:end",
    "session_start": "session:start",
    "compaction_start": "compaction:before",
    "compaction": "compaction:after",
    "flush": "memory:flush",
}
COMMAND_NEW = HOOK_NAMES["command_new"]
COMMAND_RESET = HOOK_NAMES["command_reset"]
SESSION_START = HOOK_NAMES["session_start"]
SESSION_END = HOOK_NAMES["session_end"]
COMPACTION_BEFORE = HOOK_NAMES["compaction_start"]
COMPACTION_AFTER = HOOK_NAMES["compaction"]
MEMORY_FLUSH = HOOK_NAMES["flush"]
EVENT_NAMES = tuple(HOOK_NAMES.values())

DEFAULT_HOOK_TIMEOUT_S = 30.0
BUNDLED_PACKAGE = "sessionmem._bundled_hooks"

HookSource = Literal["bundled", "workspace", "user", "extra", "code"]


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(slots=True, kw_only=True)
class HookEvent:
    """What happened, with enough context for a hook to act without reaching into the runner.

    ``transcript_path`` points at the ending session's live transcript for ``command:new`` /
    ``command:reset`` (the runner emits before it archives the file, DESIGN decision 6).
    ``transcript`` is that transcript itself (a :class:`~sessionmem.session.stores.backend.TranscriptLog`),
    for those events and ``session:end``: where the store keeps transcripts in a database (``transcript_path``
    None), hooks read it through this.
    ``model`` is the :class:`~sessionmem.model.base.Model` for hooks that need one call: the one
    ``compaction.model`` names when set (a housekeeping model), else the agent's.
    """

    name: str
    workspace: Path
    state_dir: Path
    session_key: str = "agent:main:main"
    agent_id: str = "main"
    timestamp: datetime = field(default_factory=_utcnow)
    session_entry: dict[str, Any] | None = None
    previous_session_entry: dict[str, Any] | None = None
    transcript_path: Path | None = None
    transcript: Any | None = None  # TranscriptLog; Any: hooks must not import the session package
    command_source: str | None = None
    model: Any | None = None
    config: Config = field(default_factory=Config)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        """The part before the colon: ``command`` for ``command:new``."""
        return self.name.split(":", 1)[0]


HookHandler = Callable[[HookEvent], Any | Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class HookOutcome:
    """How one hook handled one event: its return value, or the error that stopped it."""

    hook: str
    event: str
    ok: bool
    result: Any = None
    error: str | None = None
    duration_s: float = 0.0


@dataclass(frozen=True, slots=True)
class _Registration:
    name: str
    event: str
    handler: HookHandler
    timeout_s: float


class HookRegistry:
    """Handlers by event name. A handler registered for ``command`` receives every ``command:*`` event.

    :meth:`include` adds another registry's hooks after this one's, read live (a hook registered there
    later is seen too); a hook name registered there replaces one of the same name here.
    """

    def __init__(self, timeout_s: float = DEFAULT_HOOK_TIMEOUT_S) -> None:
        self.timeout_s = timeout_s
        self._registrations: list[_Registration] = []
        self._included: list[HookRegistry] = []

    def include(self, other: HookRegistry) -> None:
        """Run ``other``'s hooks after this registry's own (see the class docstring)."""
        self._included.append(other)

    def register(
        self,
        event_name: str,
        handler: HookHandler,
        *,
        name: str | None = None,
        timeout_s: float | None = None,
    ) -> None:
        hook_name = name or getattr(handler, "__qualname__", None) or repr(handler)
        self._registrations.append(
            _Registration(hook_name, event_name, handler, self.timeout_s if timeout_s is None else timeout_s)
        )

    def unregister(self, name: str) -> None:
        self._registrations = [r for r in self._registrations if r.name != name]

    def names(self, event_name: str | None = None) -> list[str]:
        regs = self._all() if event_name is None else self._matching(event_name)
        return list(dict.fromkeys(r.name for r in regs))

    def _all(self) -> list[_Registration]:
        included = [r for other in self._included for r in other._all()]
        replaced = {r.name for r in included}
        return [r for r in self._registrations if r.name not in replaced] + included

    def _matching(self, event_name: str) -> list[_Registration]:
        kind = event_name.split(":", 1)[0]
        return [r for r in self._all() if r.event in (event_name, kind)]

    async def emit(self, event: HookEvent) -> list[HookOutcome]:
        """Run the matching handlers one after another, in registration order; never raises."""
        outcomes = []
        for reg in self._matching(event.name):
            outcomes.append(await self._run(reg, event))
        return outcomes

    def emit_sync(self, event: HookEvent) -> list[HookOutcome]:
        """:meth:`emit` for synchronous callers; inside a running event loop, ``await emit()`` instead."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.emit(event))
        raise UsageError(
            "HookRegistry.emit_sync() called inside a running event loop; use 'await emit(event)'"
        )

    async def _run(self, reg: _Registration, event: HookEvent) -> HookOutcome:
        started = time.perf_counter()
        try:
            result = await asyncio.wait_for(_call(reg.handler, event), timeout=reg.timeout_s)
        except TimeoutError:
            error = f"hook {reg.name!r} timed out after {reg.timeout_s:g}s on {event.name}"
            log.warning(error)
            return HookOutcome(reg.name, event.name, False, None, error, time.perf_counter() - started)
        except Exception as exc:
            error = f"hook {reg.name!r} failed on {event.name}: {type(exc).__name__}: {exc}"
            log.warning(error, exc_info=True)
            return HookOutcome(reg.name, event.name, False, None, error, time.perf_counter() - started)
        return HookOutcome(reg.name, event.name, True, result, None, time.perf_counter() - started)


async def _call(handler: HookHandler, event: HookEvent) -> Any:
    """Await async handlers; run sync ones in a thread so a slow one cannot block the loop."""
    call_method = getattr(type(handler), "__call__", None)  # noqa: B004 (async def __call__ on a hook object)
    if inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(call_method):
        result = handler(event)
    else:
        result = await asyncio.to_thread(handler, event)
    if inspect.isawaitable(result):
        result = await result
    return result


# ---------------------------------------------------------------------------- HOOK.md front matter


def parse_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """The ``---``-delimited front matter of a HOOK.md as a dict, and the body after it.

    A small subset of YAML, enough for hook metadata: ``key: value`` lines where the value is
    JSON (``["a", "b"]``, ``{"x": 1}``, ``"text"``), a bare word or sentence, ``true``/``false``,
    a number, a flow list ``[a, b]``, or nothing followed by ``- item`` lines.
    """
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        return {}, text
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == "---")
    except StopIteration:
        return {}, text
    meta: dict[str, Any] = {}
    current_list: list[Any] | None = None
    for raw in lines[1:end]:
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        stripped = raw.strip()
        if current_list is not None and raw[:1] in (" ", "\t", "-") and stripped.startswith("- "):
            current_list.append(_scalar(stripped[2:].strip()))
            continue
        key, sep, value = raw.partition(":")
        if not sep or raw[:1] in (" ", "\t"):
            continue  # nested mappings are not hook metadata we read
        key = key.strip()
        value = value.strip()
        if value:
            meta[key] = _scalar(value)
            current_list = None
        else:
            current_list = []
            meta[key] = current_list
    return meta, "\n".join(lines[end + 1 :])


def _scalar(value: str) -> Any:
    if value[:1] in '[{"' or value in ("true", "false", "null") or re.fullmatch(r"-?\d+(\.\d+)?", value):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            pass
    if value.startswith("[") and value.endswith("]"):
        return [_scalar(part.strip()) for part in value[1:-1].split(",") if part.strip()]
    if len(value) >= 2 and value[0] == value[-1] == "'":
        return value[1:-1]
    lowered = value.lower()
    if lowered in ("yes", "on", "true"):
        return True
    if lowered in ("no", "off", "false"):
        return False
    return value


# ---------------------------------------------------------------------------- discovery


@dataclass(frozen=True, slots=True)
class HookSpec:
    """A hook found on disk. ``enabled`` is the resolved state (HOOK.md default, then config)."""

    name: str
    description: str
    events: tuple[str, ...]
    enabled: bool
    source: HookSource
    folder: Path
    default_enabled: bool = True
    error: str | None = None  # why it cannot run (bad HOOK.md, no handler.py)


def bundled_hooks_dir() -> Path | None:
    """Where the hooks shipped with sessionmem are: the wheel's package, else the source checkout."""
    try:
        spec = importlib.util.find_spec(BUNDLED_PACKAGE)
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            if Path(location).is_dir():
                return Path(location)
    # Trigger: an editable install made before the package mapping existed, or a plain checkout on
    # sys.path. Why: setuptools' editable finder only knows packages present at install time.
    # Outcome: the top-level hooks/ next to the sessionmem package.
    checkout = Path(__file__).resolve().parent.parent / "hooks"
    return checkout if checkout.is_dir() else None


def read_hook_folder(folder: Path, source: HookSource, config: Config) -> HookSpec | None:
    """A HookSpec for a folder with a HOOK.md, or None when the folder is not a hook."""
    hook_md = folder / "HOOK.md"
    if not hook_md.is_file():
        return None
    error = None
    try:
        meta, _ = parse_front_matter(hook_md.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        meta, error = {}, f"cannot read {hook_md.name}: {exc}"
    name = str(meta.get("name") or folder.name)
    events = meta.get("events")
    if not events:
        nested = meta.get("metadata")
        if isinstance(nested, dict):  # OpenClaw: metadata: {"openclaw": {"events": [...]}}
            events = (nested.get("openclaw") or {}).get("events")
    if isinstance(events, str):
        events = [events]
    event_names = tuple(str(e) for e in events or ())
    if not event_names and error is None:
        error = "HOOK.md lists no events"
    if not (folder / "handler.py").is_file() and error is None:
        error = "no handler.py"
    default_enabled = _truthy(meta.get("enabled", True))
    return HookSpec(
        name=name,
        description=str(meta.get("description") or ""),
        events=event_names,
        enabled=hook_enabled(config, name, default_enabled),
        source=source,
        folder=folder,
        default_enabled=default_enabled,
        error=error,
    )


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() not in ("false", "no", "off", "0", "")
    return bool(value)


def hook_enabled(config: Config, name: str, default: bool) -> bool:
    entry = config.hooks.internal.entries.get(name)
    if entry is not None and entry.enabled is not None:
        return entry.enabled
    return default


def hook_options(config: Config, name: str) -> dict[str, Any]:
    """The extra keys of ``hooks.internal.entries[name]`` (e.g. ``messages``, ``llmSlug``)."""
    entry = config.hooks.internal.entries.get(name)
    if entry is None:
        return {}
    return dict(entry.model_extra or {})


def hook_sources(config: Config, workspace: Path, user_dir: Path | None) -> list[tuple[HookSource, Path]]:
    sources: list[tuple[HookSource, Path]] = []
    bundled = bundled_hooks_dir()
    if bundled is not None:
        sources.append(("bundled", bundled))
    sources.append(("workspace", Path(workspace) / "hooks"))
    if user_dir is not None:
        sources.append(("user", Path(user_dir)))
    for extra in config.hooks.internal.extra_dirs:
        path = Path(extra).expanduser()
        sources.append(("extra", path if path.is_absolute() else Path(workspace) / path))
    return sources


def discover_hooks(config: Config, workspace: Path, user_dir: Path | None = None) -> list[HookSpec]:
    """Every hook on disk, later sources overriding earlier ones by name, sorted by name."""
    found: dict[str, HookSpec] = {}
    for source, root in hook_sources(config, workspace, user_dir):
        if not root.is_dir():
            continue
        for folder in sorted(p for p in root.iterdir() if p.is_dir()):
            spec = read_hook_folder(folder, source, config)
            if spec is not None:
                found[spec.name] = spec
    return [found[name] for name in sorted(found)]


def load_handler(spec: HookSpec) -> HookHandler:
    """Import a hook's handler.py under a private module name and return its ``handle``."""
    path = spec.folder / "handler.py"
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:10]
    module_name = f"sessionmem._hook_{re.sub(r'[^a-zA-Z0-9_]', '_', spec.name)}_{digest}"
    module_spec = importlib.util.spec_from_file_location(module_name, path)
    if module_spec is None or module_spec.loader is None:
        raise ImportError(f"cannot load hook handler {path}")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_name] = module
    try:
        module_spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    handle = getattr(module, "handle", None)
    if not callable(handle):
        raise ImportError(f"hook handler {path} has no handle(event) function")
    return handle


def load_hooks(
    config: Config,
    workspace: Path,
    user_dir: Path | None = None,
    *,
    registry: HookRegistry | None = None,
) -> HookRegistry:
    """A registry with every enabled hook on disk registered for its events.

    ``user_dir`` is the user's hook folder (the runner passes ``<state_dir>/hooks``). A hook whose
    handler cannot be imported is logged and skipped; the others still load.
    """
    registry = registry or HookRegistry()
    if not config.hooks.internal.enabled:
        return registry
    for spec in discover_hooks(config, workspace, user_dir):
        if not spec.enabled:
            continue
        if spec.error is not None:
            log.warning("hook %r in %s skipped: %s", spec.name, spec.folder, spec.error)
            continue
        try:
            handler = load_handler(spec)
        except Exception as exc:
            log.warning("hook %r in %s skipped: %s: %s", spec.name, spec.folder, type(exc).__name__, exc)
            continue
        for event_name in spec.events:
            registry.register(event_name, handler, name=spec.name)
    return registry
