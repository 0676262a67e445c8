"""Pure scoring of search candidates: BM25 normalisation, hybrid merge, decay, MMR, filters.

Nothing here touches the database; ``search.py`` fetches rows and drives these functions in the
order of reference §9: merge -> decay -> sort -> min-score -> MMR -> top N.

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

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime

from sessionmem.memory.ftstext import CJK_CHARS, THAI_CHARS, THAI_CLUSTER

SNIPPET_MAX_CHARS = 700
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
    text_score: float | None = None  # normalised BM25; None when not a keyword hit
    vector_score: float | None = None  # cosine; None when not a vector hit
    merged: float = 0.0
    decay: float = 1.0
    mmr_rank: int | None = None

    @property
    def final(self) -> float:
        return self.merged * self.decay

    @property
    def keyword_hit(self) -> bool:
        return self.text_score is not None


# ---------------------------------------------------------------------------- scores


def bm25_rank_to_score(rank: float) -> float:
    """FTS5's bm25() (lower is better, usually negative) mapped into [0, 1), higher is better."""
    if not math.isfinite(rank):
        return 1 / 1000
    if rank < 0:
        r = -rank
        return r / (1 + r)
    return 1 / (1 + rank)


def keyword_scores(ranks: Sequence[float], coverage: Sequence[float] | None = None) -> list[float]:
    """Text scores in (0, 1] for one query's keyword hits, best first by BM25.

    FTS5's ``bm25()`` depends on the corpus: a term found in half the notes of a small workspace has
    an IDF floored to 1e-6, so OpenClaw's ``r/(1+r)`` turns a perfect match into 0.000 and keyword
    hits stop counting in the hybrid merge. Here a hit scores ``coverage · (0.5 + 0.5 · r / r_max)``:
    a chunk holding every query term is a solid match (at least 0.5) and BM25 orders such chunks;
    ``coverage`` (the share of query terms the chunk holds, 1 for an AND match) weighs OR matches.
    """
    magnitudes = [-r if math.isfinite(r) and r < 0 else 0.0 for r in ranks]
    top = max(magnitudes, default=0.0)
    covers = list(coverage) if coverage is not None else [1.0] * len(magnitudes)
    return [
        max(0.0, min(1.0, cov)) * (0.5 + 0.5 * (m / top if top > 0 else 1.0))
        for m, cov in zip(magnitudes, covers, strict=True)
    ]


def term_coverage(terms: Sequence[str], indexed_text: str) -> float:
    """The share of ``terms`` (as ``fts_text`` spells them) present as whole words in ``indexed_text``."""
    if not terms:
        return 1.0
    haystack = indexed_text.casefold()
    found = sum(
        1 for t in terms if re.search(r"(?<!\w)" + re.escape(t.casefold()) + r"(?!\w)", haystack) is not None
    )
    return found / len(terms)


def merge_hybrid(
    keyword_hits: Iterable[Candidate],
    vector_hits: Iterable[Candidate],
    *,
    vector_weight: float,
    text_weight: float,
) -> list[Candidate]:
    """Union by chunk id; ``merged = vw * vector + tw * text`` (a missing side counts 0).

    On overlap the keyword hit's text (the snippet) wins, as in OpenClaw. Weights are expected
    normalised already (``HybridConfig.normalized_weights()``). Order: keyword hits first, then
    vector-only hits, each in the order given; callers sort afterwards.
    """
    vector_by_id = {hit.id: hit for hit in vector_hits}
    merged: list[Candidate] = []
    seen: set[str] = set()
    for hit in keyword_hits:
        if hit.id in seen:
            continue
        seen.add(hit.id)
        prior = vector_by_id.get(hit.id)
        merged.append(
            _merged(hit, hit.text_score, prior.vector_score if prior else None, vector_weight, text_weight)
        )
    for hit in vector_by_id.values():
        if hit.id not in seen:
            merged.append(_merged(hit, None, hit.vector_score, vector_weight, text_weight))
    return merged


def _merged(
    base: Candidate, text: float | None, vector: float | None, vector_weight: float, text_weight: float
) -> Candidate:
    # The constructor, not dataclasses.replace: this runs for every candidate of every query.
    return Candidate(
        id=base.id,
        path=base.path,
        source=base.source,
        start_line=base.start_line,
        end_line=base.end_line,
        text=base.text,
        date=base.date,
        text_score=text,
        vector_score=vector,
        merged=vector_weight * (vector or 0.0) + text_weight * (text or 0.0),
    )


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


def filter_min_score(cands: Sequence[Candidate], *, min_score: float, text_weight: float) -> list[Candidate]:
    """Strict ``merged >= minScore``; when nothing passes, keyword hits with ``>= min(minScore, tw)``.

    The relaxed floor keeps a note that matched by keyword but scored low on the vector side from
    vanishing entirely (OpenClaw #46671). Scores compared are undecayed (see module docstring).
    """
    strict = [c for c in cands if c.merged >= min_score]
    if strict or not any(c.keyword_hit for c in cands):
        return strict
    floor = min(min_score, text_weight)
    return [c for c in cands if c.keyword_hit and c.merged >= floor]


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

# In text order: a CJK run, a Thai run, or a word of any other script (``\w`` less those two).
_UNIT_RUN = re.compile(f"([{CJK_CHARS}]+)|([{THAI_CHARS}]+)|([^\\W{CJK_CHARS}{THAI_CHARS}]+)")


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
    for cjk, thai, word in _UNIT_RUN.findall(text.lower()):
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
    order), which keeps the cost at ``limit × n`` similarities. Every item is kept; ``mmr_rank``
    records the position chosen.
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
    tokens = [mmr_tokens(c.text) for c in ordered]
    max_sim = [0.0] * len(ordered)
    remaining = list(range(len(ordered)))
    picks: list[int] = []
    budget = len(ordered) if limit is None else min(len(ordered), max(0, limit))
    while remaining and len(picks) < budget:
        best = max(
            remaining,
            key=lambda i: (
                lam * rel[i] - (1 - lam) * (max_sim[i] if picks else 0.0),
                scores[i],
                -i,
            ),
        )
        picks.append(best)
        remaining.remove(best)
        for i in remaining:
            sim = jaccard(tokens[i], tokens[best])
            if sim > max_sim[i]:
                max_sim[i] = sim
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


def near_duplicates(a: frozenset[tuple[str, ...]], b: frozenset[tuple[str, ...]], threshold: float) -> bool:
    """True when most of the smaller shingle set is in the larger one (containment >= ``threshold``)."""
    return _contained(len(a & b), len(a), len(b), threshold)


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
