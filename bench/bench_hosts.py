"""Two gateway hosts on one PostgreSQL database, the same session: interleaved turns, and SIGKILLs.

Two processes (forked; each with its own ``PostgresSessionStore`` and connections, as two machines would
have) run the crash loop's scripted conversation (tests/support/crash_loop.py: a 3,000-token window, so a
silent flush and a compaction every six or seven turns) on one session key, in a scratch schema of the
server (``SESSIONMEM_TEST_PG_DSN``, default ``postgresql://postgres@127.0.0.1:5432/test``).

- Interleaved (default): both start together and run ``--turns`` turns each (500) as fast as they can.
  The audit reads the transcript rows with plain SQL: lost turns, cycles compacted without a flush,
  duplicate flushes (a cycle flushed twice), turns written twice, order violations (a host's turn after
  one of its later ones), parentId chain breaks, how often the hosts alternated, and turns per second.
- ``--kills N``: the hosts run on while the parent SIGKILLs one of them, at random, N times (a third
  after a random delay, a third just after a compaction row appears, a third inside a flush), checks the
  store against the transcript under the turn lock, and starts the killed host again; the other host
  goes on meanwhile. Then the same audit, plus acknowledged turns lost.

    python bench/bench_hosts.py                 # 500 turns each, then 200 kills
    python bench/bench_hosts.py --turns 500 --kills 0
    python bench/bench_hosts.py --quick         # 50 turns each, 20 kills

Targets: 0 for every figure in the "target 0" rows.
"""

from __future__ import annotations

import logging
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.support
from common import footer, header, parser, table

from tests.support.crash_loop import CrashLoopReport, run_crash_loop, run_hosts


def rows(report: CrashLoopReport, *, killed: bool) -> list[list[object]]:
    out: list[list[object]] = [
        ["seconds", f"{report.seconds:.1f}", ""],
        ["turns acknowledged", report.turns_acknowledged, ""],
        ["turns per second (both hosts)", f"{report.turns_acknowledged / report.seconds:.1f}", ""],
        ["compactions", report.compactions, ""],
        ["flushes completed", report.flushes_completed, ""],
        ["host switches (consecutive turns from different hosts)", report.switches, ""],
        ["parentId chain breaks", report.chain_breaks, "0"],
    ]
    if killed:
        out[:0] = [["SIGKILLs", report.kills, ""]]
        out.append(["flushes interrupted by a kill (run again)", report.flushes_interrupted, ""])
        out.append(["kills that left the store behind the transcript", report.store_behind_at_kill, ""])
    renamed = {
        "acknowledged turns lost": "lost turns (acknowledged, not in the transcript)",
        "cycles compacted without a flush": "unflushed compactions (cycles compacted without a flush)",
        "cycles flushed twice": "duplicate flushes (cycles flushed twice)",
        "transcript order violations": "order violations",
    }
    for name, value in report.problems().items():
        out.append([renamed.get(name, name), value, "0"])
    return out


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument(
        "--turns", type=int, default=500, help="turns per host, interleaved (default 500; 0: skip)"
    )
    p.add_argument("--kills", type=int, default=200, help="SIGKILLs of a host (default 200; 0: skip)")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    turns, kills = (8, 2) if args.smoke else (50, 20) if args.quick else (args.turns, args.kills)
    logging.basicConfig(level=logging.ERROR)  # each reconciliation after a kill logs a warning
    header("Two hosts on one PostgreSQL database, one session (bench_hosts.py)", args)
    from tests.support.postgres import scratch_schema, server_dsn, unavailable

    problem = unavailable()
    if problem is not None:
        print(f"SKIPPED: {problem}")
        footer()
        return
    print(f"Server: {server_dsn().split('@')[-1]}; each part in a fresh schema.\n")
    failed = False
    if turns:
        print(f"running {turns} interleaved turns per host ...", file=sys.stderr, flush=True)
        with scratch_schema("sessionmem_bench") as dsn, tempfile.TemporaryDirectory() as root:
            report = run_hosts(Path(root), turns=turns, store=dsn, timeout_s=max(600.0, turns * 2.0))
        print(f"### Interleaved: {turns} turns per host\n")
        print(table(["figure", "two hosts", "target"], rows(report, killed=False)))
        for error in report.runner_errors[:2]:
            print(f"\n- host error: {error}")
        failed |= any(report.problems().values()) or report.chain_breaks > 0
    if kills:
        print(f"running {kills} SIGKILLs ...", file=sys.stderr, flush=True)
        with scratch_schema("sessionmem_bench") as dsn, tempfile.TemporaryDirectory() as root:
            report = run_crash_loop(
                Path(root), kills=kills, runners=2, seed=args.seed, store=dsn, kill_one=True
            )
        print(f"\n### SIGKILL of a host mid-turn, {kills} times; the other host goes on\n")
        print(table(["figure", "two hosts", "target"], rows(report, killed=True)))
        for detail in report.mismatch_details[:5] + report.runner_errors[:2]:
            print(f"\n- {detail}")
        failed |= any(report.problems().values()) or report.chain_breaks > 0
    print(f"\nverdict: {'FAILED: a target was missed' if failed else 'every target met'}")
    footer()
    if failed:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
