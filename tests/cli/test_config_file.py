"""A config file the CLI cannot use is a clear error (exit 2, the file and the problem named), never a
traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from sessionmem.cli import cli
from sessionmem.config import Config
from sessionmem.errors import ConfigError


def test_a_config_file_that_is_not_utf8_is_named_and_exits_2(tmp_path: Path) -> None:
    config = tmp_path / "config.json5"
    config.write_bytes(b'{"agents": {"defaults": {"workspace": "caf\xe9"}}}')  # Latin-1, not UTF-8
    result = CliRunner().invoke(cli, ["--config", str(config), "memory", "status"])
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
    assert (
        str(config) in result.stderr
        and "not valid UTF-8" in result.stderr
        and "byte 42 is 0xe9" in result.stderr
    )
    with pytest.raises(ConfigError, match="not valid UTF-8"):
        Config.load(config)
