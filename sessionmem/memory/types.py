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
    """Every figure that went into a result's score (DESIGN decision 12)."""

    text_score: float | None  # normalised BM25, None when not a keyword hit
    vector_score: float | None  # cosine similarity, None when not a vector hit
    merged: float  # weighted merge
    decay_multiplier: float  # 1.0 when decay is off or the result is evergreen
    final: float  # after decay
    mmr_rank: int | None  # position chosen by MMR, None when MMR is off
    vector_path: str | None  # "matrix" | "sqlite-vec" | "brute-force"


@dataclass(frozen=True, slots=True)
class VectorPath:
    """How vector queries are served now, and why (shown by ``status``)."""

    name: str  # "matrix" | "sqlite-vec" | "brute-force" | "none"
    reason: str


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
                "vector": e.vector_score,
                "merged": e.merged,
                "decay": e.decay_multiplier,
                "final": e.final,
                "mmrRank": e.mmr_rank,
                "vectorPath": e.vector_path,
            }
        return out


@dataclass(frozen=True, slots=True)
class SearchResponse:
    results: tuple[SearchResult, ...]
    provider: str  # actual provider, "none" in FTS-only mode
    model: str  # embedding model or "fts-only"
    mode: str  # "hybrid" | "fts-only"
    fallback: dict[str, str] | None = None  # {"from": ..., "reason": ...}
    warnings: tuple[str, ...] = field(default_factory=tuple)
