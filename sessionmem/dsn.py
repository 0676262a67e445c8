"""PostgreSQL URLs: the one place that reads them, shows them, hands them to psycopg and keeps their
password out of every message.

The session store (``session.store``) and the memory index (``memorySearch.store.path``) both take a
``postgresql://`` (or ``postgres://``) URL. :meth:`PostgresUrl.parse` reads it once; messages, status and
logs show :attr:`PostgresUrl.shown` (never the password, never the parameters); psycopg gets
:attr:`PostgresUrl.conninfo` (a ``key='value'`` string built from the parsed parts, so libpq never parses
the user's text and never echoes it in an error); and every psycopg error passes through
:func:`postgres_errors`, which cuts the password out of its message and out of the exception chain a
traceback prints.

What a URL means, as libpq reads it (``postgresql://[user[:password]@][host[:port][,...]][/dbname][?k=v&...]``),
with one difference, for passwords:

- libpq ends the user info at the first ``@`` (and at a ``/``), so a password holding ``@`` or ``/`` must be
  percent-encoded for it. Here the *last* ``@`` ends it: a password may hold ``@``, ``/``, ``?``, ``#`` and
  ``:`` as written (percent-encoded works too), and a user name ``@`` (``user@tenant``). The price: an
  ``@`` in the database name or in a parameter must be written ``%40`` (libpq takes it as written). A
  host list must follow that ``@``; a user name holding ``/`` or ``?`` (what a misplaced ``@`` leaves
  when there is no password) is refused, saying so; after a password, the host the URL is shown with
  (``memory status``, every error) tells.
- ``#`` means nothing special (libpq has no fragments); the user name ends at the first ``:``.
- Every part is percent-decoded. A ``%`` that does not start ``%XX`` is an error (write ``%`` as ``%25``),
  as are ``%00`` and bytes that are not UTF-8. Query parameters are libpq's connection parameters
  (``sslmode``, ``options``, ``application_name``, ...; psycopg checks their names); a ``password`` or
  ``sslpassword`` there is a secret too. A later parameter overrides the URL's parts, as in libpq.

Errors name the part that is wrong (``the password holds a '%' that ...``), never its value.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from urllib.parse import quote

from sessionmem.errors import ConfigError

POSTGRES_SCHEMES = ("postgresql://", "postgres://")
MAX_URL_CHARS = 8192  # a connection URL is a few hundred characters; anything longer is refused unread
SECRET_PARAMS = frozenset({"password", "sslpassword"})
REDACTED = "***"

# A host as a URL can hold it: a name or address (letters, digits, ``.-_~``, percent-encoded bytes such
# as a socket folder's ``%2F``) or ``[IPv6]``, then an optional port
_HOST = r"(?:\[[0-9A-Za-z:.%]*\]|[\w.~%-]*)(?::[0-9]*)?"
_HOST_LIST = re.compile(rf"{_HOST}(?:,{_HOST})*")
_PARAM_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_HEX = frozenset("0123456789abcdefABCDEF")


def is_postgres_dsn(value: str | None) -> bool:
    """True when a store setting (``session.store``, ``memorySearch.store.path``) names a PostgreSQL
    database rather than a file."""
    return bool(value) and str(value).strip().lower().startswith(POSTGRES_SCHEMES)


@dataclass(frozen=True, slots=True)
class Host:
    name: str  # decoded; an IPv6 address without its brackets; "" for libpq's default
    port: int | None = None

    @property
    def shown(self) -> str:
        name = f"[{self.name}]" if ":" in self.name else quote(self.name, safe="")
        return name if self.port is None else f"{name}:{self.port}"


@dataclass(frozen=True, slots=True)
class PostgresUrl:
    """A parsed PostgreSQL URL. Its ``repr`` and :attr:`shown` never hold the password."""

    scheme: str
    user: str | None
    password: str | None = field(repr=False)
    hosts: tuple[Host, ...]
    dbname: str | None
    params: tuple[tuple[str, str], ...] = field(repr=False)
    secrets: frozenset[str] = field(repr=False, compare=False)  # every form a secret may take in a message

    @classmethod
    def parse(cls, text: str, *, setting: str = "the PostgreSQL URL") -> PostgresUrl:
        """Read ``text`` (see the module docstring); a malformed URL raises :class:`ConfigError` naming
        ``setting`` and the part that is wrong, without its value."""
        return _Parser(text, setting).parse()

    @property
    def shown(self) -> str:
        """``scheme://user@host:port[,host:port]/dbname``: no password, no parameters."""
        user = f"{quote(self.user, safe='')}@" if self.user else ""
        hosts = ",".join(host.shown for host in self.hosts)
        dbname = f"/{quote(self.dbname, safe='')}" if self.dbname is not None else ""
        return f"{self.scheme}://{user}{hosts}{dbname}"

    def __str__(self) -> str:
        return self.shown

    @property
    def conninfo(self) -> str:
        """The libpq ``key='value'`` string psycopg connects with (every value quoted)."""
        pairs: list[tuple[str, str]] = []
        if any(host.name for host in self.hosts):
            pairs.append(("host", ",".join(host.name for host in self.hosts)))
        if any(host.port is not None for host in self.hosts):
            pairs.append(("port", ",".join(str(host.port or "") for host in self.hosts)))
        for key, value in (("user", self.user), ("password", self.password), ("dbname", self.dbname)):
            if value is not None:
                pairs.append((key, value))
        pairs.extend(self.params)
        return " ".join(f"{key}='{_conninfo_quoted(value)}'" for key, value in pairs)

    def param(self, name: str) -> str | None:
        """The last value of query parameter ``name`` (None when absent)."""
        values = [value for key, value in self.params if key == name]
        return values[-1] if values else None

    def without_param(self, name: str) -> PostgresUrl:
        """This URL with query parameter ``name`` taken out (sessionmem's own ``schema``)."""
        return replace(self, params=tuple((k, v) for k, v in self.params if k != name))

    def scrub(self, text: str) -> str:
        """``text`` with every form of this URL's secrets replaced by ``***`` (every occurrence: a password
        of a letter or two makes the message hard to read, never leaks it)."""
        for secret in sorted(self.secrets, key=len, reverse=True):
            text = text.replace(secret, REDACTED)
        return text

    def scrub_exception(self, exc: BaseException) -> str:
        """The scrubbed message of ``exc``; ``exc`` and every exception behind it (``__cause__``,
        ``__context__``: what a traceback prints) are scrubbed in place, and a link whose text cannot be
        scrubbed (its ``__str__`` does not come from its args) is cut off."""
        self._scrub_in_place(exc)
        seen = {id(exc)}
        pending = [exc]
        while pending:
            link = pending.pop()
            for attr in ("__cause__", "__context__"):
                behind = getattr(link, attr)
                if behind is None or id(behind) in seen:
                    continue
                seen.add(id(behind))
                if self._scrub_in_place(behind):
                    pending.append(behind)
                else:
                    setattr(link, attr, None)
        return self.scrub(str(exc).strip() or type(exc).__name__)

    def _scrub_in_place(self, exc: BaseException) -> bool:
        """Scrub ``exc``'s args and notes; False when its text still holds a secret (its ``__str__`` does
        not come from its args)."""
        exc.args = tuple(self.scrub(a) if isinstance(a, str) else a for a in exc.args)
        notes = getattr(exc, "__notes__", None)
        if isinstance(notes, list):
            notes[:] = [self.scrub(n) if isinstance(n, str) else n for n in notes]
        try:
            text = str(exc)
        except Exception:  # a broken __str__ prints nothing useful, and nothing secret
            return True
        return self.scrub(text) == text


@contextlib.contextmanager
def postgres_errors(url: PostgresUrl, error: Callable[[str], Exception]) -> Iterator[None]:
    """The boundary of psycopg's errors (a pool's timeout included): one raised inside becomes
    ``error(message)``, the message and the chain behind it free of the password."""
    import psycopg

    try:
        yield
    except psycopg.Error as exc:
        raise error(url.scrub_exception(exc)) from exc


def _conninfo_quoted(value: str) -> str:
    return value.replace("\\", "\\\\").replace("'", "\\'")


def _secret_forms(*secrets: tuple[str, str]) -> frozenset[str]:
    """Each secret as written, decoded, percent-encoded, conninfo-quoted and ``repr``-escaped."""
    forms: set[str] = set()
    for written, decoded in secrets:
        forms.update(
            (
                written,
                decoded,
                quote(decoded, safe=""),
                quote(decoded),
                _conninfo_quoted(decoded),
                repr(decoded)[1:-1],
            )
        )
    return frozenset(form for form in forms if form)


class _Parser:
    """One URL's reading; every error names ``setting`` and a part, never a value."""

    def __init__(self, text: str, setting: str) -> None:
        self.text = text.strip()
        self.setting = setting

    def fail(self, problem: str) -> ConfigError:
        return ConfigError(f"{self.setting} is not a valid PostgreSQL URL: {problem}")

    def parse(self) -> PostgresUrl:
        if len(self.text) > MAX_URL_CHARS:
            raise self.fail(f"it is longer than {MAX_URL_CHARS} characters")
        scheme, sep, rest = self.text.partition("://")
        if not sep or scheme.lower() not in ("postgresql", "postgres"):
            raise self.fail("it must start with postgresql:// (or postgres://)")
        at = self._userinfo_end(rest)
        userinfo, rest = (rest[:at], rest[at + 1 :]) if at >= 0 else (None, rest)
        end = _host_list_end(rest, 0)
        hosts = self._hosts(rest[:end])
        path, _, query = rest[end:].partition("?")  # path: "" or "/dbname"
        dbname_part = path[1:]
        secrets: list[tuple[str, str]] = []
        user = password = None
        if userinfo is not None:
            user_part, has_password, password_part = userinfo.partition(":")
            if "/" in user_part or "?" in user_part:
                raise self.fail(
                    "the user name holds a '/' or '?': write them as %2F and %3F, and an '@' in the "
                    "database name or a parameter as %40 (the last '@' ends the user name and password)"
                )
            user = self.decode(user_part, "the user name") or None
            if has_password and password_part:
                password = self.decode(password_part, "the password")
                secrets.append((password_part, password))
        params = self._params(query, secrets)
        dbname = self.decode(dbname_part, "the database name") if dbname_part else None
        return PostgresUrl(
            scheme=scheme.lower(),
            user=user,
            password=password,
            hosts=hosts,
            dbname=dbname,
            params=params,
            secrets=_secret_forms(*secrets),
        )

    def _userinfo_end(self, rest: str) -> int:
        """The index of the last ``@`` (-1: there is none), which ends the user info; a host list must
        follow it, else the error names what is wrong with it."""
        at = rest.rfind("@")
        if at < 0:
            return -1
        end = _host_list_end(rest, at + 1)
        if not _HOST_LIST.fullmatch(rest, at + 1, end):
            self._hosts(rest[at + 1 : end])  # raises, naming what is wrong
            raise self.fail("what follows the last '@' is not a host list (host[:port][,host[:port]...])")
        return at

    def _hosts(self, text: str) -> tuple[Host, ...]:
        hosts = []
        for number, item in enumerate(text.split(","), start=1):
            name, port_text = item, None
            if item.startswith("["):
                close = item.find("]")
                if close < 0:
                    raise self.fail(f"host {number} opens an IPv6 address with '[' and does not close it")
                name, after = item[1:close], item[close + 1 :]
                if after and not after.startswith(":"):
                    raise self.fail(f"host {number} has something other than ':port' after its ']'")
                port_text = after[1:] if after else None
            elif ":" in item:
                name, _, port_text = item.partition(":")
            hosts.append(Host(self.decode(name, f"host {number}"), self._port(port_text, number)))
        return tuple(hosts)

    def _port(self, text: str | None, number: int) -> int | None:
        if not text:
            return None
        if not text.isascii() or not text.isdigit() or not 0 < int(text) < 65536:
            raise self.fail(f"the port of host {number} is not a number from 1 to 65535")
        return int(text)

    def _params(self, query: str, secrets: list[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
        params = []
        for number, item in enumerate((part for part in query.split("&") if part), start=1):
            key_text, has_value, value_text = item.partition("=")
            key = self.decode(key_text, f"the name of query parameter {number}")
            if not has_value or not _PARAM_NAME.fullmatch(key):
                raise self.fail(f"query parameter {number} is not name=value (a connection parameter)")
            value = self.decode(value_text, f"query parameter {key!r}")
            if key in SECRET_PARAMS:
                secrets.append((value_text, value))
            params.append((key, value))
        return tuple(params)

    def decode(self, text: str, part: str) -> str:
        """``text`` percent-decoded (libpq's rules: ``%XX`` only, no ``%00``, ``+`` is a plus)."""
        if "%" not in text:
            return text
        out = bytearray()
        i = 0
        while i < len(text):
            ch = text[i]
            if ch != "%":
                out += ch.encode("utf-8")
                i += 1
                continue
            pair = text[i + 1 : i + 3]
            if len(pair) < 2 or not set(pair) <= _HEX:
                raise self.fail(
                    f"{part} holds a '%' that does not start a percent-encoded byte: encode it as %25"
                )
            if pair == "00":
                raise self.fail(f"{part} holds %00, a zero byte, which PostgreSQL cannot take")
            out.append(int(pair, 16))
            i += 3
        decoded = out.decode("utf-8", errors="replace")
        if "\ufffd" in decoded and "\ufffd".encode() not in out:
            # Raised here, not in an ``except``: the UnicodeDecodeError would ride along as its context,
            # holding the bytes
            raise self.fail(f"{part} is not UTF-8 once percent-decoded")
        return decoded


def _host_list_end(text: str, start: int) -> int:
    """Where the host list starting at ``start`` ends: the next ``/`` or ``?``, else the end."""
    ends = [i for i in (text.find("/", start), text.find("?", start)) if i >= 0]
    return min(ends) if ends else len(text)


@dataclass(frozen=True, slots=True)
class PgTarget:
    """Where one agent's index lives: the database's URL (:mod:`sessionmem.dsn`; its ``repr`` holds no
    password) and the schema."""

    url: PostgresUrl
    schema: str

    @property
    def display(self) -> str:
        """The URL without its password, and the schema."""
        return f"{self.url.shown} schema {self.schema}"

    @property
    def conninfo(self) -> str:
        """What psycopg connects with (the password included: never show it)."""
        return self.url.conninfo

    def __str__(self) -> str:
        return self.display


def pg_target(raw: str, agent_id: str) -> PgTarget:
    """``memorySearch.store.path`` (a postgresql:// URL) for ``agent_id``: ``{agentId}`` replaced, the
    ``schema`` query parameter taken out (default ``memory_<agentId>``). A malformed URL raises
    :class:`ConfigError` naming the part that is wrong, never its value."""
    url = PostgresUrl.parse(raw.replace("{agentId}", agent_id), setting="memorySearch.store.path")
    schema = url.param("schema")
    schema = f"memory_{agent_id}" if schema is None else schema
    if not schema or len(schema) > 63 or "\x00" in schema:
        raise ConfigError(
            f"memorySearch.store.path: schema {schema!r} is not a usable PostgreSQL schema name"
        )
    return PgTarget(url.without_param("schema"), schema)
