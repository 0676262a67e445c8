"""The public surface: each public module's ``__all__`` is exactly the names it offers, every one of them
resolves, and what the README tells users to use is among them (one public place each).

Names load lazily (:mod:`sessionmem.lazy`), so the names a module offers are its ``dir()``: what it
defines plus what it lists to load, less the submodules Python binds on the package as they are imported.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
import types

import pytest

import sessionmem
from sessionmem.session.turn import events

PUBLIC_MODULES = ("sessionmem", "sessionmem.session", "sessionmem.testing")

# What the README names, and the one public place it is imported from.
README_SURFACE = {
    "sessionmem": {
        "Config",
        "LiteLLMModel",
        "MemoryIndex",
        "Model",
        "ModelReply",
        "ModelRequest",
        "SearchRequest",
        "SessionRunner",
        "StreamingModel",
        "TurnResult",
        "HookRegistry",
        "Tool",
        "tool",
        "Event",
        "FlushEvent",
        "CompactionEvent",
    },
    "sessionmem.session": {
        "SessionBackend",
        "VersionedTranscript",
        "SessionStore",
        "SqliteSessionStore",
        "PostgresSessionStore",
    },
    "sessionmem.testing": {
        "ScriptedModel",
        "flush_aware",
        "flush_write",
        "overflow_on_turn",
        "echo",
        "small_window_config",
        "run_replay",
    },
}


def offered(module: types.ModuleType) -> list[str]:
    """The public names ``module`` offers: its ``dir()`` without private names and submodules."""
    names = []
    for name in dir(module):
        if name.startswith("_") and name != "__version__":
            continue
        if isinstance(vars(module).get(name), types.ModuleType):
            continue  # a submodule (or an imported module), bound as an attribute on import
        if name in ("annotations", "TYPE_CHECKING", "lazy_names"):
            continue  # the module's own machinery: ``from __future__``, typing, the lazy loader
        names.append(name)
    return sorted(names)


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_all_is_sorted_and_is_exactly_what_the_module_offers(name: str) -> None:
    module = importlib.import_module(name)
    assert module.__all__ == sorted(module.__all__)
    assert offered(module) == sorted(module.__all__)


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_every_exported_name_resolves(name: str) -> None:
    module = importlib.import_module(name)
    for member in module.__all__:
        assert getattr(module, member) is not None, f"{name}.{member}"


def test_an_unknown_name_is_an_attribute_error_naming_it() -> None:
    with pytest.raises(AttributeError, match="'sessionmem' has no attribute 'Sesion'"):
        sessionmem.Sesion  # noqa: B018


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_what_the_readme_names_is_public(name: str) -> None:
    module = importlib.import_module(name)
    assert README_SURFACE[name] - set(module.__all__) == set()


def test_each_name_has_one_public_place() -> None:
    # the testing kit offers the scripted model too: it is what tests import with the rest of the kit
    shared = set(sessionmem.__all__) & set(importlib.import_module("sessionmem.session").__all__)
    assert shared == set()


def test_every_event_the_runner_reports_is_public() -> None:
    kinds = [
        cls.__name__
        for cls in vars(events).values()
        if isinstance(cls, type) and issubclass(cls, events.Event) and cls.__module__ == events.__name__
    ]
    assert len(kinds) > 5
    assert sorted(set(kinds) - set(sessionmem.__all__)) == []


def test_the_stores_are_the_real_classes_and_reading_them_loads_no_model_library() -> None:
    code = (
        "import sys, sessionmem.session as s; "
        "s.SessionStore, s.SqliteSessionStore; "
        "print(','.join(m for m in ('psycopg', 'litellm', 'llama_cpp') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""  # psycopg loads with PostgresSessionStore, the models never
    from sessionmem.session.stores.sessions_postgres import PostgresSessionStore
    from sessionmem.session.stores.sessions_sqlite import SqliteSessionStore

    session = importlib.import_module("sessionmem.session")
    assert session.SqliteSessionStore is SqliteSessionStore
    assert session.PostgresSessionStore is PostgresSessionStore
