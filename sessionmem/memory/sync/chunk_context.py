"""What the keyword index reads beside a chunk's own lines: its heading trail and its date in words.

A chunk cut from the middle of a file has lost what the file said above it: the headings it sits
under ("# Billing migration › ## Decisions") and the day it speaks of. Both are searched with the
chunk (they go into its FTS5 text, before its lines) but are not part of its snippet or line range.
Dates are written as numbers and as words ("2023-05-08 8 May 2023"), so "in May 2023" finds a
note filed as ``memory/2023-05-08.md`` or a transcript message of that day.

Measured on LoCoMo (bench/README.md): keyword R@6 0.907 -> 0.917 on daily logs with the heading
trail or the date, 0.897 -> 0.914 on transcripts with the date. The context is not embedded: with
MiniLM the vector side lost 0.02 R@6 when it was, as a short chunk's meaning drowns in its headings.

Pure and stdlib-only.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import date

HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
FENCE = re.compile(r"^ {0,3}(```|~~~)")
TRAIL_SEPARATOR = " › "
MONTHS = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip


def heading_trails(lines: Sequence[str]) -> list[str]:
    """For each line, the Markdown headings in force above it ("A › B"), outside code fences.

    A heading's own line gets the trail of the headings before it: a chunk that starts with a
    heading holds that heading already.
    """
    trails: list[str] = []
    open_headings: list[tuple[int, str]] = []  # (level, title), levels increasing
    trail = ""
    fenced = False
    for line in lines:
        trails.append(trail)
        if FENCE.match(line):
            fenced = not fenced
            continue
        match = None if fenced else HEADING.match(line)
        if match is None or not match.group(2):
            continue
        level = len(match.group(1))
        open_headings = [h for h in open_headings if h[0] < level] + [(level, match.group(2))]
        trail = TRAIL_SEPARATOR.join(title for _, title in open_headings)
    return trails


def date_words(day: str | None) -> str:
    """``2023-05-08`` -> ``"2023-05-08 8 May 2023"``; ``""`` for anything that is not a date."""
    if not day:
        return ""
    try:
        parsed = date.fromisoformat(day[:10])
    except ValueError:
        return ""
    return f"{parsed.isoformat()} {parsed.day} {MONTHS[parsed.month - 1]} {parsed.year}"


def chunk_context(trail: str, day: str | None) -> str:
    """The context line(s) of one chunk: its date in words, then its heading trail."""
    return "\n".join(part for part in (date_words(day), trail) if part)


def indexed_text(context: str, text: str) -> str:
    """What the keyword index holds for a chunk: its context, then its lines."""
    return f"{context}\n{text}" if context else text
