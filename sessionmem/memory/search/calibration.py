"""Vector similarity calibrated per embedding model and index, so one ``minScore`` fits them all.

DESIGN decision 15. A cosine means nothing by itself: with MiniLM-L6 a good paraphrase scores
0.2-0.45 and unrelated text about 0.0; with models whose vectors crowd together, unrelated text
scores 0.7. OpenClaw's fixed ``minScore`` 0.35 on ``0.7 x cosine`` therefore dropped most of a small
model's real answers ("users think memories don't exist when they do").

So each index measures what "unrelated" looks like for its model and its notes: a fixed set of
questions about things a memory rarely holds (:data:`PROBES`, in several languages) is embedded as
queries, and their cosines against the index's chunks give the null distribution (median and
robust spread, which one on-topic probe cannot skew). A query's cosine then counts by how many
spreads it stands above that centre, ``z = (cosine - centre) / spread``, and the calibrated score is
``1 - exp(-z / 10.4)``: 0 at or under the centre, never quite 1 (strong matches keep their order).
The default ``minScore`` 0.35 sits at z = 4.5. The best chunk of an unrelated question over a few
hundred chunks reaches z 3-4; the best chunk of a real question is usually far above (with MiniLM on
LoCoMo its median is z 6). Measured on LoCoMo with MiniLM (bench/README.md), z 4.5 keeps the same
recall as z 4.9 and 4.0 within 0.003, and answers 90% of questions about things never written down
with nothing (z 4.9: 93%, z 4.0: 84%); the lower end keeps more of a small model's paraphrases.

A small index is not a distribution: four notes give the probes four vectors to score, and how
those four happen to sit moves the centre and spread enough that a paraphrase a larger index scores
at z 4.8 stood at z 4.2, under ``minScore``. So the index's statistics are blended with a reference
measured once per model on notes shipped with the package (``reference_notes.py``), which count as
that many chunks: ``centre = (n x own + m x reference) / (n + m)`` for n vectors and m notes, the
spread likewise. At 4 vectors the reference carries 92%, at 500 9%; from ``REFERENCE_UNTIL`` vectors
on it is neither embedded nor used.

Measured at the end of a sync when the index has no calibration, or one for another model or width,
or its vector count moved by more than a fifth since; kept in the meta table (the reference's
statistics too, so it is embedded once per index and model). The probes' vectors
are kept there too, so a recalibration after growth embeds nothing. An index that cannot calibrate
(the provider failed on the probes) serves raw cosines, as before, and ``status`` says so.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from sessionmem.errors import EmbeddingError
from sessionmem.memory.embed.embedder import embeds_query_batches
from sessionmem.memory.search.reference_notes import REFERENCE_NOTES

if TYPE_CHECKING:
    import numpy as np

    from sessionmem.memory.embed.embedder import Embedder

log = logging.getLogger(__name__)

CALIBRATION_KEY = "vector_calibration_v2"  # v2: blended with the reference (v1 is measured again)
REFERENCE_KEY = "vector_calibration_reference_v1"  # the reference notes' statistics for one model
PROBE_VECTORS_KEY = "vector_calibration_probes_v1"  # the probes' query vectors, for recalibrations
Z_SCALE = 10.4  # score = 1 - exp(-z / Z_SCALE): minScore 0.35 <-> z 4.5; 0.62 at z 10, 0.85 at z 20
RECALIBRATE_CHANGE = 0.2  # share of the vector count that must change before a new measurement
MIN_COUNT_CHANGE = 8  # ... and at least this many vectors (small indexes do not recalibrate per note)
SAMPLE_ROWS = 4000  # chunk vectors measured against, evenly spread over the index
MAD_TO_SD = 1.4826  # the median absolute deviation of a normal distribution times this is its sd
MIN_SPREAD = 1e-3
REFERENCE_UNTIL = 1000  # from this many vectors on, the index's own statistics serve alone (ref. < 5%)

# Questions about things a memory rarely holds, as users would type them, in the seed languages and
# others. What matters is that they are unrelated to nearly every note: if a few happen to be on a
# workspace's topic, the median and MAD ignore them.
PROBES = (
    "What is the capital of Australia?",
    "How do I replace the chain on a bicycle?",
    "Recipe for vegetable lasagna with spinach",
    "Quarterly tax filing deadline for freelancers",
    "Symptoms of vitamin D deficiency",
    "When was the Eiffel Tower built?",
    "Configure nginx as a reverse proxy with TLS",
    "The rules of cricket explained simply",
    "How many moons does Jupiter have?",
    "Train timetable from Munich to Vienna",
    "Why do cats purr?",
    "Options for refinancing a mortgage",
    "When to plant tulip bulbs",
    "History of the Ottoman Empire",
    "How to fix a leaking kitchen faucet",
    "Compile a Rust project to WebAssembly",
    "Who won the chess world championship in 1972?",
    "Average rainfall in the Amazon basin",
    "Quelle est la meilleure saison pour visiter la Norvège ?",
    "¿Cómo se prepara una paella valenciana?",
    "Qual é o horário de funcionamento da farmácia?",
    "Wie funktioniert eine Wärmepumpe?",
    "如何更换汽车轮胎",
    "富士山の高さはどれくらいですか",
    "김치찌개 만드는 방법",
    "ما هي عاصمة كندا؟",
    "วิธีปลูกต้นมะม่วง",
    "Difference between a violin and a viola",
    "Error code E42 on a dishwasher",
    "Migration patterns of humpback whales",
    "Insurance claim for a cracked windshield",
    "Invoice 7731 for the scaffolding rental",
)


@dataclass(frozen=True, slots=True)
class Calibration:
    """Where unrelated queries' cosines sit for one model on one index."""

    provider_key: str
    model: str
    dims: int
    centre: float  # median cosine of a probe and a chunk (blended with the reference's)
    spread: float  # its robust standard deviation (MAD x 1.4826), blended likewise
    vectors: int  # chunk vectors in the index when measured
    probes: int
    reference_notes: int = 0  # reference notes blended in as that many chunks (0: none)
    reference_centre: float | None = None  # the reference's own statistics, for ``status`` and explain
    reference_spread: float | None = None

    def z(self, cosine: float) -> float:
        return (cosine - self.centre) / self.spread

    def score(self, cosine: float) -> float:
        """The calibrated vector score in [0, 1): ``1 - exp(-z / Z_SCALE)`` above the centre, else 0."""
        return 1.0 - math.exp(-max(0.0, self.z(cosine)) / Z_SCALE)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, value: Any) -> Calibration | None:
        if not isinstance(value, dict):
            return None
        try:
            cal = cls(**value)
        except TypeError:
            return None
        ok = isinstance(cal.spread, (int, float)) and cal.spread > 0 and isinstance(cal.centre, (int, float))
        return cal if ok else None

    def fits(self, embedder: Embedder, width: int | None) -> bool:
        """Measured with this embedder (and at this width, when known)."""
        return (
            self.provider_key == embedder.provider_key
            and self.model == embedder.model
            and (width is None or self.dims == width)
        )


def null_statistics(probe_vectors: np.ndarray, chunk_vectors: np.ndarray) -> tuple[float, float]:
    """(median, robust sd) of every probe-chunk cosine; vectors are L2-normalised rows."""
    import numpy as np

    sims = np.asarray(probe_vectors, dtype=np.float32) @ np.asarray(chunk_vectors, dtype=np.float32).T
    flat = sims.ravel()
    centre = float(np.median(flat))
    spread = float(np.median(np.abs(flat - centre))) * MAD_TO_SD
    if spread < MIN_SPREAD:  # most cosines equal (sparse vectors): the MAD says nothing, the sd does
        spread = float(np.std(flat))
    return centre, max(spread, MIN_SPREAD)


def needs_measuring(current: Calibration | None, embedder: Embedder, width: int | None, vectors: int) -> bool:
    if vectors == 0:
        return False
    if current is None or not current.fits(embedder, width):
        return True
    moved = abs(vectors - current.vectors)
    return moved >= MIN_COUNT_CHANGE and moved > RECALIBRATE_CHANGE * current.vectors


def probe_hash(text: str) -> str:
    """The key of a probe's query vector among the stored ones."""
    return hashlib.sha256(("calibration-probe\0" + text).encode("utf-8")).hexdigest()


def embed_probes(
    embedder: Embedder, cached: dict[str, bytes], probes: Sequence[str] = PROBES
) -> tuple[np.ndarray, dict[str, bytes]]:
    """The probes' query vectors (from ``cached``, a key -> float32 bytes map, else embedded as
    queries: in one call when the embedder can) and those newly embedded. Raises ``EmbeddingError``."""
    import numpy as np

    missing = [text for text in probes if probe_hash(text) not in cached]
    fresh: dict[str, bytes] = {}
    if missing:
        if embeds_query_batches(embedder):
            raw = np.asarray(embedder.embed_queries(missing), dtype=np.float32)
        else:
            raw = np.stack(
                [np.asarray(embedder.embed_query(t), dtype=np.float32).reshape(-1) for t in missing]
            )
        if raw.ndim != 2 or raw.shape[0] != len(missing):
            raise EmbeddingError(
                f"{embedder.model} gave {raw.shape} vectors for {len(missing)} calibration probes"
            )
        norms = np.linalg.norm(raw, axis=1)
        if not np.isfinite(raw).all() or (norms == 0).any():
            raise EmbeddingError(f"{embedder.model} gave no usable vector for a calibration probe")
        for text, row in zip(missing, raw / norms[:, None], strict=True):
            fresh[probe_hash(text)] = row.astype("<f4").tobytes()
    known = {**cached, **fresh}
    rows = [np.frombuffer(known[probe_hash(text)], dtype="<f4") for text in probes]
    if len({len(r) for r in rows}) != 1:
        raise EmbeddingError(f"{embedder.model} gave calibration probes vectors of different widths")
    return np.stack(rows), fresh


def blend(
    own: tuple[float, float], vectors: int, reference: tuple[float, float] | None
) -> tuple[float, float]:
    """(centre, spread) of the index's ``own`` statistics over ``vectors`` chunks and the reference's,
    which counts as ``len(REFERENCE_NOTES)`` chunks (module docstring); ``own`` alone without one."""
    if reference is None:
        return own
    n, m = max(0, vectors), len(REFERENCE_NOTES)
    centre = (n * own[0] + m * reference[0]) / (n + m)
    spread = (n * own[1] + m * reference[1]) / (n + m)
    return centre, max(spread, MIN_SPREAD)


def reference_digest() -> str:
    """Names the shipped reference notes: statistics stored for other notes are measured again."""
    return hashlib.sha256("\0".join(REFERENCE_NOTES).encode("utf-8")).hexdigest()[:16]


def reference_statistics(embedder: Embedder, probes: np.ndarray) -> tuple[float, float]:
    """(median, robust sd) of the probes against the reference notes embedded as documents.
    Raises ``EmbeddingError``."""
    import numpy as np

    try:
        raw = np.asarray(embedder.embed_documents(list(REFERENCE_NOTES)), dtype=np.float32)
    except EmbeddingError:
        raise
    except Exception as exc:  # a provider's own failure: the caller falls back to the index alone
        raise EmbeddingError(f"{embedder.model} failed on the reference notes: {exc}") from exc
    if raw.ndim != 2 or raw.shape != (len(REFERENCE_NOTES), probes.shape[1]):
        raise EmbeddingError(f"{embedder.model} gave {raw.shape} vectors for the reference notes")
    norms = np.linalg.norm(raw, axis=1)
    if not np.isfinite(raw).all() or (norms == 0).any():
        raise EmbeddingError(f"{embedder.model} gave no usable vector for a reference note")
    return null_statistics(probes, raw / norms[:, None])


def measure(
    embedder: Embedder,
    cached: dict[str, bytes],
    chunk_vectors: np.ndarray,
    vectors: int,
    reference: tuple[float, float] | None = None,
) -> tuple[Calibration, dict[str, bytes]]:
    """A calibration of ``embedder`` against ``chunk_vectors`` (a sample of the index's ``vectors``),
    blended with ``reference`` (the reference notes' statistics, :func:`reference_statistics`) when
    given, and the probe vectors to cache."""
    probes, fresh = embed_probes(embedder, cached)
    if probes.shape[1] != chunk_vectors.shape[1]:
        raise EmbeddingError(
            f"{embedder.model} gave {probes.shape[1]}-dimensional probe vectors for an index of "
            f"{chunk_vectors.shape[1]} dimensions"
        )
    centre, spread = blend(null_statistics(probes, chunk_vectors), vectors, reference)
    cal = Calibration(
        provider_key=embedder.provider_key,
        model=embedder.model,
        dims=int(chunk_vectors.shape[1]),
        centre=round(centre, 6),
        spread=round(spread, 6),
        vectors=vectors,
        probes=len(probes),
        reference_notes=len(REFERENCE_NOTES) if reference is not None else 0,
        reference_centre=None if reference is None else round(reference[0], 6),
        reference_spread=None if reference is None else round(reference[1], 6),
    )
    return cal, fresh


# ---------------------------------------------------------------------------- in the index


def load(conn: Any) -> Calibration | None:
    """The calibration stored in the index's meta, if any."""
    from sessionmem.memory.store.meta import read_json

    return Calibration.from_json(read_json(conn, CALIBRATION_KEY))


def refresh(conn: Any, embedder: Embedder, width: int | None, *, changed: bool = True) -> str | None:
    """Measure and store a new calibration when the stored one does not fit (see the module docstring);
    ``changed`` False (the pass wrote nothing) skips the count when a fitting one is stored.

    Returns None, or why the index stays uncalibrated (the provider failed on the probes). Runs in
    the sync that holds the writer connection."""
    import numpy as np

    from sessionmem.memory.store.meta import read_json, write_json

    current = load(conn)
    if not changed and current is not None and current.fits(embedder, width):
        return None
    # Every writing sync counts: by the vectors' length (SQLite's idx_chunks_vector_lengths) once known.
    where = "model = ? AND embedding IS NOT NULL"
    params: tuple[Any, ...] = (embedder.model,)
    if width is not None:
        where, params = f"length(embedding) = ? AND {where}", (width * 4, *params)
    (count,) = conn.execute(f"SELECT count(*) FROM chunks WHERE {where}", params).fetchone()
    if not needs_measuring(current, embedder, width, int(count)):
        return None
    step = max(1, int(count) // SAMPLE_ROWS)
    blobs = [
        bytes(b)
        for (b,) in conn.execute(
            f"SELECT embedding FROM chunks WHERE {where} AND rowid % ? = 0 LIMIT ?",
            (*params, step, SAMPLE_ROWS),
        )
    ]
    if not blobs:  # the stride missed every row (rowids are not dense): take the first ones
        blobs = [
            bytes(b)
            for (b,) in conn.execute(
                f"SELECT embedding FROM chunks WHERE {where} LIMIT ?", (*params, SAMPLE_ROWS)
            )
        ]
    widths = {len(b) for b in blobs}
    if len(widths) != 1:
        return None  # a width change is being rebuilt; the rebuilt index calibrates
    chunk_vectors = np.stack([np.frombuffer(b, dtype="<f4") for b in blobs])
    stored = read_json(conn, PROBE_VECTORS_KEY)
    cached: dict[str, bytes] = {}
    if isinstance(stored, dict) and stored.get("providerKey") == embedder.provider_key:
        vectors = stored.get("vectors")
        if isinstance(vectors, dict):
            cached = {k: base64.b64decode(v) for k, v in vectors.items() if isinstance(v, str)}
    known = set(cached)
    try:
        reference, entry = _reference(conn, embedder, cached, int(count), int(chunk_vectors.shape[1]))
        cal, fresh = measure(embedder, cached, chunk_vectors, int(count), reference)
    except EmbeddingError as exc:
        log.warning("vector calibration with %s failed: %s", embedder.model, exc)
        return f"vector scores are not calibrated ({exc}); minScore applies to raw cosine similarity"
    cached.update(fresh)
    with conn.atomic():
        write_json(conn, CALIBRATION_KEY, cal.to_json())
        if entry is not None:
            write_json(conn, REFERENCE_KEY, entry)
        if set(cached) != known:
            encoded = {k: base64.b64encode(v).decode("ascii") for k, v in cached.items()}
            write_json(conn, PROBE_VECTORS_KEY, {"providerKey": embedder.provider_key, "vectors": encoded})
    log.info(
        "vector calibration for %s: centre %.3f, spread %.3f over %d vectors",
        embedder.model,
        cal.centre,
        cal.spread,
        cal.vectors,
    )
    return None


def _reference(
    conn: Any, embedder: Embedder, cached: dict[str, bytes], vectors: int, dims: int
) -> tuple[tuple[float, float] | None, dict[str, Any] | None]:
    """The reference notes' statistics for ``embedder`` and, when newly measured, the meta entry to
    store: stored ones when they fit, else measured (embedding the notes once). None from
    ``REFERENCE_UNTIL`` vectors on, or when the provider fails on the notes (the index's own
    statistics then serve alone, as before). Adds the probe vectors it embeds to ``cached``."""
    from sessionmem.memory.store.meta import read_json

    if vectors >= REFERENCE_UNTIL:
        return None, None
    key: dict[str, Any] = {
        "providerKey": embedder.provider_key,
        "model": embedder.model,
        "dims": dims,
        "notes": reference_digest(),
    }
    stored = read_json(conn, REFERENCE_KEY)
    if isinstance(stored, dict) and all(stored.get(k) == v for k, v in key.items()):
        centre, spread = stored.get("centre"), stored.get("spread")
        if isinstance(centre, (int, float)) and isinstance(spread, (int, float)) and spread > 0:
            return (float(centre), float(spread)), None
    probes, fresh = embed_probes(embedder, cached)  # raises EmbeddingError: no calibration at all
    cached.update(fresh)
    if probes.shape[1] != dims:
        return None, None  # measure() says why
    try:
        centre, spread = reference_statistics(embedder, probes)
    except EmbeddingError as exc:
        log.warning("vector calibration with %s: no reference (%s)", embedder.model, exc)
        return None, None
    return (centre, spread), {**key, "centre": round(centre, 6), "spread": round(spread, 6)}
