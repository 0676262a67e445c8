"""The `sessionmem` command: option resolution, errors, and memory status/index/search/get.

CliRunner runs most cases in-process; a few run the real interpreter (`python -m sessionmem.cli`)
to check what a user sees: exit codes, stderr, no tracebacks, nothing heavy imported.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from datetime import date
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from sessionmem.cli import cli
from sessionmem.cli.memory import MISSING_QUERY, parse_batch_line
from sessionmem.config import Config, MemorySearchConfig
from sessionmem.context import GlobalOptions, resolve
from sessionmem.errors import ConfigError
from sessionmem.memory.search.query_bounds import MAX_QUERY_CHARS, MAX_QUERY_TERMS
from sessionmem.memory.search.records import SearchRequest
from tests.support.openai_server import OpenAIServer, server_error

REPO_ROOT = Path(__file__).resolve().parents[2]


def run_cli(*args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    """The real command in a child process, environment inherited from the (isolated) test."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-m", "sessionmem.cli", *args],
        input=input,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


# ---------------------------------------------------------------------------- composition root


def test_state_dir_comes_from_the_environment_then_the_option(tmp_path: Path, isolated_env: Path) -> None:
    assert resolve(GlobalOptions()).state_dir == isolated_env.resolve()
    chosen = tmp_path / "elsewhere"
    app = resolve(GlobalOptions(state_dir=str(chosen)))
    assert app.state_dir == chosen.resolve()
    assert app.workspace == chosen.resolve() / "workspace"
    assert app.agent_id == "main"
    assert app.config_path is None


def test_workspace_from_agent_entry_is_relative_to_the_config_file(tmp_path: Path) -> None:
    folder = tmp_path / "conf"
    folder.mkdir()
    config = folder / "agent.json5"
    config.write_text(
        "{agents: {defaults: {workspace: 'notes'}, list: [{id: 'work', workspace: 'work-notes'}]}}",
        encoding="utf-8",
    )
    assert resolve(GlobalOptions(config=str(config))).workspace == folder / "notes"
    work = resolve(GlobalOptions(config=str(config), agent="work"))
    assert work.workspace == folder / "work-notes"
    assert work.agent.id == "work"
    explicit = resolve(GlobalOptions(config=str(config), workspace=str(tmp_path / "ws")))
    assert explicit.workspace == tmp_path / "ws"


def test_config_file_in_state_dir_is_found_without_an_option(isolated_env: Path) -> None:
    isolated_env.mkdir(parents=True, exist_ok=True)
    (isolated_env / "config.json5").write_text(
        "{agents: {defaults: {memorySearch: {query: {maxResults: 3}}}}}", encoding="utf-8"
    )
    app = resolve(GlobalOptions())
    assert app.config_path == (isolated_env / "config.json5").resolve()
    assert app.agent.memory_search.query.max_results == 3


def test_environment_is_a_frozen_copy(tmp_path: Path) -> None:
    app = resolve(GlobalOptions(), env={"SESSIONMEM_STATE_DIR": str(tmp_path), "X": "1"})
    assert app.state_dir == tmp_path.resolve()
    with pytest.raises(TypeError):
        app.env["X"] = "2"  # type: ignore[index]


def test_agent_id_that_would_escape_the_state_dir_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"agent id '\.\./x' is not valid"):
        resolve(GlobalOptions(agent="../x"))


# ---------------------------------------------------------------------------- errors a user sees


def test_config_error_names_the_key_and_exits_2(runner: CliRunner, tmp_path: Path) -> None:
    config = tmp_path / "bad.json5"
    config.write_text("{agents: {defaults: {memorySearch: {query: {maxResults: 'many'}}}}}", encoding="utf-8")
    result = runner.invoke(cli, ["--config", str(config), "memory", "search", "anything"])
    assert result.exit_code == 2
    assert "agents.defaults.memorySearch.query.maxResults" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("below", [False, True])
def test_state_dir_that_is_a_file_is_named_not_a_traceback(
    runner: CliRunner, tmp_path: Path, below: bool
) -> None:
    afile = tmp_path / "state.txt"
    afile.write_text("not a folder", encoding="utf-8")
    given = afile / "sub" if below else afile
    for command in (["memory", "search", "x"], ["memory", "status"], ["memory", "index"]):
        result = runner.invoke(cli, ["--state-dir", str(given), *command])
        assert result.exit_code == 2, result.output
        assert isinstance(result.exception, SystemExit)
        assert result.stderr == (
            f"Error: state folder {given} (from --state-dir) is not a directory: {afile} is a file\n"
        )


def test_state_dir_from_the_environment_that_is_a_file_is_named(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    afile = tmp_path / "state.txt"
    afile.write_text("", encoding="utf-8")
    monkeypatch.setenv("SESSIONMEM_STATE_DIR", str(afile))
    result = runner.invoke(cli, ["memory", "search", "x"])
    assert result.exit_code == 2
    assert "(from $SESSIONMEM_STATE_DIR) is not a directory" in result.stderr


def test_index_store_that_cannot_be_created_is_named(runner: CliRunner, tmp_path: Path, notes: Path) -> None:
    afile = tmp_path / "blocker"
    afile.write_text("", encoding="utf-8")
    config = tmp_path / "store.json"
    store = afile / "index.sqlite"
    config.write_text(json.dumps({"agents": {"defaults": {"memorySearch": {"store": {"path": str(store)}}}}}))
    result = runner.invoke(cli, ["--config", str(config), "--workspace", str(notes), "memory", "search", "x"])
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit)
    assert result.stderr.startswith("Error: cannot open the memory index of agent 'main'")
    assert str(afile) in result.stderr


def test_missing_config_file_is_named(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(cli, ["--config", str(tmp_path / "nope.json"), "memory", "search", "x"])
    assert result.exit_code == 2
    assert "config file not found" in result.output and "nope.json" in result.output


def test_help_still_works_with_a_broken_config(runner: CliRunner, tmp_path: Path) -> None:
    config = tmp_path / "broken.json"
    config.write_text("{not json", encoding="utf-8")
    result = runner.invoke(cli, ["--config", str(config), "memory", "search", "--help"])
    assert result.exit_code == 0
    assert "--batch" in result.output


def test_bad_after_date_is_a_usage_error_naming_the_option(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["memory", "search", "deploy", "--after", "2024-13-01"])
    assert result.exit_code == 2
    assert "'--after'" in result.output
    assert "YYYY-MM-DD" in result.output


def test_after_later_than_before_is_refused(runner: CliRunner) -> None:
    result = runner.invoke(
        cli, ["memory", "search", "deploy", "--after", "2024-05-01", "--before", "2024-04-01"]
    )
    assert result.exit_code == 2
    assert "later than --before" in result.output


def test_missing_query_says_how_to_give_one(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["memory", "search"])
    assert result.exit_code == 2
    assert MISSING_QUERY in result.output


def test_errors_in_a_real_process_go_to_stderr_without_traceback(tmp_path: Path) -> None:
    config = tmp_path / "bad.json"
    config.write_text(json.dumps({"agents": {"defaults": {"compaction": {"reserveTokens": -1}}}}))
    proc = run_cli("--config", str(config), "memory", "search", "x")
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "agents.defaults.compaction.reserveTokens" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_help_imports_nothing_heavy() -> None:
    """`sessionmem --help` must not pay for litellm, llama_cpp, numpy, watchdog or the index."""
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "sessionmem.cli", "--help"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    assert "memory" in proc.stdout
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if "|" in line}
    for heavy in ("litellm", "llama_cpp", "numpy", "watchdog", "tqdm", "sessionmem.cli.memory"):
        assert heavy not in imported, f"{heavy} imported by --help"


# ---------------------------------------------------------------------------- --batch line parsing


def test_batch_line_fills_gaps_from_command_line_defaults() -> None:
    defaults = SearchRequest(query="", max_results=4, min_score=0.1, after=date(2024, 1, 1))
    request, request_id = parse_batch_line('{"query": "cutover", "minScore": 0.5, "id": 7}', defaults)
    assert request == SearchRequest(
        query="cutover", max_results=4, min_score=0.5, after=date(2024, 1, 1), before=None, explain=False
    )
    assert request_id == 7


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('{"maxResults": 3}', "missing search query"),
        ('{"query": "  "}', "missing search query"),
        ('{"query": "x", "max_results": 3}', "unknown key(s): max_results"),
        ('{"query": "x", "maxResults": "3"}', "'maxResults' must be an integer"),
        ('{"query": "x", "maxResults": 0}', "'maxResults' must be at least 1"),
        ('{"query": "x", "minScore": 2}', "'minScore' must be between 0 and 1"),
        ('{"query": "x", "after": "2024-02-30"}', "'after': '2024-02-30' is not a date"),
        ('{"query": "x", "after": "2024-03-01", "before": "2024-02-01"}', "later than 'before'"),
    ],
)
def test_batch_line_problems_are_named(line: str, problem: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_batch_line(line, SearchRequest(query=""))
    assert problem in str(info.value)


# ---------------------------------------------------------------------------- get


def test_get_prints_a_line_window(runner: CliRunner, workspace: Path) -> None:
    note = workspace / "memory" / "2024-01-05.md"
    note.write_text("# Jan 5\nbilling cutover moved\nto March 3\nowner: Dana\n", encoding="utf-8")
    result = runner.invoke(
        cli,
        [
            "--workspace",
            str(workspace),
            "memory",
            "get",
            "memory/2024-01-05.md",
            "--from",
            "2",
            "--lines",
            "2",
        ],
    )
    assert result.exit_code == 0, result.output
    assert result.output == "billing cutover moved\nto March 3\n"
    whole = runner.invoke(cli, ["--workspace", str(workspace), "memory", "get", "memory/2024-01-05.md"])
    assert whole.output == note.read_text(encoding="utf-8")


def test_get_missing_file_and_escaping_path_are_errors(runner: CliRunner, workspace: Path) -> None:
    missing = runner.invoke(cli, ["--workspace", str(workspace), "memory", "get", "memory/nope.md"])
    assert missing.exit_code == 1
    assert "no such memory file: memory/nope.md" in missing.output
    escaping = runner.invoke(cli, ["--workspace", str(workspace), "memory", "get", "../secrets.md"])
    assert escaping.exit_code == 1
    assert "escapes the workspace" in escaping.output
    zero = runner.invoke(cli, ["--workspace", str(workspace), "memory", "get", "MEMORY.md", "--from", "0"])
    assert zero.exit_code == 2
    assert "'--from'" in zero.output


def test_get_refuses_dotdot_that_folds_back_inside(runner: CliRunner, workspace: Path) -> None:
    (workspace / "MEMORY.md").write_text("long-term secret\n", encoding="utf-8")
    result = runner.invoke(cli, ["--workspace", str(workspace), "memory", "get", "memory/../MEMORY.md"])
    assert result.exit_code == 1
    assert "'..' segments are not allowed: memory/../MEMORY.md" in result.output
    assert "long-term secret" not in result.output
    assert "Traceback" not in result.output


# ---------------------------------------------------------------------------- end to end

JAN_NOTE = (
    "# 2024-01-05\n\n- The billing cutover moved to March 3.\n- Priya signs off on the ledger switch.\n"
)
FEB_NOTE = "# 2024-02-10\n\n- Postgres upgrade rehearsal went fine; the billing cutover is still on track.\n"
LONG_TERM = "# Long-term memory\n\n- Dana prefers metric units and 24-hour times.\n"


@pytest.fixture
def notes(workspace: Path) -> Path:
    (workspace / "MEMORY.md").write_text(LONG_TERM, encoding="utf-8")
    (workspace / "memory" / "2024-01-05.md").write_text(JAN_NOTE, encoding="utf-8")
    (workspace / "memory" / "2024-02-10.md").write_text(FEB_NOTE, encoding="utf-8")
    return workspace


@pytest.fixture
def config_file(notes: Path, tmp_path: Path) -> Path:
    """A JSON5 config (comments, unquoted keys, trailing commas) naming the workspace relatively."""
    path = tmp_path / "sessionmem.json5"
    rel = os.path.relpath(notes, tmp_path)
    path.write_text(
        "// the test agent\n"
        f"{{agents: {{defaults: {{workspace: '{rel}',\n"
        "  memorySearch: {query: {maxResults: 5,},},},},}\n",
        encoding="utf-8",
    )
    return path


def test_index_then_search_finds_the_note_in_a_real_process(config_file: Path) -> None:
    indexed = run_cli("--config", str(config_file), "memory", "index")
    assert indexed.returncode == 0, indexed.stderr
    assert indexed.stdout.startswith("Memory index updated (main): 3 files indexed, 0 unchanged, 0 deleted")
    assert indexed.stderr == ""  # not a terminal: no progress bar, no noise

    found = run_cli("--config", str(config_file), "memory", "search", "Priya ledger switch")
    assert found.returncode == 0, found.stderr
    first = found.stdout.splitlines()[0]
    score, location, day = first.split(" ")
    assert float(score) >= 0
    assert location.startswith("memory/2024-01-05.md:")
    assert day == "(2024-01-05)"
    assert "Priya signs off on the ledger switch." in found.stdout

    again = run_cli("--config", str(config_file), "memory", "index")
    assert "0 files indexed, 3 unchanged" in again.stdout


def test_search_json_shape(runner: CliRunner, notes: Path) -> None:
    result = runner.invoke(cli, ["--workspace", str(notes), "memory", "search", "billing cutover", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert {"results", "provider", "model", "mode"} <= set(data)
    assert (data["provider"], data["model"], data["mode"]) == ("none", "fts-only", "fts-only")
    paths = {r["path"] for r in data["results"]}
    assert paths == {"memory/2024-01-05.md", "memory/2024-02-10.md"}
    hit = data["results"][0]
    assert {"path", "startLine", "endLine", "score", "snippet", "source", "date"} <= set(hit)
    assert hit["source"] == "memory" and hit["startLine"] >= 1


def test_date_range_and_explain_reach_the_search(runner: CliRunner, notes: Path) -> None:
    result = runner.invoke(
        cli,
        [
            "--workspace",
            str(notes),
            "memory",
            "search",
            "billing cutover",
            "--after",
            "2024-02-01",
            "--explain",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "memory/2024-02-10.md:" in result.output
    assert "2024-01-05.md" not in result.output
    assert "fts=" in result.output and "vector=-" in result.output


def test_search_says_what_of_a_long_query_was_cut(runner: CliRunner, notes: Path) -> None:
    query = "billing cutover " + " ".join(f"zq{i:05d}" for i in range(100_000))  # 700 KB
    args = ["--workspace", str(notes), "memory", "search", query]
    result = runner.invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "memory/2024-01-05.md:" in result.stdout
    data = json.loads(runner.invoke(cli, [*args, "--json"]).stdout)
    searched = data["queryCut"]["charsSearched"]
    assert MAX_QUERY_CHARS - len("zq00000") <= searched <= MAX_QUERY_CHARS  # cut at a space
    note = f"note: The query was cut: its first {searched:,} of {len(query):,} characters and"
    assert result.stderr.startswith(note), result.stderr
    assert data["queryCut"]["termsSearched"] == MAX_QUERY_TERMS < data["queryCut"]["terms"]
    assert {r["path"] for r in data["results"]} >= {"memory/2024-01-05.md"}


def test_no_matches_is_said_plainly(runner: CliRunner, notes: Path) -> None:
    result = runner.invoke(cli, ["--workspace", str(notes), "memory", "search", "xylophone"])
    assert result.exit_code == 0
    assert result.output.strip() == "No matches."


def test_index_force_reindexes_every_file(runner: CliRunner, notes: Path) -> None:
    args = ["--workspace", str(notes), "memory", "index", "--json"]
    first = json.loads(runner.invoke(cli, args).output)
    assert first["filesIndexed"] == 3 and first["chunksWritten"] >= 3
    again = json.loads(runner.invoke(cli, args).output)
    assert (again["full"], again["filesIndexed"], again["filesUnchanged"]) == (False, 0, 3)

    forced = runner.invoke(cli, [*args, "--force"])
    assert forced.exit_code == 0, forced.output
    report = json.loads(forced.output)
    assert (report["full"], report["filesIndexed"], report["filesUnchanged"]) == (True, 3, 0)
    assert report["chunksWritten"] == first["chunksWritten"]
    found = runner.invoke(cli, ["--workspace", str(notes), "memory", "search", "Priya ledger", "--json"])
    assert [r["path"] for r in json.loads(found.output)["results"]] == ["memory/2024-01-05.md"]


def anchor_notes(workspace: Path) -> Path:
    """Eight notes that all mention the anchor; the first three much more than the rest."""
    for i in range(1, 9):
        extra = " anchor anchor locker" if i <= 3 else ""
        note = workspace / "memory" / f"2024-01-0{i}.md"
        note.write_text(f"# Note {i}\n\n- the spare anchor{extra}, item {i}\n", encoding="utf-8")
    return workspace


def search_json(runner: CliRunner, workspace: Path, *options: str) -> list[dict[str, Any]]:
    result = runner.invoke(
        cli, ["--workspace", str(workspace), "memory", "search", "anchor", "--json", *options]
    )
    assert result.exit_code == 0, result.output
    results: list[dict[str, Any]] = json.loads(result.output)["results"]
    return results


def test_max_results_caps_the_answer(runner: CliRunner, workspace: Path) -> None:
    anchor_notes(workspace)
    everything = search_json(runner, workspace, "--max-results", "20", "--min-score", "0")
    assert len(everything) == 8
    assert len(search_json(runner, workspace)) == 6  # memorySearch.query.maxResults' default
    top_two = search_json(runner, workspace, "--max-results", "2", "--min-score", "0")
    assert [r["path"] for r in top_two] == [r["path"] for r in everything[:2]]
    zero = runner.invoke(
        cli, ["--workspace", str(workspace), "memory", "search", "anchor", "--max-results", "0"]
    )
    assert zero.exit_code == 2 and "'--max-results'" in zero.output


def test_min_score_drops_results_under_the_floor(runner: CliRunner, workspace: Path) -> None:
    anchor_notes(workspace)
    everything = search_json(runner, workspace, "--max-results", "20", "--min-score", "0")
    scores = [float(r["score"]) for r in everything]
    assert max(scores) > min(scores), scores  # the notes that say "anchor" three times rank higher
    floor = round((max(scores) + min(scores)) / 2, 3)
    kept = search_json(runner, workspace, "--max-results", "20", "--min-score", str(floor))
    assert [r["path"] for r in kept] == [
        r["path"] for r, s in zip(everything, scores, strict=True) if s >= floor
    ]
    assert 0 < len(kept) < len(everything)
    assert all(float(r["score"]) >= floor for r in kept)
    over = runner.invoke(
        cli, ["--workspace", str(workspace), "memory", "search", "anchor", "--min-score", "1.5"]
    )
    assert over.exit_code == 2 and "'--min-score'" in over.output


def test_state_dir_and_agent_choose_a_separate_index_file(
    runner: CliRunner, notes: Path, tmp_path: Path, isolated_env: Path
) -> None:
    boathouse = tmp_path / "boathouse"
    (boathouse / "memory").mkdir(parents=True)
    (boathouse / "memory" / "2024-03-01.md").write_text(
        "- The tide table hangs in the boathouse.\n", encoding="utf-8"
    )
    state = tmp_path / "chosen-state"  # not created yet: the first command creates it

    def run(agent: str, workspace: Path, *command: str) -> Any:
        args = [
            "--state-dir",
            str(state),
            "--agent",
            agent,
            "--workspace",
            str(workspace),
            "memory",
            *command,
        ]
        result = runner.invoke(cli, [*args, "--json"])
        assert result.exit_code == 0, result.output
        return json.loads(result.output)

    work = run("work", notes, "index")
    assert (work["agentId"], work["filesIndexed"]) == ("work", 3)
    assert (state / "memory" / "work.sqlite").is_file()
    home = run("home", boathouse, "index")
    assert (home["agentId"], home["filesIndexed"]) == ("home", 1)
    assert (state / "memory" / "home.sqlite").is_file()
    assert not (isolated_env / "memory").exists()  # $SESSIONMEM_STATE_DIR is not used

    work_status = run("work", notes, "status")
    assert (work_status["store"], work_status["files"]) == (str(state / "memory" / "work.sqlite"), 3)
    home_status = run("home", boathouse, "status")
    assert (home_status["store"], home_status["files"]) == (str(state / "memory" / "home.sqlite"), 1)
    found = run("work", notes, "search", "billing cutover")
    assert {r["path"] for r in found["results"]} == {"memory/2024-01-05.md", "memory/2024-02-10.md"}
    assert run("home", boathouse, "search", "billing cutover")["results"] == []
    assert [r["path"] for r in run("home", boathouse, "search", "tide table")["results"]] == [
        "memory/2024-03-01.md"
    ]


def test_batch_answers_every_line_and_reports_a_bad_one_in_place(config_file: Path) -> None:
    stdin = "\n".join(
        [
            json.dumps({"query": "Priya ledger", "id": "a"}),
            '{"query": "broken',
            "",
            json.dumps({"query": "billing cutover", "after": "2024-02-01", "maxResults": 1}),
            json.dumps({"query": "metric units", "after": "yesterday"}),
        ]
    )
    proc = run_cli("--config", str(config_file), "memory", "search", "--batch", input=stdin + "\n")
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr == 'Error: 2 of 4 batch lines failed (their answers carry "error")\n'
    answers = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [a["line"] for a in answers] == [1, 2, 4, 5]
    first, broken, dated, bad_date = answers
    assert first["id"] == "a" and first["mode"] == "fts-only"
    assert first["results"][0]["path"] == "memory/2024-01-05.md"
    assert "not valid JSON" in broken["error"] and "results" not in broken
    assert [r["path"] for r in dated["results"]] == ["memory/2024-02-10.md"]
    assert "'after'" in bad_date["error"]


def test_batch_without_bad_lines_exits_0(runner: CliRunner, notes: Path) -> None:
    stdin = json.dumps({"query": "billing cutover"}) + "\n\n" + json.dumps({"query": "xylophone"}) + "\n"
    result = runner.invoke(cli, ["--workspace", str(notes), "memory", "search", "--batch"], input=stdin)
    assert result.exit_code == 0, result.output
    assert [json.loads(line)["line"] for line in result.output.splitlines()] == [1, 3]


def test_batch_failing_search_still_answers_later_lines_then_exits_1(
    runner: CliRunner, notes: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sessionmem.errors import MemoryIndexError
    from sessionmem.memory.index import MemoryIndex

    real_search = MemoryIndex.search

    def search(self: MemoryIndex, request: SearchRequest) -> object:
        if request.query == "explode":
            raise MemoryIndexError("database is locked")
        return real_search(self, request)

    monkeypatch.setattr(MemoryIndex, "search", search)
    stdin = "\n".join(json.dumps({"query": q}) for q in ("explode", "billing cutover")) + "\n"
    result = runner.invoke(cli, ["--workspace", str(notes), "memory", "search", "--batch"], input=stdin)
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert json.loads(lines[0]) == {"error": "database is locked", "line": 1}
    assert json.loads(lines[1])["results"]
    assert result.stderr == 'Error: 1 of 2 batch lines failed (their answers carry "error")\n'


CLOSED = "<index closed>"


@pytest.mark.parametrize(
    "args",
    [
        ["search", "billing cutover"],
        ["search", "billing cutover", "--json"],
        ["index"],
        ["index", "--json"],
        ["status"],
        ["status", "--json"],
    ],
)
def test_output_is_written_before_the_index_closes(
    runner: CliRunner, notes: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    """close() waits for the background sync a search on a dirty index starts: the answer must not."""
    from sessionmem.memory.index import MemoryIndex

    real_close = MemoryIndex.close

    def close(self: MemoryIndex) -> None:
        click.echo(CLOSED)
        real_close(self)

    monkeypatch.setattr(MemoryIndex, "close", close)
    result = runner.invoke(cli, ["--workspace", str(notes), "memory", *args])
    assert result.exit_code == 0, result.output
    answer, closed, rest = result.stdout.partition(CLOSED + "\n")
    assert closed and rest == "", result.stdout
    assert answer.strip(), "nothing was printed before close()"


def test_batch_and_positional_query_do_not_mix(runner: CliRunner, notes: Path) -> None:
    result = runner.invoke(cli, ["--workspace", str(notes), "memory", "search", "x", "--batch"], input="")
    assert result.exit_code == 2
    assert "not both" in result.output


def test_index_json_is_the_sync_report(runner: CliRunner, notes: Path) -> None:
    result = runner.invoke(cli, ["--workspace", str(notes), "memory", "index", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["agentId"] == "main"
    assert report["filesIndexed"] == 3 and report["filesDeleted"] == 0
    assert report["chunksWritten"] >= 3 and report["embedded"] == 0
    (notes / "memory" / "2024-02-10.md").unlink()
    forced = json.loads(runner.invoke(cli, ["--workspace", str(notes), "memory", "index", "--json"]).output)
    assert forced["filesDeleted"] == 1 and forced["filesUnchanged"] == 2


def test_index_reports_transcripts_renamed_by_new(runner: CliRunner, notes: Path, isolated_env: Path) -> None:
    from datetime import UTC, datetime

    from sessionmem.messages import Message
    from sessionmem.session.stores.transcript_folder import Transcript, archive_name

    isolated_env.mkdir(parents=True, exist_ok=True)
    (isolated_env / "config.json5").write_text(
        "{agents: {defaults: {memorySearch: {sources: ['memory', 'sessions']}}}}", encoding="utf-8"
    )
    sessions = isolated_env / "agents" / "main" / "sessions"
    live = []
    for name in ("s1", "s2"):
        transcript = Transcript.open(sessions / f"{name}.jsonl", name, notes)
        transcript.append_message(Message.user(f"where did {name} leave the spare anchor"))
        transcript.append_message(Message.assistant("in locker B under the tarpaulin"))
        live.append(transcript.path)
    args = ["--workspace", str(notes), "memory", "index"]
    first = json.loads(runner.invoke(cli, [*args, "--json"]).output)
    assert (first["filesIndexed"], first["filesRenamed"]) == (5, 0)

    live[0].rename(archive_name(live[0], datetime(2026, 3, 1, 10, 0, tzinfo=UTC)))  # what /new does
    text = runner.invoke(cli, args)
    assert text.exit_code == 0, text.output
    assert "0 files indexed, " in text.output
    assert ", 0 deleted, 1 renamed, 0 chunks, 0 embedded" in text.output

    live[1].rename(archive_name(live[1], datetime(2026, 3, 2, 10, 0, tzinfo=UTC)))
    report = json.loads(runner.invoke(cli, [*args, "--json"]).output)
    assert (report["filesRenamed"], report["filesIndexed"], report["embedded"]) == (1, 0, 0)


def test_status_says_fts_only_mode_when_no_provider_key(runner: CliRunner, notes: Path) -> None:
    result = runner.invoke(cli, ["--workspace", str(notes), "memory", "status", "--index"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "Memory Search (main)" in out
    assert "Provider: none (requested: auto)" in out
    assert "Mode: fts-only — keyword search only" in out
    assert "Indexed: 3 files · " in out
    assert "Vector path: none" in out
    assert "FTS: ready" in out
    assert f"Workspace: {notes}" in out


def test_status_json_and_deep_probe_without_provider(runner: CliRunner, notes: Path) -> None:
    result = runner.invoke(
        cli, ["--workspace", str(notes), "memory", "status", "--deep", "--index", "--json"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["mode"] == "fts-only" and data["provider"] == "none"
    assert data["providerUnavailableReason"]
    assert data["files"] == 3 and data["bySource"]["memory"]["files"] == 3
    assert data["embeddingProbe"]["ok"] is False
    assert data["fts"]["available"] is True
    assert data["sync"]["filesIndexed"] == 3


def test_status_lists_issues_for_an_empty_workspace(runner: CliRunner, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    result = runner.invoke(cli, ["--workspace", str(empty), "memory", "status"])
    assert result.exit_code == 0, result.output
    assert "Issues:" in result.output
    assert "memory directory missing" in result.output


# ---------------------------------------------------------------------------- progress and start-up cost


def test_progress_bar_is_drawn_only_on_a_terminal(notes: Path) -> None:
    """stderr on a pseudo-terminal gets the tqdm bar; the summary still goes to stdout."""
    pty = pytest.importorskip("pty")
    import fcntl
    import struct
    import termios

    master, slave = pty.openpty()
    # A fresh pseudo-terminal is 0 columns wide, where tqdm draws nothing; give it a real size.
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "sessionmem.cli", "--workspace", str(notes), "memory", "index"],
            stdout=subprocess.PIPE,
            stderr=slave,
            env=env,
            timeout=120,
            check=False,
        )
        os.close(slave)
        drawn = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            drawn += chunk
    finally:
        os.close(master)
    assert proc.returncode == 0
    assert b"Indexing memory (main)" in drawn
    assert b"Memory index updated (main)" in proc.stdout


def test_cold_search_imports_nothing_heavy_and_stays_small(notes: Path) -> None:
    """A cold FTS-only search loads no litellm/llama_cpp/watchdog and fits in 150 MB."""
    runner_py = (
        "import resource, subprocess, sys\n"
        "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "sys.stdout.write(p.stdout)\n"
        "sys.stderr.write(p.stderr)\n"
        "print('MAXRSS_KB', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    cmd = [sys.executable, "-X", "importtime", "-m", "sessionmem.cli", "--workspace", str(notes)]
    subprocess.run([*cmd, "memory", "index"], env=env, check=True, capture_output=True, timeout=120)
    proc = subprocess.run(
        [sys.executable, "-c", runner_py, *cmd, "memory", "search", "billing cutover"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "memory/2024-01-05.md" in proc.stdout
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if "|" in line}
    for heavy in ("litellm", "llama_cpp", "watchdog", "tqdm", "openai", "huggingface_hub", "mcp"):
        assert heavy not in imported, f"{heavy} imported by a cold FTS-only search"
    # Transcript indexing is not a source here, so its modules stay unloaded.
    for module in ("sessionmem.memory.sync.session_delta", "sessionmem.memory.sync.session_text"):
        assert module not in imported, f"{module} imported by a search of notes only"
    max_rss_kb = int(proc.stdout.rsplit("MAXRSS_KB", 1)[1].split()[0])
    assert max_rss_kb < 150 * 1024


@pytest.mark.local_model
def test_status_deep_and_search_with_the_local_model(
    runner: CliRunner, notes: Path, gguf_model: Path
) -> None:
    config = notes.parent / "local.json"
    config.write_text(
        json.dumps(
            {
                "agents": {
                    "defaults": {
                        "workspace": str(notes),
                        "memorySearch": {"provider": "local", "local": {"modelPath": str(gguf_model)}},
                    }
                }
            }
        ),
        encoding="utf-8",
    )
    status = runner.invoke(cli, ["--config", str(config), "memory", "status", "--index", "--deep", "--json"])
    assert status.exit_code == 0, status.output
    data = json.loads(status.output)
    assert (data["mode"], data["provider"]) == ("hybrid", "local")
    assert data["embeddingProbe"]["ok"] is True and data["embeddingProbe"]["dims"] == 384
    vector = data["vector"]
    assert vector["dims"] == 384
    # sqlite-vec must really load: through the stdlib where it can load extensions, else (as on this
    # machine's Python) through sqlean.py; the reason names the driver that took it.
    stdlib_loads = hasattr(sqlite3.Connection, "enable_load_extension")
    driver, named = ("sqlite3", "stdlib sqlite3") if stdlib_loads else ("sqlean", "sqlean.py")
    assert vector["loaded"] is True and vector["version"]
    assert vector["driver"] == driver
    assert f"loaded through {named}" in vector["reason"]
    # --deep loads the in-memory matrix and nothing is written after it: the matrix serves.
    assert vector["path"] == "matrix"
    assert data["sync"]["embedded"] == 3

    human = runner.invoke(cli, ["--config", str(config), "memory", "status", "--deep"])
    assert "Embeddings: ready (384 dims" in human.output
    assert "Mode: hybrid" in human.output
    assert f"Vector: ready (sqlite-vec {vector['version']} loaded through {named}" in human.output
    assert "Vector path: matrix (" in human.output
    # Without --deep a fresh process has not loaded the matrix: the vec0 table serves.
    cold = json.loads(runner.invoke(cli, ["--config", str(config), "memory", "status", "--json"]).output)
    assert cold["vector"]["path"] == "sqlite-vec"

    found = runner.invoke(
        cli, ["--config", str(config), "memory", "search", "who approves the ledger", "--json"]
    )
    answer = json.loads(found.output)
    assert answer["mode"] == "hybrid"
    assert answer["results"][0]["path"] == "memory/2024-01-05.md"


@pytest.mark.local_model
def test_index_switches_to_the_fallback_when_the_provider_keeps_failing(
    runner: CliRunner, notes: Path, gguf_model: Path, openai_server: OpenAIServer
) -> None:
    config = notes.parent / "fallback.json"
    memory_search = {
        "provider": "openai",
        "remote": {"baseUrl": openai_server.base_url},
        "fallback": "local",
        "local": {"modelPath": str(gguf_model)},
    }
    config.write_text(
        json.dumps({"agents": {"defaults": {"workspace": str(notes), "memorySearch": memory_search}}}),
        encoding="utf-8",
    )
    openai_server.embeddings.push(*[server_error(500) for _ in range(3)])  # every attempt of the batch

    indexed = runner.invoke(cli, ["--config", str(config), "memory", "index"])
    assert indexed.exit_code == 0, indexed.output
    assert "switched to the fallback local" in indexed.output
    assert "Memory index updated (main) (full rebuild): 3 files indexed" in indexed.output
    assert len(openai_server.embeddings.requests) == 3

    # Each command starts with the configured provider again; while it is down, the fallback's
    # vectors come from the embedding cache, so nothing is embedded twice.
    openai_server.embeddings.push(*[server_error(500) for _ in range(3)])
    again = runner.invoke(cli, ["--config", str(config), "memory", "index", "--json"])
    report = json.loads(again.output)
    assert (report["embedded"], report["cacheHits"]) == (0, 3)
    assert "switched to the fallback local" in report["issues"][0]


def test_broken_provider_fails_search_cleanly_but_status_still_answers(notes: Path, tmp_path: Path) -> None:
    config = tmp_path / "broken-provider.json5"
    missing = tmp_path / "no-such-model.gguf"
    config.write_text(
        f"{{agents: {{defaults: {{workspace: '{notes}', "
        f"memorySearch: {{provider: 'local', local: {{modelPath: '{missing}'}}}}}}}}}}",
        encoding="utf-8",
    )
    search = run_cli("--config", str(config), "memory", "search", "billing")
    assert search.returncode == 1
    assert "Local embeddings unavailable" in search.stderr and str(missing) in search.stderr
    assert "Traceback" not in search.stderr

    status = run_cli("--config", str(config), "memory", "status")
    assert status.returncode == 0, status.stderr
    assert "Mode: unavailable" in status.stdout
    assert "Issues:\n  - embedding provider: Local embeddings unavailable." in status.stdout

    syncing = run_cli("--config", str(config), "memory", "status", "--index")
    assert syncing.returncode == 1
    assert "Local embeddings unavailable" in syncing.stderr


def test_sessions_source_follows_the_configured_session_store(
    runner: CliRunner, notes: Path, tmp_path: Path
) -> None:
    """``session.store`` moves sessions.json and the transcripts; indexing and ``memory get`` follow."""
    from sessionmem.model.scripted import ScriptedModel, flush_aware
    from sessionmem.session.runner import SessionRunner

    config = tmp_path / "store.json"
    store = {"store": str(tmp_path / "chats" / "{agentId}" / "sessions.json")}
    sources = {"memorySearch": {"sources": ["memory", "sessions"]}}
    config.write_text(json.dumps({"session": store, "agents": {"defaults": sources}}), encoding="utf-8")
    args = ["--config", str(config), "--workspace", str(notes)]
    app = resolve(GlobalOptions(config=str(config), workspace=str(notes)))
    assert app.sessions_dir == tmp_path / "chats" / "main"

    model = ScriptedModel(responder=flush_aware(lambda request: "in locker B under the tarpaulin"))
    session = SessionRunner(model, config=app.config, workspace=notes, state_dir=app.state_dir).open()
    session.run_turn_sync("where did we leave the spare anchor")
    assert session.transcript.path.parent == app.sessions_dir

    indexed = runner.invoke(cli, [*args, "memory", "index", "--json"])
    assert indexed.exit_code == 0, indexed.output
    assert json.loads(indexed.output)["filesIndexed"] == 4  # MEMORY.md, two notes, the transcript
    found = runner.invoke(cli, [*args, "memory", "search", "spare anchor tarpaulin", "--json"])
    assert found.exit_code == 0, found.output
    hits = [r["path"] for r in json.loads(found.output)["results"] if r["path"].startswith("sessions/")]
    assert hits == [f"sessions/{session.transcript.path.name}"]
    got = runner.invoke(cli, [*args, "memory", "get", hits[0]])
    assert got.exit_code == 0, got.output
    assert "tarpaulin" in got.output


# ---------------------------------------------------------------------------- one index per agent


def test_two_agents_on_one_store_path_are_refused_by_name(tmp_path: Path) -> None:
    shared = str(tmp_path / "index.sqlite")
    document = {
        "agents": {
            "defaults": {"memorySearch": {"store": {"path": shared}}},
            "list": [{"id": "work"}, {"id": "home"}],
        }
    }
    with pytest.raises(ConfigError, match=r"memorySearch\.store\.path .*'work' and 'home'.*\{agentId\}"):
        Config.from_dict(document)
    templated = {
        **document,
        "agents": {
            **document["agents"],
            "defaults": {"memorySearch": {"store": {"path": str(tmp_path / "{agentId}.sqlite")}}},
        },
    }
    Config.from_dict(templated)  # one file per agent: fine
    own = {"agents": {"list": [{"id": "work", "memorySearch": {"store": {"path": shared}}}, {"id": "home"}]}}
    Config.from_dict(own)  # only one agent uses that file: fine
    config = tmp_path / "agents.json"
    config.write_text(json.dumps(document))
    result = run_cli("--config", str(config), "--agent", "work", "memory", "status")
    assert (
        result.returncode == 2
        and "memorySearch.store.path" in result.stderr
        and "Traceback" not in result.stderr
    )


def test_an_index_file_of_another_agent_is_never_shared(tmp_path: Path) -> None:
    """Python callers bypass config validation: the index file itself says whose it is."""
    from sessionmem.memory.index import MemoryIndex

    settings = MemorySearchConfig.model_validate(
        {"provider": "none", "store": {"path": str(tmp_path / "one.sqlite")}}
    )
    workspace = tmp_path / "ws"
    (workspace / "memory").mkdir(parents=True)
    with MemoryIndex.open("work", workspace, settings, state_dir=tmp_path / "state", watch=False) as index:
        index.sync()
    with pytest.raises(ConfigError, match=r"belongs to agent 'work'.*memorySearch\.store\.path"):
        MemoryIndex.open("home", workspace, settings, state_dir=tmp_path / "state", watch=False)


def test_get_of_a_huge_file_is_capped_and_says_how_to_read_on(runner: CliRunner, workspace: Path) -> None:
    (workspace / "memory" / "big.md").write_text(
        "".join(f"- line {i}: {'x' * 40}\n" for i in range(1, 20_001))
    )
    result = run_cli("--workspace", str(workspace), "memory", "get", "memory/big.md")
    assert result.returncode == 0, result.stderr
    assert len(result.stdout) < 20_000 and result.stdout.startswith("- line 1: ")
    shown = result.stdout.count("\n")
    assert f"--from {shown + 1}" in result.stderr and "capped" in result.stderr
