"""Text as the FTS5 index sees it.

SQLite's ``unicode61`` tokenizer keeps a run of Chinese, Japanese or Korean characters as one
token, so a keyword inside the run is never found (OpenClaw #20730). We index and query a form of
the text in which every CJK character stands alone; a CJK query word becomes a phrase of single
characters, which matches the same characters side by side. Other scripts are unchanged.
"""

from __future__ import annotations

import re

# Han (incl. extension A and compatibility), Hiragana, Katakana, Hangul syllables and Jamo.
CJK_CHAR = re.compile(
    "[\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af\u1100-\u11ff\u3130-\u318f]"
)


def fts_text(text: str) -> str:
    """The document text to store in the FTS5 column (CJK characters space-separated)."""
    return CJK_CHAR.sub(lambda m: f" {m.group(0)} ", text)


def has_cjk(text: str) -> bool:
    return CJK_CHAR.search(text) is not None
