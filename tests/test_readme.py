"""The README's Python examples run as written."""

from __future__ import annotations

import ast
import importlib
import re
import typing
from datetime import date
from pathlib import Path

import pytest
from pydantic import BaseModel

README = Path(__file__).resolve().parent.parent / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def test_the_readme_python_example_runs_and_flushes_then_compacts(capsys: pytest.CaptureFixture[str]) -> None:
    example = python_blocks()[0]
    exec(compile(example, str(README), "exec"), {"__name__": "readme"})
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "ok: I prefer metric units."
    events = [line for line in printed if line.startswith("· ")]
    assert events[:2] == ["· flush", "· compaction"]  # the 3,000-token window of the example works
    today = date.today().isoformat()
    assert f"memory/{today}.md 1 - The user prefers metric units." in printed
    assert any(
        line.startswith(f"memory/peers/telegram~direct~42/{today}-trip-notes.md 1 ") for line in printed
    )


def config_keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every key of a config model, dotted, camelCase; a dict of models as ``<>``."""
    keys: list[str] = []
    for name, field in model.model_fields.items():
        alias = "memorySearch" if name == "memory_search" else field.alias or name
        annotation, args = field.annotation, typing.get_args(field.annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            keys += config_keys(annotation, f"{prefix}{alias}.")
        elif (
            typing.get_origin(annotation) is dict
            and isinstance(args[1], type)
            and issubclass(args[1], BaseModel)
        ):
            keys += config_keys(args[1], f"{prefix}{alias}.<>.")
        else:
            keys.append(prefix + alias)
    return keys


def documented_keys() -> set[str]:
    """The keys of the README's configuration table: each row's first cell, where a key without a dot
    after another (`compaction.memoryFlush.prompt` / `systemPrompt`) is a sibling of the one before."""
    text = README.read_text(encoding="utf-8")
    table = text[text.index("| key (under `agents.defaults`") :].split("\n\n", 1)[0]
    keys: set[str] = set()
    for row in table.splitlines()[2:]:
        previous: str | None = None
        for item in re.findall(r"`([^`]+)`", row.split("|")[1]):
            key = re.sub(r"<[^>]*>", "<>", item)
            if "." not in key and previous is not None:
                key = previous.rsplit(".", 1)[0] + "." + key
            keys.add(key)
            previous = key
    return keys


def test_every_config_key_is_in_the_readme_table() -> None:
    from sessionmem.config import AgentConfig, Config

    expected = config_keys(AgentConfig)
    for section in ("memory", "session", "hooks"):
        annotation = Config.model_fields[section].annotation
        assert isinstance(annotation, type) and issubclass(annotation, BaseModel)
        expected += config_keys(annotation, f"{section}.")
    missing = [key for key in expected if key not in documented_keys()]
    assert missing == [], f"config keys missing from the README's table: {missing}"


def test_the_readme_tool_example_prints_the_schema_it_shows(capsys: pytest.CaptureFixture[str]) -> None:
    example = python_blocks()[1]
    exec(compile(example, str(README), "exec"), {"__name__": "readme"})
    shown = example.rstrip().splitlines()[-1].removeprefix("# ")
    assert capsys.readouterr().out.strip() == shown


def test_every_import_in_the_readmes_python_blocks_works() -> None:
    imports = [
        ast.unparse(node)
        for block in python_blocks()
        for node in ast.walk(ast.parse(block))
        if isinstance(node, ast.Import | ast.ImportFrom)
    ]
    assert any("sessionmem" in line for line in imports)
    for line in imports:
        exec(compile(line, line, "exec"), {})


def test_every_import_and_dotted_name_in_the_readmes_prose_resolves() -> None:
    """``from sessionmem... import X`` in inline code runs; ```sessionmem.a.B``` names something real."""
    text = README.read_text(encoding="utf-8")
    inline = re.findall(r"`((?:from sessionmem[\w.]* import|import sessionmem)[^`]*)`", text)
    assert inline, "the README's prose imports nothing: update this test"
    for line in inline:
        exec(compile(line, line, "exec"), {})
    for dotted in set(re.findall(r"`(sessionmem(?:\.\w+)+)`", text)):
        module, _, name = dotted.rpartition(".")
        try:
            importlib.import_module(dotted)
        except ModuleNotFoundError:
            assert hasattr(importlib.import_module(module), name), dotted
