"""Replies first: the latency a user sees per turn while the flush and the compaction come and go.

One session, a model of fixed latency per call (``--latency``, 0.2 s and 1 s by default), a user who reads
the reply and answers after ``--think`` seconds; ``--turns`` turns in a small window, so both thresholds
are crossed many times. Two windows (``--window``): the testing kit's 3,000 tokens, where the flush's own
messages take the context past the compaction threshold (the flush and its compaction come after one
reply), and 32,000 tokens with the defaults as they scale to it (reserve a quarter, soft threshold an
eighth, a quarter kept) and messages ten times longer (about 1,100 tokens a turn): the flush and the
compaction of a cycle come after different replies, as in a model's usual window. Each turn's latency
is the wall time from ``run_turn`` to its return (the first turn, which loads the tokenizer and the
hooks, is not counted). A turn is *plain* when no memory work ran while the user waited for it (nor
when it arrived); the target compares the p95 of all turns with the p95 of plain turns (issue 18:
within 1.25x).

Two ways side by side, alternating per latency in one run:

- ``replies first`` (the runner as it is): ``run_turn`` returns with the reply, the memory work runs after;
- ``work on the user's time`` (how it was): the caller waits for that work too before it has its answer
  (``run_turn`` then ``wait_idle``), which is what a user saw when the flush and the compaction ran inside
  the turn.

Also counted from the events: flushes, compactions and compactions whose cycle had no flush (must be 0).
``--scale`` multiplies every sleep (model and user) to shorten a run; the ratio is what to read.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import WrappedModel, footer, header, parser, stats, table, verdict

TARGET_RATIO = 1.25


class SlowModel(WrappedModel):
    """Delegates to ``inner`` after sleeping ``latency`` seconds: a provider of fixed latency."""

    def __init__(self, inner: Any, latency: float) -> None:
        super().__init__(inner)
        self.latency = latency

    async def complete(self, request: Any) -> Any:
        await asyncio.sleep(self.latency)
        return await self.inner.complete(request)


class Recorder:
    """The runner's events, and whether memory work is running now."""

    def __init__(self) -> None:
        self.working = False
        self.work_seen = 0  # memory work started since the counter was read
        self.flushed_cycles: set[int] = set()
        self.flushes = 0
        self.compactions = 0
        self.unflushed_compactions = 0

    def __call__(self, event: Any) -> None:
        if event.kind == "memory_work_start":
            self.working = True
            self.work_seen += 1
        elif event.kind == "memory_work_end":
            self.working = False
        elif event.kind in ("flush", "compaction_start"):
            self.work_seen += 1  # inline work (preflight, overflow): also on the user's time
        if event.kind == "flush" and event.error is None:
            self.flushes += 1
            self.flushed_cycles.add(event.compaction_count)
        elif event.kind == "compaction":
            self.compactions += 1
            if event.compaction_count - 1 not in self.flushed_cycles:
                self.unflushed_compactions += 1


def window_config(window: int) -> Any:
    """The testing kit's config for 3,000 tokens; for larger windows the defaults as they scale to it."""
    from sessionmem.testing import small_window_config

    if window <= 3000:
        return small_window_config(window)
    quarter = window // 4
    return small_window_config(
        window, reserve_tokens=quarter, soft_threshold_tokens=window // 8, keep_recent_tokens=quarter
    )


async def conversation(
    root: Path, window: int, latency: float, think: float, turns: int, *, wait_for_work: bool
) -> tuple[list[float], list[float], Recorder]:
    """(all turn latencies, plain turn latencies, the events) of one conversation."""
    from sessionmem import SessionRunner
    from sessionmem.testing import ScriptedModel, flush_aware, flush_write

    longer = max(1, window // 3000)  # messages grow with the window: as many turns per cycle
    model = ScriptedModel(
        responder=flush_aware(
            lambda request: "Noted. " + " ".join(["the plan stays as agreed"] * 12 * longer),
            flush=flush_write("- the user keeps the plan as agreed\n"),
        )
    )
    recorder = Recorder()
    runner = SessionRunner(
        SlowModel(model, latency),
        config=window_config(window),
        workspace=root / "workspace",
        state_dir=root / "state",
        on_event=recorder,
    )
    every: list[float] = []
    plain: list[float] = []
    async with runner:
        session = runner.open("agent:main:bench")
        for i in range(turns):
            recorder.work_seen = 1 if recorder.working else 0  # still running: this turn waits for it
            start = time.perf_counter()
            await session.run_turn(
                f"Turn {i}: " + " ".join(["here is what I think of the plan"] * 6 * longer)
            )
            if wait_for_work:
                await session.wait_idle()
            took = time.perf_counter() - start
            if i == 0:  # warm-up, not counted: the first turn loads the tokenizer and the hooks
                continue
            every.append(took)
            if not recorder.work_seen:
                plain.append(took)
            await asyncio.sleep(think)
        await session.wait_idle()
    return every, plain, recorder


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--turns", type=int, default=200, help="turns per conversation (default 200)")
    p.add_argument("--latency", default="0.2,1.0", help="model seconds per call, comma-separated")
    p.add_argument("--think", type=float, default=1.5, help="the user's seconds before answering")
    p.add_argument("--scale", type=float, default=1.0, help="multiply every sleep (model and user)")
    p.add_argument("--window", default="3000,32000", help="context windows in tokens, comma-separated")
    args = p.parse_args()
    turns, scale = args.turns, args.scale
    if args.smoke:
        turns, scale = 12, 0.02
    elif args.quick:
        turns, scale = 60, 0.25
    latencies = [float(x) for x in args.latency.split(",")]
    windows = [int(x) for x in args.window.split(",")]
    header("Replies first (bench_replies.py)", args)
    from sessionmem.tokens import configure_litellm_environment

    configure_litellm_environment()
    print(
        f"{turns} turns per conversation; the user answers "
        f"{args.think:g} s after each reply; every sleep scaled by {scale:g} (the figures below are scaled "
        "back to the stated latencies).\n"
    )
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-replies-") as tmp_name:
        for window in windows:
            for latency in latencies:
                for n, (label, waits) in enumerate(
                    (("work on the user's time", True), ("replies first", False))
                ):
                    root = Path(tmp_name) / f"{window}-{latency}-{n}"
                    every, plain, rec = asyncio.run(
                        conversation(
                            root, window, latency * scale, args.think * scale, turns, wait_for_work=waits
                        )
                    )
                    a = stats(x / scale * 1000 for x in every)
                    b = stats(x / scale * 1000 for x in plain) if plain else None
                    ratio = a.p95 / b.p95 if b else float("nan")
                    rows.append(
                        [
                            f"{window:,}",
                            f"{latency:g} s",
                            label,
                            f"{a.p50:.0f} / {a.p95:.0f}",
                            f"{b.p50:.0f} / {b.p95:.0f} ({b.n})" if b else "none",
                            f"{ratio:.2f}x",
                            verdict(ratio, TARGET_RATIO) if not waits else "",
                            rec.flushes,
                            rec.compactions,
                            rec.unflushed_compactions,
                        ]
                    )
    headers = [
        "window (tokens)",
        "model latency",
        "memory work",
        "all turns p50 / p95 (ms)",
        "plain turns p50 / p95 (ms, count)",
        "p95 all / plain",
        f"target <= {TARGET_RATIO}x",
        "flushes",
        "compactions",
        "compactions without a flush",
    ]
    print(table(headers, rows))
    footer()


if __name__ == "__main__":
    main()
