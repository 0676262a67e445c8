"""Records passed between the index, search, the tools and the CLI."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from sessionmem.privacy import Visibility

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True, slots=True)
class SearchRequest:
    query: str
    max_results: int | None = None  # None -> config query.maxResults
    min_score: float | None = None  # None -> config query.minScore
    after: date | None = (
        None  # inclusive; results dated before are dropped (undated kept only without a range)
    )
    before: date | None = None  # inclusive
    # The day "yesterday" or "last week" in the query counts from (query_dates); None -> today on the
    # machine's clock, in its local zone.
    today: date | None = None
    sources: tuple[str, ...] | None = None  # None -> all configured sources
    explain: bool = False
    # What the reader may see (sessionmem.privacy), applied inside the query, before ranking and the
    # maxResults cut; None -> everything (the owner: the CLI, the Python API without a session).
    visibility: Visibility | None = None

    def __post_init__(self) -> None:
        # Trigger: a NUL or another control character in the query (a tool argument, a --batch line).
        # Why: it broke the keyword query, and the failure was reported as the embedding provider's.
        # Outcome: it separates words like a space; the rest of the query is searched as usual.
        if isinstance(self.query, str) and _CONTROL.search(self.query):
            object.__setattr__(self, "query", _CONTROL.sub(" ", self.query))


@dataclass(frozen=True, slots=True)
class ScoreExplanation:
    """Every figure that went into a result's score, raw and calibrated (DESIGN decisions 12, 15)."""

    text_score: float | None  # keyword evidence in [0, 1], None when no query term matched
    vector_score: float | None  # calibrated vector evidence in [0, 1], None without a vector
    merged: float  # the two merged (noisy-OR); minScore applies to this
    decay_multiplier: float  # 1.0 when decay is off or the result is evergreen
    final: float  # after decay and the date weight
    mmr_rank: int | None  # position chosen by MMR, None when MMR is off
    vector_path: str | None  # "matrix" | "sqlite-vec" | "brute-force"
    bm25: float | None = None  # FTS5's raw bm25() rank (lower is better)
    cosine: float | None = None  # raw cosine similarity
    date_weight: float = 1.0  # below 1 when dated outside the time the query names (date_boost)
    proximity: float = 1.0  # over 1 when the query's words stand together in it (second_stage, (b), (c))
    trailing: float = 1.0  # below 1 when the next hit goes on from its best line, or its words lie apart
    # (second_stage, (a), (c))


@dataclass(frozen=True, slots=True)
class VectorPath:
    """How vector queries are served now, and why (shown by ``status``)."""

    name: str  # "matrix" | "sqlite-vec" | "brute-force" | "none"
    reason: str
    rows_read: int = 0  # rows the in-memory matrix read from the index so far (loads and changes)


@dataclass(frozen=True, slots=True)
class SearchResult:
    path: str
    start_line: int
    end_line: int
    score: float
    snippet: str
    source: str  # "memory" | "sessions"
    date: str | None = None  # YYYY-MM-DD
    citation: str | None = None
    explanation: ScoreExplanation | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "path": self.path,
            "startLine": self.start_line,
            "endLine": self.end_line,
            "score": round(self.score, 6),
            "snippet": self.snippet,
            "source": self.source,
            "date": self.date,
        }
        if self.citation is not None:
            out["citation"] = self.citation
        if self.explanation is not None:
            e = self.explanation
            out["explain"] = {
                "text": e.text_score,
                "bm25": e.bm25,
                "vector": e.vector_score,
                "cosine": e.cosine,
                "merged": e.merged,
                "decay": e.decay_multiplier,
                "dateWeight": e.date_weight,
                "proximity": e.proximity,
                "trailing": e.trailing,
                "final": e.final,
                "mmrRank": e.mmr_rank,
                "vectorPath": e.vector_path,
            }
        return out


@dataclass(frozen=True, slots=True)
class HeldBack:
    """Candidates that scored under the floor: never dropped without saying so (DESIGN decision 15)."""

    count: int
    best_score: float  # the best of them (calibrated, undecayed)
    min_score: float  # the floor they missed

    def to_json(self) -> dict[str, Any]:
        return {"count": self.count, "bestScore": round(self.best_score, 6), "minScore": self.min_score}

    def note(self) -> str:
        return (
            f"{self.count} {'match' if self.count == 1 else 'matches'} scored below minScore "
            f"{self.min_score:g} (best {self.best_score:.3f}); search again with a lower minScore to see them"
        )


@dataclass(frozen=True, slots=True)
class NotFound:
    """The results do not hold what the query asks: its distinctive words are missing (``answer_check``).

    What is shown (``to_json``, the tool's note) counts the missing words and never repeats them: a reply
    holds no query text, so "the output holds nothing of a forgotten person" stays a check anyone can run
    on it (tests/session/test_forget.py), and the model has its own question. ``missing`` (Python) has them.
    """

    missing: tuple[str, ...]  # the query's distinctive terms the closest result and the lines beside it lack
    held_share: float  # the share of the distinctive terms' IDF the closest result holds

    def to_json(self) -> dict[str, Any]:
        return {
            "missingWords": len(self.missing),
            "heldShare": round(self.held_share, 4),
            "note": self.note(),
        }

    def note(self) -> str:
        n = len(self.missing)
        which = "the rarest word" if n == 1 else f"{n} of the rarest words"
        return (
            f"The memory may hold nothing about this: even the closest result does not mention {which} "
            "of the question. The results share only the topic or the people; do not answer from them "
            "unless they clearly say it. Say you checked."
        )


@dataclass(frozen=True, slots=True)
class QueryCut:
    """What a search left out of a query over its bounds (``query_bounds``): said, never an error."""

    chars: int  # the query's length as sent (stripped)
    chars_searched: int  # the length of the part searched
    terms: int  # distinct keywords in the part searched
    terms_searched: int  # the first ones, those looked for

    def to_json(self) -> dict[str, Any]:
        return {
            "chars": self.chars,
            "charsSearched": self.chars_searched,
            "terms": self.terms,
            "termsSearched": self.terms_searched,
            "note": self.note(),
        }

    def note(self) -> str:
        parts = []
        if self.chars_searched < self.chars:
            parts.append(f"its first {self.chars_searched:,} of {self.chars:,} characters")
        if self.terms_searched < self.terms:
            parts.append(f"{self.terms_searched:,} of its {self.terms:,} distinct keywords")
        searched = " and ".join(parts)
        return f"The query was cut: {searched} were searched; a shorter query is searched whole."


@dataclass(frozen=True, slots=True)
class SearchResponse:
    results: tuple[SearchResult, ...]
    provider: str  # actual provider, "none" in FTS-only mode
    model: str  # embedding model or "fts-only"
    mode: str  # "hybrid" | "fts-only"
    fallback: dict[str, str] | None = None  # {"from": ..., "reason": ...}
    warnings: tuple[str, ...] = field(default_factory=tuple)
    held_back: HeldBack | None = None  # candidates under minScore, when a floor applied and any fell
    calibration: dict[str, Any] | None = None  # with ``explain``: how vector scores were calibrated
    query_cut: QueryCut | None = None  # the query was over its bounds: what was searched of it
    not_found: NotFound | None = None  # the results lack the query's distinctive words (``answer_check``)

    def to_json(self) -> dict[str, Any]:
        """The response as the CLI's ``--json`` and the inspector's API show it (camelCase keys)."""
        out: dict[str, Any] = {
            "results": [result.to_json() for result in self.results],
            "provider": self.provider,
            "model": self.model,
            "mode": self.mode,
        }
        if self.fallback:
            out["fallback"] = dict(self.fallback)
        if self.warnings:
            out["warnings"] = list(self.warnings)
        if self.held_back is not None:
            out["heldBack"] = self.held_back.to_json()
        if self.calibration is not None:
            out["calibration"] = dict(self.calibration)
        if self.query_cut is not None:
            out["queryCut"] = self.query_cut.to_json()
        if self.not_found is not None:
            out["notFound"] = self.not_found.to_json()
        return out
