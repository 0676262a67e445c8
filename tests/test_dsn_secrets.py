"""No PostgreSQL password in any error, log line, status, event or message, whatever it holds.

Every way in is tried with every kind of password (``%`` not starting a byte, ``/``, ``#``, ``?``, ``@``,
percent-encoded, a multi-host URL): the CLI (``sessions export``, ``memory status``, ``memory search``)
and the Python API (a runner on that ``session.store``, a ``MemoryIndex`` on that
``memorySearch.store.path``). The URLs are valid (but for the one with a stray ``%``) and name a user that
does not exist on the real test server, so psycopg's own connection error comes back: the password must
be in none of stdout, stderr, the exception's text and chain (what a traceback prints), the log records
and the events. Then the same passwords with a user the server accepts: a runner and an index work, and
show the URL (multi-host too) without the password.
"""

from __future__ import annotations

import json
import logging
import re
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from click.testing import CliRunner

from sessionmem.cli import cli
from sessionmem.config import Config, MemorySearchConfig
from sessionmem.errors import ConfigError, MemoryIndexError, SessionMemError
from sessionmem.memory.index import MemoryIndex
from sessionmem.memory.search.records import SearchRequest
from sessionmem.model.scripted import ScriptedModel, flush_aware
from sessionmem.session.runner import SessionRunner
from tests.memory.stores import pg_schema
from tests.memory.support import FTS_ONLY
from tests.support.postgres import IN_CI, server_dsn, unavailable

# Each password's pieces (split at its special characters) are distinctive, so a fragment of one in a
# message (the old ``Port could not be cast to integer value as 'S3cr'``) is found too.
PASSWORDS = {
    "stray %": "Xq7Zp%zzWv9Kd",
    "slash": "Xq7Zp/Wv9Kd",
    "hash": "Xq7Zp#Wv9Kd",
    "question mark": "Xq7Zp?Wv9Kd",
    "at sign": "Xq7Zp@Wv9Kd",
    "all of them": "Xq7Zp@W/v9#K?d:Lm3",
    "percent-encoded slash": "Xq7Zp%2FWv9Kd",
}
MULTI_HOST = "multi-host"


def pieces(password: str) -> list[str]:
    """What must not appear: the password's alphanumeric runs, as written and percent-decoded."""
    return sorted({p for p in re.split(r"[^A-Za-z0-9]+", password) if len(p) >= 3} - {"2F"})


@dataclass(frozen=True)
class Server:
    """The test server's parts (``SESSIONMEM_TEST_PG_DSN``, a plain URL without a password)."""

    user: str
    where: str  # host:port
    dbname: str


@pytest.fixture(scope="module")
def server() -> Server:
    problem = unavailable()
    if problem is not None:
        if IN_CI:
            pytest.fail(f"the PostgreSQL tests must run in CI: {problem}")
        pytest.skip(problem)
    parts = urlsplit(server_dsn())
    where = f"{parts.hostname or '127.0.0.1'}:{parts.port or 5432}"
    return Server(parts.username or "postgres", where, parts.path.lstrip("/") or "test")


def url(server: Server, user: str, password: str, *, multi_host: bool = False, query: str = "") -> str:
    """A URL of the test server as a user would type it (the password as given, unencoded)."""
    where = f"127.0.0.1:1,{server.where}" if multi_host else server.where  # nothing listens on port 1
    return f"postgresql://{user}:{password}@{where}/{server.dbname}{query}"


def cases(server: Server) -> list[tuple[str, str, str]]:
    """(case, the URL, the password's pieces) for every password, with a user the server does not have."""
    out = [(name, url(server, "nosuchuser", pw), pw) for name, pw in PASSWORDS.items()]
    out.append((MULTI_HOST, url(server, "nosuchuser", "Xq7Zp@Wv9Kd", multi_host=True), "Xq7Zp@Wv9Kd"))
    return out


def chain_text(exc: BaseException) -> str:
    """The exception's text, reprs and every exception behind it, and the traceback Python would print."""
    texts, seen, pending = [], set(), [exc]
    while pending:
        link = pending.pop()
        if link is None or id(link) in seen:
            continue
        seen.add(id(link))
        texts += [str(link), repr(link), repr(link.args)]
        pending += [link.__cause__, link.__context__]
    texts.append("".join(traceback.format_exception(exc)))
    return "\n".join(texts)


def assert_hidden(password: str, *texts: str) -> None:
    for text in texts:
        for piece in pieces(password):
            assert piece not in text, f"{piece!r} of the password in:\n{text}"


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    with caplog.at_level(logging.DEBUG):
        yield caplog


def log_text(caplog: pytest.LogCaptureFixture) -> str:
    return "\n".join(
        f"{r.getMessage()} {r.exc_text or ''} "
        + ("".join(traceback.format_exception(r.exc_info[1])) if r.exc_info and r.exc_info[1] else "")
        for r in caplog.records
    )


def write_config(tmp_path: Path, data: dict[str, Any]) -> list[str]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    config = tmp_path / "config.json"
    config.write_text(json.dumps(data))
    workspace = tmp_path / "workspace"
    (workspace / "memory").mkdir(parents=True, exist_ok=True)
    return ["--config", str(config), "--state-dir", str(tmp_path / "state"), "--workspace", str(workspace)]


def memory_config(store: str) -> dict[str, Any]:
    return {"agents": {"defaults": {"memorySearch": {"provider": "none", "store": {"path": store}}}}}


# ---------------------------------------------------------------------------- failing to connect


def test_the_cli_never_prints_the_password(
    server: Server, tmp_path: Path, logs: pytest.LogCaptureFixture
) -> None:
    runner = CliRunner()
    for number, (case, dsn, password) in enumerate(cases(server)):
        where = tmp_path / f"case{number}"
        session_args = write_config(where / "s", {"session": {"store": dsn}})
        memory_args = write_config(where / "m", memory_config(dsn))
        for args in (
            [*session_args, "sessions", "export", "--to", str(where / "copy.sqlite")],
            [*memory_args, "memory", "status"],
            [*memory_args, "memory", "status", "--json"],
            [*memory_args, "memory", "search", "anything"],
        ):
            result = runner.invoke(cli, args)
            assert result.exit_code in (1, 2), (case, args, result.output)
            assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
            assert "Traceback" not in result.output
            assert_hidden(password, result.stdout, result.stderr, log_text(logs))
            if case == "stray %":
                assert "the password holds a '%' that does not start a percent-encoded byte" in result.stderr
            else:  # the server's own answer comes through, scrubbed
                assert 'role "nosuchuser" does not exist' in result.stderr, (case, result.stderr)
                assert "postgresql://nosuchuser@" in result.stderr  # where, without the password
    assert not list(tmp_path.rglob("copy.sqlite"))


def test_a_runner_or_an_index_on_a_bad_url_raises_without_the_password(
    server: Server, tmp_path: Path, logs: pytest.LogCaptureFixture
) -> None:
    workspace = tmp_path / "workspace"
    (workspace / "memory").mkdir(parents=True)
    for case, dsn, password in cases(server):
        events: list[Any] = []
        with pytest.raises(SessionMemError) as opening_runner:
            SessionRunner(
                ScriptedModel(responder=flush_aware(lambda request: "ok")),
                config=Config.from_dict({"session": {"store": dsn}}),
                workspace=workspace,
                state_dir=tmp_path / "state",
                on_event=events.append,
            )
        settings = MemorySearchConfig.model_validate({"provider": "none", "store": {"path": dsn}})
        with pytest.raises(SessionMemError) as opening_index:
            MemoryIndex.open("main", workspace, settings, state_dir=tmp_path / "state", selection=FTS_ONLY)
        assert_hidden(
            password,
            chain_text(opening_runner.value),
            chain_text(opening_index.value),
            log_text(logs),
            repr(events),
        )
        for caught in (opening_runner, opening_index):
            expected = ConfigError if case == "stray %" or caught is opening_runner else MemoryIndexError
            assert isinstance(caught.value, expected), (case, caught.value)


# ---------------------------------------------------------------------------- working


def test_a_password_with_every_special_character_works_and_is_never_shown(
    server: Server, pg_dsn: str, tmp_path: Path, logs: pytest.LogCaptureFixture
) -> None:
    """Trust auth takes any password: the URL is read right (user, password, both hosts, database,
    parameters), the runner and the index work through it, and nothing they show holds the password."""
    password = PASSWORDS["all of them"]
    user = server.user
    query = "?" + pg_dsn.partition("?")[2]  # the scratch schema of the session store
    dsn = url(server, user, password, multi_host=True, query=query)
    shown = f"postgresql://{user}@127.0.0.1:1,{server.where}/{server.dbname}"

    workspace = tmp_path / "workspace"
    (workspace / "memory").mkdir(parents=True)
    (workspace / "memory" / "notes.md").write_text("- the spare anchor is in the blue locker\n")
    events: list[Any] = []
    runner = SessionRunner(
        ScriptedModel(responder=flush_aware(lambda request: "noted")),
        config=Config.from_dict({"session": {"store": dsn}}),
        workspace=workspace,
        state_dir=tmp_path / "state",
        on_event=events.append,
    )
    try:
        session = runner.open("agent:main:main")
        assert session.run_turn_sync("hello").reply == "noted"
        status = session.run_turn_sync("/status").reply or ""
        assert runner.store.where == shown  # type: ignore[attr-defined]
    finally:
        runner.close()
    assert events

    with pg_schema() as schema:
        index_dsn = url(server, user, password, multi_host=True, query=f"?schema={schema}")
        settings = MemorySearchConfig.model_validate({"provider": "none", "store": {"path": index_dsn}})
        with MemoryIndex.open(
            "main", workspace, settings, state_dir=tmp_path / "state", selection=FTS_ONLY, watch=False
        ) as index:
            index.sync()
            hits = index.search(SearchRequest("spare anchor")).results
            index_status = index.status()
        assert [h.path for h in hits] == ["memory/notes.md"]
        assert index_status.store_path == f"{shown} schema {schema}"

        args = write_config(tmp_path / "cli", memory_config(index_dsn))
        cli_runner = CliRunner()
        human = cli_runner.invoke(cli, [*args, "memory", "status"])
        as_json = cli_runner.invoke(cli, [*args, "memory", "status", "--json"])
        assert human.exit_code == 0 and as_json.exit_code == 0, human.output + as_json.output
        assert f"Store: PostgreSQL {shown} schema {schema}" in human.stdout
    assert_hidden(
        password,
        status,
        repr(events),
        repr(runner.store),
        repr(index_status),
        human.output,
        as_json.output,
        log_text(logs),
    )
