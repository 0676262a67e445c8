"""The README's Python examples run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def test_the_readme_python_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    example = python_blocks()[0]
    exec(compile(example, str(README), "exec"), {"__name__": "readme"})
    printed = capsys.readouterr().out
    assert "memory/2026-11-10.md 1 - The billing cutover is on 2026-12-01." in printed


def test_the_readme_tool_example_prints_the_schema_it_shows(capsys: pytest.CaptureFixture[str]) -> None:
    example = python_blocks()[1]
    exec(compile(example, str(README), "exec"), {"__name__": "readme"})
    shown = example.rstrip().splitlines()[-1].removeprefix("# ")
    assert capsys.readouterr().out.strip() == shown
