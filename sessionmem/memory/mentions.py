"""Where a person still appears in what ``forget`` leaves alone: found to be listed, never edited.

``forget`` removes a person's own notes and conversations (DESIGN 21). Shared ones may still hold them:
the daily logs and ``MEMORY.md`` that every session writes with ``memory.scope: agent``, other notes, a
group's transcript. Editing those silently would change other people's memory, so they are found here
and listed for the owner to review. Two kinds of evidence:

- ``names``: their id or a name as the owner gave it, matched as a whole word (not inside a number, a
  time or a date either), ignoring case;
- ``written``: lines their own sessions wrote there (the text of their write-tool calls, read from their
  transcripts before these are erased), matched as whole lines.

Pure: the caller reads the files and passes their lines. Each line costs one regular-expression scan
(alternatives of escaped literals) and one set lookup, so a scan is linear in the text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sessionmem.errors import UsageError

MAX_LINES = 20  # line numbers listed per file (the total is counted)
MIN_WRITTEN = 8  # shorter written lines ("- ok", a heading) are too common to say who wrote them
MAX_NAMES = 20
MAX_NAME_CHARS = 200


@dataclass(frozen=True, slots=True)
class Mention:
    """One file that still mentions the person."""

    path: str  # workspace-relative, sessions/<file>, or the transcript's name
    lines: tuple[int, ...]  # 1-based, the first MAX_LINES of them
    total: int  # how many lines matched
    names: tuple[str, ...]  # the names found in it (as given, in the order given)
    written: int  # how many of its lines their sessions wrote

    def to_json(self) -> dict[str, object]:
        return {
            "path": self.path,
            "lines": list(self.lines),
            "total": self.total,
            "names": list(self.names),
            "writtenLines": self.written,
        }


class MentionFinder:
    """Finds ``names`` (whole words, any case) and ``written`` lines (whole, stripped) in files."""

    def __init__(self, names: Sequence[str], written: Iterable[str] = ()) -> None:
        given = [n.strip() for n in names if n and n.strip()]
        if len(given) > MAX_NAMES or any(len(n) > MAX_NAME_CHARS for n in given):
            raise UsageError(f"at most {MAX_NAMES} names of at most {MAX_NAME_CHARS} characters each")
        self.names = tuple(dict.fromkeys(given))
        by_length = sorted(self.names, key=len, reverse=True)  # the longest first: "ann lee" before "ann"
        self._pattern = (
            re.compile("|".join(_whole(n) for n in by_length), re.IGNORECASE) if by_length else None
        )
        self._lower = {n.lower(): n for n in self.names}
        self.written = frozenset(w for w in (line.strip() for line in written) if len(w) >= MIN_WRITTEN)

    def __bool__(self) -> bool:
        return bool(self._pattern is not None or self.written)

    def scan(self, path: str, lines: Iterable[str]) -> Mention | None:
        """The mention in one file (its lines, in order), or None."""
        matched: list[int] = []
        total = written = 0
        found: dict[str, None] = {}
        for no, line in enumerate(lines, start=1):
            hit = False
            if self._pattern is not None:
                for match in self._pattern.finditer(line):
                    found.setdefault(self._lower.get(match.group(0).lower(), match.group(0)))
                    hit = True
            if line.strip() in self.written:
                written += 1
                hit = True
            if hit:
                total += 1
                if len(matched) < MAX_LINES:
                    matched.append(no)
        if not total:
            return None
        return Mention(path, tuple(matched), total, tuple(n for n in self.names if n in found), written)


def _whole(name: str) -> str:
    """``name`` as a whole word: no letter or digit touching it, nor a number it would be part of
    (peer ``42`` is not in ``00:42:55``, ``2026-11-42`` or ``3.42``)."""
    return rf"(?<!\w)(?<!\d[:.,/-]){re.escape(name)}(?!\w)(?![:.,/-]\d)"
