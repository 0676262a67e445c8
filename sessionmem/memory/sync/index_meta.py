"""What the configuration asks the index to be (its ``meta``), and which differences from the stored meta
mean a full rebuild."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sessionmem.memory.store.fts_view import FTS_TEXT_VERSION
from sessionmem.memory.store.meta import FTS_ONLY_MODEL, NONE_PROVIDER_KEY
from sessionmem.memory.store.schema import AUDIENCE_VERSION
from sessionmem.memory.sync.sources import normalize_extra_paths

if TYPE_CHECKING:
    from sessionmem.config import MemorySearchConfig
    from sessionmem.memory.embed.embedder import Embedder


def desired_meta(
    settings: MemorySearchConfig,
    workspace: Path,
    sources: list[str],
    embedder: Embedder | None,
    *,
    vector_loaded: bool,
    agent_id: str | None = None,
) -> dict[str, Any]:
    """The meta an index built now would record; any difference from the stored one means a rebuild
    (``agentId`` excepted: :func:`claim_owner` refuses an index file of another agent first)."""
    extras = sorted(str(p) for p in normalize_extra_paths(workspace, settings.extra_paths))
    scope = hashlib.sha256(json.dumps({"extraPaths": extras}, sort_keys=True).encode()).hexdigest()
    return {
        "provider": embedder.provider if embedder else "none",
        "model": embedder.model if embedder else FTS_ONLY_MODEL,
        "providerKey": embedder.provider_key if embedder else NONE_PROVIDER_KEY,
        "sources": sources,
        "scopeHash": scope,
        "chunkTokens": settings.chunking.tokens,
        "chunkOverlap": settings.chunking.overlap,
        "ftsTokenizer": settings.store.fts.tokenizer,
        # The form of the FTS column's text: an index written before Thai support (no key) rebuilds.
        "ftsText": FTS_TEXT_VERSION,
        "vectorTable": bool(embedder is not None and vector_loaded),
        # Who may see each row (sessionmem.privacy): an index labelled before, or by another rule, rebuilds.
        "audience": AUDIENCE_VERSION,
        "agentId": agent_id,
        "vectorDims": embedder.dims if embedder else None,
    }


def meta_mismatch(stored: dict[str, Any] | None, desired: dict[str, Any]) -> list[str]:
    """The keys whose change requires a full rebuild.

    Vector dims count only when both are known: a remote embedder learns its width from its first
    answer. Until then the pass itself guards the width (:class:`VectorWidthChanged`)."""
    if stored is None:
        return ["no index metadata"]
    out = [key for key in desired if key != "vectorDims" and stored.get(key) != desired[key]]
    dims_then, dims_now = stored.get("vectorDims"), desired.get("vectorDims")
    if dims_then is not None and dims_now is not None and dims_then != dims_now:
        out.append("vectorDims")
    return out
