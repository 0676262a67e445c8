"""The user's clock: the time zone notes are dated in (``userTimezone``, else the machine's), the day's
``YYYY-MM-DD`` stamp that names a daily log, and the ``Current time:`` line the prompts carry.

A base module: the memory writer (``memory/tools/writing.py``), the flush and the prompt
(``session/turn``) and session rotation all date things the same way from here.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from sessionmem.errors import ConfigError


def user_zone(name: str | None) -> tzinfo:
    """The user's time zone: an IANA name from config, else the machine's local zone."""
    if name:
        try:
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ConfigError(f"userTimezone {name!r} is not a known IANA time zone") from exc
    local = datetime.now().astimezone().tzinfo
    return local if local is not None else UTC


def zone_label(name: str | None) -> str:
    """The zone's display name for the ``Current time:`` line."""
    if name:
        return name
    env = os.environ.get("TZ")
    if env:
        return env
    try:
        target = os.path.realpath("/etc/localtime")
        if "zoneinfo/" in target:
            return target.split("zoneinfo/", 1)[1]
    except OSError:
        pass
    return datetime.now().astimezone().tzname() or "UTC"


def date_stamp(now: datetime, zone: tzinfo) -> str:
    """``YYYY-MM-DD`` of ``now`` in ``zone`` (naive ``now`` is taken as UTC)."""
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    return now.astimezone(zone).strftime("%Y-%m-%d")


def _ordinal(day: int) -> str:
    suffix = "th" if 11 <= day % 100 <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return f"{day}{suffix}"


def current_time_line(now: datetime, zone: tzinfo, label: str) -> str:
    """``Current time: Monday, February 16th, 2026 — 10:00 AM (America/New_York) / 2026-02-16 15:00 UTC``."""
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    local = now.astimezone(zone)
    hour = local.hour % 12 or 12
    ampm = "AM" if local.hour < 12 else "PM"
    when = (
        f"{local.strftime('%A, %B')} {_ordinal(local.day)}, {local.year} — {hour}:{local.minute:02d} {ampm}"
    )
    utc = now.astimezone(UTC).strftime("%Y-%m-%d %H:%M")
    return f"Current time: {when} ({label}) / {utc} UTC"
