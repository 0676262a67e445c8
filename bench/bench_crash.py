"""The crash loop: a conversation whose runners are killed with SIGKILL again and again (DESIGN 16).

A scripted conversation with a small window (a flush and a compaction every six or seven turns) runs
in child processes on one session key, one runner or two at once. The parent kills them, in turn:
after a random delay; as soon as a compaction entry appears in the transcript (the runner is then
between the transcript and sessions.json); within a millisecond of a flush prompt appearing (the runner
is inside the flush); as soon as a runner marks that the memory work after a reply starts (the reply
was acknowledged, its flush or compaction not yet written). After each kill it checks the store
against the transcript as the kill left it and after a new runner reopened the session, restarts the
runner, and at the end audits the transcript. The loop and the audit are
``tests/support/crash_loop.py``; the test suite runs the same loop with 20 kills on each store.

    python bench/bench_crash.py               # 200 kills with one runner, 200 with two (sessions.json)
    python bench/bench_crash.py --store all   # the same on sessions.json, SQLite and PostgreSQL
    python bench/bench_crash.py --kills 500
    python bench/bench_crash.py --quick       # 20 and 20

Targets: 0 for every figure below "count mismatches after reopen".
"""

from __future__ import annotations

import contextlib
import logging
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.support.crash_loop
from common import footer, header, parser, table

from tests.support.crash_loop import CrashLoopReport, run_crash_loop


def rows(reports: list[CrashLoopReport]) -> list[list[object]]:
    def line(name: str, values: list[object], target: str = "") -> list[object]:
        return [name, *values, target]

    out = [
        line("SIGKILLs (moments)", [f"{r.kills} ({r.checks})" for r in reports]),
        line("seconds", [f"{r.seconds:.0f}" for r in reports]),
        line("turns acknowledged", [r.turns_acknowledged for r in reports]),
        line("compactions", [r.compactions for r in reports]),
        line("flushes completed", [r.flushes_completed for r in reports]),
        line("flushes interrupted by a kill (run again)", [r.flushes_interrupted for r in reports]),
        line(
            "turns answered while the memory work before them ran",
            [r.turns_answered_early for r in reports],
        ),
        line("kills that left the store behind the transcript", [r.store_behind_at_kill for r in reports]),
        line(
            "kills after a reply, before its memory work wrote a line",
            [r.killed_before_work_wrote for r in reports],
        ),
    ]
    for name in reports[0].problems():
        out.append(line(name, [r.problems()[name] for r in reports], "0"))
    return out


STORES = {"json": "sessions.json", "sqlite": "SQLite", "postgres": "PostgreSQL (two runners: two hosts)"}


@contextlib.contextmanager
def store_spec(store: str, root: str) -> Iterator[str | None]:
    """``session.store`` for ``store``: None (sessions.json), a SQLite file, or a scratch schema's DSN."""
    if store == "json":
        yield None
    elif store == "sqlite":
        yield str(Path(root) / "sessions.sqlite")
    else:
        from tests.support.postgres import scratch_schema

        with scratch_schema("sessionmem_bench") as dsn:
            yield dsn


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--kills", type=int, default=200, help="SIGKILL moments per configuration (default 200)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--store",
        default="json",
        choices=(*STORES, "all"),
        help="the session store: sessions.json (json, the default), sqlite, postgres (a scratch schema on "
        "the local server), or all three",
    )
    args = p.parse_args()
    kills = 3 if args.smoke else 20 if args.quick else args.kills
    logging.basicConfig(level=logging.ERROR)  # each reconciliation logs a warning: hundreds here
    header("Crash loop: SIGKILL during turns with flushes and compactions", args)
    failed = False
    for store in STORES if args.store == "all" else (args.store,):
        reports = []
        for runners in (1, 2):
            with (
                tempfile.TemporaryDirectory(prefix="sessionmem-crash-") as root,
                store_spec(store, root) as spec,
            ):
                print(
                    f"{store}: {kills} kill moments with {runners} runner(s) ...", file=sys.stderr, flush=True
                )
                reports.append(
                    run_crash_loop(Path(root), kills=kills, runners=runners, seed=args.seed, store=spec)
                )
        print(f"### Session store: {STORES[store]}\n")
        print(table(["figure", "1 runner", "2 runners on one key", "target"], rows(reports)))
        print()
        for report in reports:
            for detail in report.mismatch_details[:5] + report.runner_errors[:2]:
                print(f"- {report.runners} runner(s): {detail}")
        failed = failed or any(value for report in reports for value in report.problems().values())
    print(f"verdict: {'FAILED: a target was missed' if failed else 'every target met'}")
    footer()
    if failed:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
