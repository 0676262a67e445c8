"""The composition root: the one place that reads config files and the environment.

Every command turns the global options into a :class:`Context` through :func:`resolve` and passes
explicit objects (the agent's config, the workspace, the state folder, a frozen copy of the
environment) down to the library. Nothing below the CLI reads ``os.environ`` or a config file.

Resolution order:

- state folder: ``--state-dir`` > ``$SESSIONMEM_STATE_DIR`` > ``~/.sessionmem``
- config file: ``--config`` > ``$SESSIONMEM_CONFIG`` > ``<state>/config.json5`` > ``<state>/config.json``
  (the last two only when they exist; no file at all means every default)
- agent: ``--agent`` > ``main``
- workspace: ``--workspace`` > the agent's ``workspace`` (its ``agents.list`` entry over
  ``agents.defaults``; a relative path is taken from the config file's folder) > ``<state>/workspace``
- sessions (sessions.json and transcripts, also what the ``sessions`` memory source indexes): the folder
  of ``session.store`` > ``<state>/agents/<agentId>/sessions``
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from sessionmem.config import DEFAULT_AGENT_ID, AgentConfig, Config
from sessionmem.errors import ConfigError
from sessionmem.session.stores.keys import is_valid_agent_id
from sessionmem.session.stores.keys import sessions_dir as default_sessions_dir
from sessionmem.session.stores.opening import parse_store_spec

STATE_DIR_ENV = "SESSIONMEM_STATE_DIR"
CONFIG_ENV = "SESSIONMEM_CONFIG"
DEFAULT_STATE_DIR = "~/.sessionmem"
DEFAULT_CONFIG_NAMES = ("config.json5", "config.json")


@dataclass(frozen=True, slots=True)
class Context:
    """Everything a command needs, resolved once from options, config and environment."""

    config: Config
    agent: AgentConfig
    agent_id: str
    workspace: Path
    state_dir: Path
    env: Mapping[str, str]
    config_path: Path | None = None

    @property
    def sessions_dir(self) -> Path:
        """Where this agent's transcripts live (and its sessions.json or SQLite file): the folder of
        ``session.store`` (``~`` and ``{agentId}`` expanded), else ``<state>/agents/<agentId>/sessions``. (A
        store that keeps transcripts as rows has none: ``assembly.transcripts_of`` gives its shelf.)"""
        spec = parse_store_spec(self.config.session.store, state_dir=self.state_dir, agent_id=self.agent_id)
        return spec.sessions_dir or default_sessions_dir(self.state_dir, self.agent_id)


@dataclass(frozen=True, slots=True)
class GlobalOptions:
    """The global options as typed, before anything is read (``None`` = not given)."""

    config: str | None = None
    state_dir: str | None = None
    workspace: str | None = None
    agent: str | None = None


def resolve(options: GlobalOptions, env: Mapping[str, str] | None = None) -> Context:
    """Read the config file and the environment once; raise ``ConfigError`` naming what is wrong."""
    environ: Mapping[str, str] = MappingProxyType(dict(os.environ if env is None else env))
    state_dir = _absolute(options.state_dir or environ.get(STATE_DIR_ENV) or DEFAULT_STATE_DIR)
    if options.state_dir:
        _require_folder(state_dir, "--state-dir")
    else:
        _require_folder(state_dir, f"${STATE_DIR_ENV}" if environ.get(STATE_DIR_ENV) else "the default")
    agent_id = options.agent or DEFAULT_AGENT_ID
    if not is_valid_agent_id(agent_id):
        raise ConfigError(
            f"agent id {agent_id!r} is not valid: "
            "use letters, digits, '.', '-' and '_' (at most 64, starting with a letter or digit)"
        )

    config_path = _config_path(options.config, environ, state_dir)
    config = Config.load(config_path) if config_path is not None else Config()
    agent = config.for_agent(agent_id)
    workspace = _workspace(options.workspace, agent, config_path, state_dir)
    return Context(
        config=config,
        agent=agent,
        agent_id=agent_id,
        workspace=workspace,
        state_dir=state_dir,
        env=environ,
        config_path=config_path,
    )


def _require_folder(state_dir: Path, origin: str) -> None:
    """Refuse a state folder that is a file, or lies under one, before anything tries to create it.

    Trigger: ``--state-dir notes.txt``. Why: the index would fail deep inside with a bare
    ``NotADirectoryError`` traceback. Outcome: a ``ConfigError`` naming the folder and the file.
    A folder that does not exist yet is fine (it is created on first use).
    """
    for path in (state_dir, *state_dir.parents):
        if path.is_dir():
            return
        if os.path.lexists(path):
            what = "is a file" if path.is_file() else "is not a directory"
            raise ConfigError(f"state folder {state_dir} (from {origin}) is not a directory: {path} {what}")


def _config_path(given: str | None, env: Mapping[str, str], state_dir: Path) -> Path | None:
    explicit = given or env.get(CONFIG_ENV)
    if explicit:
        path = _absolute(explicit)
        if not path.is_file():
            origin = "--config" if given else f"${CONFIG_ENV}"
            raise ConfigError(f"config file not found: {path} (from {origin})")
        return path
    for name in DEFAULT_CONFIG_NAMES:
        candidate = state_dir / name
        if candidate.is_file():
            return candidate
    return None


def _workspace(given: str | None, agent: AgentConfig, config_path: Path | None, state_dir: Path) -> Path:
    if given:
        return _absolute(given)
    if agent.workspace:
        path = Path(agent.workspace).expanduser()
        if not path.is_absolute():
            # Trigger: a config file says "workspace": "notes". Why: the same config must mean the same
            # folder whatever directory the command runs from. Outcome: relative to the config file.
            base = config_path.parent if config_path is not None else Path.cwd()
            path = base / path
        return path.resolve()
    return state_dir / "workspace"


def _absolute(value: str) -> Path:
    return Path(value).expanduser().resolve()
