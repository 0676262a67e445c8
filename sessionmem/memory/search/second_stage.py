"""Second-stage ordering of the best keyword hits: where a hit holds the query's words, not only whether.

Trigger: a search with keyword hits (FTS-only or hybrid). BM25 counts the query's words in a chunk
whatever their place; the best ``HITS`` keyword hits are read once more, line by line, in the tokens
the index itself makes of them (the store's FTS5 tokenizer: stems, CJK characters, identifiers' parts).

Why: two things BM25 cannot see decided first places on LoCoMo (a conversation per daily log, a turn
per line; chunks of one file overlap):

(a) The answer follows the words that ask for it. A hit whose best-matching line (the most query IDF
    on one line) is its last line ends where the answer starts; when another keyword hit of the same
    file holds that line and what follows it, that one is the better place to read, and the first is
    weighted ``TRAILING_WEIGHT``. 19-22 of the development split's questions first found at rank 2 had
    that overlapping earlier chunk first.
(b) Query words standing together say what was asked, words scattered over a chunk only its topic.
    Each pair of consecutive query terms (in the query's order) found within ``PROXIMITY_WINDOW``
    tokens of each other on one line of the hit counts with the sum of the two terms' IDFs; the hit
    is weighted ``1 + PROXIMITY_GAIN x`` the share of all pairs' weight found so.
(c) An answer is told in a few lines; BM25 scores a chunk's words wherever they stand, so a chunk
    gathering the question's words from all over (an overlapping earlier chunk often holds more of
    them, lines before the answer) outranked the one holding them together. The hit's best window
    of ``FOCUS_LINES`` lines (the most query IDF, each term once) is set against the query and against
    the whole hit: its rank is weighted ``1 + COVER_GAIN x`` the window's share of the query's IDF, its
    evidence ``1 - FOCUS_WEIGHT + FOCUS_WEIGHT x`` the window's share of what the whole hit holds.

Outcome: ``weights`` gives each of those hits a ``Weight``: (b) and (c)'s cover multiply its BM25 rank
(negative, so above 1 lifts it) before the rank is calibrated into keyword evidence
(``ranking.keyword_score``), (a) and (c)'s focus multiply that evidence (measured against (a) on the rank
too: keyword R@6 0.925 -> 0.926, MiniLM 0.936 -> 0.937). Nothing else changes: vector evidence, the
merge, the floor and MMR come after.

Cost: every line of the ``HITS`` hits goes through the index's tokenizer in one statement
(``fts_tokens.Tokenizer.places``) and only the query's tokens come back; the rest is pure. Figures:
``bench/README.md``, "Recall II".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

HITS = 20  # the best keyword hits the second stage reads (40 gave the same figures, at twice the cost)
TRAILING_WEIGHT = 0.8  # (a): a hit whose best line is its last, continued by another hit of its file
PROXIMITY_GAIN = 0.2  # (b): rank x 1 + gain x the IDF-weighted share of query-term pairs found together
PROXIMITY_WINDOW = 4  # (b): at most this many tokens from one term's start to the next one's
FOCUS_LINES = 3  # (c): the window of lines a hit is read in (its best line and one either side)
COVER_GAIN = 0.1  # (c): rank x 1 + gain x the window's share of the query's IDF
FOCUS_WEIGHT = 0.2  # (c): evidence x 1 - weight + weight x the window's share of the hit's query IDF


@dataclass(frozen=True, slots=True)
class Hit:
    """One keyword hit as the second stage reads it: its place in its file and each line's tokens."""

    key: int
    path: str
    start_line: int
    end_line: int
    lines: Sequence[Mapping[int, str]]  # each line's query tokens by position, in order; the last is end_line


@dataclass(frozen=True, slots=True)
class Place:
    """Where any keyword hit lies (its file and inclusive lines): what may continue a hit."""

    key: int
    path: str
    start_line: int
    end_line: int


@dataclass(frozen=True, slots=True)
class Weight:
    """What the second stage makes of one hit: its BM25 rank's multiplier (``rank``, (b) and (c)) and its
    keyword evidence's (``evidence``, (a) and (c))."""

    rank: float = 1.0
    evidence: float = 1.0


@dataclass(frozen=True, slots=True)
class Term:
    """One query term: its tokens (a phrase stands token after token) and its IDF in the index."""

    tokens: tuple[str, ...]
    idf: float


def weights(hits: Sequence[Hit], places: Sequence[Place], terms: Sequence[Term]) -> dict[int, Weight]:
    """{hit key: its ``Weight``} for ``hits``, the query's ``terms`` in its order; ``places``: every
    keyword hit of the search (those that may continue a hit)."""
    by_path: dict[str, list[Place]] = {}
    for place in places:
        by_path.setdefault(place.path, []).append(place)
    wanted = {term.tokens[0] for term in terms if term.tokens}
    out: dict[int, Weight] = {}
    for hit in hits:
        starts: dict[str, list[tuple[int, int]]] = {}  # (line, position) of each query term's first token
        for n, line in enumerate(hit.lines):
            for p, token in line.items():
                if token in wanted:
                    starts.setdefault(token, []).append((n, p))
        found = [_occurrences(hit.lines, starts, term.tokens) for term in terms]
        trailing = _ends_on_best_line(hit, found, terms) and _continued(hit, by_path.get(hit.path, ()))
        window, whole = _best_window(len(hit.lines), found, terms)
        query = sum(term.idf for term in terms)
        cover = window / query if query > 0 else 0.0
        focus = window / whole if whole > 0 else 1.0
        out[hit.key] = Weight(
            rank=(1.0 + PROXIMITY_GAIN * _pairs_together(found, terms)) * (1.0 + COVER_GAIN * cover),
            evidence=(TRAILING_WEIGHT if trailing else 1.0) * (1.0 - FOCUS_WEIGHT + FOCUS_WEIGHT * focus),
        )
    return out


def _best_window(
    n_lines: int, found: Sequence[list[tuple[int, int]]], terms: Sequence[Term]
) -> tuple[float, float]:
    """(the most query IDF any ``FOCUS_LINES`` consecutive lines hold, what the whole hit holds), each
    term counted once."""
    on_line: list[set[int]] = [set() for _ in range(n_lines)]
    whole = 0.0
    for i, (places, term) in enumerate(zip(found, terms, strict=True)):
        if places:
            whole += term.idf
        for line, _ in places:
            on_line[line].add(i)
    best = 0.0
    for start in range(max(1, n_lines - FOCUS_LINES + 1)):
        held = set().union(*on_line[start : start + FOCUS_LINES])
        best = max(best, sum(terms[i].idf for i in held))
    return best, whole


def _occurrences(
    lines: Sequence[Mapping[int, str]], starts: dict[str, list[tuple[int, int]]], tokens: Sequence[str]
) -> list[tuple[int, int]]:
    """(line, position) of each place ``tokens`` stand side by side on one line (``starts``: where
    each first token stands)."""
    if not tokens:
        return []
    return [
        (n, p)
        for n, p in starts.get(tokens[0], ())
        if all(lines[n].get(p + i) == t for i, t in enumerate(tokens[1:], 1))
    ]


def _ends_on_best_line(hit: Hit, found: Sequence[list[tuple[int, int]]], terms: Sequence[Term]) -> bool:
    """Whether the line holding the most query IDF (the first such line) is the hit's last line."""
    if len(hit.lines) < 2:
        return False  # a one-line hit: its line is its best whatever it holds
    held = [0.0] * len(hit.lines)
    for places, term in zip(found, terms, strict=True):
        for line in {n for n, _ in places}:
            held[line] += term.idf
    best = max(held)
    return best > 0 and held.index(best) == len(held) - 1


def _continued(hit: Hit, others: Sequence[Place]) -> bool:
    """Whether another hit of the file holds the hit's last line and the line after it."""
    return any(o.key != hit.key and o.start_line <= hit.end_line < o.end_line for o in others)


def _pairs_together(found: Sequence[list[tuple[int, int]]], terms: Sequence[Term]) -> float:
    """The IDF-weighted share of consecutive term pairs standing within ``PROXIMITY_WINDOW`` tokens of
    each other on one line (0 for a query of one term)."""
    total = together = 0.0
    for i in range(len(terms) - 1):
        weight = terms[i].idf + terms[i + 1].idf
        total += weight
        if _near(found[i], found[i + 1]):
            together += weight
    return together / total if total > 0 else 0.0


def _near(a: Sequence[tuple[int, int]], b: Sequence[tuple[int, int]]) -> bool:
    """Whether an occurrence of ``a`` and one of ``b`` start at most ``PROXIMITY_WINDOW`` tokens apart
    on one line."""
    if not a or not b:
        return False
    starts: dict[int, list[int]] = {}
    for line, p in b:
        starts.setdefault(line, []).append(p)
    return any(abs(p - q) <= PROXIMITY_WINDOW for line, p in a for q in starts.get(line, ()))
