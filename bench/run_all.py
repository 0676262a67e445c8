"""Run every benchmark one after another and write their tables to ``bench/results/latest.md``.

    python bench/run_all.py            # the full run (about 10 minutes on a 2-core machine)
    python bench/run_all.py --quick    # small sizes, every script (a few minutes)
    python bench/run_all.py --smoke    # tiny sizes, checks that every script runs (what CI runs)
    python bench/run_all.py --model PATH --only search,cli

Scripts run sequentially, each in its own process, so no benchmark competes with another; before
each one the file system is synced, so the previous script's writeback (bench_search leaves an 870 MB
index behind) does not land in the next one's timings.
The results file is rewritten after every script, so a run stopped part-way keeps every table
finished so far (and says which scripts it has not reached yet).
``bench/results/`` is ignored by git: copy figures from there into documentation by hand, all from one
run of one commit (the file's head names it).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import git_commit, load_average, machine, parser

BENCH = Path(__file__).resolve().parent
# Lightest first: the heavy scripts leave the kernel busy for a while after they exit (bench_search
# an 870 MB index to write back and delete, bench_index a llama.cpp process's memory), and the runner's
# sub-millisecond figures doubled when bench_runner ran right after them.
SCRIPTS = (
    "runner",
    "replies",
    "store",
    "gateway",
    "serve",
    "delta",
    "crash",
    "store_pg",
    "hosts",
    "pg_hosts_search",
    "cli",
    "hostile",
    "forget",
    "index",
    "huge_file",
    "recall",
    "search",
    "keyword_postings",
    "sign_codes",
)


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--model", help="GGUF embedding model for bench_index.py and bench_recall.py")
    p.add_argument("--only", help=f"comma-separated subset of: {', '.join(SCRIPTS)}")
    p.add_argument("--out", default=str(BENCH / "results" / "latest.md"), help="where to write the tables")
    args = p.parse_args()
    names = [n.strip() for n in args.only.split(",")] if args.only else list(SCRIPTS)
    unknown = [n for n in names if n not in SCRIPTS]
    if unknown:
        raise SystemExit(f"unknown benchmark(s): {', '.join(unknown)}; choose from {', '.join(SCRIPTS)}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    parts = [
        "# sessionmem benchmarks\n",
        f"- machine: {machine()}",
        f"- commit: {git_commit()}; started {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}",
        f"- load average at start: {load_average()}",
        f"- mode: {'SMOKE run' if args.smoke else 'QUICK run' if args.quick else 'full run'}\n",
    ]
    failed: list[str] = []
    write_results(out, parts, pending=names)
    for position, name in enumerate(names):
        cmd = [sys.executable, str(BENCH / f"bench_{name}.py")]
        if args.smoke:
            cmd.append("--smoke")
        elif args.quick:
            cmd.append("--quick")
        if name in ("index", "recall") and args.model:
            cmd += ["--model", args.model]
        if name == "replies" and not args.quick:
            cmd += ["--scale", "0.5"]  # 14 minutes instead of 28; the ratios are what to read
        if name == "hosts" and not args.quick:
            cmd += ["--turns", "500", "--kills", "100"]  # modest: bench_hosts.py alone runs 200 kills
        os.sync()  # see the module docstring
        t0 = time.perf_counter()
        print(f"running bench_{name}.py ...", file=sys.stderr, flush=True)
        proc = subprocess.run(cmd, capture_output=True, text=True)
        took = time.perf_counter() - t0
        print(f"  done in {took:.0f} s (exit {proc.returncode})", file=sys.stderr, flush=True)
        parts.append(proc.stdout.rstrip() + "\n")
        parts.append(f"_bench_{name}.py took {took:.0f} s._\n")
        if proc.returncode != 0:
            failed.append(name)
            parts.append(
                f"**bench_{name}.py FAILED (exit {proc.returncode}):**\n\n```\n{proc.stderr[-3000:]}\n```\n"
            )
        write_results(out, parts, pending=names[position + 1 :])
    parts.append(f"Total: {time.perf_counter() - started:.0f} s.\n")
    write_results(out, parts, pending=[])
    print(f"wrote {out}", file=sys.stderr)
    if failed:
        raise SystemExit(f"failed: {', '.join(failed)}")


def write_results(out: Path, parts: list[str], *, pending: list[str]) -> None:
    """The tables so far, written whole to a temporary file and renamed over ``out``, so a reader (or
    a run stopped now) never sees half a table; the scripts not run yet are named at the end."""
    text = "\n".join(parts)
    if pending:
        text += f"\n_Not run yet: {', '.join(f'bench_{name}.py' for name in pending)}._\n"
    partial = out.with_name(out.name + ".partial")
    partial.write_text(text)
    partial.replace(out)


if __name__ == "__main__":
    main()
