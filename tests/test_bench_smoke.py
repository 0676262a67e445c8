"""Every benchmark still runs: each ``bench/bench_*.py`` in its ``--smoke`` mode, in its own process.

The benchmarks import the package's names directly (and wrap some methods to time them), so a name
renamed or removed under them breaks them silently until the next full run; here it fails CI. A smoke
run uses tiny sizes and leaves out the comparisons with other tools (qmd). Nothing here checks a figure:
speed is not asserted in tests, only that each script finishes and prints its tables.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import IN_CI, REPO_ROOT

BENCH = REPO_ROOT / "bench"
SCRIPTS = sorted(path.stem for path in BENCH.glob("bench_*.py"))
RECALL_DATA = REPO_ROOT.parent / "shared" / "recall" / "locomo-dev" / "manifest.json"


def run_bench(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
    }
    return subprocess.run(
        [sys.executable, *args], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300
    )


def test_every_script_is_listed_in_run_all() -> None:
    """run_all.py runs the scripts by name: one missing there would never be run."""
    sys.path.insert(0, str(BENCH))
    try:
        import run_all
    finally:
        sys.path.remove(str(BENCH))
    assert sorted(f"bench_{name}" for name in run_all.SCRIPTS) == SCRIPTS


@pytest.mark.parametrize("script", SCRIPTS)
def test_smoke_run(script: str, tmp_path: Path) -> None:
    if script == "bench_recall" and not RECALL_DATA.is_file():
        if IN_CI:
            pytest.fail(f"the recall data is missing: {RECALL_DATA}")
        pytest.skip("the LoCoMo development split is not beside the repository")
    proc = run_bench([str(BENCH / f"{script}.py"), "--smoke"], tmp_path)
    assert proc.returncode == 0, f"{script} --smoke failed ({proc.returncode}):\n{proc.stderr[-3000:]}"
    assert proc.stdout.startswith("## "), proc.stdout[:500]
    assert "- SMOKE run" in proc.stdout
    assert "_Load average at the end:" in proc.stdout


def test_run_all_writes_each_table_as_it_completes(tmp_path: Path) -> None:
    """A run stopped after a script keeps that script's tables; the rest are named as not run."""
    out = tmp_path / "latest.md"
    proc = run_bench(
        [str(BENCH / "run_all.py"), "--smoke", "--only", "delta,huge_file", "--out", str(out)], tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = out.read_text()
    assert "- mode: SMOKE run" in text
    assert text.index("bench_delta.py took") < text.index("bench_huge_file.py took")
    assert "Not run yet" not in text
    assert "Total:" in text


def test_recall_against_other_settings_compares_question_by_question(tmp_path: Path) -> None:
    """``bench_recall.py --against``: the same questions asked with other settings, the difference with its
    interval and the questions gained and lost, each figure beside its own interval."""
    if not RECALL_DATA.is_file():
        if IN_CI:
            pytest.fail(f"the recall data is missing: {RECALL_DATA}")
        pytest.skip("the LoCoMo development split is not beside the repository")
    figures = tmp_path / "figures.json"
    against = '{"query": {"hybrid": {"secondStage": {"enabled": false}}}}'
    proc = run_bench(
        [str(BENCH / "bench_recall.py"), "--smoke", "--against", against, "--json", str(figures)], tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"With `{against}` merged, against the settings above" in proc.stdout
    assert "keyword, memory: R@6 " in proc.stdout and " lost of 25), MRR " in proc.stdout
    assert "keyword, memory: 95% intervals over the questions: R@6 " in proc.stdout
    result = json.loads(figures.read_text())
    compared = result["keyword/memory/against"]
    low, high = compared["recall_interval"]
    assert low <= compared["recall_change"] <= high
    assert compared["n"] == result["keyword/memory"]["n"] == 25  # 5 questions of each of 5 conversations
    assert len(result["keyword/memory"]["R@6_interval"]) == 2


@pytest.mark.parametrize(
    ("flag", "value", "said"),
    [
        ("--against", '{"query": {"hybrid": {"mmr": {"enable": false}}}}', "query.hybrid.mmr.enable"),
        ("--time-against", "{bad", "--time-against is not JSON"),
        ("--set", "[1]", "--set must be a JSON object"),
    ],
)
def test_recall_settings_options_are_checked_before_any_question(
    flag: str, value: str, said: str, tmp_path: Path
) -> None:
    """A misspelt setting stops the run at once, named, not after the first configuration's questions."""
    proc = run_bench([str(BENCH / "bench_recall.py"), "--smoke", flag, value], tmp_path)
    assert proc.returncode == 2
    assert said in proc.stderr
    assert "R@6" not in proc.stdout  # no question was asked
