"""memory_search / memory_get as the model sees them: schemas, results, citations, errors (reference §10)."""

from __future__ import annotations

import asyncio
import json
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from sessionmem.errors import EmbeddingError, MemoryIndexError
from sessionmem.memory.search.records import SearchRequest, SearchResponse, SearchResult
from sessionmem.memory.tools.reading import (
    INDEX_ACTION,
    INDEX_WARNING,
    PROVIDER_ACTION,
    PROVIDER_WARNING,
    QUOTA_ACTION,
    QUOTA_WARNING,
    MemoryTools,
    chat_type_of_key,
    handle_memory_get,
    handle_memory_search,
    memory_get_schema,
    memory_search_schema,
)
from sessionmem.privacy import EVERYTHING

RESULT_KEYS = {"path", "startLine", "endLine", "score", "snippet", "source", "date"}


class StubIndex:
    """Stands in for MemoryIndex: answers every search with fixed results and records the requests."""

    def __init__(self, results: tuple[SearchResult, ...] = (), **response: Any) -> None:
        self.response = SearchResponse(
            results=results,
            provider=response.get("provider", "local"),
            model=response.get("model", "all-MiniLM-L6-v2"),
            mode=response.get("mode", "hybrid"),
            fallback=response.get("fallback"),
            warnings=response.get("warnings", ()),
        )
        self.requests: list[SearchRequest] = []

    def search(self, request: SearchRequest) -> SearchResponse:
        self.requests.append(request)
        return self.response


class FailingIndex:
    def __init__(self, error: Exception) -> None:
        self.error = error

    def search(self, request: SearchRequest) -> SearchResponse:
        raise self.error


class ProviderHttpError(Exception):
    def __init__(self, message: str, status_code: int) -> None:
        super().__init__(message)
        self.status_code = status_code


MULTI = SearchResult(
    path="memory/2026-01-05.md",
    start_line=3,
    end_line=7,
    score=0.8123456789,
    snippet="  Decided to move billing cutover to March.\n",
    source="memory",
    date="2026-01-05",
)
SINGLE = SearchResult(
    path="sessions/abc.jsonl", start_line=4, end_line=4, score=0.5, snippet="User: hi", source="sessions"
)


def _search(index: Any, args: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    out = handle_memory_search(index, args, **kwargs)
    json.dumps(out)  # everything the handler returns must be JSON-serialisable
    return out


# -- schemas ---------------------------------------------------------------------------------------------


def test_schemas_are_openai_function_definitions() -> None:
    search = memory_search_schema()
    assert search["type"] == "function"
    fn = search["function"]
    assert fn["name"] == "memory_search"
    assert fn["parameters"]["required"] == ["query"]
    assert set(fn["parameters"]["properties"]) == {"query", "maxResults", "minScore", "after", "before"}
    assert "YYYY-MM-DD" in fn["description"] and "disabled=true" in fn["description"]
    get = memory_get_schema()["function"]
    assert get["name"] == "memory_get"
    assert get["parameters"]["required"] == ["path"]
    assert get["parameters"]["properties"]["from"]["type"] == "integer"
    assert "sessions/" not in get["description"]
    assert "sessions/<id>.jsonl" in memory_get_schema(include_sessions=True)["function"]["description"]
    assert "session transcripts" in memory_search_schema(include_sessions=True)["function"]["description"]


# -- memory_search ---------------------------------------------------------------------------------------


def test_search_result_shape_without_citations() -> None:
    index = StubIndex((MULTI,))
    out = _search(index, {"query": "billing cutover"}, citations="off")
    assert out["provider"] == "local" and out["model"] == "all-MiniLM-L6-v2"
    assert out["mode"] == "hybrid" and out["citations"] == "off"
    assert "fallback" not in out and "disabled" not in out
    (hit,) = out["results"]
    assert set(hit) == RESULT_KEYS
    assert hit == {
        "path": "memory/2026-01-05.md",
        "startLine": 3,
        "endLine": 7,
        "score": 0.812346,
        "snippet": "  Decided to move billing cutover to March.\n",
        "source": "memory",
        "date": "2026-01-05",
    }


def test_search_passes_arguments_to_the_index() -> None:
    index = StubIndex()
    _search(
        index,
        {
            "query": "  cutover ",
            "maxResults": 3,
            "minScore": 0.2,
            "after": "2026-01-01",
            "before": "2026-01-31",
        },
        citations="off",
    )
    (request,) = index.requests
    assert request.query == "cutover"
    assert (request.max_results, request.min_score) == (3, 0.2)
    assert (request.after, request.before) == (date(2026, 1, 1), date(2026, 1, 31))


def test_search_defaults_are_left_to_the_index_config() -> None:
    index = StubIndex()
    _search(index, {"query": "x"}, citations="off")
    assert index.requests[0] == SearchRequest(query="x", visibility=EVERYTHING)  # no session: the owner


def test_citations_on_decorate_snippets_with_line_ranges() -> None:
    out = _search(
        StubIndex((MULTI, SINGLE)), {"query": "q"}, citations="on", session_key="agent:main:discord:group:1"
    )
    multi, single = out["results"]
    assert multi["citation"] == "memory/2026-01-05.md#L3-L7"
    assert (
        multi["snippet"] == "Decided to move billing cutover to March.\n\nSource: memory/2026-01-05.md#L3-L7"
    )
    assert single["citation"] == "sessions/abc.jsonl#L4"
    assert single["snippet"] == "User: hi\n\nSource: sessions/abc.jsonl#L4"
    assert out["citations"] == "on"


@pytest.mark.parametrize(
    ("session_key", "cited"),
    [
        ("agent:main:main", True),
        (None, True),
        ("agent:main:telegram:direct:42", True),
        ("agent:main:whatsapp:dm:+1555", True),
        ("not-a-session-key", False),  # unknown shapes count as shared (DESIGN 14)
        ("agent:main:discord:group:1234", False),
        ("agent:main:slack:channel:c0ffee", False),
        ("Agent:Ops:Slack:Channel:General", False),
        ("agent:main:telegram:acct:group:9", False),
    ],
)
def test_citations_auto_follow_the_chat_type_of_the_session_key(session_key: str | None, cited: bool) -> None:
    out = _search(StubIndex((MULTI,)), {"query": "q"}, citations="auto", session_key=session_key)
    (hit,) = out["results"]
    assert ("citation" in hit) is cited
    assert hit["snippet"].endswith("Source: memory/2026-01-05.md#L3-L7") is cited
    assert out["citations"] == "auto"


def test_explicit_chat_type_overrides_key_parsing() -> None:
    out = _search(
        StubIndex((MULTI,)),
        {"query": "q"},
        citations="auto",
        session_key="agent:main:main",
        chat_type="group",
    )
    assert "citation" not in out["results"][0]


def test_chat_type_of_ambiguous_or_unknown_keys_is_never_direct() -> None:
    # "group" anywhere wins (reading a group as direct would cite and reveal; see sessionmem.privacy).
    assert chat_type_of_key("agent:main:group:direct:1") == "group"
    assert chat_type_of_key("agent:main:signal:group:abc") == "group"
    assert chat_type_of_key("agent:main:cron:nightly") is None
    assert chat_type_of_key("agent::broken") is None


def test_fallback_and_fts_mode_are_reported() -> None:
    index = StubIndex(
        (MULTI,),
        provider="none",
        model="fts-only",
        mode="fts-only",
        fallback={"from": "openai", "reason": "no key"},
    )
    out = _search(index, {"query": "q"}, citations="off")
    assert (out["provider"], out["model"], out["mode"]) == ("none", "fts-only", "fts-only")
    assert out["fallback"] == {"from": "openai", "reason": "no key"}


@pytest.mark.parametrize(
    "error",
    [
        RuntimeError("Error code: 429 - rate limited"),
        RuntimeError("You exceeded your current quota (insufficient_quota)"),
        ProviderHttpError("Too Many Requests", 429),
    ],
)
def test_quota_failures_come_back_as_disabled_with_quota_advice(error: Exception) -> None:
    out = _search(FailingIndex(error), {"query": "q"}, citations="on")
    assert out == {
        "results": [],
        "disabled": True,
        "unavailable": True,
        "error": str(error),
        "warning": QUOTA_WARNING,
        "action": QUOTA_ACTION,
    }
    assert QUOTA_WARNING == "Memory search is unavailable because the embedding provider quota is exhausted."
    assert QUOTA_ACTION == "Top up or switch embedding provider, then retry memory_search."


def test_other_failures_come_back_as_provider_errors() -> None:
    out = _search(FailingIndex(ConnectionError("connection refused")), {"query": "q"}, citations="on")
    assert out["disabled"] is True and out["unavailable"] is True
    assert out["error"] == "connection refused"
    assert (
        out["warning"]
        == PROVIDER_WARNING
        == "Memory search is unavailable due to an embedding/provider error."
    )
    assert (
        out["action"] == PROVIDER_ACTION == "Check embedding provider configuration and retry memory_search."
    )


def index_failures() -> list[Exception]:
    """What an index store raises: SQLite's errors, psycopg's (loaded here), the index's own."""
    import sqlite3

    import psycopg

    return [
        sqlite3.OperationalError("no such table: chunks_fts"),
        psycopg.errors.TooManyColumns("target lists can have at most 1664 entries"),
        psycopg.errors.ProgramLimitExceeded("word is too long (4290 bytes, max 2047 bytes)"),  # "429"
        MemoryIndexError("memory index /x.sqlite is closed"),
    ]


@pytest.mark.parametrize("error", index_failures(), ids=lambda e: type(e).__name__)
def test_index_failures_are_never_called_provider_errors(error: Exception) -> None:
    out = _search(FailingIndex(error), {"query": "q"}, citations="off")
    assert out["disabled"] is True and out["error"] == str(error)
    assert (out["warning"], out["action"]) == (INDEX_WARNING, INDEX_ACTION)
    assert INDEX_WARNING == "Memory search is unavailable due to an error in the memory index."


def test_an_embedding_error_is_still_the_providers() -> None:
    out = _search(FailingIndex(EmbeddingError("HTTP 500 from the embeddings endpoint")), {"query": "q"})
    assert (out["warning"], out["action"]) == (PROVIDER_WARNING, PROVIDER_ACTION)


def test_exception_without_message_is_named() -> None:
    out = _search(FailingIndex(TimeoutError()), {"query": "q"}, citations="off")
    assert out["error"] == "TimeoutError"


def test_no_index_means_search_unavailable() -> None:
    out = _search(None, {"query": "q"}, citations="off")
    assert out["disabled"] is True and "not configured" in out["error"]


@pytest.mark.parametrize(
    ("args", "argument", "fragment"),
    [
        ({}, "query", "is required"),
        ({"query": 42}, "query", "must be a string"),
        ({"query": "   "}, "query", "must not be empty"),
        ({"query": "q", "maxResults": "many"}, "maxResults", "must be an integer"),
        ({"query": "q", "maxResults": 2.5}, "maxResults", "must be an integer"),
        ({"query": "q", "maxResults": True}, "maxResults", "must be an integer"),
        ({"query": "q", "maxResults": 0}, "maxResults", "at least 1"),
        ({"query": "q", "minScore": "high"}, "minScore", "must be a number"),
        ({"query": "q", "minScore": -0.5}, "minScore", "at least 0"),
        ({"query": "q", "after": "yesterday"}, "after", "YYYY-MM-DD"),
        ({"query": "q", "before": 20260101}, "before", "YYYY-MM-DD"),
        ({"query": "q", "after": "2026-02-30"}, "after", "not a real calendar date"),
        ({"query": "q", "after": "2026-03-01", "before": "2026-02-01"}, "after", "not be later than before"),
    ],
)
def test_bad_search_arguments_name_the_argument(args: dict[str, Any], argument: str, fragment: str) -> None:
    index = StubIndex()
    out = _search(index, args, citations="off")
    assert out["results"] == []
    assert out["argument"] == argument
    assert f"'{argument}'" in out["error"] and fragment in out["error"]
    assert index.requests == []  # the index is not queried with bad arguments


def test_numbers_sent_as_floats_or_strings_are_accepted() -> None:
    index = StubIndex()
    _search(index, {"query": "q", "maxResults": 5.0, "minScore": "0.3"}, citations="off")
    _search(index, {"query": "q", "maxResults": "4"}, citations="off")
    assert [(r.max_results, r.min_score) for r in index.requests] == [(5, 0.3), (4, None)]


# -- memory_get ------------------------------------------------------------------------------------------

NOTE = "line 1\nline 2\nline 3\nline 4\nline 5\n"


@pytest.fixture
def note(workspace: Path) -> Path:
    path = workspace / "memory" / "2026-01-05.md"
    path.write_text(NOTE, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("window", "text"),
    [
        ({}, NOTE),
        ({"from": 2, "lines": 2}, "line 2\nline 3"),
        ({"from": 4}, "line 4\nline 5\n"),
        ({"lines": 1}, "line 1"),
        ({"from": 5, "lines": 10}, "line 5\n"),
        ({"from": 7, "lines": 2}, ""),
        ({"from": 99}, ""),
        ({"from": 0, "lines": 0}, NOTE),
        ({"from": "2", "lines": 1.0}, "line 2"),
    ],
)
def test_get_reads_line_windows(workspace: Path, note: Path, window: dict[str, Any], text: str) -> None:
    out = handle_memory_get(workspace, {"path": "memory/2026-01-05.md", **window})
    assert out == {"path": "memory/2026-01-05.md", "text": text}


def test_get_accepts_absolute_path_and_returns_relative(workspace: Path, note: Path) -> None:
    out = handle_memory_get(workspace, {"path": str(note), "from": 1, "lines": 1})
    assert out == {"path": "memory/2026-01-05.md", "text": "line 1"}


def test_get_missing_file_is_empty_text(workspace: Path) -> None:
    assert handle_memory_get(workspace, {"path": "memory/2020-01-01.md"}) == {
        "path": "memory/2020-01-01.md",
        "text": "",
    }


def test_get_refuses_a_binary_file_named_md_and_normalises_text(workspace: Path) -> None:
    (workspace / "memory" / "blob.md").write_bytes(b"\xff\xfe\x00\x00binary")
    out = handle_memory_get(workspace, {"path": "memory/blob.md"})
    assert out["disabled"] is True and out["text"] == "" and "binary" in out["error"]
    (workspace / "memory" / "crlf.md").write_bytes(b"\xef\xbb\xbfone\r\ntwo\r\n")
    assert handle_memory_get(workspace, {"path": "memory/crlf.md", "from": 2, "lines": 1})["text"] == "two"


def test_get_extra_path_file(workspace: Path, tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "idea.md").write_text("a\nb\n", encoding="utf-8")
    out = handle_memory_get(workspace, {"path": str(vault / "idea.md"), "from": 2}, extra_paths=[str(vault)])
    assert out == {"path": "../vault/idea.md", "text": "b\n"}


@pytest.mark.parametrize("path", ["../outside.md", "AGENTS.md", "memory/x.txt", "/etc/passwd"])
def test_get_refusals_are_disabled_errors(workspace: Path, tmp_path: Path, path: str) -> None:
    (tmp_path / "outside.md").write_text("secret", encoding="utf-8")
    (workspace / "AGENTS.md").write_text("agents", encoding="utf-8")
    out = handle_memory_get(workspace, {"path": path})
    assert out["path"] == path and out["text"] == "" and out["disabled"] is True
    assert path in out["error"]


@pytest.mark.parametrize("path", ["memory/../MEMORY.md", "memory/2026/../../MEMORY.md", "memory/../x.md"])
def test_get_refuses_dotdot_even_when_it_folds_back_to_a_memory_file(workspace: Path, path: str) -> None:
    (workspace / "MEMORY.md").write_text("long-term secret\n", encoding="utf-8")
    out = handle_memory_get(workspace, {"path": path})
    assert out == {
        "path": path,
        "text": "",
        "disabled": True,
        "error": f"'..' segments are not allowed: {path}",
    }
    assert json.loads(json.dumps(out)) == out


def test_get_refuses_symlinked_note(workspace: Path, tmp_path: Path) -> None:
    (tmp_path / "real.md").write_text("secret", encoding="utf-8")
    (workspace / "MEMORY.md").symlink_to(tmp_path / "real.md")
    out = handle_memory_get(workspace, {"path": "MEMORY.md"})
    assert out["disabled"] is True and "symlinks are not followed" in out["error"]
    assert out["text"] == ""


@pytest.mark.parametrize(
    ("args", "argument"),
    [
        ({}, "path"),
        ({"path": 3}, "path"),
        ({"path": "MEMORY.md", "from": "top"}, "from"),
        ({"path": "MEMORY.md", "lines": [1]}, "lines"),
    ],
)
def test_get_bad_arguments_name_the_argument(workspace: Path, args: dict[str, Any], argument: str) -> None:
    out = handle_memory_get(workspace, args)
    assert out["disabled"] is True and out["text"] == ""
    assert out["argument"] == argument and f"'{argument}'" in out["error"]


def _session_line(role: str, text: str) -> str:
    return json.dumps(
        {"type": "message", "timestamp": "2026-01-05T10:00:00Z", "message": {"role": role, "content": text}}
    )


@pytest.fixture
def sessions_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "sessions"
    folder.mkdir()
    lines = [
        json.dumps({"type": "session", "version": 3, "id": "abc"}),
        _session_line("user", "When is the billing\n  cutover?"),
        json.dumps({"type": "message", "message": {"role": "toolResult", "content": "raw tool output"}}),
        _session_line("assistant", "March 3rd."),
        _session_line("user", "thanks"),
    ]
    (folder / "abc.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def test_get_reads_the_transcript_lines_a_session_hit_points_to(workspace: Path, sessions_dir: Path) -> None:
    out = handle_memory_get(
        workspace, {"path": "sessions/abc.jsonl", "from": 2, "lines": 3}, sessions_dir=sessions_dir
    )
    assert out == {
        "path": "sessions/abc.jsonl",
        "text": "User: When is the billing cutover?\nAssistant: March 3rd.",
    }
    whole = handle_memory_get(workspace, {"path": "sessions/abc.jsonl"}, sessions_dir=sessions_dir)
    assert whole["text"].splitlines()[-1] == "User: thanks"
    assert "raw tool output" not in whole["text"]


def test_get_session_path_without_sessions_dir_is_refused(workspace: Path) -> None:
    out = handle_memory_get(workspace, {"path": "sessions/abc.jsonl"})
    assert out["disabled"] is True and "no sessions directory" in out["error"]


def test_get_missing_session_file_is_empty(workspace: Path, sessions_dir: Path) -> None:
    out = handle_memory_get(workspace, {"path": "sessions/gone.jsonl"}, sessions_dir=sessions_dir)
    assert out == {"path": "sessions/gone.jsonl", "text": ""}


# -- MemoryTools -----------------------------------------------------------------------------------------


def test_memory_tools_dispatches_json_arguments(workspace: Path, note: Path) -> None:
    tools = MemoryTools(index=StubIndex((MULTI,)), workspace=workspace, citations="auto")
    assert [s["function"]["name"] for s in tools.schemas()] == ["memory_search", "memory_get"]
    found = json.loads(tools.call("memory_search", '{"query": "cutover"}', session_key="agent:main:main"))
    assert found["results"][0]["citation"] == "memory/2026-01-05.md#L3-L7"
    in_group = json.loads(
        tools.call("memory_search", {"query": "cutover"}, session_key="agent:main:x:group:1")
    )
    assert "citation" not in in_group["results"][0]
    got = json.loads(tools.call("memory_get", '{"path": "memory/2026-01-05.md", "from": 3, "lines": 1}'))
    assert got == {"path": "memory/2026-01-05.md", "text": "line 3"}


def test_memory_tools_reports_bad_json_and_unknown_tools(workspace: Path) -> None:
    tools = MemoryTools(index=StubIndex(), workspace=workspace)
    bad = json.loads(tools.call("memory_search", "{query: oops"))
    assert bad["results"] == [] and "not valid JSON" in bad["error"]
    not_object = json.loads(tools.call("memory_get", "[1, 2]"))
    assert not_object["disabled"] is True and "JSON object" in not_object["error"]
    unknown = json.loads(tools.call("web_search", "{}"))
    assert "unknown tool 'web_search'" in unknown["error"] and "memory_search, memory_get" in unknown["error"]


def test_memory_tools_without_index_offers_only_get(workspace: Path) -> None:
    tools = MemoryTools(index=None, workspace=workspace, citations="off")
    assert tools.names == ("memory_get",)
    assert [s["function"]["name"] for s in tools.schemas()] == ["memory_get"]
    assert "unknown tool" in json.loads(tools.call("memory_search", {"query": "q"}))["error"]
    assert (
        tools.recall_section()
        .splitlines()[1]
        .endswith("If low confidence after reading them, say you checked.")
    )
    assert tools.recall_section(prompt_mode="minimal") == ""


def test_memory_tools_async_call_and_keyword_handlers(workspace: Path, note: Path) -> None:
    tools = MemoryTools(index=StubIndex((SINGLE,)), workspace=workspace, citations="on")
    text = asyncio.run(tools.acall("memory_get", {"path": "memory/2026-01-05.md", "lines": 1}))
    assert json.loads(text)["text"] == "line 1"
    handlers = tools.handlers()
    assert set(handlers) == {"memory_search", "memory_get"}
    assert handlers["memory_get"](path="memory/2026-01-05.md", **{"from": 5})["text"] == "line 5\n"
    assert handlers["memory_search"](query="hi")["results"][0]["citation"] == "sessions/abc.jsonl#L4"


def test_memory_tools_mention_sessions_when_transcripts_are_readable(
    workspace: Path, sessions_dir: Path
) -> None:
    tools = MemoryTools(index=StubIndex(), workspace=workspace, sessions_dir=sessions_dir, citations="off")
    assert "sessions/<id>.jsonl" in tools.schemas()[1]["function"]["description"]
    assert "+ indexed session transcripts" in tools.recall_section()
    assert "Citations are disabled" in tools.recall_section()


def test_memory_tools_from_config(workspace: Path, sessions_dir: Path) -> None:
    from sessionmem.config import Config

    config = Config.from_dict(
        {
            "memory": {"citations": "off"},
            "agents": {
                "defaults": {
                    "memorySearch": {
                        "extraPaths": ["notes"],
                        "sources": ["memory", "sessions"],
                        "experimental": {"sessionMemory": True},
                    }
                }
            },
        }
    )
    tools = MemoryTools.from_config(
        config, "main", index=StubIndex(), workspace=workspace, sessions_dir=sessions_dir
    )
    assert (tools.citations, tools.extra_paths, tools.sessions_dir) == ("off", ("notes",), sessions_dir)
    assert tools.names == ("memory_search", "memory_get")

    plain = MemoryTools.from_config(
        Config(), "main", index=StubIndex(), workspace=workspace, sessions_dir=sessions_dir
    )
    assert plain.sessions_dir is None and plain.citations == "auto"
    refused = json.loads(plain.call("memory_get", {"path": "sessions/abc.jsonl"}))
    assert refused["disabled"] is True

    disabled = Config.from_dict({"agents": {"defaults": {"memorySearch": {"enabled": False}}}})
    off = MemoryTools.from_config(disabled, "main", index=StubIndex(), workspace=workspace)
    assert off.names == () and off.schemas() == [] and off.recall_section() == ""


def test_real_fts_index_search_then_get_the_cited_lines(workspace: Path, tmp_path: Path) -> None:
    """End to end on the real SQLite index (FTS-only): a hit's citation opens the lines it names."""
    from sessionmem.config import Config
    from sessionmem.memory.embed.embedder import EmbedderSelection
    from sessionmem.memory.index import MemoryIndex

    (workspace / "MEMORY.md").write_text(
        "# Long-term\n\nThe user prefers tea over coffee.\n", encoding="utf-8"
    )
    (workspace / "memory" / "2026-01-05.md").write_text(
        "# 2026-01-05\n\n- Decided to move the billing cutover to March 3.\n- Lunch with Priya.\n",
        encoding="utf-8",
    )
    (workspace / "memory" / "2026-02-10.md").write_text(
        "# 2026-02-10\n\n- Billing cutover rehearsal went fine.\n", encoding="utf-8"
    )
    settings = Config().for_agent("main").memory_search
    index = MemoryIndex.open(
        "main",
        workspace,
        settings,
        state_dir=tmp_path / "state",
        selection=EmbedderSelection(None, "none", reason="test"),
    )
    try:
        index.sync()
        tools = MemoryTools(index=index, workspace=workspace, citations="auto")
        found = json.loads(
            tools.call("memory_search", {"query": "billing cutover"}, session_key="agent:main:main")
        )
        assert (found["provider"], found["mode"]) == ("none", "fts-only")
        by_path = {hit["path"]: hit for hit in found["results"]}
        assert set(by_path) == {"memory/2026-01-05.md", "memory/2026-02-10.md"}
        january = by_path["memory/2026-01-05.md"]
        assert january["date"] == "2026-01-05"
        assert january["citation"] == f"memory/2026-01-05.md#L{january['startLine']}-L{january['endLine']}"

        window = {"path": january["path"], "from": january["startLine"]}
        window["lines"] = january["endLine"] - january["startLine"] + 1
        got = json.loads(tools.call("memory_get", window))
        assert "billing cutover to March 3" in got["text"]

        february_only = json.loads(
            tools.call("memory_search", {"query": "billing cutover", "after": "2026-02-01"})
        )
        assert [hit["path"] for hit in february_only["results"]] == ["memory/2026-02-10.md"]

        in_group = json.loads(
            tools.call("memory_search", {"query": "tea"}, session_key="agent:main:discord:group:7")
        )
        assert [hit["path"] for hit in in_group["results"]] == ["MEMORY.md"]
        assert "citation" not in in_group["results"][0]
    finally:
        index.close()


def test_real_index_session_hit_opens_with_memory_get(workspace: Path, tmp_path: Path) -> None:
    """DESIGN decision 8: the path and lines of a session-transcript hit are readable with memory_get."""
    from sessionmem.config import Config
    from sessionmem.memory.embed.embedder import EmbedderSelection
    from sessionmem.memory.index import MemoryIndex

    config = Config.from_dict(
        {
            "agents": {
                "defaults": {
                    "memorySearch": {
                        "sources": ["memory", "sessions"],
                        "experimental": {"sessionMemory": True},
                    }
                }
            }
        }
    )
    index = MemoryIndex.open(
        "main",
        workspace,
        config.for_agent("main").memory_search,
        state_dir=tmp_path / "state",
        selection=EmbedderSelection(None, "none", reason="test"),
    )
    try:
        index.sessions_dir.mkdir(parents=True, exist_ok=True)
        lines = [
            json.dumps({"type": "session", "version": 3, "id": "abc"}),
            _session_line("user", "What colour is the zeppelin hangar?"),
            json.dumps(
                {"type": "message", "message": {"role": "toolResult", "content": "api_key=sk-secret"}}
            ),
            _session_line("assistant", "The zeppelin hangar is teal."),
        ]
        (index.sessions_dir / "abc.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        index.sync()
        tools = MemoryTools.from_config(config, "main", index=index, workspace=workspace)
        assert tools.sessions_dir == index.sessions_dir
        (hit,) = json.loads(tools.call("memory_search", {"query": "zeppelin hangar"}))["results"]
        assert (hit["path"], hit["source"], hit["startLine"], hit["endLine"]) == (
            "sessions/abc.jsonl",
            "sessions",
            2,
            4,
        )
        got = json.loads(tools.call("memory_get", {"path": hit["path"], "from": 2, "lines": 3}))
        assert got == {
            "path": "sessions/abc.jsonl",
            "text": "User: What colour is the zeppelin hangar?\nAssistant: The zeppelin hangar is teal.",
        }
    finally:
        index.close()


# ---------------------------------------------------------------------------- output caps


def test_get_of_a_huge_file_is_capped_with_a_note_on_how_to_read_on(workspace: Path) -> None:
    from sessionmem.memory.tools.reading import GET_MAX_CHARS, GET_MAX_LINES

    lines = [f"- line {i:06d}: " + "x" * 40 for i in range(1, 20_001)]  # ~1 MB
    (workspace / "memory" / "big.md").write_text("\n".join(lines) + "\n")
    out = handle_memory_get(workspace, {"path": "memory/big.md"})
    shown = out["text"].split("\n")
    assert len(out["text"]) <= GET_MAX_CHARS and len(shown) <= GET_MAX_LINES
    assert shown == lines[: len(shown)]  # whole lines, from the first
    assert out["truncated"] is True and out["nextFrom"] == len(shown) + 1
    assert f"from={len(shown) + 1}" in out["note"] and "memory_get" in out["note"]
    more = handle_memory_get(workspace, {"path": "memory/big.md", "from": out["nextFrom"], "lines": 5})
    assert more["text"].split("\n") == lines[len(shown) : len(shown) + 5] and "truncated" not in more


def test_get_of_one_huge_line_cuts_it_and_says_so(workspace: Path) -> None:
    from sessionmem.memory.tools.reading import GET_MAX_CHARS

    (workspace / "memory" / "line.md").write_text("y" * 1_000_000 + "\nsecond line\n")
    out = handle_memory_get(workspace, {"path": "memory/line.md"})
    assert out["text"] == "y" * GET_MAX_CHARS and out["truncated"] is True
    assert out["nextFrom"] == 2 and "cut" in out["note"]


def test_get_of_a_huge_transcript_message_is_capped(workspace: Path, tmp_path: Path) -> None:
    from sessionmem.memory.tools.reading import GET_MAX_CHARS

    folder = tmp_path / "sessions"
    folder.mkdir()
    lines = [_session_line("user", f"message {i} " + "z" * 3000) for i in range(100)]
    (folder / "big.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = handle_memory_get(workspace, {"path": "sessions/big.jsonl"}, sessions_dir=folder)
    assert len(out["text"]) <= GET_MAX_CHARS and out["truncated"] is True
    shown = out["text"].count("User: message")
    assert out["nextFrom"] == shown + 1  # JSONL line numbers: one message per line here
