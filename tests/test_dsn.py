"""What a PostgreSQL URL means (:mod:`sessionmem.dsn`): libpq's reading, but a password may hold ``@``, ``/``,
``?``, ``#`` as written (the last ``@`` ends the user info); multi-host lists and IPv6 addresses; what
psycopg is handed; and a malformed URL's error names the part that is wrong, never its value."""

from __future__ import annotations

import pytest

from sessionmem.dsn import PostgresUrl
from sessionmem.errors import ConfigError
from tests.test_dsn_secrets import assert_hidden, chain_text


@pytest.mark.parametrize(
    ("text", "user", "password", "hosts", "dbname"),
    [
        ("postgresql://u:pw@h/db", "u", "pw", [("h", None)], "db"),
        ("postgresql://u:a/b#c?d@h:5433/db", "u", "a/b#c?d", [("h", 5433)], "db"),
        ("postgresql://u:p@ss@h/db", "u", "p@ss", [("h", None)], "db"),  # the last '@' ends the user info
        ("postgresql://u:p@ss/w@h/db", "u", "p@ss/w", [("h", None)], "db"),
        ("postgresql://u:pw@h/my%40db?application_name=a%40b", "u", "pw", [("h", None)], "my@db"),
        ("postgresql://user@tenant:pw@h/db", "user@tenant", "pw", [("h", None)], "db"),
        ("postgresql://u:p%40ss%2Fx@h/db", "u", "p@ss/x", [("h", None)], "db"),  # encoded works as in libpq
        ("postgresql://u:pw@h1:5432,h2:5433/db", "u", "pw", [("h1", 5432), ("h2", 5433)], "db"),
        ("postgresql://u:pw@h1:5432,h2/db", "u", "pw", [("h1", 5432), ("h2", None)], "db"),
        (
            "postgresql://u@[::1]:6432,[fe80::1%25eth0]/db",
            "u",
            None,
            [("::1", 6432), ("fe80::1%eth0", None)],
            "db",
        ),
        ("postgres://h", None, None, [("h", None)], None),
        ("postgresql:///db", None, None, [("", None)], "db"),
        ("postgresql://u@%2Fvar%2Frun%2Fpostgresql/db", "u", None, [("/var/run/postgresql", None)], "db"),
    ],
)
def test_a_url_is_read_as_libpq_reads_it(
    text: str, user: str | None, password: str | None, hosts: list[tuple[str, int | None]], dbname: str | None
) -> None:
    parsed = PostgresUrl.parse(text)
    assert (parsed.user, parsed.password, parsed.dbname) == (user, password, dbname)
    assert [(h.name, h.port) for h in parsed.hosts] == hosts
    if password:
        assert password not in repr(parsed) + parsed.shown


def test_psycopg_gets_every_part_and_parameter_as_libpq_would_from_the_encoded_url() -> None:
    from psycopg.conninfo import conninfo_to_dict

    parsed = PostgresUrl.parse(
        "postgresql://u:a'b\\c@h1:5432,h2/db?sslmode=require&options=-csearch_path%3Dx"
    )
    assert conninfo_to_dict(parsed.conninfo) == conninfo_to_dict(
        "postgresql://u:a'b%5Cc@h1:5432,h2/db?sslmode=require&options=-csearch_path%3Dx"
    )
    assert parsed.shown == "postgresql://u@h1:5432,h2/db"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (
            "postgresql://u:Xq7Zp%zzWv9Kd@h/db",
            "the password holds a '%' that does not start a percent-encoded",
        ),
        ("postgresql://u:Xq7Zp%00Wv9Kd@h/db", "the password holds %00"),
        ("postgresql://u:Xq7Zp%FFWv9Kd@h/db", "the password is not UTF-8 once percent-decoded"),
        ("postgresql://u:pw@h:Xq7Zp/db", "the port of host 1 is not a number"),
        ("postgresql://u:Xq7Zp@h:99999/db", "the port of host 1 is not a number from 1 to 65535"),
        ("postgresql://u:Xq7Zp@[::1/db", "host 1 opens an IPv6 address with '['"),
        ("postgresql://h/db?application_name=Xq7Zp@Wv9Kd", "the user name holds a '/' or '?'"),
        ("postgresql://u:Xq7Zp", "the port of host 1 is not a number"),  # no "@host": u is the host
        ("postgresql://u:Xq7Zp@h#Wv9Kd/db", "what follows the last '@' is not a host list"),
        ("postgresql://u:Xq7Zp@h/db?Wv9Kd", "query parameter 1 is not name=value"),
        ("postgresql://u:Xq7Zp@h/db?password=Wv9Kd%zz", "query parameter 'password' holds a '%'"),
        ("mysql://u:Xq7Zp@h/db", "it must start with postgresql://"),
        ("postgresql://u:Xq7Zp@h/" + "x" * 9000, "longer than 8192 characters"),
    ],
)
def test_a_malformed_url_names_the_part_not_its_value(text: str, problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        PostgresUrl.parse(text, setting="session.store")
    message = str(caught.value)
    assert message.startswith("session.store is not a valid PostgreSQL URL: ") and problem in message, message
    assert_hidden("Xq7Zp Wv9Kd", chain_text(caught.value))


def test_a_password_of_many_at_signs_is_read_whole() -> None:
    text = "postgresql://u:" + "@a" * 4000 + "@h/db"
    assert PostgresUrl.parse(text).password == "@a" * 4000
