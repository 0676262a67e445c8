"""Whether the results hold what the query asks, not only its topic (the ``notFound`` flag).

A question about something never written down ("what is the name of Caroline's parrot?") still finds
notes about the same person, and often the same topic, that score well: the best of them scored a
median 0.49 with MiniLM on LoCoMo, so a model handed them may answer from them. What those notes lack
is the question's distinctive words: the ones rare in the index (by the same IDF the keyword score
uses), not the names that nearly every note shares. So after ranking, each distinctive query term is
looked for around each result: in the result and in the chunks within ``NEIGHBOUR_LINES`` of it (a
conversation's answer often sits one turn away from the words that found it). When no result's
neighbourhood holds ``HELD_SHARE`` of the distinctive terms' IDF, and no result's vector evidence is
strong (``STRONG_VECTOR``: a paraphrase is found by meaning, not by words), the response says so.

The share is counted per result, not over all of them together: an answer is written in one place, so
the question's rare words stand together near it. Counted over all the results, an off-topic question
("which cryptocurrency wallet holds the company's bitcoin?") passed on a word of one result and a word
of another ("company", "wallet"); on LoCoMo's held-out conversations one in seven such questions was
answered unflagged by keyword-only search (0.864 answered with nothing or flagged; 0.972 per result).

The results are still returned, flagged (``SearchResponse.not_found``), not withheld: a question
worded unlike its answer ("what does Melanie partake in?" for a note on pottery) is flagged but still
answered by its hits, and a model reading them can judge; dropping them would lose that answer.

A term is looked for with the index's own matching (stems, CJK phrases): the chunks holding it come
from the keyword search, at most ``HOLDER_CAP`` of them. A term held by more chunks than that, or by
more than ``COMMON_SHARE`` of the index, is common: it cannot tell whether the answer is there. What
lies around each result is first taken from the search's own candidates (their places are known); only
when those alone would flag the response are the chunks around the results read (one statement), since
more neighbours can only hold more.

Measured on LoCoMo (``bench/bench_recall.py``, daily logs; never-said = the 250 questions of
``never_said_questions.tsv`` answered with nothing or flagged, generic = the 250 off-topic ones of
``no_answer_questions.txt``; cost = answerable questions flagged), development split / held-out:

- per result (``HELD_SHARE`` 0.3, ``COMMON_SHARE`` 0.05): keyword-only generic 0.980 / 0.972, never-said
  0.792, cost 0.096 / 0.115; MiniLM generic 0.992 / 0.988, never-said 0.796, cost 0.035 / 0.050.
- over all results together (before): keyword-only generic 0.912 / 0.864, never-said 0.780, cost 0.082 /
  0.105; MiniLM 0.992 / 0.988, 0.796, cost 0.032 / 0.047.
- over all results, keyword-only: ``HELD_SHARE`` 0.3 / 0.4 / 0.5 / 0.7 (``COMMON_SHARE`` 0.05) flagged
  0.780 / 0.844 / 0.968 / 0.992 of the never-said set at a cost of 0.083 / 0.129 / 0.181 / 0.243;
  ``COMMON_SHARE`` 0.2 cost less (0.041 at 0.3) but let the generic set fall to 0.864 (0.912 at 0.05).
- over all results, MiniLM (0.3, 0.05): ``STRONG_VECTOR`` 0.5 / 0.6 / 0.7: never-said 0.796 / 0.804 /
  0.804, cost 0.031 / 0.083 / 0.096; ``COMMON_SHARE`` 0.1 cost 0.022-0.061 but never-said 0.748-0.756.
- ``NEIGHBOUR_LINES`` 0 or 10 changed no figure on the daily logs (a chunk there already spans about
  ten turns); it is kept for notes and transcripts cut between the question's words and the answer.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
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
    """One distinctive query term: its IDF and the chunks (rowids) the index holds it in (empty: none)."""

    text: str
    idf: float
    holders: frozenset[int]


def judge(
    terms: Sequence[Term], around: Sequence[Collection[int]], best_vector: float | None
) -> NotFound | None:
    """``NotFound`` when no result's neighbourhood (``around``: per result, the rowids of the chunks near
    it, its own included) holds ``HELD_SHARE`` of the distinctive terms' IDF and no result's vector
    evidence reaches ``STRONG_VECTOR``; None otherwise (pure). ``missing``: the terms the neighbourhood
    holding the most lacks."""
    if not terms or not around or (best_vector is not None and best_vector >= STRONG_VECTOR):
        return None
    total = sum(t.idf for t in terms)
    if total <= 0:
        return None
    best = max(around, key=lambda near: _held(terms, near))
    held = _held(terms, best)
    if held / total >= HELD_SHARE:
        return None
    missing = tuple(t.text for t in terms if t.holders.isdisjoint(best))
    return NotFound(missing=missing, held_share=held / total)


def _held(terms: Sequence[Term], near: Collection[int]) -> float:
    return sum(t.idf for t in terms if not t.holders.isdisjoint(near))


def distinctive_terms(keywords: Any, terms: Sequence[str], total_rows: int) -> list[Term]:
    """The query's terms rare enough to tell whether the answer is there, each with the chunks holding it
    (``keywords``: the store's ``KeywordSearch``, whose ``hits`` counts and ``holders`` finds; two reads
    whatever the terms)."""
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
    held = keywords.holders([phrase for _, phrase, count in picked if count])
    return [
        Term(text, bm25_idf(total_rows, count), frozenset(held.get(phrase, ())))
        for text, phrase, count in picked
    ]


def neighbourhoods(conn: Any, hits: Sequence[Span]) -> list[frozenset[int]]:
    """Per hit, the rowids of every chunk of the index within ``NEIGHBOUR_LINES`` of it (one statement)."""
    if not hits:
        return []
    where, params = conn.one_of("path", sorted({h.path for h in hits}))
    low = min(h.start_line for h in hits) - NEIGHBOUR_LINES
    high = max(h.end_line for h in hits) + NEIGHBOUR_LINES
    columns = "SELECT rowid, path, start_line, end_line FROM chunks"
    sql = f"{columns} WHERE {where} AND end_line >= ? AND start_line <= ?"
    chunks = [
        (int(r[0]), Span(str(r[1]), int(r[2]), int(r[3]))) for r in conn.execute(sql, (*params, low, high))
    ]
    return [frozenset(rowid for rowid, span in chunks if h.near(span, NEIGHBOUR_LINES)) for h in hits]


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
    found = distinctive_terms(keywords, terms, total_rows)
    vectors = [h.vector_score for h in hits if h.vector_score is not None]
    best_vector = max(vectors) if vectors else None
    spans = [Span(h.path, h.start_line, h.end_line) for h in hits]
    known = [(c.rowid, Span(c.path, c.start_line, c.end_line)) for c in candidates if c.rowid is not None]
    around = [frozenset(r for r, s in known if h.near(s, NEIGHBOUR_LINES)) for h in spans]
    if judge(found, around, best_vector) is None:
        return None  # the candidates around the results hold enough: more neighbours would hold more
    return judge(found, neighbourhoods(conn, spans), best_vector)
