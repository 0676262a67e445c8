"""The agent-facing memory tools: ``memory_search`` and ``memory_get`` (reference §10).

Each tool is an OpenAI function-calling schema plus a handler that never raises: whatever goes wrong
(bad arguments, a refused path, a failing embedding provider) comes back as a JSON object the model can
read and act on, because a tool crash would end the user's turn for a problem the model could route
around. :class:`MemoryTools` bundles both for a session runner: ``schemas()`` to advertise them and
``call()`` / ``acall()`` to run one from a tool call's name and JSON arguments.

Beyond OpenClaw: ``memory_search`` takes an optional ``after``/``before`` date range and results carry
their date (DESIGN decision 11); ``memory_get`` reads the transcript lines a session hit points to
(decision 8), in a live transcript or in one archived by ``/new`` (``sessions/<id>.jsonl.reset.<time>``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

from sessionmem.config import Config
from sessionmem.errors import (
    EmbedderUnavailable,
    EmbeddingError,
    MemoryIndexError,
    MemoryPathError,
    UsageError,
)
from sessionmem.memory.search.records import SearchRequest, SearchResponse, SearchResult
from sessionmem.memory.store.seam import database_errors
from sessionmem.memory.sync.sources import NotMarkdownError, read_markdown
from sessionmem.memory.sync.transcript_names import FolderShelf, TranscriptShelf
from sessionmem.memory.tools.arguments import optional_date, optional_int, optional_number, required_str
from sessionmem.memory.tools.paths import MemoryTarget, check_visible, resolve_memory_target
from sessionmem.memory.tools.recall_prompt import memory_recall_section
from sessionmem.messages import text_problem
from sessionmem.privacy import EVERYTHING, Visibility, classify_key, reader_visibility
from sessionmem.tools.define import Tool
from sessionmem.tools.json_schema import ArgumentError

SEARCH_TOOL = "memory_search"
GET_TOOL = "memory_get"

_QUOTA_RE = re.compile(r"insufficient_quota|quota|429", re.IGNORECASE)
QUOTA_WARNING = "Memory search is unavailable because the embedding provider quota is exhausted."
QUOTA_ACTION = "Top up or switch embedding provider, then retry memory_search."
PROVIDER_WARNING = "Memory search is unavailable due to an embedding/provider error."
PROVIDER_ACTION = "Check embedding provider configuration and retry memory_search."
INDEX_WARNING = "Memory search is unavailable due to an error in the memory index."
INDEX_ACTION = "Check the memory index (sessionmem memory status) and retry memory_search."


class SearchIndex(Protocol):
    """What the search handler needs from an index (``MemoryIndex`` satisfies it)."""

    def search(self, request: SearchRequest) -> SearchResponse: ...


# -- schemas ---------------------------------------------------------------------------------------------


def memory_search_schema(*, include_sessions: bool = False) -> dict[str, Any]:
    corpus = "MEMORY.md + memory/*.md"
    if include_sessions:
        corpus += (
            " (and indexed session transcripts, whose hits have paths like sessions/<id>.jsonl, or"
            " sessions/<id>.jsonl.reset.<time> for a session ended by /new or /reset)"
        )
    description = (
        f"Mandatory recall step: semantically search {corpus} before answering questions about prior "
        "work, decisions, dates, people, preferences, or todos; returns top snippets with path + lines and "
        "the date of each note. Use after/before (YYYY-MM-DD, inclusive) to search only a date range. If "
        "response has disabled=true, memory retrieval is unavailable and should be surfaced to the user."
    )
    return _function(
        SEARCH_TOOL,
        description,
        {
            "query": {"type": "string", "description": "What to look for, in natural language or keywords."},
            "maxResults": {"type": "integer", "minimum": 1, "description": "Most results to return."},
            "minScore": {"type": "number", "minimum": 0, "description": "Drop results scoring below this."},
            "after": {
                "type": "string",
                "description": "Only results dated on or after this day (YYYY-MM-DD).",
            },
            "before": {
                "type": "string",
                "description": "Only results dated on or before this day (YYYY-MM-DD).",
            },
        },
        required=["query"],
    )


def memory_get_schema(*, include_sessions: bool = False) -> dict[str, Any]:
    where = "MEMORY.md or memory/*.md"
    if include_sessions:
        where = (
            "MEMORY.md, memory/*.md or a session transcript hit "
            "(sessions/<id>.jsonl or sessions/<id>.jsonl.reset.<time>; lines are transcript line numbers)"
        )
    description = (
        f"Safe snippet read from {where} with optional from/lines; use after memory_search to pull only the "
        "needed lines and keep context small."
    )
    return _function(
        GET_TOOL,
        description,
        {
            "path": {
                "type": "string",
                "description": "Path from a memory_search result, e.g. memory/2026-01-05.md.",
            },
            "from": {"type": "integer", "minimum": 1, "description": "First line to read (1-based)."},
            "lines": {"type": "integer", "minimum": 1, "description": "How many lines to read."},
        },
        required=["path"],
    )


def _function(
    name: str, description: str, properties: dict[str, Any], *, required: list[str]
) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


# -- citations -------------------------------------------------------------------------------------------


def chat_type_of_key(session_key: str | None) -> str | None:
    """``direct``, ``group``, ``channel`` or None (a shape not known, or malformed) for a session key;
    ``direct`` when there is none (the owner). Parsed by :mod:`sessionmem.privacy`, the one place."""
    if not session_key:
        return "direct"
    try:
        return classify_key(session_key).chat_type
    except UsageError:
        return None


def citations_enabled(mode: str, *, session_key: str | None = None, chat_type: str | None = None) -> bool:
    """``on`` always, ``off`` never, ``auto`` only in direct chats (group/channel sessions stay uncited)."""
    if mode == "on":
        return True
    if mode == "off":
        return False
    return (chat_type or chat_type_of_key(session_key)) == "direct"


def citation_for(path: str, start_line: int, end_line: int) -> str:
    if start_line == end_line:
        return f"{path}#L{start_line}"
    return f"{path}#L{start_line}-L{end_line}"


def _result_json(result: SearchResult, *, cite: bool) -> dict[str, Any]:
    out = result.to_json()
    if cite:
        citation = citation_for(result.path, result.start_line, result.end_line)
        out["citation"] = citation
        out["snippet"] = f"{result.snippet.strip()}\n\nSource: {citation}"
    else:
        out.pop("citation", None)
    return out


# -- handlers --------------------------------------------------------------------------------------------


def search_error_payload(error: BaseException | str) -> dict[str, Any]:
    """The ``disabled``/``unavailable`` answer for a failing index: the index's own failures (its
    database, a ``MemoryIndexError`` that is no embedding error) said as such, the others with
    OpenClaw's provider and quota wording."""
    message = str(error) or type(error).__name__
    status = getattr(error, "status_code", None)
    if _index_failure(error):
        warning, action = INDEX_WARNING, INDEX_ACTION
    elif status == 429 or _QUOTA_RE.search(message):
        warning, action = QUOTA_WARNING, QUOTA_ACTION
    else:
        warning, action = PROVIDER_WARNING, PROVIDER_ACTION
    return {
        "results": [],
        "disabled": True,
        "unavailable": True,
        "error": message,
        "warning": warning,
        "action": action,
    }


def _index_failure(error: BaseException | str) -> bool:
    """True when the index failed (its store's SQL, a ``MemoryIndexError`` not about embeddings)."""
    if isinstance(error, (EmbeddingError, EmbedderUnavailable)):
        return False
    return isinstance(error, (MemoryIndexError, *database_errors()))


def handle_memory_search(
    index: SearchIndex | None,
    args: Mapping[str, Any],
    *,
    session_key: str | None = None,
    citations: str = "auto",
    chat_type: str | None = None,
    visibility: Visibility = EVERYTHING,
) -> dict[str, Any]:
    """Run ``memory_search``; always returns a JSON-ready dict, never raises.

    ``chat_type`` (from the session layer) overrides the key parsing used by ``citations="auto"``.
    ``visibility``: what the reader may see; the index leaves everything else out of the query.
    """
    try:
        request = dataclasses.replace(_search_request(args), visibility=visibility)
    except ArgumentError as exc:
        return {"results": [], "error": str(exc), "argument": exc.argument}
    if index is None:
        return search_error_payload("memory search is not configured for this agent")
    try:
        response = index.search(request)
    except Exception as exc:  # tool failures go back to the model as JSON
        return search_error_payload(exc)
    try:
        return _search_payload(response, citations=citations, session_key=session_key, chat_type=chat_type)
    except Exception as exc:  # a malformed response is still an answer, not a crash
        return search_error_payload(exc)


def _search_request(args: Mapping[str, Any]) -> SearchRequest:
    if not isinstance(args, Mapping):
        raise ArgumentError.about("arguments", "must be a JSON object")
    query = required_str(args, "query")
    max_results = optional_int(args, "maxResults", minimum=1)
    min_score = optional_number(args, "minScore", minimum=0.0)
    after = optional_date(args, "after")
    before = optional_date(args, "before")
    if after is not None and before is not None and after > before:
        raise ArgumentError.about("after", f"must not be later than before ({after} > {before})")
    return SearchRequest(
        query=query, max_results=max_results, min_score=min_score, after=after, before=before
    )


def _search_payload(
    response: SearchResponse, *, citations: str, session_key: str | None, chat_type: str | None
) -> dict[str, Any]:
    cite = citations_enabled(citations, session_key=session_key, chat_type=chat_type)
    payload: dict[str, Any] = {
        "results": [_result_json(r, cite=cite) for r in response.results],
        "provider": response.provider,
        "model": response.model,
        "mode": response.mode,
        "citations": citations,
    }
    if response.fallback:
        payload["fallback"] = dict(response.fallback)
    if response.warnings:
        payload["warnings"] = list(response.warnings)
    if not response.results and response.held_back is not None:  # never silently empty (DESIGN 15)
        payload["heldBack"] = response.held_back.to_json()
        payload["note"] = response.held_back.note()
    if response.query_cut is not None:  # said, not an error: the results answer what was searched
        payload["queryCut"] = response.query_cut.to_json()
    if response.results and response.not_found is not None:  # on topic, but not what was asked
        payload["notFound"] = response.not_found.to_json()
        payload["note"] = response.not_found.note()
    return payload


def handle_memory_get(
    workspace: Path,
    args: Mapping[str, Any],
    *,
    extra_paths: Iterable[str | os.PathLike[str]] = (),
    sessions_dir: Path | None = None,
    transcripts: TranscriptShelf | None = None,
    visibility: Visibility = EVERYTHING,
) -> dict[str, Any]:
    """Run ``memory_get``: ``{path, text}``, or ``{path, text: "", disabled: true, error}``; never raises.
    A path ``visibility`` does not allow is refused like any other refused path."""
    raw_path = args.get("path") if isinstance(args, Mapping) else None
    shown = raw_path if text_problem(raw_path) is None else ""  # echoed back only when it is text
    try:
        if not isinstance(args, Mapping):
            raise ArgumentError.about("arguments", "must be a JSON object")
        path = required_str(args, "path")
        start = optional_int(args, "from", minimum=None)
        count = optional_int(args, "lines", minimum=None)
    except ArgumentError as exc:
        return {"path": shown, "text": "", "disabled": True, "error": str(exc), "argument": exc.argument}
    # OpenClaw: start = max(1, from), count = max(1, lines); 0 or negative means "not given".
    start = max(1, start) if start is not None and start > 0 else None
    count = max(1, count) if count is not None and count > 0 else None
    try:
        target = resolve_memory_target(
            workspace, path, extra_paths, sessions_dir=sessions_dir, transcripts=transcripts
        )
        check_visible(target, visibility)
        if target.kind == "session":
            lines, numbers = _read_session(target, start, count)
        else:
            lines, numbers = _read_markdown(target.path, start, count)
    except (MemoryPathError, NotMarkdownError) as exc:
        return {"path": shown, "text": "", "disabled": True, "error": str(exc)}
    except Exception as exc:  # unreadable files come back to the model as JSON
        return {"path": shown, "text": "", "disabled": True, "error": f"cannot read {shown}: {exc}"}
    return {"path": target.display, **capped(lines, numbers)}


# Trigger: memory_get of a 1 MB file (or one huge transcript message). Why: the result goes into the
# model's context; a tool result bigger than the window locks the session. Outcome: at most this many
# lines and characters, whole lines, with a note saying where to go on (DESIGN: nothing is lost).
GET_MAX_LINES = 400
GET_MAX_CHARS = 12_000


def capped(
    lines: list[str], numbers: list[int], *, max_lines: int = GET_MAX_LINES, max_chars: int = GET_MAX_CHARS
) -> dict[str, Any]:
    """``{"text"}`` of the window, or when it is over the caps its head with ``truncated``, ``nextFrom``
    (the line to read on from) and a ``note`` (one line cut only when a single line is over the cap)."""
    text = "\n".join(lines)
    if len(text) <= max_chars and len(lines) <= max_lines:
        return {"text": text}
    kept: list[str] = []
    size = 0
    for line in lines[:max_lines]:
        if size + len(line) + (1 if kept else 0) > max_chars:
            break
        size += len(line) + (1 if kept else 0)
        kept.append(line)
    cut = not kept  # the first line alone is over the cap: show its head
    if cut:
        kept = [lines[0][:max_chars]]
    first, last = numbers[0], numbers[len(kept) - 1]
    next_from = last + 1
    what = f"line {first} cut at {max_chars:,} characters" if cut else f"lines {first}-{last}"
    note = (
        f"Output capped at {max_lines} lines and {max_chars:,} characters: showing {what}. "
        f"Call memory_get again with from={next_from} (and lines=N) to read on."
    )
    return {"text": "\n".join(kept), "truncated": True, "nextFrom": next_from, "note": note}


def slice_lines(content: str, start: int | None, count: int | None) -> str:
    """The 1-based window ``[start, start+count)`` of ``content``; whole text when neither is given."""
    if start is None and count is None:
        return content
    lines = content.split("\n")
    first = (start or 1) - 1
    n = count if count is not None else len(lines)
    return "\n".join(lines[first : first + n])


def _read_markdown(path: Path, start: int | None, count: int | None) -> tuple[list[str], list[int]]:
    """The window's lines as the index reads the file (binary refused, BOM and CRLF normalised) and
    their line numbers; nothing for a missing file."""
    try:
        content = read_markdown(path).text
    except FileNotFoundError:
        return [], []
    if start is None and count is None:
        lines = content.split("\n")
        return lines, list(range(1, len(lines) + 1))
    lines = slice_lines(content, start, count).split("\n")
    return lines, list(range(start or 1, (start or 1) + len(lines)))


def _read_session(target: MemoryTarget, start: int | None, count: int | None) -> tuple[list[str], list[int]]:
    """The window's flattened messages, read from the transcript's shelf; nothing for a missing one."""
    try:
        from sessionmem.memory.sync.session_text import shelved_window
    except ImportError as exc:
        raise MemoryPathError(target.name, f"session transcripts cannot be read ({exc})") from None
    assert target.shelf is not None
    try:
        return shelved_window(target.shelf, target.name, start or 1, count)
    except FileNotFoundError:
        return [], []


# -- the bundle a session runner plugs in ----------------------------------------------------------------


class MemoryTools:
    """Both memory tools bound to one agent's index and workspace.

    ``index=None`` offers only ``memory_get`` (no search configured). ``call`` is synchronous;
    ``acall`` runs it in a worker thread so SQLite and embedding calls do not block the event loop.
    ``visibility``: what this reader may see (:mod:`sessionmem.privacy`), applied to both tools; the
    owner's view (everything) when none is given, as on the command line.
    """

    def __init__(
        self,
        *,
        index: SearchIndex | None,
        workspace: Path,
        extra_paths: Iterable[str | os.PathLike[str]] = (),
        sessions_dir: Path | None = None,
        citations: str = "auto",
        session_key: str | None = None,
        enable_get: bool = True,
        visibility: Visibility = EVERYTHING,
        transcripts: TranscriptShelf | None = None,
    ) -> None:
        self.index = index
        self.visibility = visibility
        self.workspace = Path(workspace)
        self.extra_paths = tuple(os.fspath(p) for p in extra_paths)
        if transcripts is None and sessions_dir is not None:
            transcripts = FolderShelf(sessions_dir)
        self.transcripts = transcripts  # where session hits are read (None: transcripts not searched)
        self.citations = citations
        self.session_key = session_key
        self.enable_get = enable_get

    @classmethod
    def from_config(
        cls,
        config: Config,
        agent_id: str,
        *,
        index: SearchIndex | None,
        workspace: Path,
        sessions_dir: Path | None = None,
        session_key: str | None = None,
        transcripts: TranscriptShelf | None = None,
    ) -> MemoryTools:
        """The tools as the config asks: none when ``memorySearch.enabled`` is false (as OpenClaw, which
        then registers neither tool); citations from ``memory.citations``; extra paths from the agent;
        session transcripts readable only when they are indexed (``sources`` has "sessions"), so a
        session hit can always be opened (DESIGN 8); what ``session_key`` may see under ``memory.scope``
        (no key: the owner's view). ``transcripts`` (or the folder ``sessions_dir``) defaults to the index's
        own shelf."""
        search = config.for_agent(agent_id).memory_search
        if transcripts is None and sessions_dir is not None:
            transcripts = FolderShelf(sessions_dir)
        if transcripts is None:  # MemoryIndex knows where the agent's transcripts live
            found = getattr(index, "transcripts", None)
            transcripts = found if isinstance(found, TranscriptShelf) else None
        from sessionmem.memory.sync.session_delta import sessions_enabled

        sessions_on = sessions_enabled(search)
        return cls(
            index=index if search.enabled else None,
            workspace=workspace,
            extra_paths=search.extra_paths,
            transcripts=transcripts if sessions_on else None,
            citations=config.memory.citations,
            session_key=session_key,
            enable_get=search.enabled,
            visibility=reader_visibility(session_key, config.memory.scope),
        )

    @property
    def sessions_dir(self) -> Path | None:
        """The folder session hits are read from (None: not searched, or kept as rows, not files)."""
        return self.transcripts.folder if self.transcripts is not None else None

    @property
    def has_search(self) -> bool:
        return self.index is not None

    @property
    def has_get(self) -> bool:
        return self.enable_get

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n for n, on in ((SEARCH_TOOL, self.has_search), (GET_TOOL, self.has_get)) if on)

    def handles(self, name: str) -> bool:
        return name in self.names

    def schemas(self) -> list[dict[str, Any]]:
        sessions = self.transcripts is not None
        out = []
        if self.has_search:
            out.append(memory_search_schema(include_sessions=sessions))
        if self.has_get:
            out.append(memory_get_schema(include_sessions=sessions))
        return out

    def recall_section(self, *, prompt_mode: str = "full") -> str:
        """The Memory Recall system-prompt section matching the tools offered (reference §11)."""
        return memory_recall_section(
            has_search=self.has_search,
            has_get=self.has_get,
            citations=self.citations,
            include_sessions=self.transcripts is not None,
            prompt_mode=prompt_mode,
        )

    def handlers(self) -> dict[str, Callable[..., dict[str, Any]]]:
        """``{name: handler(**arguments) -> dict}`` for registries that call handlers with keyword arguments
        (``sessionmem.tools.define.Tool``); pair them with ``schemas()`` by name."""
        return {name: functools.partial(self._keyword_call, name) for name in self.names}

    def _keyword_call(self, name: str, /, **arguments: Any) -> dict[str, Any]:
        return self.call_dict(name, arguments)

    def call(self, name: str, args: str | Mapping[str, Any] | None, *, session_key: str | None = None) -> str:
        """Run one tool call and return its JSON result text; never raises."""
        return json.dumps(self.call_dict(name, args, session_key=session_key), ensure_ascii=False)

    async def acall(
        self, name: str, args: str | Mapping[str, Any] | None, *, session_key: str | None = None
    ) -> str:
        return await asyncio.to_thread(self.call, name, args, session_key=session_key)

    def call_dict(
        self, name: str, args: str | Mapping[str, Any] | None, *, session_key: str | None = None
    ) -> dict[str, Any]:
        parsed = _parse_arguments(args)
        if name == SEARCH_TOOL and self.has_search:
            if isinstance(parsed, str):
                return {"results": [], "error": parsed, "argument": "arguments"}
            return handle_memory_search(
                self.index,
                parsed,
                session_key=session_key or self.session_key,
                citations=self.citations,
                visibility=self.visibility,
            )
        if name == GET_TOOL and self.has_get:
            if isinstance(parsed, str):
                return {"path": "", "text": "", "disabled": True, "error": parsed, "argument": "arguments"}
            return handle_memory_get(
                self.workspace,
                parsed,
                extra_paths=self.extra_paths,
                transcripts=self.transcripts,
                visibility=self.visibility,
            )
        return {"error": f"unknown tool {name!r}; available: {', '.join(self.names) or 'none'}"}


def _parse_arguments(args: str | Mapping[str, Any] | None) -> Mapping[str, Any] | str:
    """Tool-call arguments as a mapping, or an error message the model can act on."""
    if args is None:
        return {}
    if isinstance(args, Mapping):
        return args
    if isinstance(args, str):
        if not args.strip():
            return {}
        try:
            value = json.loads(args)
        except json.JSONDecodeError as exc:
            return f"arguments are not valid JSON ({exc.msg} at position {exc.pos})"
        if isinstance(value, dict):
            return value
    return "arguments must be a JSON object"


def reading_tools(memory: MemoryTools, *, session_key: str | None = None) -> list[Tool]:
    """The reading tools ``memory`` offers (``memory_search``, ``memory_get``) as tools the dispatcher
    runs like every other; each answers the JSON the memory tools give."""

    async def call(name: str, /, **args: Any) -> str:
        return str(await memory.acall(name, args, session_key=session_key))

    return [
        Tool(fn["name"], fn.get("description", ""), fn["parameters"], functools.partial(call, fn["name"]))
        for fn in (schema["function"] for schema in memory.schemas())
    ]
