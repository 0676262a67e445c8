"""PostgreSQL connection strings as messages and status show them: never the password.

The session store (``session.store``) and the memory index (``memorySearch.store.path``) both take a
``postgresql://`` URL; every place that names one to a user (errors, ``memory status``, the CLI's copy
report) goes through :func:`shown_dsn`; :func:`is_postgres_dsn` tells a DSN from a file path.
"""

from __future__ import annotations

import re
from urllib.parse import quote, urlsplit, urlunsplit

POSTGRES_SCHEMES = ("postgresql://", "postgres://")
_CONNINFO_PAIR = re.compile(r"(\w+)\s*=\s*('(?:[^'\\]|\\.)*'|\S+)")


def is_postgres_dsn(value: str | None) -> bool:
    """True when a store setting (``session.store``, ``memorySearch.store.path``) names a PostgreSQL
    database rather than a file."""
    return bool(value) and str(value).strip().lower().startswith(POSTGRES_SCHEMES)


def shown_dsn(dsn: str) -> str:
    """``scheme://user@host:port/dbname`` of a URL (no password, no parameters); for a libpq
    ``key=value`` string, ``host:port/dbname``."""
    text = dsn.strip()
    if "://" in text:
        parts = urlsplit(text)
        host = parts.hostname or "localhost"
        where = f"{host}:{parts.port}" if parts.port else host
        user = f"{quote(parts.username)}@" if parts.username else ""
        return urlunsplit((parts.scheme, user + where, parts.path, "", ""))
    pairs = {key.lower(): value.strip("'") for key, value in _CONNINFO_PAIR.findall(text)}
    host = pairs.get("host") or pairs.get("hostaddr") or "localhost"
    return f"{host}:{pairs.get('port') or 5432}/{pairs.get('dbname') or pairs.get('user') or ''}"
