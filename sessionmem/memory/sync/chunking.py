"""The line-based chunker (reference §6.3), pure and stdlib-only.

Sizes are measured in *weighted characters*: a character counts 1, a Chinese, Japanese, Korean or
Thai character counts 4. With ``max_chars = tokens * 4`` that budgets English at ~4 chars per token
and CJK at ~1 char per token, so a 400-token chunk of Chinese holds ~400 characters, not 1,600
(OpenClaw HEAD's ``estimateStringChars``). Thai is as dense: measured with tiktoken's
``cl100k_base`` (OpenAI's embedding tokenizer) on the Thai seed, Thai runs take ~1.06 characters per
token (vowel and tone marks included), against ~0.97 for Chinese and ~3.8 for English, so a Thai
character weighs 4 too (counted as 1 it made Thai chunks ~2.5x their token budget). Counting with
a tokenizer would be exact but costs ~100x more on a 10 MB file; the estimate only needs to never
badly undercount.

Each chunk records 1-based first and last line; consecutive chunks share ``overlap`` tokens of
whole lines; a line longer than a chunk is cut into segments that keep its line number.
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from sessionmem.memory.store.fts_view import CJK_CHARS, THAI_CHARS

CJK_WEIGHT = 4
MIN_CHUNK_CHARS = 32


@functools.cache
def _heavy_char() -> re.Pattern[str]:
    """Characters that weigh CJK_WEIGHT: CJK (ftstext's class) and the Thai block, marks included.

    Compiled on first use, not at import: the index imports this module, and a search that finds the
    index up to date (every cold ``memory search``) chunks nothing; the class takes about 2 ms to compile."""
    return re.compile(f"[{CJK_CHARS}{THAI_CHARS}]")


@dataclass(frozen=True, slots=True)
class Chunk:
    start_line: int  # 1-based, inclusive
    end_line: int
    text: str
    hash: str  # sha256 of text
    context: str = ""  # keyword-searched with the chunk, not part of it (``chunk_context``)


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def weighted_len(text: str) -> int:
    """Characters, with each CJK or Thai character counted ``CJK_WEIGHT`` times."""
    return len(text) + (CJK_WEIGHT - 1) * len(_heavy_char().findall(text))


def chunk_markdown(content: str, tokens: int = 400, overlap: int = 80) -> list[Chunk]:
    """Split ``content`` into overlapping line-based chunks of about ``tokens`` tokens each.

    Whitespace-only chunks are kept here (the index drops them with :func:`drop_blank`) so the
    algorithm stays the reference's; an empty string gives one empty chunk on line 1.
    """
    tokens = max(1, int(tokens))
    overlap = min(max(0, int(overlap)), tokens - 1)
    max_chars = max(MIN_CHUNK_CHARS, tokens * 4)
    overlap_chars = overlap * 4
    chunks: list[Chunk] = []
    buf: list[tuple[str, int, int]] = []  # (segment, line number, weighted size incl. newline)
    current = 0

    lines = content.split("\n")
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()  # a final newline ends the last line; it does not start an empty one
    for line_no, line in enumerate(lines, start=1):
        for segment, weight in _segments(line, max_chars, tokens):
            size = weight + 1
            if buf and current + size > max_chars:
                chunks.append(_flush(buf))
                buf = _carry(buf, overlap_chars)
                current = sum(item[2] for item in buf)
                # Unlike the reference, never let carried overlap push a chunk past the budget.
                while buf and current + size > max_chars:
                    current -= buf.pop(0)[2]
            buf.append((segment, line_no, size))
            current += size
    if buf:
        chunks.append(_flush(buf))
    return chunks


def _segments(line: str, max_chars: int, tokens: int) -> Iterable[tuple[str, int]]:
    """A line cut into pieces of at most ``max_chars`` weighted characters (an empty line is one piece)."""
    if not line:
        return [("", 0)]
    if _heavy_char().search(line) is None:  # the common case: weight == length
        if len(line) <= max_chars:
            return [(line, len(line))]
        pieces = [line[i : i + max_chars] for i in range(0, len(line), max_chars)]
        return [(piece, len(piece)) for piece in pieces]
    out: list[tuple[str, int]] = []
    for i in range(0, len(line), max_chars):
        piece = line[i : i + max_chars]
        weight = weighted_len(piece)
        if weight <= max_chars:
            out.append((piece, weight))
            continue
        # Over-weight (CJK or Thai) piece: re-split at ``tokens`` characters, which weigh at most max_chars.
        step = max(1, tokens)
        for j in range(0, len(piece), step):
            sub = piece[j : j + step]
            out.append((sub, weighted_len(sub)))
    return out


def _flush(buf: list[tuple[str, int, int]]) -> Chunk:
    text = "\n".join(item[0] for item in buf)
    return Chunk(buf[0][1], buf[-1][1], text, text_hash(text))


def _carry(buf: list[tuple[str, int, int]], overlap_chars: int) -> list[tuple[str, int, int]]:
    """The last whole segments whose sizes reach ``overlap_chars`` (at least one), or nothing."""
    if overlap_chars <= 0:
        return []
    acc = 0
    keep_from = len(buf)
    while keep_from > 0 and acc < overlap_chars:
        keep_from -= 1
        acc += buf[keep_from][2]
    return buf[keep_from:]


def drop_blank(chunks: Iterable[Chunk]) -> list[Chunk]:
    """Chunks with something besides whitespace."""
    return [c for c in chunks if c.text.strip()]


def remap_lines(chunks: Sequence[Chunk], line_map: Sequence[int] | None) -> list[Chunk]:
    """Map content line numbers to original-file lines (``line_map[i]`` is content line ``i + 1``)."""
    if not line_map:
        return list(chunks)
    last = len(line_map)

    def m(n: int) -> int:
        return line_map[min(max(n, 1), last) - 1]

    return [replace(c, start_line=m(c.start_line), end_line=m(c.end_line)) for c in chunks]


def split_for_embedding(
    chunks: Sequence[Chunk], max_input_tokens: int, count: Callable[[str], int] | None = None
) -> list[Chunk]:
    """Chunks over the provider's input limit cut into pieces that fit (same lines, own hashes).

    UTF-8 bytes bound tokens from above for byte-level and word-piece tokenizers alike, so a chunk
    within ``max_input_tokens`` bytes is never counted; a larger one is counted with ``count``
    (tiktoken by default) and cut only when it really is over the limit.
    """
    limit = max(1, int(max_input_tokens))
    if count is None:
        from sessionmem.tokens import count_tokens

        count = count_tokens
    counter: Callable[[str], int] = count
    out: list[Chunk] = []
    for chunk in chunks:
        out.extend(_fit(chunk, chunk.text, limit, counter))
    return out


def _fit(chunk: Chunk, text: str, limit: int, count: Callable[[str], int]) -> list[Chunk]:
    if len(text.encode("utf-8", "surrogatepass")) <= limit:
        return [chunk if text == chunk.text else replace(chunk, text=text, hash=text_hash(text))]
    n = count(text)
    if n <= limit or len(text) <= 1:
        return [chunk if text == chunk.text else replace(chunk, text=text, hash=text_hash(text))]
    pieces = max(2, math.ceil(n / limit))
    step = max(1, math.ceil(len(text) / pieces))
    out: list[Chunk] = []
    for i in range(0, len(text), step):
        out.extend(_fit(chunk, text[i : i + step], limit, count))
    return out
