"""How many threads the local model uses for each call when ``memorySearch.local.nThreads`` is unset.

llama.cpp splits every operation of a batch across its threads and waits for all of them at a spinning
barrier after each one. When another process holds a core, the thread that shares it is descheduled
for a time slice while the others spin at the barrier, and that happens hundreds of times a batch: on
a 2-core host with one core busy, MiniLM embedded 1.5-1.9 chunks/s with both cores against 7.4-7.9
with one thread. On an idle host both cores are faster (bench/README.md). No fixed count is right on
a host whose load comes and goes, so the count is measured instead:

- the candidates are every usable core, one fewer, half, and one (:func:`candidate_counts`);
- each is tried once, one thread first (safe when cores are shared), then the fastest so far is used;
  its rate (model tokens per second of the llama.cpp call) is kept as a moving average, so when load
  arrives and it slows below what another count did, that count takes over at once;
- another count is re-tried (a probe) only while probes stay within a share of the embedding time:
  a twentieth, halved each time a probe loses, down to a hundredth; a probe that wins resets it;
- calls under :data:`MIN_MEASURED_TOKENS` (a search's query) use the current count and teach
  nothing: their time is mostly fixed per-call cost.

Vectors do not depend on the thread count (each dot product is computed whole by one thread; a test
compares them bit for bit), so switching between calls changes only the speed. A set ``nThreads``
skips all of this: on a dedicated host, the number of cores.
"""

from __future__ import annotations

import os
from collections import Counter

MIN_MEASURED_TOKENS = 256  # about one window of a chunk; a query is far below
FIRST_PROBE_SHARE = 0.05
LAST_PROBE_SHARE = 0.01
SWITCH_MARGIN = 1.1  # another count must be this much faster to take over (no flapping on noise)
_SMOOTHING = 0.5  # weight of the newest rate in a count's moving average


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the platform says; else all)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def candidate_counts(cores: int) -> tuple[int, ...]:
    """Every core, one fewer, half and one, largest first, without repeats: (2, 1) on 2 cores."""
    return tuple(sorted({max(1, cores), max(1, cores - 1), max(1, cores // 2), 1}, reverse=True))


class ThreadChooser:
    """Picks the thread count of each llama.cpp call from the rates of the calls before it.

    Not thread-safe: the embedder calls it under its own lock. ``calls`` counts the calls made at
    each count (the benchmark prints it).
    """

    def __init__(self, candidates: tuple[int, ...]):
        if not candidates or min(candidates) < 1:
            raise ValueError(f"thread counts must be 1 or more, got {candidates!r}")
        self.candidates = tuple(sorted(set(candidates)))  # one thread first
        self.calls: Counter[int] = Counter()
        self._rates: dict[int, float] = {}
        self._last_used: dict[int, int] = {}  # count -> number of the measured call that last used it
        self._measured = 0
        self._current = self.candidates[0]
        self._probing: int | None = None
        self._share = FIRST_PROBE_SHARE
        self._seconds = 0.0  # time of all measured calls
        self._next_probe_at = 0.0

    @property
    def current(self) -> int:
        """The count in use between probes."""
        return self._current

    def next_count(self, tokens: int) -> int:
        """The thread count for a call of ``tokens`` model tokens."""
        self._probing = None
        if tokens >= MIN_MEASURED_TOKENS:
            untried = [c for c in self.candidates if c not in self._rates]
            if untried:
                self._probing = untried[0]
            elif self._seconds >= self._next_probe_at and len(self.candidates) > 1:
                others = [c for c in self.candidates if c != self._current]
                self._probing = min(others, key=lambda c: self._last_used.get(c, -1))
        count = self._probing if self._probing is not None else self._current
        self.calls[count] += 1
        return count

    def record(self, count: int, tokens: int, seconds: float) -> None:
        """What the call :meth:`next_count` chose took; short calls and failed timings are ignored."""
        if tokens < MIN_MEASURED_TOKENS or seconds <= 0 or count not in self.candidates:
            return
        rate = tokens / seconds
        fresh = self._last_used.get(count) == self._measured  # this count also ran the call before
        old = self._rates.get(count)
        self._rates[count] = rate if old is None or not fresh else _SMOOTHING * rate + (1 - _SMOOTHING) * old
        self._measured += 1
        self._last_used[count] = self._measured
        self._seconds += seconds
        best = max(self._rates, key=lambda c: self._rates[c])
        current_rate = self._rates.get(self._current, 0.0)
        if best != self._current and self._rates[best] > current_rate * SWITCH_MARGIN:
            self._current = best
            if count == best and self._probing == count:
                self._share = FIRST_PROBE_SHARE  # the host changed: look around more often again
        elif self._probing == count and count != self._current and len(self._rates) == len(self.candidates):
            self._share = max(LAST_PROBE_SHARE, self._share / 2)
        if self._probing == count and len(self._rates) == len(self.candidates):
            self._next_probe_at = self._seconds + seconds / self._share
        self._probing = None
