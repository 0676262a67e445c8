"""A coarse first pass for the in-memory matrix of a large index: sign bits, then exact rescoring.

Trigger: a matrix of at least ``COARSE_MIN_ROWS`` rows. Why: one float32 matrix-vector product
reads the whole matrix (150 MB at 100k chunks of 384 dimensions, 1.5 GB at 1M) and is bound by memory
bandwidth: ~10 ms at 100k and 108 ms at 1M on a 2-core server, where a whole hybrid search may take
25 ms (to 100k chunks) or 60 ms (at 1M).
Outcome: each row also keeps its sign bits, one per dimension (48 bytes a row at 384 dimensions:
48 MB at 1M, 1/32 of the matrix), stored word by word (word ``j`` of every row is one contiguous
array). A query counts, for every row, the dimensions whose signs differ from its own (XOR and
popcount), the dimensions where the query's value is larger than its median magnitude counting
twice; the ``candidate_count`` rows differing least are then scored exactly with their float32 rows,
and the best ``k`` of those are the answer. Scores are exact cosines; only which rows get scored is
approximate.

Measured on MiniLM vectors (LoCoMo's 2,888 daily-log lines and 999 questions, among vectors drawn
from their mean and covariance; ``bench/bench_sign_codes.py``): of each question's exact top 120 (the
hybrid search's vector pool), the 9,600 candidates held 99.99% at 100k rows (the worst question
99.2%), 99.97% at 200k and 99.92% at 300k, and every one of the top 6 at each size; half as many
candidates lost a top-6 row at 100k and at 300k, so the count stays. Counting every dimension once did
worse (98.0% at 300k), and so did centring the bits on the mean vector (tests/memory/test_sign_codes.py
checks vectors shaped like these). The pass costs ~1 ms at 100k and the rescoring ~3: measured there,
every row scored 9.5 / 17.4 ms and the sign-bit path 6.3 / 12.1 (p50 / p95, the same 999 questions
alternating, with the same top 6 for all; 11.9 / 24.2 against 8.5 / 16.9 in a busier run), while at 50k
it is no faster (4.9 against 5.7 ms): so it starts at 100k rows.

A smaller index is scanned whole, as before: exact. So is a query whose filters (sources, audience,
dates) leave no more rows than the candidate count.
"""

from __future__ import annotations

import numpy as np

COARSE_MIN_ROWS = 100_000
# Rows rescored exactly: CANDIDATE_FACTOR times k, and at least CANDIDATE_SHARE of the rows.
CANDIDATE_FACTOR = 80
CANDIDATE_SHARE = 1 / 100
_BUILD_ROWS = 16_384  # rows encoded at a time: the temporaries stay a few MB


def candidate_count(rows: int, k: int) -> int:
    """How many rows the coarse pass hands to exact scoring for a top-``k`` query over ``rows``."""
    return min(rows, max(CANDIDATE_FACTOR * k, int(rows * CANDIDATE_SHARE)))


def _words(bits: np.ndarray, words: int) -> np.ndarray:
    """Rows of packed bits (uint8), zero-padded to ``words`` 64-bit words, as uint64."""
    out = np.zeros((*bits.shape[:-1], words * 8), dtype=np.uint8)
    out[..., : bits.shape[-1]] = bits
    return out.view(np.uint64)


class SignCodes:
    """The sign bits of every row of one matrix (module docstring)."""

    def __init__(self, matrix: np.ndarray) -> None:
        n, dims = matrix.shape
        self.words = (dims + 63) // 64
        codes = np.empty((self.words, n), dtype=np.uint64)
        for start in range(0, n, _BUILD_ROWS):
            part = np.packbits(matrix[start : start + _BUILD_ROWS] > 0, axis=1)
            codes[:, start : start + len(part)] = _words(part, self.words).T
        self.codes = codes

    @property
    def rows(self) -> int:
        return int(self.codes.shape[1])

    def extended(self, rows: np.ndarray) -> SignCodes:
        """A new ``SignCodes``: these rows' codes, then those of ``rows`` (a matrix that grew by them)."""
        more = SignCodes(rows)
        out = SignCodes.__new__(SignCodes)
        out.words, out.codes = self.words, np.concatenate([self.codes, more.codes], axis=1)
        return out

    @property
    def nbytes(self) -> int:
        return int(self.codes.nbytes)

    def distances(self, q: np.ndarray) -> np.ndarray:
        """For every row, the dimensions whose sign differs from ``q``'s, those where ``q`` is larger
        than its median magnitude counted twice (uint16)."""
        signs = _words(np.packbits(q > 0), self.words)
        magnitude = np.abs(q)
        large = _words(np.packbits(magnitude > np.median(magnitude)), self.words)
        dist = np.zeros(self.rows, dtype=np.uint16)
        differ = np.empty(self.rows, dtype=np.uint64)
        for j in range(self.words):
            np.bitwise_xor(self.codes[j], signs[j], out=differ)
            dist += np.bitwise_count(differ)
            np.bitwise_and(differ, large[j], out=differ)
            dist += np.bitwise_count(differ)
        return dist

    def candidates(self, q: np.ndarray, count: int, mask: np.ndarray | None = None) -> np.ndarray:
        """Indexes (ascending) of about ``count`` rows differing least from ``q`` among those ``mask``
        allows (every one when it allows no more than ``count``)."""
        if mask is not None:
            if int(np.count_nonzero(mask)) <= count:
                return np.flatnonzero(mask)
        elif count >= self.rows:
            return np.arange(self.rows)
        dist = self.distances(q)
        if mask is not None:  # past every allowed row's distance (at most 2 x 64 x words)
            dist |= (~mask).view(np.uint8).astype(np.uint16) << 15
        # the smallest distance whose rows, with all closer ones, reach ``count``: a histogram, not a sort
        cutoff = int(np.searchsorted(np.cumsum(np.bincount(dist)), count))
        rows = np.flatnonzero(dist <= cutoff)
        if len(rows) > 2 * count:  # many ties at the cutoff: keep the closest ``count``
            rows = np.sort(rows[np.argpartition(dist[rows], count - 1)[:count]])
        return rows
