"""Recall on LoCoMo's development split: how often ``MemoryIndex.search`` returns the evidence lines.

The data and the harness live outside the repository (``../shared/recall/``: LoCoMo, CC BY-NC 4.0,
evaluation only; nothing of it is copied here). The harness (``eval_recall.py``) asks each question
of an index built over one conversation and scores the hits: R@k (a top-k hit covers an evidence
line), MRR, and the lines per hit (bigger chunks cover more lines, so recall is read beside it).

This script plugs the public API in: one ``MemoryIndex`` per conversation with the product defaults
(only ``provider``, the model path and, for the transcript layout, ``sources: ["sessions"]`` set),
each question a ``SearchRequest`` for the top 10. Configurations: keyword-only (no embedding
provider) and the local MiniLM GGUF, each on the daily-log layout (``memory/YYYY-MM-DD.md``) and the
transcript layout (``sessions/*.jsonl``), beside the harness's own stdlib BM25 on the same layouts.
Then two sets of questions nobody can answer from the memory, asked of every conversation's index
in each configuration (daily logs, defaults), and the rate is the share answered with nothing or
flagged not found (``SearchResponse.not_found``): the 50 generic ones of
``bench/no_answer_questions.txt`` (off topic for every conversation), and the 250 of
``bench/never_said_questions.tsv`` (50 per conversation, naming its own people, asking about things
they never mentioned: each question's distinctive words are checked absent from its conversation's
files on every run, and by ``--check-sets`` alone). Beside R@6, the share of answerable questions
flagged not found (a cost: their answer was there).

    python bench/bench_recall.py                      # every configuration and the no-answer rate
    python bench/bench_recall.py --only keyword       # keyword-only, both layouts (about 10 s)
    python bench/bench_recall.py --quick              # 40 questions per conversation
    python bench/bench_recall.py --today last-session # "last week" counted from each conversation's end
    python bench/bench_recall.py --only keyword --layout memory \
        --time-against '{"query": {"hybrid": {"secondStage": {"enabled": false}}}}'
                                                      # search time with and without those settings
    python bench/bench_recall.py --only minilm --layout memory \
        --against '{"query": {"hybrid": {"mmr": {"enabled": false}}}}'
                                                      # recall with and without, question by question

Each R@6 and MRR is printed with its 95% bootstrap interval over the questions (``recall_stats``): on
this split one question is 0.001 of R@6 and the interval is about +-0.015 wide, so a change of a few
questions is read from ``--against``, which asks both settings the same questions and gives the
difference its own (paired) interval and the questions gained and lost.

R@6 is printed per LoCoMo category too (single-hop, multi-hop, temporal, open-domain, adversarial).
Dates the questions name ("in August 2023", "last week") weigh hits dated then (``date_boost``).
Relative ones count from the search's clock, today, by default, as for a user; LoCoMo's questions are
asked long after its conversations, so with ``--today last-session`` they count from the day of each
conversation's last daily log instead (an experiment: the product has no such anchor).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import shutil
import sys
import tempfile
import time
from datetime import date
from pathlib import Path
from types import ModuleType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO_ROOT, find_model, footer, header, parser, stats, table, verdict
from pydantic import ValidationError
from recall_stats import compare, found_within, interval, read_ranks, reciprocal

from sessionmem.config import MemorySearchConfig, deep_merge
from sessionmem.dsn import pg_target
from sessionmem.memory.index import MemoryIndex
from sessionmem.memory.search.records import SearchRequest

DEFAULT_DATA = REPO_ROOT.parent / "shared" / "recall" / "locomo-dev"
NO_ANSWER_FILE = Path(__file__).resolve().parent / "no_answer_questions.txt"
NEVER_SAID_FILE = Path(__file__).resolve().parent / "never_said_questions.tsv"
NEVER_SAID_TARGET = 0.60
KS = (1, 3, 6, 10)
LAYOUTS = ("memory", "sessions")
# The targets on locomo-dev: R@6 and MRR per configuration, the transcript layout within
# 0.02 of the daily logs, and questions about things never written down answered with nothing.
TARGETS = {"keyword": (0.92, 0.81), "minilm": (0.94, 0.83)}  # Recall II (issue 19)
LAYOUT_GAP_TARGET = 0.02
NO_ANSWER_TARGET = 0.90
CATEGORIES = ("single-hop", "multi-hop", "temporal", "open-domain", "adversarial")
DAILY_LOG = re.compile(r"(\d{4}-\d{2}-\d{2})\.md")
NAMES = {"keyword": "sessionmem, keyword-only (no provider)", "minilm": "sessionmem, local MiniLM-L6 GGUF"}


def load_harness(data: Path) -> ModuleType:
    path = data.parent / "eval_recall.py"
    spec = importlib.util.spec_from_file_location("eval_recall", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load the recall harness at {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def settings_for(layout: str, model: Path | None, overrides: dict[str, Any]) -> MemorySearchConfig:
    """The product defaults; ``overrides`` (``--set``) only for experiments."""
    raw: dict[str, Any] = {"provider": "local" if model else "none", "sync": {"watch": False}}
    if model:
        raw["local"] = {"modelPath": str(model)}
    if layout == "sessions":
        raw["sources"] = ["sessions"]
    return MemorySearchConfig.model_validate(deep_merge(raw, overrides))


def merged(settings: MemorySearchConfig, overrides: dict[str, Any]) -> MemorySearchConfig:
    """``settings`` with ``overrides`` (camelCase JSON, as ``--set`` takes) merged over them."""
    return MemorySearchConfig.model_validate(
        deep_merge(settings.model_dump(by_alias=True, exclude_unset=True), overrides)
    )


def settings_option(p: argparse.ArgumentParser, flag: str, text: str) -> dict[str, Any]:
    """A settings option's JSON, checked before anything runs: a key misspelt would otherwise fail only
    after the first configuration's questions (minutes, with the MiniLM model)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        p.error(f"{flag} is not JSON ({exc.msg} at character {exc.pos})")
    if not isinstance(value, dict):
        p.error(f"{flag} must be a JSON object of memorySearch settings, got {type(value).__name__}")
    try:
        merged(settings_for("memory", None, {}), value)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        p.error(f"{flag} is not valid memorySearch settings: {problems}")
    return value


class Backend:
    """The harness's plug-in: ``prepare(workspace)`` indexes one conversation, ``search`` asks it."""

    def __init__(
        self,
        layout: str,
        settings: MemorySearchConfig,
        state_root: Path,
        store: str | None = None,
        pin_today: bool = False,
        seed_from: Path | None = None,
    ) -> None:
        self.layout = layout
        self.seed_from = seed_from  # another run's states, copied once: only what differs is embedded
        self.pin_today = pin_today  # relative dates count from the conversation's last daily log
        self.today: date | None = None
        self.settings = settings
        self.state_root = state_root
        self.store = store  # a postgresql:// DSN: each conversation in a schema of its own
        self.schemas: set[str] = set()
        self.index: MemoryIndex | None = None
        self.workspace: str | None = None
        self.index_seconds = 0.0
        self.search_ms: list[float] = []
        self.flagged = 0  # answerable questions whose response said not found (``not_found``)
        self.asked = 0

    def prepare(self, workspace: str) -> None:
        self.close()
        ws = Path(workspace)
        state = self.state_root / f"{ws.name}-{self.layout}"
        seed = self.seed_from / state.name if self.seed_from is not None else None
        if seed is not None and seed.is_dir() and not state.exists() and not self.store:
            shutil.copytree(seed, state)
        settings = self.settings
        if self.store:
            tag = "against_" if self.seed_from is not None else ""  # its own schemas beside the run's
            schema = f"bench_recall_{tag}{ws.name}_{self.layout}".replace("-", "_")
            self.schemas.add(schema)
            dsn = f"{self.store}{'&' if '?' in self.store else '?'}schema={schema}"
            settings = settings.model_copy(update={"store": settings.store.model_copy(update={"path": dsn})})
        started = time.perf_counter()
        self.index = MemoryIndex.open(
            "bench", ws, settings, state_dir=state, watch=False, sessions_dir=ws / "sessions"
        )
        self.index.sync()
        self.index_seconds += time.perf_counter() - started
        self.workspace = workspace
        if self.pin_today:
            days = [m.group(1) for p in (ws / "memory").iterdir() if (m := DAILY_LOG.fullmatch(p.name))]
            self.today = date.fromisoformat(max(days)) if days else None

    def ask(self, request: SearchRequest) -> Any:
        assert self.index is not None
        started = time.perf_counter()
        response = self.index.search(request)
        self.search_ms.append((time.perf_counter() - started) * 1000)
        return response

    def search(self, workspace: str, query: str, k: int) -> list[dict[str, Any]]:
        if self.workspace != workspace:
            self.prepare(workspace)
        response = self.ask(SearchRequest(query, max_results=k, today=self.today))
        self.asked += 1
        self.flagged += response.not_found is not None
        return [
            {"path": r.path, "startLine": r.start_line, "endLine": r.end_line, "score": r.score}
            for r in response.results
        ]

    def close(self) -> None:
        if self.index is not None:
            self.index.close()
            self.index = None
            self.workspace = None


def row(name: str, layout: str, res: dict[str, Any], target: str = "") -> list[object]:
    m = res["by"]["all"]
    return [
        name,
        layout,
        *(f"{m[f'R@{k}']:.3f}" for k in (1, 6, 10)),
        f"{m['MRR']:.3f}",
        f"{res['mean_lines_per_hit']:.1f}",
        f"{res['mean_hits_returned']:.2f}",
        target,
    ]


def never_said_questions(data: Path) -> dict[str, list[str]]:
    """{conversation: questions} of ``never_said_questions.tsv``, each question's distinctive words
    checked to be absent from its conversation's files (case-insensitive substrings): exits naming
    any found, so the set cannot silently come to ask about something said."""
    by_conv: dict[str, list[str]] = {}
    texts: dict[str, str] = {}
    found: list[str] = []
    for line in NEVER_SAID_FILE.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        conv, question, words = line.split("\t")
        if conv not in texts:
            files = [p for d in ("memory", "sessions") for p in sorted((data / conv / d).glob("*"))]
            texts[conv] = "\n".join(p.read_text(encoding="utf-8").casefold() for p in files)
        found += [f"{conv}: {w!r} ({question})" for w in words.split(",") if w.casefold() in texts[conv]]
        by_conv.setdefault(conv, []).append(question)
    if found:
        raise SystemExit(f"{NEVER_SAID_FILE.name}: words said in the conversation:\n" + "\n".join(found))
    return by_conv


def generic_questions() -> list[str]:
    lines = NO_ANSWER_FILE.read_text(encoding="utf-8").splitlines()
    return [q.strip() for q in lines if q.strip() and not q.startswith("#")]


def no_answer_rates(data: Path, backend: Backend, limit: int | None) -> dict[str, tuple[int, int, int]]:
    """Per set: (answered with nothing, flagged not found, asked), each conversation's questions."""
    never_said = never_said_questions(data)
    generic = generic_questions()
    counts = {"generic": [0, 0, 0], "never_said": [0, 0, 0]}
    for conv in sorted(p for p in data.iterdir() if (p / "qa.jsonl").is_file()):
        backend.prepare(str(conv))
        for name, questions in (("generic", generic), ("never_said", never_said.get(conv.name, []))):
            for question in questions[:limit]:
                response = backend.ask(SearchRequest(question))
                c = counts[name]
                c[0] += not response.results
                c[1] += bool(response.results) and response.not_found is not None
                c[2] += 1
    backend.close()
    return {name: (c[0], c[1], c[2]) for name, c in counts.items()}


def time_against(
    data: Path, backend: Backend, against: dict[str, Any], limit: int | None
) -> tuple[list[float], list[float]]:
    """Search milliseconds of every question with the backend's settings and with ``against`` merged over
    them, alternating per question in this process (so load changes fall on both): each conversation's
    index is copied once synced, and the copy opened with the other settings (nothing to embed again)."""
    mine: list[float] = []
    theirs: list[float] = []
    other_settings = merged(backend.settings, against)
    for conv in sorted(p for p in data.iterdir() if (p / "qa.jsonl").is_file()):
        backend.prepare(str(conv))
        questions = [json.loads(line)["question"] for line in (conv / "qa.jsonl").read_text().splitlines()]
        state = backend.state_root / f"{conv.name}-{backend.layout}"
        copy = backend.state_root / f"{conv.name}-{backend.layout}-against"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(state, copy)
        other = MemoryIndex.open(
            "bench", conv, other_settings, state_dir=copy, watch=False, sessions_dir=conv / "sessions"
        )
        try:
            other.sync()
            for question in questions[:limit]:
                for index, out in ((backend.index, mine), (other, theirs)):
                    assert index is not None
                    started = time.perf_counter()
                    index.search(SearchRequest(question, max_results=10))
                    out.append((time.perf_counter() - started) * 1000)
        finally:
            other.close()
            shutil.rmtree(copy, ignore_errors=True)
    backend.close()
    return mine, theirs


def drop_schemas(dsn: str, schemas: set[str]) -> None:
    """Drop the schemas a ``--store`` run made."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(pg_target(dsn, "bench").conninfo, autocommit=True) as conn:
        for schema in sorted(schemas):
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument(
        "--data", default=str(DEFAULT_DATA), help="LoCoMo workspaces (default ../shared/recall/locomo-dev)"
    )
    p.add_argument(
        "--model", help="GGUF embedding model (default ../shared/models/all-MiniLM-L6-v2.Q8_0.gguf)"
    )
    p.add_argument("--only", choices=tuple(TARGETS), help="one configuration")
    p.add_argument("--layout", choices=LAYOUTS, help="one layout")
    p.add_argument(
        "--set", default="{}", help="JSON merged over memorySearch (experiments, not the defaults)"
    )
    p.add_argument(
        "--check-sets",
        action="store_true",
        help="only check the never-said set's words are absent, then exit",
    )
    p.add_argument(
        "--today",
        choices=("clock", "last-session"),
        default="clock",
        help="the day relative dates in questions count from (default: the search's clock)",
    )
    p.add_argument("--state-dir", help="keep the indexes here (their embedding cache serves the next run)")
    p.add_argument("--json", help="also write every figure to this file")
    p.add_argument(
        "--time-against",
        help="JSON merged over the settings: each configuration's searches are also timed with it, "
        "alternating per question in one process (before / after of a setting)",
    )
    p.add_argument(
        "--against",
        help="JSON merged over the settings: recall with it too, question by question (gained, lost, "
        "and the difference's interval), its indexes seeded from the run's",
    )
    p.add_argument(
        "--store",
        help="a postgresql:// DSN: index in PostgreSQL (a schema per conversation, dropped afterwards "
        "unless --state-dir is given) instead of SQLite files",
    )
    args = p.parse_args()
    overrides = settings_option(p, "--set", args.set)
    against = settings_option(p, "--against", args.against) if args.against else None
    timed_against = settings_option(p, "--time-against", args.time_against) if args.time_against else None
    data = Path(args.data).resolve()
    if not (data / "manifest.json").is_file():
        raise SystemExit(f"no LoCoMo workspaces at {data} (see ../shared/recall/README.md)")
    if args.check_sets:
        sets = never_said_questions(data)
        print(f"{NEVER_SAID_FILE.name}: {sum(map(len, sets.values()))} questions, none of their words said")
        return
    harness = load_harness(data)
    model = find_model(args.model)
    configs = [c for c in TARGETS if args.only in (None, c)]
    layouts = [args.layout] if args.layout else list(LAYOUTS)
    if args.smoke:  # a tiny slice: keyword-only, one layout, 5 questions per conversation
        configs, layouts = [c for c in configs if c == "keyword"] or configs[:1], layouts[:1]
    limit = 5 if args.smoke else 40 if args.quick else None
    header("Recall on LoCoMo's development split (bench_recall.py)", args)
    print(f"- data: {data.name}, 5 conversations, questions with evidence; top 10 asked; k = {KS}")
    print(
        f"- index store: {'PostgreSQL ' + pg_target(args.store, 'bench').display if args.store else 'SQLite'}"
    )
    print(f"- relative dates in questions count from: {args.today}")
    if overrides:
        print(f"- overrides (NOT the product defaults): `{json.dumps(overrides)}`")
    if "minilm" in configs and model is None:
        print("- the MiniLM GGUF was not found: its rows are left out")
        configs.remove("minilm")
    print()

    state_root = Path(args.state_dir) if args.state_dir else Path(tempfile.mkdtemp(prefix="bench-recall-"))
    state_root.mkdir(parents=True, exist_ok=True)

    def evaluate(search: Any, prepare: Any, layout: str) -> dict[str, Any]:
        """The harness's figures, and ``ranks``: each question's first covering rank."""
        per_question = state_root / "per-question.jsonl"
        result: dict[str, Any] = harness.evaluate(
            str(data), search, prepare, layout=layout, ks=KS, limit=limit, progress=False,
            per_question=str(per_question),
        )  # fmt: skip
        result["ranks"] = read_ranks(per_question)
        per_question.unlink()
        return result

    def intervals(ranks: dict[str, int | None]) -> dict[str, tuple[float, float]]:
        """R@6's and MRR's 95% bootstrap intervals over the questions."""
        firsts = list(ranks.values())
        return {"R@6": interval(found_within(firsts, 6)), "MRR": interval(reciprocal(firsts))}

    comparisons: list[str] = []
    rows: list[list[object]] = []
    category_rows: list[list[object]] = []
    backends: list[Backend] = []
    figures: dict[str, Any] = {}
    notes: list[str] = []
    try:
        for layout in layouts:
            search, prepare = harness.make_baseline(layout)
            res = evaluate(search, prepare, layout)
            rows.append(row("stdlib BM25 of the harness (400/80 chunks)", layout, res))
            category_rows.append(
                [
                    "stdlib BM25 of the harness",
                    layout,
                    *(f"{res['by'].get(c, {}).get('R@6', 0):.3f}" for c in CATEGORIES),
                ]
            )
            figures[f"baseline/{layout}"] = res["by"]["all"]
        for config in configs:
            r6: dict[str, float] = {}
            for layout in layouts:
                backend = Backend(
                    layout,
                    settings_for(layout, model if config == "minilm" else None, overrides),
                    state_root,
                    args.store,
                    pin_today=args.today == "last-session",
                )
                backends.append(backend)
                try:
                    res = evaluate(backend.search, backend.prepare, layout)
                finally:
                    backend.close()
                m = res["by"]["all"]
                want_r6, want_mrr = TARGETS[config]
                ok = m["R@6"] >= want_r6 and m["MRR"] >= want_mrr
                rows.append(
                    row(
                        NAMES[config],
                        layout,
                        res,
                        f"{'meets' if ok else 'MISSES'} R@6 >= {want_r6}, MRR >= {want_mrr}",
                    )
                )
                r6[layout] = m["R@6"]
                spread = intervals(res["ranks"])
                notes.append(
                    f"- {config}, {layout}: 95% intervals over the questions: "
                    + ", ".join(f"{name} {low:.3f}-{high:.3f}" for name, (low, high) in spread.items())
                )
                if against is not None:
                    other = Backend(
                        layout,
                        merged(backend.settings, against),
                        state_root / "against",
                        args.store,
                        pin_today=args.today == "last-session",
                        seed_from=state_root,
                    )
                    backends.append(other)
                    try:
                        res_against = evaluate(other.search, other.prepare, layout)
                    finally:
                        other.close()
                    change = compare(res["ranks"], res_against["ranks"])
                    figures[f"{config}/{layout}/against"] = {
                        **res_against["by"]["all"],
                        "recall_change": round(change.recall_change, 4),
                        "recall_interval": [round(x, 4) for x in change.recall_interval],
                        "mrr_change": round(change.mrr_change, 4),
                        "mrr_interval": [round(x, 4) for x in change.mrr_interval],
                        "gained": change.gained,
                        "lost": change.lost,
                    }
                    comparisons.append(f"- {config}, {layout}: {change.line()}")
                ms = sorted(backend.search_ms)
                flagged = backend.flagged / max(backend.asked, 1)
                figures[f"{config}/{layout}"] = {
                    **m,
                    "lines_per_hit": res["mean_lines_per_hit"],
                    "flagged_answerable": round(flagged, 4),
                    **{f"{name}_interval": [round(x, 4) for x in ends] for name, ends in spread.items()},
                }
                notes.append(
                    f"- {config}, {layout}: answerable questions flagged not found {backend.flagged} of "
                    f"{backend.asked} = {flagged:.3f} (lower is better)"
                )
                by_category = {c: res["by"][c]["R@6"] for c in CATEGORIES if c in res["by"]}
                figures[f"{config}/{layout}/R@6_by_category"] = by_category
                category_rows.append(
                    [NAMES[config], layout, *(f"{by_category.get(c, 0):.3f}" for c in CATEGORIES)]
                )
                notes.append(
                    f"- {config}, {layout}: indexing the 5 conversations {backend.index_seconds:.1f} s; "
                    f"search p50 {ms[len(ms) // 2]:.1f} ms (with the query's embedding, if any)"
                )
                print(
                    f"  {config}/{layout}: R@6 {m['R@6']:.3f} MRR {m['MRR']:.3f}", file=sys.stderr, flush=True
                )
            if len(r6) == 2:
                gap = r6["memory"] - r6["sessions"]
                figures[f"{config}/layout_gap"] = round(gap, 4)
                notes.insert(
                    0,
                    f"- {config}: R@6 of the daily logs minus the transcripts {gap:+.3f} "
                    f"({verdict(abs(gap), LAYOUT_GAP_TARGET)} |gap| <= {LAYOUT_GAP_TARGET})",
                )
        print(
            table(
                ["search", "layout", "R@1", "R@6", "R@10", "MRR", "lines/hit", "hits/query", "target"], rows
            )
        )
        print()
        if comparisons:
            print(f"With `{json.dumps(against)}` merged, against the settings above, question by question:\n")
            print("\n".join(comparisons))
            print()
        print("R@6 per question category:\n")
        print(table(["search", "layout", *CATEGORIES], category_rows))
        print()
        for config in configs:
            settings = settings_for("memory", model if config == "minilm" else None, overrides)
            backend = Backend("memory", settings, state_root, args.store)
            backends.append(backend)
            rates = no_answer_rates(data, backend, 2 if args.smoke else None)
            for name, (empty, flagged, total) in rates.items():
                file = NO_ANSWER_FILE.name if name == "generic" else NEVER_SAID_FILE.name
                if not total:  # the set names the development split's people: none of these conversations
                    notes.insert(0, f"- {file}: no question for these conversations ({config}), not asked")
                    continue
                rate = (empty + flagged) / total
                target = NO_ANSWER_TARGET if name == "generic" else NEVER_SAID_TARGET
                figures[f"{config}/{name}"] = {
                    "rate": round(rate, 4),
                    "empty": empty,
                    "flagged": flagged,
                    "total": total,
                }
                notes.insert(
                    0,
                    f"- questions never written about ({file}, {config}, defaults, daily logs): {empty} "
                    f"answered with nothing + {flagged} flagged not found, of {total} = {rate:.3f} "
                    f"({verdict(rate, target, lower_is_better=False)} >= {target})",
                )
        if timed_against is not None:
            merged_json = json.dumps(timed_against)
            print(f"\nSearch time, every question, alternating (`{merged_json}` merged: 'against'):\n")
            timing_rows = []
            for config in configs:
                settings = settings_for(layouts[0], model if config == "minilm" else None, overrides)
                backend = Backend(layouts[0], settings, state_root, args.store)
                backends.append(backend)
                mine, theirs = time_against(data, backend, timed_against, limit)
                for name, samples in (("as run", mine), ("against", theirs)):
                    st = stats(samples)
                    timing_rows.append([config, layouts[0], name, f"{st.p50:.1f}", f"{st.p95:.1f}", st.n])
            print(table(["search", "layout", "settings", "p50 ms", "p95 ms", "searches"], timing_rows))
        print("\n".join(notes))
    finally:
        if not args.state_dir:
            shutil.rmtree(state_root, ignore_errors=True)
            if args.store:
                drop_schemas(args.store, {s for b in backends for s in b.schemas})
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1))
    footer()


if __name__ == "__main__":
    main()
