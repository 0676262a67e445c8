"""How much of a query a search reads: the bounds, in one place.

Trigger: a query is text from outside (a model's tool call, an MCP or HTTP body, a command line) and
may be megabytes long or hold thousands of distinct words. Why: every step of a search is linear in the
query, but a megabyte still costs seconds of parsing, embedding and SQL (the PostgreSQL ranker selects
one column per keyword and refuses more than 1,664), and holds the interpreter lock while it runs.
Outcome: a search reads the first ``MAX_QUERY_CHARS`` characters of a query (cut at a space when there
is one) and searches its first ``MAX_QUERY_TERMS`` distinct keywords; the response says what was cut
(``types.QueryCut``), never an error. A real question stays far below both: a page of text is about
3,000 characters, and a question of twenty words has fewer than twenty keywords.
"""

from __future__ import annotations

MAX_QUERY_CHARS = 4_000  # characters of a query a search reads
MAX_QUERY_TERMS = 64  # distinct keywords a search looks for (the vector side reads the whole cut text)


def bound_query(text: str) -> str:
    """``text`` cut to ``MAX_QUERY_CHARS`` characters; a word the cut would split is left out when the
    text before it holds a space (a single long word is cut where the bound falls)."""
    if len(text) <= MAX_QUERY_CHARS:
        return text
    kept = text[:MAX_QUERY_CHARS]
    if not text[MAX_QUERY_CHARS].isspace() and not kept[-1].isspace():
        head = kept.rsplit(None, 1)
        if len(head) == 2:
            kept = head[0]
    return kept.rstrip()
