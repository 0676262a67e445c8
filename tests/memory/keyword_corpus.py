"""The words of a synthetic note line whose word shares span every case the keyword search ranks apart:
"one" in two lines of three, "notes" in one of four, "harbor" one of six, "maple" 4 of 25, "cedar" one of
20, "zinnia" one of 37, "quokka" in 3 lines, "vellum fjord" together in 4, "会议记录" in 1 of 50; each line
padded with filler words to varied lengths (so chunk lengths vary, as BM25's length normalisation needs)."""

from __future__ import annotations


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
