"""Fixtures shared by the memory tests (helpers that are not fixtures live in ``support.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def state(tmp_path: Path) -> Path:
    """The state directory (sessions, index files) of one test."""
    return tmp_path / "state"
