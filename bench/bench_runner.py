"""Session runner overhead per turn, excluding the model, at 10, 100 and 1,000 messages of history;
transcript append throughput.

The model is a ``ScriptedModel`` answering at once with a fixed reported usage, wrapped in a model
that records the wall time spent inside ``complete``; overhead = ``run_turn`` wall time minus that.
Fixed usage keeps the projection far below the flush and compaction thresholds, so these are plain
turns (no flush, no compaction). See bench/README.md.
"""

from __future__ import annotations

import asyncio
import cProfile
import io
import os
import pstats
import random
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import WORDS, WrappedModel, footer, header, parser, stats, table, verdict

HISTORIES = (10, 100, 1_000)
TARGET_MS_AT_1000 = 2.0


def cpu_times() -> tuple[float, float]:
    """(user, system) CPU seconds of this process: Python work vs kernel work (file system calls)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime, usage.ru_stime


class TimedModel(WrappedModel):
    """Delegates to ``inner`` and adds the time spent in its ``complete`` to ``model_s``."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.model_s = 0.0
        self.model_cpu = (0.0, 0.0)  # (user, system) seconds

    async def complete(self, request: Any) -> Any:
        start, cpu = time.perf_counter(), cpu_times()
        try:
            return await self.inner.complete(request)
        finally:
            self.model_s += time.perf_counter() - start
            now = cpu_times()
            self.model_cpu = (self.model_cpu[0] + now[0] - cpu[0], self.model_cpu[1] + now[1] - cpu[1])


class FsyncClock:
    """Wraps ``os.fsync`` to add up the time spent in it (behaviour unchanged): sessions.json is
    written atomically with an fsync of the file and of its folder on every usage update."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.calls = 0
        self._real = os.fsync

    def install(self) -> None:
        real = self._real

        def fsync(fd: int) -> None:
            start = time.perf_counter()
            try:
                real(fd)
            finally:
                self.seconds += time.perf_counter() - start
                self.calls += 1

        os.fsync = fsync  # type: ignore[assignment]


FSYNC = FsyncClock()


def make_runner(root: Path) -> tuple[Any, TimedModel]:
    from sessionmem.messages import Message, Usage
    from sessionmem.model.scripted import ScriptedModel
    from sessionmem.session.runner import SessionRunner

    def reply(request: Any) -> Any:
        return Message.assistant("Noted, thanks.", usage=Usage(input=1_000, output=5))

    model = TimedModel(ScriptedModel(responder=reply, name="bench-scripted"))
    ws = root / "workspace"
    (ws / "memory").mkdir(parents=True, exist_ok=True)
    runner = SessionRunner(model, workspace=ws, state_dir=root / "state")
    return runner, model


def user_text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(20)).capitalize() + "?"


async def measure(
    history: int, turns: int, root: Path, profile: cProfile.Profile | None
) -> list[tuple[float, float, int, float, float]]:
    """Grow a session to ``history`` messages, then time ``turns`` turns.

    Returns per turn: overhead ms, of which in fsync ms, fsync calls, user and system CPU ms."""
    runner, model = make_runner(root)
    session = runner.open()
    rng = random.Random(history)
    while len(session.context) < history:
        await session.run_turn(user_text(rng))
    await session.run_turn(user_text(rng))  # one unmeasured turn at this size
    out = []
    for _ in range(turns):
        text = user_text(rng)
        model.model_s, model.model_cpu = 0.0, (0.0, 0.0)
        fsync_s, fsync_calls = FSYNC.seconds, FSYNC.calls
        start, cpu = time.perf_counter(), cpu_times()
        await session.run_turn(text)
        wall, end = time.perf_counter() - start, cpu_times()
        out.append(
            (
                (wall - model.model_s) * 1000,
                (FSYNC.seconds - fsync_s) * 1000,
                FSYNC.calls - fsync_calls,
                (end[0] - cpu[0] - model.model_cpu[0]) * 1000,
                (end[1] - cpu[1] - model.model_cpu[1]) * 1000,
            )
        )
    if profile is not None:  # as many turns again under the profiler, not timed (it slows them)
        for _ in range(turns):
            text = user_text(rng)
            profile.enable()
            await session.run_turn(text)
            profile.disable()
    return out


def append_throughput(root: Path, count: int, size: int) -> tuple[float, float, float]:
    """(appends/s, MB/s, bytes per line) appending ``count`` messages of ``size`` characters."""
    from sessionmem.messages import Message
    from sessionmem.session.stores.transcript_folder import Transcript

    path = root / f"append-{size}.jsonl"
    transcript = Transcript.open(path, "bench", root)
    for _ in range(100):  # warm up
        transcript.append_message(Message.user("warm up"))
    rng = random.Random(size)
    texts = []
    for _ in range(count):
        words: list[str] = []
        while sum(len(w) + 1 for w in words) < size:
            words.append(rng.choice(WORDS))
        texts.append(" ".join(words)[:size])
    before = path.stat().st_size
    start = time.perf_counter()
    for i, text in enumerate(texts):
        transcript.append_message(Message.user(text) if i % 2 == 0 else Message.assistant(text))
    elapsed = time.perf_counter() - start
    written = path.stat().st_size - before
    return count / elapsed, written / elapsed / 2**20, written / count


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--turns", type=int, default=30, help="measured turns per session (default 30)")
    p.add_argument("--sessions", type=int, default=3, help="fresh sessions per history size (default 3)")
    args = p.parse_args()
    turns, sessions = (5, 1) if args.quick else (args.turns, args.sessions)
    append_count = 50 if args.smoke else 500 if args.quick else 5_000
    header("Session runner overhead (bench_runner.py)", args)
    from sessionmem.tokens import configure_litellm_environment

    configure_litellm_environment()
    FSYNC.install()
    results: dict[int, list[tuple[float, float, int, float, float]]] = {}
    profile = cProfile.Profile()
    with tempfile.TemporaryDirectory(prefix="bench-runner-") as tmp_name:
        tmp = Path(tmp_name)
        histories = HISTORIES[:2] if args.smoke else HISTORIES  # smoke: no 1,000-message history
        for history in histories:
            samples: list[tuple[float, float, int, float, float]] = []
            for s in range(sessions):
                prof = profile if history == histories[-1] else None
                samples += asyncio.run(measure(history, turns, tmp / f"h{history}-s{s}", prof))
            results[history] = samples
        appends = [(size, *append_throughput(tmp, append_count, size)) for size in (200, 4_000)]

    print(
        f"Each history size: {sessions} fresh session(s) grown through the runner to the size, one "
        "unmeasured "
        f"turn, then {turns} measured turns (so history runs from N to N+{2 * turns + 2} messages). "
        "Overhead = run_turn wall time - time inside model.complete: preflight projection, flush check, "
        "transcript appends, request building, sessions.json update, events. User / system CPU = the "
        "process's CPU time in Python and in the kernel (file system calls) during the turn, minus the "
        "model's; getrusage counts in clock ticks (often 1-4 ms), so they are given as means over all turns."
        "\n"
    )
    rows = []
    for history, samples in results.items():
        whole = stats(x[0] for x in samples)
        fsync = stats(x[1] for x in samples)
        user = sum(x[3] for x in samples) / len(samples)
        system = sum(x[4] for x in samples) / len(samples)
        calls = max(x[2] for x in samples)
        target = (
            f"<= {TARGET_MS_AT_1000} ms: p50 {verdict(whole.p50, TARGET_MS_AT_1000)}, "
            f"p95 {verdict(whole.p95, TARGET_MS_AT_1000)}"
            if history == 1_000
            else ""
        )
        rows.append(
            [
                f"{history:,}",
                f"{whole.p50:.3f} / {whole.p95:.3f}",
                f"{fsync.p50:.3f} / {fsync.p95:.3f} ({calls} per turn)",
                f"{user:.3f}",
                f"{system:.3f}",
                whole.n,
                target,
            ]
        )
    headers = [
        "history (messages)",
        "overhead p50 / p95 (ms)",
        "of which in fsync p50 / p95 (ms)",
        "user CPU, mean (ms)",
        "system CPU, mean (ms)",
        "turns",
        "target (whole overhead)",
    ]
    print(table(headers, rows))
    print(
        "\nWhere the time goes at 1,000 messages (cProfile over as many turns again after the timed ones, "
        "top 12 by own time; "
        "`scripted.py` lines are the model's own prompt count, inside `complete`, so not overhead):\n"
    )
    buf = io.StringIO()
    pstats.Stats(profile, stream=buf).strip_dirs().sort_stats("tottime").print_stats(12)
    lines = [ln for ln in buf.getvalue().splitlines() if ln.strip()]
    start = next((i for i, ln in enumerate(lines) if ln.lstrip().startswith("ncalls")), 0)
    print("```")
    print("\n".join(lines[start : start + 13]))
    print("```")
    print("\nTranscript appends (`Transcript.append_message`, one locked `os.write` per line, no fsync):\n")
    print(
        table(
            ["message text", "bytes per line", "appends/s", "MB/s"],
            [
                [f"{size:,} chars", f"{per:,.0f}", f"{rate:,.0f}", f"{mbs:.1f}"]
                for size, rate, mbs, per in appends
            ],
        )
    )
    footer()


if __name__ == "__main__":
    main()
