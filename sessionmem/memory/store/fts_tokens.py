"""The tokens SQLite's FTS5 makes of a text, for a store that indexes them elsewhere (PostgreSQL).

PostgreSQL's parsers and dictionaries split, fold and stem differently from FTS5's ``porter
unicode61`` (and in a C-locale database they drop CJK characters). So the PostgreSQL store does not
parse text itself: it asks FTS5, in a private in-memory database with the tokenizer the index is
configured with (``schema.FTS_TOKENIZERS``), for each text's tokens and their positions (the
``fts5vocab`` instance table), and stores those as a tsvector. Both stores then see the same tokens of
the same ``ftstext.fts_text`` form: a CJK character or a Thai cluster is a token of its own in both, a
query's phrase is the same token sequence, and BM25 counts the same document lengths.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Mapping, Sequence

from sessionmem.memory.store.database import sqlite_module
from sessionmem.memory.store.schema import FTS_TOKENIZERS

MAX_POSITION = 16383  # a tsvector position's limit; later positions are stored as this one
# A lexeme's limit in a tsvector or a tsquery: a longer word is refused ("word is too long"), which failed
# the sync of a note holding one and the search of a query holding one. Both keep its first 2,047 bytes.
MAX_LEXEME_BYTES = 2047


class Tokenizer:
    """FTS5's tokenizer ``spec`` (a ``store.fts.tokenizer`` name or raw FTS5 spec), usable from any thread."""

    def __init__(self, spec: str) -> None:
        module, _ = sqlite_module()
        self._conn = module.connect(":memory:", check_same_thread=False, isolation_level=None)
        tokenize = FTS_TOKENIZERS.get(spec, spec).replace("'", "''")
        self._conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(text, tokenize = '{tokenize}')")
        self._conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
        self._lock = threading.Lock()

    def tokens(self, texts: Sequence[str]) -> list[list[str]]:
        """Each text's tokens in order, as FTS5 indexes them."""
        out: list[list[tuple[int, str]]] = [[] for _ in texts]
        for doc, term, offset in self._instances(texts, "SELECT doc, term, offset FROM v", ()):
            out[doc].append((offset, term))
        return [[lexeme(term) for _, term in sorted(row)] for row in out]

    def places(self, texts: Sequence[str], wanted: Collection[str]) -> list[dict[int, str]]:
        """Each text's tokens among ``wanted``, by their position in the text: only those come back, so
        the cost follows the matches, not the texts' length (``tokens`` of 40 search hits: 27 ms)."""
        out: list[dict[int, str]] = [{} for _ in texts]
        if not wanted:
            return out
        terms = sorted(wanted)
        sql = f"SELECT doc, term, offset FROM v WHERE term IN ({','.join('?' * len(terms))})"
        for doc, term, offset in self._instances(texts, sql, terms):
            out[doc][offset] = term
        return out

    def _instances(self, texts: Sequence[str], sql: str, params: Sequence[str]) -> list[tuple[int, str, int]]:
        """(text's index, token, position) of ``sql`` over the instance table, the texts put in the
        private table for that one statement."""
        with self._lock:
            self._conn.execute("BEGIN")
            try:
                self._conn.executemany("INSERT INTO t(rowid, text) VALUES (?, ?)", enumerate(texts))
                return [(int(d), str(t), int(o)) for d, t, o in self._conn.execute(sql, params)]
            finally:
                self._conn.execute("ROLLBACK")

    def close(self) -> None:
        self._conn.close()


def lexeme(token: str) -> str:
    """``token`` as PostgreSQL can store and search it: cut to ``MAX_LEXEME_BYTES`` bytes of UTF-8."""
    if len(token) * 4 <= MAX_LEXEME_BYTES:  # short enough whatever its characters
        return token
    return token.encode()[:MAX_LEXEME_BYTES].decode("utf-8", "ignore")


def quote_lexeme(term: str) -> str:
    """``term`` as a quoted tsvector/tsquery lexeme."""
    return "'" + term.replace("\\", "\\\\").replace("'", "''") + "'"


def tsvector_literal(tokens: Sequence[str]) -> str:
    """The tsvector text of ``tokens`` with their 1-based positions (``'a':1,4 'b':2``)."""
    positions: dict[str, list[int]] = {}
    for i, token in enumerate(tokens):
        positions.setdefault(token, []).append(min(i + 1, MAX_POSITION))
    return " ".join(f"{quote_lexeme(t)}:{','.join(map(str, ps))}" for t, ps in positions.items())


def phrase_text(phrase: str) -> str:
    """The text inside one quoted FTS5 phrase (``keywords.fts_phrases``: ``"bill 4821"``)."""
    inner = phrase[1:-1] if len(phrase) >= 2 and phrase[0] == phrase[-1] == '"' else phrase
    return inner.replace('""', '"')


def tsquery_literal(phrases: Sequence[Sequence[str]]) -> str:
    """A tsquery ORing the phrases (each a token sequence, matched side by side); '' when none."""
    parts = [" <-> ".join(quote_lexeme(t) for t in tokens) for tokens in phrases if tokens]
    return " | ".join(f"({p})" for p in parts)


def phrase_count(tokens: Sequence[str], positions: Mapping[str, Sequence[int]]) -> int:
    """How often ``tokens`` stand side by side in a document whose lexemes have ``positions``."""
    if not tokens:
        return 0
    first = positions.get(tokens[0], ())
    if len(tokens) == 1:
        return len(first)
    rest = [set(positions.get(t, ())) for t in tokens[1:]]
    return sum(1 for p in first if all(p + i + 1 in later for i, later in enumerate(rest)))
