"""Recall on LoCoMo's development split: how often ``MemoryIndex.search`` returns the evidence lines.

The data and the harness live outside the repository (``../shared/recall/``: LoCoMo, CC BY-NC 4.0,
evaluation only; nothing of it is copied here). The harness (``eval_recall.py``) asks each question
of an index built over one conversation and scores the hits: R@k (a top-k hit covers an evidence
line), MRR, and the lines per hit (bigger chunks cover more lines, so recall is read beside it).

This script plugs the public API in: one ``MemoryIndex`` per conversation, product defaults (only
``provider`` and the model path set, and ``sources: ["sessions"]`` for the transcript layout), each
question a ``SearchRequest`` for the top 10. Configurations: keyword-only (no embedding provider) and
the local MiniLM GGUF, each on the daily-log layout (``memory/YYYY-MM-DD.md``) and the transcript
layout (``sessions/*.jsonl``). Then the no-answer check: the 50 questions of
``bench/no_answer_questions.txt`` (about things these conversations never mention) are asked of
every conversation's MiniLM index; the rate is the share that returns nothing above ``minScore``.

    python bench/bench_recall.py                      # all four configurations + no-answer rate
    python bench/bench_recall.py --only keyword       # keyword-only, both layouts
    python bench/bench_recall.py --quick              # 40 questions per conversation
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO_ROOT, find_model, footer, header, parser, table, verdict

from sessionmem.config import MemorySearchConfig
from sessionmem.memory.index import MemoryIndex
from sessionmem.memory.types import SearchRequest

DEFAULT_DATA = REPO_ROOT.parent / "shared" / "recall" / "locomo-dev"
NO_ANSWER_FILE = Path(__file__).resolve().parent / "no_answer_questions.txt"
K = 10
# Issue targets on locomo-dev (R@6, MRR; the transcript layout within 0.02 of the daily logs).
TARGETS = {"keyword": (0.90, 0.77), "minilm": (0.92, 0.80)}
NO_ANSWER_TARGET = 0.80
# The README's figures of the harness's own stdlib BM25 (400/80 chunks) on this split.
BASELINE = {"R@1": None, "R@6": 0.872, "R@10": None, "MRR": 0.753, "lines": 10.5}


def load_harness(data: Path) -> ModuleType:
    path = data.parent / "eval_recall.py"
    spec = importlib.util.spec_from_file_location("eval_recall", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load the recall harness at {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def settings_for(layout: str, model: Path | None, overrides: dict[str, Any]) -> MemorySearchConfig:
    raw: dict[str, Any] = {"provider": "local" if model else "none", "sync": {"watch": False}}
    if model:
        raw["local"] = {"modelPath": str(model)}
    if layout == "sessions":
        raw["sources"] = ["sessions"]
    raw = _merge(raw, overrides)
    return MemorySearchConfig.model_validate(raw)


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        out[key] = (
            _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
        )
    return out


class Backend:
    """The harness's plug-in: ``prepare(workspace)`` builds the conversation's index, ``search`` asks it."""

    def __init__(self, layout: str, settings: MemorySearchConfig, state_root: Path) -> None:
        self.layout = layout
        self.settings = settings
        self.state_root = state_root
        self.index: MemoryIndex | None = None
        self.workspace: str | None = None
        self.index_seconds = 0.0
        self.search_ms: list[float] = []

    def prepare(self, workspace: str) -> None:
        self.close()
        ws = Path(workspace)
        state = self.state_root / f"{ws.name}-{self.layout}"
        started = time.perf_counter()
        self.index = MemoryIndex.open(
            "bench", ws, self.settings, state_dir=state, watch=False, sessions_dir=ws / "sessions"
        )
        self.index.sync()
        self.index_seconds += time.perf_counter() - started
        self.workspace = workspace

    def search(self, workspace: str, query: str, k: int) -> list[dict[str, Any]]:
        if self.workspace != workspace:
            self.prepare(workspace)
        assert self.index is not None
        started = time.perf_counter()
        response = self.index.search(SearchRequest(query, max_results=k))
        self.search_ms.append((time.perf_counter() - started) * 1000)
        return [
            {"path": r.path, "startLine": r.start_line, "endLine": r.end_line, "score": r.score}
            for r in response.results
        ]

    def close(self) -> None:
        if self.index is not None:
            self.index.close()
            self.index = None
            self.workspace = None


def run_config(
    harness: ModuleType,
    data: Path,
    layout: str,
    settings: MemorySearchConfig,
    state_root: Path,
    limit: int | None,
) -> tuple[dict[str, Any], Backend]:
    backend = Backend(layout, settings, state_root)
    try:
        result = harness.evaluate(
            str(data),
            backend.search,
            backend.prepare,
            layout=layout,
            ks=(1, 3, 6, 10),
            limit=limit,
            progress=False,
        )
    finally:
        backend.close()
    return result, backend


def no_answer_rate(data: Path, settings: MemorySearchConfig, state_root: Path) -> tuple[float, int, int]:
    """Share of (conversation, unanswerable question) pairs that return no result at the defaults."""
    questions = [
        q.strip() for q in NO_ANSWER_FILE.read_text().splitlines() if q.strip() and not q.startswith("#")
    ]
    empty = total = 0
    backend = Backend("memory", settings, state_root)
    try:
        for conv in sorted(p for p in data.iterdir() if (p / "qa.jsonl").is_file()):
            backend.prepare(str(conv))
            assert backend.index is not None
            for q in questions:
                total += 1
                empty += not backend.index.search(SearchRequest(q)).results
    finally:
        backend.close()
    return empty / max(total, 1), empty, total


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument(
        "--data",
        default=str(DEFAULT_DATA),
        help="the LoCoMo workspaces (default: ../shared/recall/locomo-dev)",
    )
    p.add_argument(
        "--model", help="GGUF embedding model (default: ../shared/models/all-MiniLM-L6-v2.Q8_0.gguf)"
    )
    p.add_argument("--only", choices=("keyword", "minilm"), help="one embedding configuration")
    p.add_argument("--layout", choices=("memory", "sessions"), help="one layout")
    p.add_argument(
        "--set", default="{}", help="JSON merged over memorySearch (experiments; not the product defaults)"
    )
    p.add_argument("--json", help="also write every figure here")
    p.add_argument("--state-dir", help="keep the indexes here (embedding cache reused between runs)")
    args = p.parse_args()
    data = Path(args.data).resolve()
    if not (data / "manifest.json").is_file():
        raise SystemExit(f"no LoCoMo workspaces at {data} (see ../shared/recall/README.md)")
    harness = load_harness(data)
    model = find_model(args.model)
    overrides = json.loads(args.set)
    header("Recall on LoCoMo (locomo-dev)", args)
    if overrides:
        print(f"- overrides (NOT the product defaults): `{json.dumps(overrides)}`\n")
    configs = [c for c in ("keyword", "minilm") if args.only in (None, c)]
    if "minilm" in configs and model is None:
        print("- MiniLM GGUF not found: the local-model rows are skipped\n")
        configs.remove("minilm")
    layouts = [args.layout] if args.layout else ["memory", "sessions"]
    limit = 40 if args.quick else None
    state_root = Path(args.state_dir) if args.state_dir else Path(tempfile.mkdtemp(prefix="bench-recall-"))
    rows: list[list[object]] = [
        [
            "stdlib BM25 in the harness (400/80 chunks)",
            "memory",
            "-",
            f"{BASELINE['R@6']:.3f}",
            "-",
            f"{BASELINE['MRR']:.3f}",
            f"{BASELINE['lines']:.1f}",
            "",
            "",
        ]
    ]
    figures: dict[str, Any] = {}
    try:
        for config in configs:
            settings = settings_for("memory", model if config == "minilm" else None, overrides)
            by_layout: dict[str, dict[str, Any]] = {}
            for layout in layouts:
                settings = settings_for(layout, model if config == "minilm" else None, overrides)
                res, backend = run_config(harness, data, layout, settings, state_root, limit)
                m = res["by"]["all"]
                by_layout[layout] = m
                target_r6, target_mrr = TARGETS[config]
                ok = verdict(m["R@6"], target_r6, lower_is_better=False) == "meets" and m["MRR"] >= target_mrr
                search_ms = sorted(backend.search_ms)
                figures[f"{config}/{layout}"] = {
                    **m,
                    "lines_per_hit": res["mean_lines_per_hit"],
                    "hits_per_query": res["mean_hits_returned"],
                    "index_s": round(backend.index_seconds, 1),
                    "search_p50_ms": round(search_ms[len(search_ms) // 2], 2) if search_ms else None,
                }
                rows.append(
                    [
                        "keyword-only (no provider)"
                        if config == "keyword"
                        else "hybrid, local MiniLM-L6 GGUF",
                        layout,
                        f"{m['R@1']:.3f}",
                        f"{m['R@6']:.3f}",
                        f"{m['R@10']:.3f}",
                        f"{m['MRR']:.3f}",
                        f"{res['mean_lines_per_hit']:.1f}",
                        f"{res['mean_hits_returned']:.2f}",
                        f"{'meets' if ok else 'MISSES'} (R@6 >= {target_r6}, MRR >= {target_mrr})",
                    ]
                )
                print(
                    f"  {config}/{layout}: R@6 {m['R@6']:.3f} MRR {m['MRR']:.3f}", file=sys.stderr, flush=True
                )
            if len(by_layout) == 2:
                gap = by_layout["memory"]["R@6"] - by_layout["sessions"]["R@6"]
                figures[f"{config}/layout_gap"] = round(gap, 4)
        print(
            table(
                ["configuration", "layout", "R@1", "R@6", "R@10", "MRR", "lines/hit", "hits/query", "target"],
                rows,
            )
        )
        for config in configs:
            gap = figures.get(f"{config}/layout_gap")
            if gap is not None:
                print(
                    f"\n- {config}: R@6 of the daily logs minus the transcripts: {gap:+.3f} ({verdict(abs(gap), 0.02)} |gap| <= 0.02)"
                )
        if "minilm" in configs:
            settings = settings_for("memory", model, overrides)
            rate, empty, total = no_answer_rate(data, settings, state_root)
            figures["no_answer"] = {"rate": round(rate, 4), "empty": empty, "total": total}
            print(
                f"- no-answer questions ({NO_ANSWER_FILE.name}, MiniLM, defaults): {empty} of {total} return nothing"
                f" = {rate:.3f} ({verdict(rate, NO_ANSWER_TARGET, lower_is_better=False)} >= {NO_ANSWER_TARGET})"
            )
        for name, f in figures.items():
            if isinstance(f, dict) and "index_s" in f:
                print(
                    f"- {name}: indexing {f['index_s']} s for the 5 conversations; search p50 {f['search_p50_ms']} ms"
                )
    finally:
        if not args.state_dir:
            shutil.rmtree(state_root, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1))
    footer()


if __name__ == "__main__":
    main()
