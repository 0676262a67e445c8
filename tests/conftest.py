"""Shared fixtures: an isolated environment, a temporary workspace, the real GGUF model."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest_plugins = [
    "tests.support.openai_server",
    "tests.support.full_disk",
    "tests.support.stores",
    "tests.support.postgres",
]

REPO_ROOT = Path(__file__).resolve().parent.parent
GGUF_MODEL = REPO_ROOT.parent / "shared" / "models" / "all-MiniLM-L6-v2.Q8_0.gguf"
IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}

_PROVIDER_KEYS = (
    "OPENAI_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "VOYAGE_API_KEY",
    "MISTRAL_API_KEY",
    "ANTHROPIC_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_API_BASE",
)


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No provider keys from the developer's shell; state under a temporary folder."""
    for key in _PROVIDER_KEYS:
        monkeypatch.delenv(key, raising=False)
    state = tmp_path / "state"
    monkeypatch.setenv("SESSIONMEM_STATE_DIR", str(state))
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    return state


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "workspace"
    (ws / "memory").mkdir(parents=True)
    return ws


@pytest.fixture(scope="session")
def gguf_model() -> Path:
    """The real MiniLM GGUF model. Missing parts fail in CI and skip elsewhere."""
    problem = None
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        problem = "llama-cpp-python is not installed (pip install -e '.[local]')"
    if problem is None and not GGUF_MODEL.is_file():
        problem = f"model file not found at {GGUF_MODEL}"
    if problem:
        if IN_CI:
            pytest.fail(f"local-model tests must run in CI: {problem}")
        pytest.skip(problem)
    return GGUF_MODEL
