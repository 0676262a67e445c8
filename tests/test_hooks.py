"""Hooks: registry emission (sync, async, failures, timeouts), HOOK.md parsing, discovery and precedence."""

from __future__ import annotations

import asyncio
import fnmatch
import logging
import re
import tomllib
from pathlib import Path

import pytest

from sessionmem.config import Config, merge
from sessionmem.errors import UsageError
from sessionmem.hooks import (
    COMMAND_NEW,
    COMMAND_RESET,
    HookEvent,
    HookRegistry,
    bundled_hooks_dir,
    discover_hooks,
    hook_options,
    load_hooks,
    parse_front_matter,
)

REPO_ROOT = Path(__file__).resolve().parent.parent


def event(tmp_path: Path, name: str = COMMAND_NEW, config: Config | None = None) -> HookEvent:
    return HookEvent(
        name=name, workspace=tmp_path / "ws", state_dir=tmp_path / "state", config=config or Config()
    )


def write_hook(root: Path, folder: str, front: str, handler: str) -> Path:
    path = root / folder
    path.mkdir(parents=True, exist_ok=True)
    (path / "HOOK.md").write_text(f"---\n{front}\n---\n\n# {folder}\n", encoding="utf-8")
    (path / "handler.py").write_text(handler, encoding="utf-8")
    return path


# ---------------------------------------------------------------------------- registry


def test_sync_and_async_handlers_both_run_in_order(tmp_path: Path) -> None:
    seen: list[str] = []

    def sync_hook(ev: HookEvent) -> str:
        seen.append("sync:" + ev.name)
        return "s"

    async def async_hook(ev: HookEvent) -> str:
        await asyncio.sleep(0)
        seen.append("async:" + ev.name)
        return "a"

    registry = HookRegistry()
    registry.register(COMMAND_NEW, sync_hook, name="one")
    registry.register(COMMAND_NEW, async_hook, name="two")
    registry.register(COMMAND_RESET, sync_hook, name="other-event")
    outcomes = asyncio.run(registry.emit(event(tmp_path)))
    assert seen == ["sync:command:new", "async:command:new"]
    assert [(o.hook, o.ok, o.result) for o in outcomes] == [("one", True, "s"), ("two", True, "a")]


def test_handler_for_event_kind_receives_every_action(tmp_path: Path) -> None:
    registry = HookRegistry()
    registry.register("command", lambda ev: ev.name, name="all-commands")
    assert [o.result for o in registry.emit_sync(event(tmp_path, COMMAND_RESET))] == [COMMAND_RESET]
    assert registry.emit_sync(event(tmp_path, "session:start")) == []


def test_failing_hook_is_reported_and_does_not_stop_others(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(ev: HookEvent) -> None:
        raise RuntimeError("disk on fire")

    registry = HookRegistry()
    registry.register(COMMAND_NEW, broken, name="broken")
    registry.register(COMMAND_NEW, lambda ev: "fine", name="fine")
    with caplog.at_level(logging.WARNING, logger="sessionmem.hooks"):
        outcomes = asyncio.run(registry.emit(event(tmp_path)))
    assert outcomes[0].ok is False
    assert outcomes[0].error is not None and "disk on fire" in outcomes[0].error
    assert (outcomes[1].ok, outcomes[1].result) == (True, "fine")
    assert "broken" in caplog.text


def test_slow_hook_times_out_without_blocking_the_caller(tmp_path: Path) -> None:
    cancelled: list[bool] = []

    async def slow(ev: HookEvent) -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    registry = HookRegistry(timeout_s=0.05)
    registry.register(COMMAND_NEW, slow, name="slow")
    registry.register(COMMAND_NEW, lambda ev: 1, name="after")
    outcomes = asyncio.run(registry.emit(event(tmp_path)))
    assert outcomes[0].ok is False and "timed out" in (outcomes[0].error or "")
    assert cancelled == [True]  # stopped at its timeout, not left running nor awaited to the end
    assert outcomes[1].ok is True


def test_async_callable_object_is_awaited(tmp_path: Path) -> None:
    class Hook:
        async def __call__(self, ev: HookEvent) -> str:
            return "called"

    registry = HookRegistry()
    registry.register(COMMAND_NEW, Hook(), name="obj")
    assert registry.emit_sync(event(tmp_path))[0].result == "called"


# ---------------------------------------------------------------------------- HOOK.md


def test_front_matter_forms() -> None:
    text = """---
name: my-hook
description: "Does a thing: well"
events:
  - command:new
  - command:reset
enabled: false
timeout: 5
tags: [a, 'b']
metadata: {"openclaw": {"emoji": "x"}}
# a comment
---
# Body
"""
    meta, body = parse_front_matter(text)
    assert meta == {
        "name": "my-hook",
        "description": "Does a thing: well",
        "events": ["command:new", "command:reset"],
        "enabled": False,
        "timeout": 5,
        "tags": ["a", "b"],
        "metadata": {"openclaw": {"emoji": "x"}},
    }
    assert body.strip() == "# Body"
    assert parse_front_matter("# no front matter") == ({}, "# no front matter")


# ---------------------------------------------------------------------------- discovery


def test_bundled_session_memory_hook_is_found_and_enabled_by_default(tmp_path: Path) -> None:
    specs = {s.name: s for s in discover_hooks(Config(), tmp_path)}
    spec = specs["session-memory"]
    assert spec.source == "bundled"
    assert spec.events == (COMMAND_NEW, COMMAND_RESET)
    assert spec.enabled is True and spec.error is None
    assert load_hooks(Config(), tmp_path).names(COMMAND_NEW) == ["session-memory"]


def test_later_sources_override_earlier_by_name(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    user = tmp_path / "state" / "hooks"
    extra = tmp_path / "extra"
    write_hook(
        ws / "hooks", "greeter", "name: greeter\nevents: [command:new]", "def handle(ev):\n    return 'ws'\n"
    )
    write_hook(
        user, "greeter2", "name: greeter\nevents: [command:new]", "def handle(ev):\n    return 'user'\n"
    )
    write_hook(
        ws / "hooks",
        "other",
        "name: other\nevents: [command:new]",
        "def handle(ev):\n    return 'ws-other'\n",
    )
    write_hook(
        extra, "other", "name: other\nevents: [command:new]", "async def handle(ev):\n    return 'extra'\n"
    )
    config = merge(Config(), {"hooks": {"internal": {"extraDirs": [str(extra)]}}})
    specs = {s.name: s for s in discover_hooks(config, ws, user)}
    assert (specs["greeter"].source, specs["other"].source) == ("user", "extra")
    registry = load_hooks(config, ws, user)
    results = {o.hook: o.result for o in registry.emit_sync(event(tmp_path, config=config))}
    assert results["greeter"] == "user"
    assert results["other"] == "extra"


def test_workspace_hook_overrides_bundled_one(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write_hook(
        ws / "hooks",
        "session-memory",
        "name: session-memory\nevents: [command:new]",
        "def handle(ev):\n    return 'mine'\n",
    )
    registry = load_hooks(Config(), ws)
    assert [o.result for o in registry.emit_sync(event(tmp_path))] == ["mine"]


def test_enable_and_disable_through_config(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write_hook(
        ws / "hooks",
        "opt-in",
        "name: opt-in\nevents: [command:new]\nenabled: false",
        "def handle(ev):\n    return 1\n",
    )
    assert load_hooks(Config(), ws).names() == ["session-memory"]
    config = merge(
        Config(),
        {
            "hooks": {
                "internal": {"entries": {"opt-in": {"enabled": True}, "session-memory": {"enabled": False}}}
            }
        },
    )
    assert load_hooks(config, ws).names() == ["opt-in"]
    off = merge(Config(), {"hooks": {"internal": {"enabled": False}}})
    assert load_hooks(off, ws).names() == []


def test_broken_hooks_are_skipped_and_the_rest_load(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    ws = tmp_path / "ws"
    write_hook(ws / "hooks", "syntax", "name: syntax\nevents: [command:new]", "def handle(ev) oops\n")
    write_hook(ws / "hooks", "no-handle", "name: no-handle\nevents: [command:new]", "x = 1\n")
    write_hook(ws / "hooks", "no-events", "name: no-events", "def handle(ev):\n    return 1\n")
    (ws / "hooks" / "not-a-hook").mkdir()
    with caplog.at_level(logging.WARNING, logger="sessionmem.hooks"):
        registry = load_hooks(Config(), ws)
    assert registry.names() == ["session-memory"]
    specs = {s.name: s for s in discover_hooks(Config(), ws)}
    assert specs["no-events"].error == "HOOK.md lists no events"
    assert "not-a-hook" not in specs
    assert "syntax" in caplog.text and "no-handle" in caplog.text


def test_hook_options_are_the_entry_extra_keys() -> None:
    config = merge(
        Config(), {"hooks": {"internal": {"entries": {"session-memory": {"messages": 3, "llmSlug": False}}}}}
    )
    assert hook_options(config, "session-memory") == {"messages": 3, "llmSlug": False}
    assert hook_options(config, "absent") == {}


# ---------------------------------------------------------------------------- packaging


def test_bundled_hooks_dir_is_the_top_level_hooks_folder_in_a_checkout() -> None:
    found = bundled_hooks_dir()
    assert found is not None
    assert (found / "session-memory" / "HOOK.md").is_file()
    assert found.resolve() == (REPO_ROOT / "hooks").resolve()


def test_pyproject_lists_every_package_and_maps_the_hooks_folder() -> None:
    setuptools_cfg = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(setuptools_cfg["packages"])
    on_disk = {
        ".".join(p.parent.relative_to(REPO_ROOT).parts)
        for p in (REPO_ROOT / "sessionmem").rglob("__init__.py")
        if "__pycache__" not in p.parts
    }
    missing = on_disk - listed
    assert not missing, (
        f"add these packages to [tool.setuptools] packages in pyproject.toml: {sorted(missing)}"
    )
    assert setuptools_cfg["package-dir"]["sessionmem._bundled_hooks"] == "hooks"
    globs = setuptools_cfg["package-data"]["sessionmem._bundled_hooks"]
    assert any(re.fullmatch(r"\*/\*\.md", g) for g in globs)  # HOOK.md
    assert any(re.fullmatch(r"\*/\*\.py", g) for g in globs)  # handler.py
    # Every file of a bundled hook folder is matched by a glob, so the wheel ships all of it.
    hook_files = [
        p.relative_to(REPO_ROOT / "hooks").as_posix()
        for p in (REPO_ROOT / "hooks").glob("*/*")
        if p.is_file() and "__pycache__" not in p.parts
    ]
    assert "session-memory/handler.py" in hook_files
    unshipped = [f for f in hook_files if not any(fnmatch.fnmatchcase(f, g) for g in globs)]
    assert not unshipped, f"add package-data globs for the bundled hook files {unshipped}"


def test_emit_sync_inside_a_running_loop_is_a_usage_error(tmp_path: Path) -> None:
    registry = HookRegistry()

    async def inside() -> None:
        registry.emit_sync(event(tmp_path))

    with pytest.raises(UsageError, match="await emit"):
        asyncio.run(inside())


# ---------------------------------------------------------------------------- hooks= on the runner


def test_hooks_given_to_the_runner_add_to_the_bundled_session_memory_hook(tmp_path: Path) -> None:
    from sessionmem.model.scripted import ScriptedModel, flush_aware
    from sessionmem.session.runner import SessionRunner

    def run(config: Config, hooks: HookRegistry, folder: str) -> tuple[list[str], list[Path]]:
        seen: list[str] = []
        hooks.register(COMMAND_NEW, lambda ev: seen.append(ev.session_key), name="audit")
        workspace = tmp_path / folder
        runner = SessionRunner(
            ScriptedModel(responder=flush_aware(summary="summary")),
            config=config,
            workspace=workspace,
            state_dir=tmp_path / f"{folder}-state",
            hooks=hooks,
        )
        session = runner.open()
        session.run_turn_sync("we ship on Friday")
        session.run_turn_sync("/new")
        return seen, sorted(
            (workspace / "memory" / "peers" / "main").glob("*.md")
        )  # /new files: the chat's folder

    seen, files = run(Config(), HookRegistry(), "kept")
    assert seen == ["agent:main:main"] and len(files) == 1  # the audit hook and session-memory both ran
    assert "we ship on Friday" in files[0].read_text()
    off = merge(Config(), {"hooks": {"internal": {"entries": {"session-memory": {"enabled": False}}}}})
    seen, files = run(off, HookRegistry(), "disabled")
    assert seen == ["agent:main:main"] and files == []
    # A registry that already holds the bundled hooks does not get them twice.
    seen, files = run(Config(), load_hooks(Config(), tmp_path / "loaded"), "loaded")
    assert len(files) == 1


def test_hook_names_come_from_event_kinds_and_every_hook_point_has_an_event() -> None:
    from typing import get_args

    from sessionmem.hooks import EVENT_NAMES, HOOK_NAMES
    from sessionmem.session.turn.events import EventKind

    assert set(HOOK_NAMES) <= set(get_args(EventKind))  # every hook point is an on_event kind
    assert (
        set(EVENT_NAMES)
        == set(HOOK_NAMES.values())
        == {
            "command:new",
            "command:reset",
            "session:start",
            "session:end",
            "compaction:before",
            "compaction:after",
            "memory:flush",
        }
    )
    assert HOOK_NAMES["compaction_start"] == "compaction:before"
