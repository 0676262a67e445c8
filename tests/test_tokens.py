"""Token counting offline, and the environment litellm runs in."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from sessionmem import tokens


def test_counts_come_from_the_bundled_encoding_without_network() -> None:
    assert tokens.count_tokens("") == 0
    assert tokens.count_tokens("hello world") == 2
    assert tokens.count_tokens("你好世界") >= 2  # CJK is counted, not skipped
    folder = tokens.litellm_tokenizer_dir()
    assert folder is not None and any(folder.iterdir())


def test_litellm_environment_defaults_respect_the_users_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("LITELLM_LOCAL_MODEL_COST_MAP", "DISABLE_AIOHTTP_TRANSPORT", "TIKTOKEN_CACHE_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DISABLE_AIOHTTP_TRANSPORT", "False")
    tokens.configure_litellm_environment()
    assert os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    assert os.environ["DISABLE_AIOHTTP_TRANSPORT"] == "False"  # the user's setting stands
    assert os.environ["TIKTOKEN_CACHE_DIR"] == str(tokens.litellm_tokenizer_dir())


def test_finding_the_tokenizer_folder_does_not_import_litellm() -> None:
    code = (
        "import sys; from sessionmem import tokens; tokens.litellm_tokenizer_dir(); "
        "print('litellm' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
