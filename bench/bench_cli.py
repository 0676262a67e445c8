"""A cold ``sessionmem memory search`` (a new process each time) on an indexed 300-note workspace.

FTS-only (default config, no provider keys in the environment). Wall time and peak RSS of each run,
measured side by side with ``python -c pass`` (the interpreter's own start-up), ``python -c "import
sessionmem"`` and ``python -c "import sessionmem.cli"`` (start-up plus the command's import) and, when
``qmd`` is on the PATH, ``qmd search`` over the same notes (its own index, in a private XDG folder),
interleaved so that noise from other processes falls on all alike. See bench/README.md.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import footer, header, parser, stats, table, verdict, write_notes

WALL_TARGET_S = 0.3
RSS_TARGET_MB = 150.0
QUERY = "billing cutover"
SEARCH = f"sessionmem memory search '{QUERY}'"
PEER = f"qmd search '{QUERY}'"
_PROVIDER_KEYS = (
    "OPENAI_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "VOYAGE_API_KEY",
    "MISTRAL_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_API_BASE",
)
TIME_BIN = "/usr/bin/time"
IMPORT_TARGET_MS = 50.0  # `import sessionmem` over `python -c pass`


def sessionmem_command() -> list[str]:
    """The installed console script beside this Python, else ``python -m sessionmem.cli``."""
    script = Path(sys.executable).with_name("sessionmem")
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-m", "sessionmem.cli"]


def run_measured(cmd: list[str], env: dict[str, str], tmp: Path) -> tuple[float, float, str]:
    """(wall seconds, peak RSS MB, stdout) of one run of ``cmd``."""
    use_time = os.access(TIME_BIN, os.X_OK)
    out_file = tmp / "time.txt"
    full = [TIME_BIN, "-v", "-o", str(out_file), *cmd] if use_time else cmd
    start = time.perf_counter()
    proc = subprocess.run(full, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    if use_time:
        rss_kb = next(
            int(line.split(":")[1])
            for line in out_file.read_text().splitlines()
            if "Maximum resident set size" in line
        )
        return wall, rss_kb / 1024, proc.stdout
    # Fallback: the running maximum over all children so far (an upper bound for this run).
    import resource

    return wall, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, proc.stdout


HEAVY = (
    "numpy",
    "pydantic",
    "filelock",
    "asyncio",
    "click",
    "sqlean",
    "sqlite_vec",
    "orjson",
    "tiktoken",
    "sessionmem.config",
    "sessionmem.memory.sync.sync_pass",
    "sessionmem.memory.sync.session_delta",
    "sessionmem.memory.sync.session_text",
    "sessionmem.memory.embed.remote",
)


def import_breakdown(cmd: list[str], env: dict[str, str]) -> tuple[list[tuple[str, float]], dict[str, float]]:
    """One run under ``-X importtime``: (top-level imports, heavy packages), cumulative ms each."""
    proc = subprocess.run(
        cmd, env={**env, "PYTHONPROFILEIMPORTTIME": "1"}, capture_output=True, text=True, check=True
    )
    top: list[tuple[str, float]] = []
    heavy: dict[str, float] = {}
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = line.split("|", 2)
        try:
            ms = int(cumulative) / 1000
        except ValueError:
            continue  # the header line
        stripped = name.strip()
        if name.startswith(" ") and not name.startswith("  "):
            top.append((stripped, ms))
        if stripped in HEAVY:
            heavy[stripped] = max(heavy.get(stripped, 0.0), ms)
    top.sort(key=lambda item: -item[1])
    return top, heavy


def qmd_command(ws: Path, tmp: Path, env: dict[str, str]) -> tuple[list[str], dict[str, str]] | None:
    """``qmd search`` over ``ws`` with its index in a private XDG folder (None when qmd is absent).

    The collection is added (and so indexed) once here, like ``sessionmem memory index`` above; the
    timed command is then a cold BM25 search, as ours is keyword-only.
    """
    qmd = shutil.which("qmd")
    if qmd is None:
        return None
    qenv = {
        **env,
        "XDG_CONFIG_HOME": str(tmp / "qmd-config"),
        "XDG_CACHE_HOME": str(tmp / "qmd-cache"),
        "NO_COLOR": "1",
    }
    add = [qmd, "collection", "add", str(ws), "--name", "memory", "--mask", "**/*.md"]
    proc = subprocess.run(add, env=qenv, capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"(qmd is installed but `qmd collection add` failed, so it is left out: {proc.stderr[-300:]})")
        return None
    return [qmd, "search", QUERY, "-n", "6"], qenv


def qmd_found(found: dict[str, int], runs: int) -> str:
    return f" by sessionmem, {found[PEER]}/{runs} by qmd" if PEER in found else ""


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=20, help="runs of each command (default 20)")
    p.add_argument("--notes", type=int, default=300, help="notes in the workspace (default 300)")
    args = p.parse_args()
    runs = 2 if args.smoke else 5 if args.quick else args.runs
    notes = 20 if args.smoke else args.notes
    header("Cold CLI search (bench_cli.py)", args)
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as tmp_name:
        tmp = Path(tmp_name)
        ws = tmp / "workspace"
        write_notes(ws, notes)
        (ws / "memory" / "2024-01-05.md").write_text(
            "# 2024-01-05\n\n- The billing cutover from LedgerLoop to Stripe is set for March 3.\n"
        )
        env = {k: v for k, v in os.environ.items() if k not in _PROVIDER_KEYS}
        env["SESSIONMEM_STATE_DIR"] = str(tmp / "state")
        env.pop("SESSIONMEM_CONFIG", None)
        # Trigger: a shell with PYTHONDONTWRITEBYTECODE set (some sandboxes and CI images set it). Why: pip
        # compiles an installed package's byte code, and an editable install writes it on first import, so
        # a user's cold search reads .pyc files; without them every run compiles ~35 modules (about 45 ms).
        # Outcome: the children may write byte code, and the warm-up run below writes it.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        cli = [*sessionmem_command(), "--workspace", str(ws)]
        start = time.perf_counter()
        proc = subprocess.run([*cli, "memory", "index"], env=env, capture_output=True, text=True)
        index_s = time.perf_counter() - start
        if proc.returncode != 0:
            raise SystemExit(f"memory index failed: {proc.stderr}")

        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "python -c 'import sessionmem'": [sys.executable, "-c", "import sessionmem"],
            "python -c 'import sessionmem.cli'": [sys.executable, "-c", "import sessionmem.cli"],
            SEARCH: [*cli, "memory", "search", QUERY],
        }
        envs = dict.fromkeys(commands, env)
        qmd = None if args.smoke else qmd_command(ws, tmp, env)  # smoke: our side only
        if qmd is not None:
            commands[PEER], envs[PEER] = qmd
        for name, cmd in commands.items():  # warm the page cache and .pyc files once
            run_measured(cmd, envs[name], tmp)
        walls: dict[str, list[float]] = {name: [] for name in commands}
        rss: dict[str, list[float]] = {name: [] for name in commands}
        found = dict.fromkeys(commands, 0)
        top_imports, heavy = import_breakdown(commands[SEARCH], env)
        for _ in range(runs):
            for name, cmd in commands.items():
                wall, peak, stdout = run_measured(cmd, envs[name], tmp)
                walls[name].append(wall * 1000)
                rss[name].append(peak)
                found[name] += "memory/" in stdout  # a result path (qmd: qmd://memory/...)

    print(
        f"Workspace: {notes} notes + MEMORY.md + one note naming the billing cutover; indexed once with "
        f"`sessionmem memory index` ({index_s:.2f} s, a cold process, FTS-only). Each command below ran "
        f"{runs} times, interleaved; wall time from the parent (includes fork/exec), peak RSS from "
        f"{'/usr/bin/time -v' if os.access(TIME_BIN, os.X_OK) else 'getrusage(RUSAGE_CHILDREN)'}. "
        f"Results were printed in {found[SEARCH]}/{runs} "
        f"runs{qmd_found(found, runs)}.\n"
    )
    base = stats(walls["python -c pass"]).p50
    rows = []
    for name in commands:
        w, r = stats(walls[name]), stats(rss[name])
        rows.append(
            [
                f"`{name}`",
                f"{w.p50:.0f}",
                f"{w.p95:.0f}",
                f"{w.p50 - base:+.0f}",
                f"{r.p50:.0f}",
                f"{r.p95:.0f}",
            ]
        )
    print(
        table(
            [
                "command",
                "wall p50 (ms)",
                "wall p95 (ms)",
                "p50 over `python -c pass`",
                "RSS p50 (MB)",
                "RSS p95 (MB)",
            ],
            rows,
        )
    )
    w95, r95 = stats(walls[SEARCH]).p95 / 1000, stats(rss[SEARCH]).p95
    imported = stats(walls["python -c 'import sessionmem'"]).p50 - base
    print(
        f"\nTargets: wall p95 {w95:.3f} s ({verdict(w95, WALL_TARGET_S)} <= {WALL_TARGET_S} s); "
        f"peak RSS p95 {r95:.0f} MB ({verdict(r95, RSS_TARGET_MB)} <= {RSS_TARGET_MB:.0f} MB); "
        f"`import sessionmem` {imported:.0f} ms over `python -c pass` "
        f"({verdict(imported, IMPORT_TARGET_MS)} <= {IMPORT_TARGET_MS:.0f} ms)."
    )
    if PEER in walls:
        ours, theirs = stats(walls[SEARCH]).p50, stats(walls[PEER]).p50
        print(
            f"Against qmd in this run: sessionmem {ours:.0f} ms, qmd {theirs:.0f} ms (p50); "
            f"{verdict(ours, theirs)} no slower than qmd."
        )
    print(
        "\nWhere a cold search's time goes: one more run under `python -X importtime` (which slows imports "
        "a little); cumulative import time of the top-level imports, then of heavy packages wherever they "
        "were imported from:\n"
    )
    print(
        table(["top-level import", "cumulative ms"], [[f"`{n}`", f"{ms:.0f}"] for n, ms in top_imports[:8]])
    )
    print()
    print(
        table(
            ["package or module", "cumulative ms"],
            [[f"`{n}`", f"{ms:.0f}"] for n, ms in sorted(heavy.items(), key=lambda kv: -kv[1])],
        )
    )
    if PEER not in walls:
        print(
            "\n(qmd is not installed here: `npm install -g @tobilu/qmd`; DESIGN.md quotes qmd 0.16-0.26 s / "
            "71-95 MB, OpenClaw 5-7 s / ~600 MB.)"
        )
    footer()


if __name__ == "__main__":
    main()
