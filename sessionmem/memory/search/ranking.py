"""Pure scoring of search candidates: calibrated keyword evidence, hybrid merge, decay, MMR, filters.

Nothing here touches the database; ``search.py`` fetches rows and drives these functions in the
order of reference §9: merge -> decay -> sort -> min-score -> MMR -> top N.

Scores that mean the same whatever the corpus and the model (DESIGN decision 15). Keyword evidence
(:func:`keyword_score`) is a chunk's BM25 as a share of the query's own ideal BM25, so a chunk holding
only a query's common words scores low in any workspace; vector evidence is the cosine calibrated
against unrelated text (``calibration.py``). Both lie in [0, 1], 0 meaning "no evidence", and
:func:`combine` merges them as independent evidence (a noisy-OR): either side alone can carry a
result over ``minScore`` when it is strong, and agreement lifts a result above both.

Temporal decay and DESIGN decision 13 ("age never erases relevance"). OpenClaw multiplies the score
by ``exp(-ln2/halfLife * age)``: a two-year-old note keeps 0.000001 of its score, so a perfect old
match loses to any fresh noise, and once multiplied it also falls under ``minScore`` and vanishes.
We keep OpenClaw's curve but floor it: ``multiplier = DECAY_FLOOR + (1 - DECAY_FLOOR) * curve``,
with ``DECAY_FLOOR = 0.7``. So recency still orders notes that match about as well (a fresh note
wins against an old one unless the old one scores over 1/0.7 ≈ 1.43 times higher), and an old note that
matches well still outranks a new note that matches poorly. The min-score floor is applied to the
undecayed score: it is a relevance threshold, and age is not relevance.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime

from sessionmem.memory.store.fts_view import CJK_CHARS, THAI_CHARS, THAI_CLUSTER

SNIPPET_MAX_CHARS = 700
# keyword_score = 1 - exp(-a * bm25 / ideal): 0.63 for the ideal chunk, 0.39 at half of it, 0.86 at twice.
KEYWORD_SATURATION = 1.0
KEYWORD_RELATIVE_FLOOR = 1 / 3  # FTS-only mode: matches under a third of the best are held back
DECAY_FLOOR = 0.7
MS_PER_DAY = 86_400_000

_DATED_PATH = re.compile(r"(?:^|/)memory/(\d{4})-(\d{2})-(\d{2})\.md$")


@dataclass(frozen=True, slots=True)
class Candidate:
    """One chunk on its way to becoming a result, with every figure that shaped its score."""

    id: str
    path: str
    source: str
    start_line: int
    end_line: int
    text: str
    date: str | None = None  # YYYY-MM-DD of the file or first message
    rowid: int | None = None  # its row in the index (None: made without one)
    text_score: float | None = None  # keyword evidence in [0, 1]; None when no query term matched
    vector_score: float | None = None  # calibrated vector evidence in [0, 1]; None without a vector
    bm25: float | None = None  # FTS5's bm25() rank (negative; lower is better)
    cosine: float | None = None  # raw cosine similarity to the query
    merged: float = 0.0
    decay: float = 1.0
    date_weight: float = 1.0  # below 1 when dated outside the time the query names (date_boost)
    mmr_rank: int | None = None
    proximity: float = 1.0  # the second stage's weight of the BM25 rank, (b) and (c) (second_stage)
    trailing: float = 1.0  # the second stage's weight of the keyword evidence, (a) and (c) (second_stage)

    @property
    def final(self) -> float:
        return self.merged * self.decay * self.date_weight


# ---------------------------------------------------------------------------- scores


def keyword_score(rank: float, ideal: float, coverage: float) -> float:
    """Keyword evidence in [0, 1) from FTS5's ``bm25()`` rank (negative, lower is better).

    ``ideal`` is the BM25 of an average-length chunk holding each query term once (the sum of the
    terms' IDFs), so ``-rank / ideal`` is the share of the query a chunk matches, weighted by rarity:
    a chunk holding only the query's common words scores near 0 in a workspace of any size (OpenClaw's
    ``r / (1 + r)`` gave a perfect match 0.000 in a small workspace and any match about 1 in a large
    one). It saturates: ``1 - exp(-x)`` is 0.63 for the ideal chunk, 0.86 at twice it, so a chunk must
    hold about half of what the query asks, by rarity, to pass ``minScore`` 0.35 on its keywords alone
    (measured on LoCoMo with MiniLM, against 1 - exp(-1.6 x): R@6 +0.004, questions never written
    about answered with nothing 0.904 -> 0.936; 1 - exp(-2.5 x) let 24% of those through). ``coverage``
    (the share of query terms the chunk holds as written, not only as stems) weighs it between half
    and all: measured on LoCoMo, it lifts the exact wording first (MRR +0.013, R@1 +0.03).
    """
    if not math.isfinite(rank) or rank >= 0 or ideal <= 0:
        return 0.0
    strength = 1.0 - math.exp(-KEYWORD_SATURATION * -rank / ideal)
    return strength * (0.5 + 0.5 * max(0.0, min(1.0, coverage)))


@dataclass(frozen=True, slots=True)
class CoverageTerms:
    """A query's terms (as ``fts_text`` spells them, case-folded) for :func:`term_coverage`."""

    words: tuple[str, ...]  # one word each (``\w+``): looked up in the set of the text's words
    phrases: tuple[str, ...]  # the others (identifiers, spaced CJK): found with ``str.find``

    def __len__(self) -> int:
        return len(self.words) + len(self.phrases)


_WORD = re.compile(r"\w+")


def coverage_terms(terms: Sequence[str]) -> CoverageTerms:
    """``terms`` sorted for :func:`term_coverage`: no pattern is compiled per term (a compile cost
    0.5 ms, and a query brings its own terms each time)."""
    folded = [t.casefold() for t in terms]
    return CoverageTerms(
        words=tuple(t for t in folded if _WORD.fullmatch(t)),
        phrases=tuple(t for t in folded if not _WORD.fullmatch(t)),
    )


def term_coverage(terms: CoverageTerms, indexed_text: str) -> float:
    """The share of the query's terms (:func:`coverage_terms`) present as whole words in ``indexed_text``:
    not inside a longer word on either side, as ``(?<!\\w)term(?!\\w)`` would find them."""
    if not len(terms):
        return 1.0
    # A word is found where it stands, as a phrase is, rather than in the set of the text's words: the
    # same answer (a run of word characters with none on either side is one of them), without cutting
    # every candidate's text into words (120 texts a search: 5 ms at 100k chunks).
    haystack = indexed_text.casefold()
    return sum(1 for t in (*terms.words, *terms.phrases) if _holds_whole(haystack, t)) / len(terms)


def _holds_whole(haystack: str, term: str) -> bool:
    """True when ``term`` stands in ``haystack`` with no word character right before or after it."""
    at = haystack.find(term)
    while at >= 0:
        end = at + len(term)
        if (at == 0 or not _is_word_char(haystack[at - 1])) and (
            end == len(haystack) or not _is_word_char(haystack[end])
        ):
            return True
        at = haystack.find(term, at + 1)
    return False


def _is_word_char(ch: str) -> bool:
    """``\\w`` for one character, as ``re`` defines it for text."""
    return ch.isalnum() or ch == "_"


def combine(text: float | None, vector: float | None, *, vector_weight: float, text_weight: float) -> float:
    """Keyword and vector evidence (each in [0, 1], None = none) merged as a weighted noisy-OR.

    ``1 - (1 - v)^a_v (1 - t)^a_t`` with ``a = weight / max(weights)``: with equal weights (the
    default) a strong match on either side passes ``minScore`` alone, and two weak ones add up, less
    than a strong one. Weights are relative; a zero weight ignores that side. Measured on LoCoMo with
    MiniLM (bench_recall.py), equal weights beat OpenClaw's 0.7 / 0.3 (R@6 0.927 vs 0.909, MRR 0.812 vs
    0.772 on daily logs), and the noisy-OR beats a weighted sum, under which a note found by keywords
    alone could not pass the floor.
    """
    top = max(vector_weight, text_weight)
    if top <= 0:
        return 0.0
    miss = 1.0
    for value, weight in ((vector, vector_weight), (text, text_weight)):
        if value is not None and weight > 0:
            miss *= (1.0 - max(0.0, min(1.0, value))) ** (weight / top)
    return 1.0 - miss


def sort_by_score(cands: Iterable[Candidate]) -> list[Candidate]:
    """Highest final score first; ties keep a stable order by path and line."""
    return sorted(cands, key=lambda c: (-c.final, c.path, c.start_line))


# ---------------------------------------------------------------------------- temporal decay


def parse_day(value: str | None) -> date | None:
    if not value:
        return None
    try:
        return date.fromisoformat(value[:10])
    except ValueError:
        return None


def is_evergreen(path: str, source: str) -> bool:
    """``MEMORY.md``, ``memory.md`` and ``memory/`` files of the memory source not named by a date.

    Hook output such as ``memory/2026-01-01-slug.md`` is evergreen too, as in OpenClaw.
    """
    if source != "memory" or _DATED_PATH.search(path):
        return False
    name = path.rsplit("/", 1)[-1]
    return name in ("MEMORY.md", "memory.md") or path.startswith("memory/") or "/memory/" in path


def decay_date(path: str, source: str, chunk_date: str | None) -> date | None:
    """The date a result ages from, or None when it never decays (or has no known date).

    ``memory/YYYY-MM-DD.md`` (a valid calendar date) ages from its name; evergreen files never age;
    sessions and extra paths age from the date the index recorded (first message, or file mtime).
    """
    m = _DATED_PATH.search(path)
    if m:
        try:
            return date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
        except ValueError:
            return None
    if is_evergreen(path, source):
        return None
    return parse_day(chunk_date)


def decay_curve(age_days: float, half_life_days: float) -> float:
    """OpenClaw's curve: ``exp(-ln2 / halfLife * age)``; 0.5 at one half-life, 1 for future dates."""
    half_life = max(1.0, float(half_life_days))
    return math.exp(-(math.log(2) / half_life) * max(0.0, age_days))


def decay_multiplier(
    day: date | None, now: datetime, half_life_days: float, *, floor: float = DECAY_FLOOR
) -> float:
    """``floor + (1 - floor) * curve(age)``; 1.0 for undated (evergreen) results."""
    if day is None:
        return 1.0
    midnight = datetime(day.year, day.month, day.day, tzinfo=UTC)
    aware_now = now if now.tzinfo is not None else now.replace(tzinfo=UTC)
    age_days = (aware_now - midnight).total_seconds() * 1000 / MS_PER_DAY
    return floor + (1.0 - floor) * decay_curve(age_days, half_life_days)


def apply_decay(cands: Iterable[Candidate], *, now: datetime, half_life_days: float) -> list[Candidate]:
    return [
        replace(c, decay=decay_multiplier(decay_date(c.path, c.source, c.date), now, half_life_days))
        for c in cands
    ]


# ---------------------------------------------------------------------------- filters


def keyword_floor(cands: Sequence[Candidate]) -> float:
    """FTS-only mode's floor: a third of the best match. Relative, because with no vector side a
    query answered in other words still deserves its best partial matches; measured on LoCoMo, it
    cost no R@6 (0.915 -> 0.914) and removed one result in six."""
    return KEYWORD_RELATIVE_FLOOR * max((c.merged for c in cands), default=0.0)


def apply_floor(cands: Sequence[Candidate], *, min_score: float) -> tuple[list[Candidate], list[Candidate]]:
    """(kept, held back): ``merged >= minScore`` against the rest, order kept.

    The scores compared are calibrated and undecayed (see the module docstring), so one floor fits
    every model; what falls under it is reported (``SearchResponse.held_back``), never dropped silently.
    """
    kept = [c for c in cands if c.merged >= min_score]
    held = [c for c in cands if c.merged < min_score]
    return kept, held


def in_date_range(value: str | None, after: date | None, before: date | None) -> bool:
    """Inclusive range on the result's date; with any bound set, undated results are out."""
    if after is None and before is None:
        return True
    day = parse_day(value)
    if day is None:
        return False
    if after is not None and day < after:
        return False
    return not (before is not None and day > before)


def snippet(text: str) -> str:
    """At most 700 characters. Python strings are code points, so no surrogate pair can be split."""
    return text[:SNIPPET_MAX_CHARS]


# ---------------------------------------------------------------------------- MMR


@functools.cache
def _unit_run() -> re.Pattern[str]:
    """In text order: a CJK run, a Thai run, or a word of any other script (``\\w`` less those two).

    Compiled on first use, not at import: its large character classes take about 2 ms to compile, and
    a search without MMR or transcript hits (every cold ``memory search`` of notes) never needs it."""
    return re.compile(f"([{CJK_CHARS}]+)|([{THAI_CHARS}]+)|([^\\W{CJK_CHARS}{THAI_CHARS}]+)")


def _pairs(units: Sequence[str]) -> Iterable[str]:
    """Adjacent units joined in pairs; a one-unit run is its own token."""
    if len(units) == 1:
        return [units[0]]
    return (units[i] + units[i + 1] for i in range(len(units) - 1))


def text_units(text: str) -> list[str]:
    """The units MMR and the duplicate check compare, in text order (lower-cased).

    Unicode words, with CJK runs as character pairs and Thai runs as pairs of Thai clusters.
    OpenClaw's ``[a-z0-9_]+`` sees nothing in CJK text, so every CJK snippet looked identical.
    Thai has no spaces between words either, and ``\\w`` stops at its vowel and tone marks (they are
    not letters), so a Thai sentence fell into arbitrary pieces with the marks thrown away (ข้าว
    "rice" and ข่าว "news" were the same). A Thai run is cut into clusters (a base character with
    its marks, as ``fts_text`` cuts them) and compared by pairs of clusters, like CJK characters.
    """
    units: list[str] = []
    for cjk, thai, word in _unit_run().findall(text.lower()):
        if cjk:
            units.extend(_pairs(cjk))
        elif thai:
            units.extend(_pairs(THAI_CLUSTER.findall(thai)))
        else:
            units.append(word)
    return units


def mmr_tokens(text: str) -> frozenset[str]:
    """The set of ``text_units``: what MMR's Jaccard similarity compares."""
    return frozenset(text_units(text))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a and not b:
        return 1.0
    if not a or not b:
        return 0.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


def mmr_rerank(cands: Sequence[Candidate], *, lambda_: float, limit: int | None = None) -> list[Candidate]:
    """Greedy maximal marginal relevance: ``λ·rel − (1−λ)·max sim to chosen``. Only reorders.

    Relevance is the final score min-max normalised to [0, 1] (all equal -> 1). Ties go to the
    higher original score. The first ``limit`` picks are chosen greedily (the rest follow in score
    order). Every item is kept; ``mmr_rank`` records the position chosen.

    A candidate's value is at most ``λ·rel``, so each pick reads the candidates in score order only
    until that bound falls to the best value found: a text's units (``mmr_tokens``) are made only for
    the candidates that could still win. The order is the one comparing every candidate gives, at a
    fraction of its cost: the units take about 0.1 ms per 1,600 characters, and the 200 candidates of
    a search took 40 ms when each text was read (``bench/README.md``).
    """
    lam = min(1.0, max(0.0, lambda_))
    ordered = sort_by_score(cands)
    if not ordered:
        return []
    if lam >= 1.0:
        return [replace(c, mmr_rank=i) for i, c in enumerate(ordered)]
    scores = [c.final for c in ordered]
    lo, hi = min(scores), max(scores)
    rel = [1.0 if hi == lo else (s - lo) / (hi - lo) for s in scores]
    tokens: dict[int, frozenset[str]] = {}  # read so far
    max_sim: dict[int, float] = {}  # of the candidates read: similarity to the closest pick
    remaining = list(range(len(ordered)))  # in score order, so rel never increases along it
    picks: list[int] = []
    budget = len(ordered) if limit is None else min(len(ordered), max(0, limit))
    while remaining and len(picks) < budget:
        best = remaining[0]
        best_key: tuple[float, float, int] | None = None
        for i in remaining:
            if best_key is not None and lam * rel[i] <= best_key[0]:
                break  # neither this one nor any after it can beat best (ties go to the earlier)
            if i not in tokens:
                tokens[i] = mmr_tokens(ordered[i].text)
                max_sim[i] = max((jaccard(tokens[i], tokens[p]) for p in picks), default=0.0)
            key = (lam * rel[i] - (1 - lam) * max_sim[i], scores[i], -i)
            if best_key is None or key > best_key:
                best, best_key = i, key
        picks.append(best)
        remaining.remove(best)
        for i in remaining:
            if i in tokens:
                max_sim[i] = max(max_sim[i], jaccard(tokens[i], tokens[best]))
    picks += remaining
    return [replace(ordered[i], mmr_rank=rank) for rank, i in enumerate(picks)]


# ---------------------------------------------------------------------------- cross-source duplicates

DUPLICATE_SHINGLE = 4  # units (words; CJK or Thai pairs) per shingle
DUPLICATE_MIN_SHINGLES = 6  # shorter texts are never called duplicates
DUPLICATE_CONTAINMENT = 0.6  # share of the smaller text's shingles found in the other
_ROLE_LABEL = re.compile(r"^\s*(?:user|assistant)\s*:\s*", re.IGNORECASE | re.MULTILINE)


def shingles(text: str, size: int = DUPLICATE_SHINGLE) -> frozenset[tuple[str, ...]]:
    """Overlapping ``size``-grams of ``text``'s ``text_units`` (role labels dropped).

    A conversation archived by ``/new`` (``user: …``) and the same conversation flattened from its
    transcript (``User: …``, whitespace collapsed, secrets redacted) share almost all of these; a note
    that only mentions the same facts in other words shares few. The units are MMR's: words, and in
    CJK and Thai (no spaces between words) overlapping pairs of characters or clusters, so a shingle
    there spans five characters or clusters; with ``\\w+`` a whole CJK sentence was one word.
    """
    words = text_units(_ROLE_LABEL.sub(" ", text))
    if len(words) < size:
        return frozenset([tuple(words)]) if words else frozenset()
    return frozenset(tuple(words[i : i + size]) for i in range(len(words) - size + 1))


def _contained(shared: int, size_a: int, size_b: int, threshold: float) -> bool:
    small = min(size_a, size_b)
    return small >= DUPLICATE_MIN_SHINGLES and shared / small >= threshold


def collapse_cross_source(
    cands: Sequence[Candidate], *, threshold: float = DUPLICATE_CONTAINMENT
) -> list[Candidate]:
    """Drop a hit whose text nearly duplicates a better hit from *another* source.

    One conversation can come back twice: as the ``memory/YYYY-MM-DD-slug.md`` file the ``/new`` hook
    wrote and as chunks of its transcript (source ``sessions``). The higher-scoring hit stays; on equal
    scores the ``memory`` one (the curated copy). Hits of the same source are never collapsed here
    (overlapping chunks of one file are expected; MMR handles that diversity). Order is kept.
    Cost: one pass over the shingles through an inverted index, not a comparison per pair.
    """
    if len({c.source for c in cands}) < 2:
        return list(cands)
    order = sorted(range(len(cands)), key=lambda i: (-cands[i].final, cands[i].source != "memory", i))
    sizes: list[int] = []  # shingle count of each kept hit
    sources: list[str] = []
    postings: dict[tuple[str, ...], list[int]] = {}  # shingle -> kept hits holding it
    dropped: set[int] = set()
    for i in order:
        cand = cands[i]
        grams = shingles(cand.text)
        shared: dict[int, int] = {}
        for gram in grams:
            for k in postings.get(gram, ()):
                if sources[k] != cand.source:
                    shared[k] = shared.get(k, 0) + 1
        if any(_contained(n, len(grams), sizes[k], threshold) for k, n in shared.items()):
            dropped.add(i)
            continue
        k = len(sizes)
        sizes.append(len(grams))
        sources.append(cand.source)
        for gram in grams:
            postings.setdefault(gram, []).append(k)
    return [c for i, c in enumerate(cands) if i not in dropped]
