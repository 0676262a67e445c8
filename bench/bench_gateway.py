"""A gateway of 1,000 active sessions in one runner: RSS per round and per-turn overhead.

One ``SessionRunner`` serves ``--sessions`` session keys (one per chat, as a gateway does), each
turn going to the next key in turn, so every key is active and the runner keeps at most
``session.maxIdleSessions`` of them in memory (the rest are reopened from the store and the
transcript when their turn comes). A round is one turn on every key. After each round the process's
resident set is read; a gateway whose memory is bounded shows a flat line after the first rounds,
while one that kept every session ever opened grows with each round's history.

The model is a ``ScriptedModel`` answering at once with a fixed reported usage (no flush, no
compaction), its record of the requests it answered emptied after each turn (a real model keeps
none); overhead = ``run_turn`` wall time minus the time inside the model. See bench/README.md.
"""

from __future__ import annotations

import asyncio
import gc
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_runner import TimedModel, user_text
from common import current_rss_mb, footer, header, parser, stats, table, verdict

TARGET_GROWTH = 0.10  # RSS after the last round within 10% of RSS after round 2


def make_runner(root: Path, max_idle: int, store: str | None) -> tuple[Any, TimedModel]:
    from sessionmem.config import Config
    from sessionmem.messages import Message, Usage
    from sessionmem.model.scripted import ScriptedModel
    from sessionmem.session.runner import SessionRunner

    def reply(request: Any) -> Any:
        return Message.assistant("Noted, thanks.", usage=Usage(input=1_000, output=5))

    model = TimedModel(ScriptedModel(responder=reply, name="bench-scripted"))
    ws = root / "workspace"
    (ws / "memory").mkdir(parents=True, exist_ok=True)
    config = Config.model_validate({"session": {"maxIdleSessions": max_idle, "store": store}})
    runner = SessionRunner(model, workspace=ws, state_dir=root / "state", config=config)
    return runner, model


async def serve(
    root: Path, sessions: int, rounds: int, max_idle: int, store: str | None
) -> tuple[list[float], list[float]]:
    """Run ``rounds`` rounds of one turn per session key; returns (RSS MB after each round, overhead
    ms of every turn from round 2 on: round 1 creates the sessions)."""
    runner, model = make_runner(root, max_idle, store)
    rng = random.Random(sessions)
    rss: list[float] = []
    overhead: list[float] = []
    async with runner:
        for round_no in range(rounds):
            for i in range(sessions):
                session = runner.open(f"agent:main:telegram:direct:{i}")
                text = user_text(rng)
                model.model_s = 0.0
                start = time.perf_counter()
                await session.run_turn(text)
                if round_no:
                    overhead.append((time.perf_counter() - start - model.model_s) * 1000)
                # ScriptedModel keeps every request it answered (for tests); a real model keeps none, and
                # 8,000 requests with their contexts would be the bench's own growth, not the runner's
                model.inner.calls.clear()
            gc.collect()
            rss.append(current_rss_mb())
    return rss, overhead


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--sessions", type=int, default=1_000, help="active session keys (default 1,000)")
    p.add_argument("--rounds", type=int, default=8, help="turns per session key (default 8)")
    p.add_argument("--max-idle", type=int, default=256, help="session.maxIdleSessions (default 256)")
    p.add_argument(
        "--store", default=None, help="session.store (default: sessions.json; e.g. sqlite, or a DSN)"
    )
    args = p.parse_args()
    sessions, rounds = (20, 2) if args.smoke else (100, 3) if args.quick else (args.sessions, args.rounds)
    header("Gateway: many active sessions in one runner (bench_gateway.py)", args)
    from sessionmem.tokens import configure_litellm_environment

    configure_litellm_environment()
    with tempfile.TemporaryDirectory(prefix="bench-gateway-") as tmp:
        rss, overhead = asyncio.run(serve(Path(tmp), sessions, rounds, args.max_idle, args.store))
    print(
        f"One runner, {sessions:,} session keys, {rounds} rounds of one turn per key (round-robin), "
        f"session.maxIdleSessions = {args.max_idle}, session.store = {args.store or 'sessions.json'}; "
        "history grows by 2 messages per key per round.\n"
    )
    print(
        table(
            ["after round", *[str(r + 1) for r in range(rounds)]],
            [["RSS (MB)", *[f"{mb:.1f}" for mb in rss]]],
        )
    )
    growth = (rss[-1] - rss[1]) / rss[1] if len(rss) > 1 else 0.0
    over = stats(overhead)
    print()
    print(
        table(
            ["figure", "value", "target"],
            [
                [
                    "RSS growth, round 2 -> last",
                    f"{growth:+.1%} ({rss[1]:.1f} -> {rss[-1]:.1f} MB)" if len(rss) > 1 else "n/a",
                    f"<= {TARGET_GROWTH:.0%}: {verdict(growth, TARGET_GROWTH)}",
                ],
                [
                    "runner overhead per turn p50 / p95 (ms)",
                    f"{over.p50:.2f} / {over.p95:.2f} ({over.n:,} turns)",
                    "",
                ],
            ],
        )
    )
    footer()


if __name__ == "__main__":
    main()
