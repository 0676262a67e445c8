"""The words of a synthetic note line whose word shares span every case the keyword search ranks apart:
"one" in two lines of three, "notes" in one of four, "harbor" one of six, "maple" 4 of 25, "cedar" one of
20, "zinnia" one of 37, "quokka" in 3 lines, "vellum fjord" together in 4, "会议记录" in 1 of 50; each line
padded with filler words to varied lengths (so chunk lengths vary, as BM25's length normalisation needs)."""

from __future__ import annotations

from pathlib import Path

# Queries spanning every way the keyword matrix and the keyword statement split a query.
QUERIES = [
    "one notes",  # two held words
    "one",
    "maple zinnia",  # a held word and a rare one
    "harbor one cedar",
    "notes maple harbor one quokka",
    '"vellum fjord" one',  # a phrase of two words with a held word
    "会议 one",  # CJK: a phrase of characters with a held word
    "quokka zinnia",  # no held word: the full-text engine alone
]


def note_words(i: int) -> list[str]:
    """The words of line ``i`` (deterministic)."""
    words = [f"filler{(i * 7) % 23}", f"pad{i % 11}"] * (3 + (i * 13) % 9)
    words += ["one"] * (1 + i % 3) if i % 3 else []
    words += ["notes"] * (1 + (i // 4) % 4) if i % 4 == 0 else []
    words += ["harbor"] * (1 + i % 2) if i % 6 == 1 else []
    words += ["maple"] * (1 + i % 3 // 2) if i % 25 < 4 else []
    words += ["cedar"] if i % 20 == 3 else []
    words += ["zinnia"] * (1 + i % 4) if i % 37 == 0 else []
    words += ["quokka"] if i in (3, 40, 2041) else []
    words += ["vellum", "fjord"] if i in (5, 6, 50, 2900) else []
    words += ["会议记录"] if i % 50 == 7 else []
    return words


def note(day: int, lines: range) -> str:
    """A daily note of ``lines`` (one per line number), each tagged with its number and ``day``."""
    return "".join(f"- n{i} d{day} " + " ".join(note_words(i)) + "\n" for i in lines)


def write_dated_notes(memory: Path) -> None:
    """Six dated notes of 500 lines each (~1,800 chunks of 64 tokens) under ``memory``."""
    memory.mkdir(parents=True)
    for day in range(6):
        (memory / f"2026-01-0{day + 1}-log.md").write_text(note(day, range(day * 500, day * 500 + 500)))
