"""The curated public surface, and the promise that importing it stays cheap."""

from __future__ import annotations

import subprocess
import sys

import sessionmem


def test_all_is_sorted_and_every_name_resolves() -> None:
    assert sessionmem.__all__ == sorted(sessionmem.__all__)
    for name in sessionmem.__all__:
        assert getattr(sessionmem, name) is not None, name


def test_import_does_not_load_litellm_llama_cpp_or_the_runner() -> None:
    code = (
        "import sys, sessionmem; "
        "heavy = [m for m in ('litellm', 'llama_cpp', 'numpy', 'watchdog', 'sessionmem.session.runner') "
        "if m in sys.modules]; print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_import_does_not_load_pydantic_or_the_config_models() -> None:
    """``import sessionmem`` stays cheap: pydantic and the config models load when Config is first used."""
    code = (
        "import sys, sessionmem; "
        "print(','.join(m for m in ('pydantic', 'sessionmem.config') if m in sys.modules)); "
        "sessionmem.Config; "
        "print(','.join(m for m in ('pydantic', 'sessionmem.config') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == ["", "pydantic,sessionmem.config"]


def test_lazy_names_are_the_real_classes() -> None:
    from sessionmem.memory.index import MemoryIndex
    from sessionmem.session.runner import SessionRunner

    assert sessionmem.SessionRunner is SessionRunner
    assert sessionmem.MemoryIndex is MemoryIndex
    from sessionmem.config import Config

    assert sessionmem.Config is Config
