"""The line-based chunker (reference §6.3) and the embedding-limit splitter."""

from __future__ import annotations

import hashlib
import itertools

from sessionmem.memory.sync.chunking import (
    chunk_markdown,
    drop_blank,
    remap_lines,
    split_for_embedding,
    text_hash,
    weighted_len,
)
from sessionmem.tokens import count_tokens


def _lines(n: int, width: int = 50) -> str:
    return "\n".join(f"line {i:03d} " + "w" * width for i in range(1, n + 1))


def test_small_file_is_one_chunk_with_1_based_lines() -> None:
    (chunk,) = chunk_markdown("# Title\n\nbody\n")
    assert (chunk.start_line, chunk.end_line) == (1, 3)  # the final newline opens no line 4
    assert chunk.text == "# Title\n\nbody"
    assert chunk.hash == hashlib.sha256(chunk.text.encode()).hexdigest()


def test_chunks_cover_every_line_and_respect_the_budget() -> None:
    content = _lines(100)
    chunks = chunk_markdown(content, tokens=400, overlap=0)
    assert len(chunks) > 1
    assert all(len(c.text) <= 1600 for c in chunks)
    assert chunks[0].start_line == 1 and chunks[-1].end_line == 100
    for prev, nxt in itertools.pairwise(chunks):
        assert nxt.start_line == prev.end_line + 1  # no overlap, no gap
    rebuilt = "\n".join(c.text for c in chunks)
    assert rebuilt == content


def test_overlap_carries_the_last_whole_lines() -> None:
    content = _lines(100)  # 59 chars per line + newline = 60
    chunks = chunk_markdown(content, tokens=400, overlap=80)  # overlap 320 chars -> 6 lines
    for prev, nxt in itertools.pairwise(chunks):
        shared = prev.end_line - nxt.start_line + 1
        assert shared == 6
        assert nxt.text.split("\n")[:shared] == prev.text.split("\n")[-shared:]
    assert all(len(c.text) <= 1600 for c in chunks)


def test_long_line_is_split_into_segments_sharing_its_line_number() -> None:
    line = "x" * (1600 * 3 + 25)
    chunks = chunk_markdown(f"before\n{line}\nafter", tokens=400, overlap=0)
    assert all(len(c.text) <= 1600 for c in chunks)
    middle = [c for c in chunks if "x" in c.text]
    assert all(c.start_line <= 2 <= c.end_line for c in middle)
    assert sum(c.text.count("x") for c in chunks) == len(line)
    assert chunks[-1].end_line == 3


def test_long_line_with_overlap_never_exceeds_the_budget() -> None:
    chunks = chunk_markdown("y" * 20_000, tokens=400, overlap=80)
    assert max(len(c.text) for c in chunks) <= 1600


def test_cjk_is_not_undercounted() -> None:
    chinese = "记忆系统在压缩之前写入每日笔记。" * 400  # 6,400 characters on one line
    chunks = chunk_markdown(chinese, tokens=400, overlap=0)
    assert all(weighted_len(c.text) <= 1600 for c in chunks)
    # A 400-token chunk of Chinese holds about 400 characters, not 1,600.
    assert max(len(c.text) for c in chunks) <= 400
    worst = max(count_tokens(c.text) for c in chunks)
    assert worst <= 600, f"a chunk holds {worst} real tokens for a 400-token budget"


THAI_NOTES = [
    "หน่วยความจำของเอเจนต์คือไฟล์Markdownธรรมดาในเวิร์กสเปซ ไฟล์เหล่านี้คือแหล่งอ้างอิงความจริงเพียงหนึ่งเดียว",
    "เครื่องมือค้นหาหน่วยความจำถูกจัดเตรียมโดยปลั๊กอินหน่วยความจำที่เปิดใช้งานอยู่",
    "บันทึกรายวันเพิ่มต่อท้ายเท่านั้น อ่านของวันนี้และเมื่อวานตอนเริ่มเซสชัน",
    "การตัดสินใจ ความชอบ และข้อเท็จจริงที่คงทนให้เขียนลงในหน่วยความจำระยะยาว",
    "หากมีคนพูดว่าจำสิ่งนี้ไว้ให้เขียนลงไป อย่าเก็บไว้ในหน่วยความจำชั่วคราว",
]


def test_thai_is_not_undercounted() -> None:
    # Thai takes about one cl100k_base token per character (marks included), like CJK.
    lines = "\n".join(f"- {THAI_NOTES[i % len(THAI_NOTES)]} ({i})" for i in range(200))
    one_line = "".join(THAI_NOTES) * 20
    for content in (lines, one_line):
        chunks = chunk_markdown(content, tokens=400, overlap=80)
        assert len(chunks) > 1 and all(weighted_len(c.text) <= 1600 + 1 for c in chunks)
        sizes = [count_tokens(c.text, "cl100k_base") for c in chunks]
        assert max(sizes) <= 500, f"a chunk holds {max(sizes)} cl100k tokens for a 400-token budget"
        assert max(sizes) >= 300  # and a chunk is not a fraction of its budget either


def test_mixed_cjk_lines_are_budgeted_by_weight() -> None:
    content = "\n".join(["English words here " * 3, "日本語のメモです。" * 5, "한국어 메모입니다 " * 4] * 60)
    chunks = chunk_markdown(content, tokens=100, overlap=20)
    assert all(weighted_len(c.text) <= 400 + 1 for c in chunks)


def test_empty_and_whitespace_content() -> None:
    (empty,) = chunk_markdown("")
    assert (empty.start_line, empty.end_line, empty.text) == (1, 1, "")
    assert drop_blank(chunk_markdown("")) == []
    assert drop_blank(chunk_markdown("\n   \n\t\n")) == []


def test_a_ten_megabyte_single_line_becomes_bounded_chunks_of_line_one() -> None:
    content = "lorem ipsum " * (10 * 1024 * 1024 // 12)
    chunks = chunk_markdown(content)
    assert all(c.start_line == 1 == c.end_line for c in chunks)
    assert max(len(c.text) for c in chunks) <= 1600
    assert sum(len(c.text) for c in chunks) >= len(content.strip())  # nothing dropped


def test_remap_lines_through_a_line_map() -> None:
    content = "\n".join(f"User: message {i}" for i in range(5))
    chunks = chunk_markdown(content, tokens=10, overlap=0)
    remapped = remap_lines(chunks, [4, 6, 7, 10, 13])
    assert remapped[0].start_line == 4
    assert remapped[-1].end_line == 13
    assert [c.text for c in remapped] == [c.text for c in chunks]
    assert remap_lines(chunks, None) == chunks


def test_split_for_embedding_keeps_small_chunks_and_splits_large_ones() -> None:
    small, big = chunk_markdown("short line"), chunk_markdown("word " * 3000, tokens=4000, overlap=0)
    assert split_for_embedding(small, 512) == small
    pieces = split_for_embedding(big, 512)
    assert len(pieces) > 1
    assert all(count_tokens(p.text) <= 512 for p in pieces)
    assert all((p.start_line, p.end_line) == (big[0].start_line, big[0].end_line) for p in pieces)
    assert all(p.hash == text_hash(p.text) for p in pieces)
    assert "".join(p.text for p in pieces) == big[0].text


def test_split_for_embedding_counts_only_chunks_over_the_byte_limit() -> None:
    calls: list[str] = []

    def count(text: str) -> int:
        calls.append(text)
        return len(text) // 4

    chunks = chunk_markdown("a" * 100) + chunk_markdown("b" * 1000)
    assert split_for_embedding(chunks, 300, count) == chunks  # 1000 bytes, but 250 "tokens"
    assert calls == ["b" * 1000]
