"""Text as the FTS5 index sees it.

SQLite's ``unicode61`` tokenizer keeps a run of Chinese, Japanese or Korean characters as one
token, so a keyword inside the run is never found (OpenClaw #20730). Thai is written without
spaces between words and has the same problem, worse: ``unicode61`` also treats Thai vowel and tone
marks as separators, so a Thai sentence falls into arbitrary pieces. We index and query a form of
the text in which every CJK character, and every Thai cluster (a base character with the vowel and
tone marks written on it), stands alone; a CJK or Thai query word becomes a phrase of those units,
which matches the same units side by side. Other scripts are unchanged.

``FTS_TEXT_VERSION`` names the form ``fts_text`` writes; the index records it in its meta
(``ftsText``), so an index holding an older form is rebuilt (from its embedding cache, nothing
re-embedded) instead of waiting for each file to change. Change it whenever ``fts_text`` changes
what it writes for some text, or what the index passes to it. 1: CJK characters spaced; 2: Thai
clusters spaced too; 3: each chunk's context (``chunk_context``: heading trail, date in words) first.

And FTS5's ranking as its ``bm25()`` computes it: the IDF, the constants, the row count and average row
length from FTS5's averages record, and the SQLite varints its records are packed in (shared by the
keyword search, ``sqlite_keywords``, and the postings held in memory, ``keyword_postings``).
"""

from __future__ import annotations

import math
import re
from typing import Any

FTS_TEXT_VERSION = 3

# The scripts written without spaces between words, as the insides of character classes, for the
# patterns (here, chunking, ranking, the query's keywords) that combine them. Han: extension A and the
# compatibility ideographs too; Katakana: the phonetic extensions too; Hangul: syllables and Jamo.
HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
HIRAGANA = "\u3040-\u309f"
KATAKANA = "\u30a0-\u30ff\u31f0-\u31ff"
HANGUL = "\uac00-\ud7af\u1100-\u11ff\u3130-\u318f"
CJK_CHARS = HIRAGANA + KATAKANA + HAN + HANGUL

# Thai combining marks (category Mn): MAI HAN-AKAT, the upper and lower vowels, PHINTHU, the tone marks,
# THANTHAKHAT, NIKHAHIT, YAMAKKAN. Everything else in the block is a base character of its own.
THAI_MARKS = "\u0e31\u0e34-\u0e3a\u0e47-\u0e4e"
THAI_CHARS = "\u0e01-\u0e3a\u0e3f-\u0e5b"
# Marks are consumed by the cluster before them; a mark with no base (after a space) is a unit alone.
THAI_CLUSTER = re.compile(f"[{THAI_CHARS}][{THAI_MARKS}]*")

# One unit of the FTS form: a CJK character or a Thai cluster (a base with its marks).
_FTS_UNIT = re.compile(f"[{CJK_CHARS}]|{THAI_CLUSTER.pattern}")


def fts_text(text: str) -> str:
    """The document text to store in the FTS5 column (CJK characters and Thai clusters space-separated)."""
    return _FTS_UNIT.sub(lambda m: f" {m.group(0)} ", text)


def bm25_idf(rows: int, hits: int) -> float:
    """FTS5's IDF of a phrase found in ``hits`` of ``rows`` rows (floored at 1e-6, as FTS5 does)."""
    idf = math.log((rows - hits + 0.5) / (hits + 0.5)) if rows > 0 else 0.0
    return idf if idf > 0 else 1e-6


BM25_K1 = 1.2  # FTS5's bm25() defaults
BM25_B = 0.75


def fts_totals(conn: Any) -> tuple[int, float]:
    """FTS5's row count and average row length in tokens, from its averages record (rows, then tokens
    per column), as ``bm25()`` reads them."""
    row = conn.execute("SELECT block FROM chunks_fts_data WHERE id = 1").fetchone()
    values = varints(bytes(row[0])) if row and row[0] else []
    if not values or not values[0]:
        return 0, 0.0
    return values[0], sum(values[1:]) / values[0]


def varints(blob: bytes) -> list[int]:
    """The SQLite varints packed in ``blob`` (FTS5's structure records use them)."""
    out, pos = [], 0
    while pos < len(blob):
        value = 0
        for i in range(9):
            byte = blob[pos]
            pos += 1
            if i == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if not byte & 0x80:
                break
        out.append(value)
    return out
