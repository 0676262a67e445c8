"""Token counting with tiktoken, offline.

litellm ships tiktoken's ``cl100k_base`` and ``o200k_base`` files; before tiktoken loads an
encoding we point ``TIKTOKEN_CACHE_DIR`` at that folder (unless the user set it), found without
importing litellm. Encoders load lazily, once, so ``import sessionmem`` stays fast.
"""

from __future__ import annotations

import importlib.util
import os
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import tiktoken

DEFAULT_ENCODING = "o200k_base"


def configure_litellm_environment() -> None:
    """Set, unless the user did, the environment litellm and tiktoken should run in here.

    - ``LITELLM_LOCAL_MODEL_COST_MAP``: litellm reads its bundled price map instead of downloading it.
    - ``DISABLE_AIOHTTP_TRANSPORT``: litellm's aiohttp sessions are bound to the event loop that made
      them; the runner's sync API runs each turn in a fresh loop, and the cached sessions leaked
      ("Unclosed client session" at exit). httpx's own transport has no such tie.
    - ``TIKTOKEN_CACHE_DIR``: the encodings bundled in litellm, so tiktoken never downloads them.
    """
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("DISABLE_AIOHTTP_TRANSPORT", "True")
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        return
    folder = litellm_tokenizer_dir()
    if folder is not None:
        os.environ["TIKTOKEN_CACHE_DIR"] = str(folder)


def litellm_tokenizer_dir() -> Path | None:
    """The folder of tiktoken files bundled in litellm, located without importing litellm."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        candidate = Path(root) / "litellm_core_utils" / "tokenizers"
        if candidate.is_dir():
            return candidate
    return None


@lru_cache(maxsize=4)
def encoding(name: str = DEFAULT_ENCODING) -> tiktoken.Encoding:
    configure_litellm_environment()
    import tiktoken

    return tiktoken.get_encoding(name)


def count_tokens(text: str, encoding_name: str = DEFAULT_ENCODING) -> int:
    """Exact token count of ``text`` (special tokens are counted as plain text)."""
    if not text:
        return 0
    return len(encoding(encoding_name).encode(text, disallowed_special=()))
