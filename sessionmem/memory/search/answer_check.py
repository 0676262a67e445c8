"""Whether the results hold what the query asks, not only its topic (the ``notFound`` flag).

A question about something never written down ("what is the name of Caroline's parrot?") still finds
notes about the same person, and often the same topic, that score well: the best of them scored a
median 0.49 with MiniLM on LoCoMo, so a model handed them may answer from them. What those notes lack
is the question's distinctive words: the ones rare in the index (by the same IDF the keyword score
uses), not the names that nearly every note shares. So after ranking, each distinctive query term is
looked for in the results returned and in the lines next to them (``NEIGHBOUR_LINES``, where a
conversation's answer often sits one turn away from the words that found it); when the terms held
carry less than ``HELD_SHARE`` of the distinctive terms' IDF, and no result's vector evidence is strong
(``STRONG_VECTOR``: a paraphrase is found by meaning, not by words), the response says so.

The results are still returned, flagged (``SearchResponse.not_found``), not withheld: a question
worded unlike its answer ("what does Melanie partake in?" for a note on pottery) is flagged but still
answered by its hits, and a model reading them can judge; dropping them would lose that answer.

A term is looked for with the index's own matching (stems, CJK phrases): the chunks holding it are
read from the keyword search, at most ``HOLDER_CAP`` of them. A term held by more chunks than that,
or by more than ``COMMON_SHARE`` of the index, is common: it cannot tell whether the answer is there.
Where those chunks lie is known for the search's own candidates; it is read only for the terms none of
them holds near a result.

Measured on LoCoMo's development split (``bench/bench_recall.py``; never-said = the 250 questions of
``never_said_questions.tsv`` answered with nothing or flagged; cost = answerable questions flagged):

- keyword-only: ``HELD_SHARE`` 0.3 / 0.4 / 0.5 / 0.7 (``COMMON_SHARE`` 0.05) flagged 0.780 / 0.844 /
  0.968 / 0.992 of the never-said set at a cost of 0.083 / 0.129 / 0.181 / 0.243; ``COMMON_SHARE`` 0.2
  cost less (0.041 at 0.3) but let the generic off-topic set fall to 0.864 (0.912 at 0.05).
- MiniLM hybrid (0.3, 0.05): ``STRONG_VECTOR`` 0.5 / 0.6 / 0.7: never-said 0.796 / 0.804 / 0.804,
  cost 0.031 / 0.083 / 0.096; ``COMMON_SHARE`` 0.1 cost 0.022-0.061 but never-said 0.748-0.756.
- ``NEIGHBOUR_LINES`` 0 or 10 changed no figure on the daily logs (a chunk there already spans about
  ten turns); it is kept for notes and transcripts cut between the question's words and the answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sessionmem.memory.search.query_terms import quoted_phrases
from sessionmem.memory.search.records import NotFound
from sessionmem.memory.store.fts_view import bm25_idf

COMMON_SHARE = 0.05  # a term in more of the index's chunks than this is what every note shares
HOLDER_CAP = 400  # chunks read per term; a term in more is treated as common
NEIGHBOUR_LINES = 10  # lines either side of a result that count as its neighbourhood
HELD_SHARE = 0.3  # the share of the distinctive terms' IDF the results must hold
STRONG_VECTOR = 0.5  # a result with calibrated vector evidence this strong is never flagged


@dataclass(frozen=True, slots=True)
class Span:
    """Where a chunk lies: its file and inclusive line range."""

    path: str
    start_line: int
    end_line: int

    def near(self, other: Span, lines: int) -> bool:
        """True when ``other`` overlaps this span widened by ``lines`` on each side, in the same file."""
        return (
            self.path == other.path
            and other.start_line <= self.end_line + lines
            and other.end_line >= self.start_line - lines
        )


@dataclass(frozen=True, slots=True)
class Term:
    """One distinctive query term: its IDF and where the index holds it (``holders``, empty if nowhere;
    only one of them when a candidate of the search holds it near a result: all ``judge`` needs)."""

    text: str
    idf: float
    holders: tuple[Span, ...]


def judge(terms: Sequence[Term], hits: Sequence[Span], best_vector: float | None) -> NotFound | None:
    """``NotFound`` when ``hits`` (and their neighbours) hold under ``HELD_SHARE`` of the distinctive
    terms' IDF and no hit's vector evidence reaches ``STRONG_VECTOR``; None otherwise (pure)."""
    if not terms or not hits or (best_vector is not None and best_vector >= STRONG_VECTOR):
        return None
    missing = [t for t in terms if not any(h.near(s, NEIGHBOUR_LINES) for h in hits for s in t.holders)]
    total = sum(t.idf for t in terms)
    held = total - sum(t.idf for t in missing)
    if total <= 0 or held / total >= HELD_SHARE:
        return None
    return NotFound(missing=tuple(t.text for t in missing), held_share=held / total)


def distinctive_terms(
    keywords: Any,
    conn: Any,
    terms: Sequence[str],
    total_rows: int,
    hits: Sequence[Span] = (),
    known: Mapping[int, Span] | None = None,
) -> list[Term]:
    """The query's terms rare enough to tell whether the answer is there, each with its holders.

    ``keywords``: the store's ``KeywordSearch`` (``hits`` counts, ``search`` finds); ``conn``: the store.
    ``known``: where chunks the search already read lie (its candidates, by rowid): a term one of them
    holds near ``hits`` needs no more, and only the other terms' holders are read (a term held by 400
    chunks cost 3.5 ms of reading at 100k chunks in PostgreSQL)."""
    if total_rows <= 0:
        return []
    common = min(HOLDER_CAP, COMMON_SHARE * total_rows)
    picked: list[tuple[str, str, int]] = []  # (term, its phrase, its count of chunks)
    seen: set[str] = set()
    for text in terms:
        phrases = quoted_phrases([text])
        if not phrases or phrases[0] in seen:
            continue
        phrase = phrases[0]
        seen.add(phrase)
        count = int(keywords.hits(phrase))
        if count <= common:
            picked.append((text, phrase, count))
    # every term's holders, then the places of those not known yet, in two reads whatever the terms
    held = keywords.holders([phrase for _, phrase, count in picked if count])
    known = known or {}
    found: dict[str, tuple[Span, ...]] = {}
    for phrase, rowids in held.items():
        near = next((known[r] for r in rowids if r in known and _near_any(known[r], hits)), None)
        if near is not None:
            found[phrase] = (near,)
    unknown = {r for phrase, rowids in held.items() if phrase not in found for r in rowids if r not in known}
    spans = {**_spans(conn, sorted(unknown)), **known}
    for phrase, rowids in held.items():
        if phrase not in found:
            found[phrase] = tuple(spans[r] for r in rowids if r in spans)
    return [Term(text, bm25_idf(total_rows, count), found.get(phrase, ())) for text, phrase, count in picked]


def _near_any(span: Span, hits: Sequence[Span]) -> bool:
    return any(h.near(span, NEIGHBOUR_LINES) for h in hits)


def _spans(conn: Any, rowids: list[int]) -> dict[int, Span]:
    if not rowids:
        return {}
    where, params = conn.one_of("rowid", rowids)
    sql = f"SELECT rowid, path, start_line, end_line FROM chunks WHERE {where}"
    return {int(r[0]): Span(str(r[1]), int(r[2]), int(r[3])) for r in conn.execute(sql, params)}


def check(
    keywords: Any,
    conn: Any,
    terms: Sequence[str],
    total_rows: int,
    hits: Sequence[Any],
    candidates: Sequence[Any] = (),
) -> NotFound | None:
    """Whether ``hits`` (ranking ``Candidate``s, best first) hold what ``terms`` ask (module docstring);
    ``candidates``: every candidate of the search, whose places need no reading."""
    if not hits or not terms:
        return None
    spans = [Span(h.path, h.start_line, h.end_line) for h in hits]
    known = {c.rowid: Span(c.path, c.start_line, c.end_line) for c in candidates if c.rowid is not None}
    vectors = [h.vector_score for h in hits if h.vector_score is not None]
    found = distinctive_terms(keywords, conn, terms, total_rows, spans, known)
    return judge(found, spans, max(vectors) if vectors else None)
