"""Finding and reading the Markdown memory files, and the sources the index syncs from.

Discovery follows OpenClaw's ``listMemoryFiles`` (reference §6.1): ``MEMORY.md``/``memory.md``,
``memory/**/*.md`` and the configured extra paths; symlinks are never followed (a symlink could pull
any file on the machine into the agent's memory); dependency folders are skipped; a file reached
twice (overlapping extra paths) is listed once, by real path.

Discovery stats each file as it walks (``os.scandir`` gives it almost for free) so the index can
skip an unchanged file without another system call (DESIGN decision 10).

A *source* is what the index syncs from: it lists entries (stat only) and loads one entry's text
on demand. Markdown memory is one source; session transcripts are another (their flattening lives
with the transcript code, which hands a ``build_session_entry`` function to :class:`TranscriptSource`).
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any, Protocol

from sessionmem.errors import MemoryIndexError
from sessionmem.memory.sync.transcript_names import (
    FolderShelf,
    TranscriptShelf,
    first_line_session_key,
    header_session_key,
    reset_archive_of,
)
from sessionmem.privacy import OWNER, markdown_label, transcript_label

# Dependency folders, and the versions a MEMORY.md replace saved
# (sessionmem.memory.tools.history.HISTORY_DIR):
# an extra path over the whole workspace must not index them.
IGNORED_DIRS = frozenset(
    {".git", "node_modules", ".pnpm-store", ".venv", "venv", "__pycache__", ".tox", ".memory-history"}
)
ROOT_FILES = ("MEMORY.md", "memory.md")
_DATE_NAME = re.compile(r"^(\d{4})-(\d{2})-(\d{2})(?![0-9]).*\.md$", re.IGNORECASE)


class NotMarkdownError(MemoryIndexError):
    """A file named ``*.md`` is not text (mostly control bytes or invalid UTF-8); it is not indexed."""

    def __init__(self, path: str) -> None:
        super().__init__(f"binary content in {path} (control bytes or invalid UTF-8); not indexed")
        self.path = path


# C0 control characters but tab, newline and carriage return, and DEL: never meant in a Markdown note.
CONTROL_CHARS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
BINARY_SHARE = 0.3  # a file whose first 64 KiB are this much control bytes or bad UTF-8 is binary
_SAMPLE_CHARS = 65536


def strip_control_chars(text: str) -> tuple[str, int]:
    """``text`` for a memory file: CRLF and lone CR become LF, other control characters (NUL
    included; tab and newline kept) are removed. Returns the text and how many were removed."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return CONTROL_CHARS.subn("", text)


def _looks_binary(text: str) -> bool:
    sample = text[:_SAMPLE_CHARS]
    odd = len(CONTROL_CHARS.findall(sample)) + sample.count("\ufffd")
    return bool(sample) and odd >= BINARY_SHARE * len(sample)


@dataclass(frozen=True, slots=True)
class MemoryFile:
    """A discovered file: where it is, the path results carry, and its stat at discovery time."""

    abs_path: Path
    rel_path: str  # workspace-relative with '/'; '../…' for extra files outside the workspace
    source: str = "memory"
    mtime_ns: int = -1
    size: int = -1


@dataclass(frozen=True, slots=True)
class MarkdownText:
    text: str
    issue: str | None = None  # e.g. invalid UTF-8 replaced; the file is still indexed


# ---------------------------------------------------------------------------- paths


def normalize_rel_path(value: str) -> str:
    """Strip whitespace and leading ``./``; backslashes become ``/``."""
    text = value.strip().replace("\\", "/")
    while text.startswith("./"):
        text = text[2:]
    return text


def is_memory_path(rel: str) -> bool:
    """True for ``MEMORY.md``, ``memory.md`` and anything under ``memory/`` (OpenClaw ``isMemoryPath``)."""
    norm = normalize_rel_path(rel)
    return norm in ROOT_FILES or norm.startswith("memory/")


def normalize_extra_paths(workspace: Path, extra_paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Trim, drop empties, resolve relative entries against the workspace, de-duplicate (order kept)."""
    out: list[Path] = []
    seen: set[str] = set()
    for raw in extra_paths:
        text = os.fspath(raw).strip()
        if not text:
            continue
        candidate = Path(text).expanduser()
        if not candidate.is_absolute():
            candidate = Path(workspace) / candidate
        norm = os.path.normpath(os.path.abspath(candidate))
        if norm not in seen:
            seen.add(norm)
            out.append(Path(norm))
    return out


def named_date(rel_path: str) -> str | None:
    """``YYYY-MM-DD`` when the file's name starts with a real date (``2026-03-07-x.md``), else None."""
    match = _DATE_NAME.match(rel_path.rsplit("/", 1)[-1])
    if match:
        try:
            return date(int(match.group(1)), int(match.group(2)), int(match.group(3))).isoformat()
        except ValueError:
            pass  # 2026-13-45.md is not a date
    return None


def file_date(rel_path: str, mtime: float) -> str:
    """The day a file speaks of: ``YYYY-MM-DD`` from a dated name (``2026-03-07-x.md``), else its mtime."""
    return named_date(rel_path) or datetime.fromtimestamp(mtime).date().isoformat()


# ---------------------------------------------------------------------------- discovery


def list_memory_files(
    workspace: Path, extra_paths: Iterable[str | os.PathLike[str]] = ()
) -> list[MemoryFile]:
    """Every Markdown memory file of ``workspace``, in discovery order, de-duplicated by real path."""
    ws = Path(os.path.normpath(os.path.abspath(workspace)))
    found: list[tuple[str, MemoryFile]] = []  # (real path, file)
    ws_real = os.path.realpath(ws)
    for name in ROOT_FILES:
        st = _lstat(ws / name)
        if st is not None and stat.S_ISREG(st.st_mode):
            found.append((os.path.join(ws_real, name), _make(ws, ws / name, st)))
    memory_dir = ws / "memory"
    st = _lstat(memory_dir)
    if st is not None and stat.S_ISDIR(st.st_mode):
        found.extend(_walk(ws, memory_dir))
    for extra in normalize_extra_paths(ws, extra_paths):
        st = _lstat(extra)
        if st is None or stat.S_ISLNK(st.st_mode):
            continue  # missing paths are ignored; symlinks are never followed
        if stat.S_ISDIR(st.st_mode):
            found.extend(_walk(ws, extra))
        elif stat.S_ISREG(st.st_mode) and _is_markdown(extra.name):
            found.append((os.path.realpath(extra), _make(ws, extra, st)))
    seen: set[str] = set()
    out: list[MemoryFile] = []
    for real, item in found:
        if real not in seen:
            seen.add(real)
            out.append(item)
    return out


def _walk(ws: Path, root: Path) -> Iterator[tuple[str, MemoryFile]]:
    """Markdown files under ``root`` (a real directory); symlinks and dependency folders skipped.

    Why: no symlink is followed, so a file's real path is the root's real path plus its relative
    part; one ``realpath`` and one ``relpath`` per root instead of per file keep a 10,000-file
    scan cheap (DESIGN decision 10).
    """
    root_real = os.path.realpath(root)
    root_rel = os.path.relpath(root, ws).replace(os.sep, "/")
    stack = [(str(root), root_real, "" if root_rel == "." else root_rel + "/")]
    while stack:
        folder, folder_real, prefix = stack.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        subdirs = []
        for entry in entries:
            name = entry.name
            try:
                if entry.is_symlink():
                    continue
                if entry.is_dir(follow_symlinks=False):
                    if name not in IGNORED_DIRS:
                        subdirs.append((entry.path, os.path.join(folder_real, name), f"{prefix}{name}/"))
                    continue
                if not (_is_markdown(name) and entry.is_file(follow_symlinks=False)):
                    continue
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue  # vanished while walking
            item = MemoryFile(Path(entry.path), prefix + name, "memory", st.st_mtime_ns, st.st_size)
            yield os.path.join(folder_real, name), item
        stack.extend(reversed(subdirs))


def _make(ws: Path, path: Path, st: os.stat_result) -> MemoryFile:
    rel = os.path.relpath(path, ws).replace(os.sep, "/")
    return MemoryFile(path, rel, "memory", st.st_mtime_ns, st.st_size)


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None


def _is_markdown(name: str) -> bool:
    return name.lower().endswith(".md")


# ---------------------------------------------------------------------------- reading


def read_markdown(path: Path, display: str | None = None) -> MarkdownText:
    """The text of a Markdown file; raises :class:`NotMarkdownError` for binary content.

    Invalid UTF-8 and control characters (a stray NUL) are replaced with U+FFFD and reported in
    ``issue``: the file is still indexed and readable, since losing a file of notes to one bad byte is
    worse than a visible replacement mark. Only a file that is mostly such bytes counts as binary.
    A BOM is dropped; CRLF becomes LF (line numbers are unchanged).
    """
    data = Path(path).read_bytes()
    name = display or str(path)
    issues = []
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        text = data.decode("utf-8", errors="replace")
        issues.append(f"invalid UTF-8 in {name} (first bad byte at offset {exc.start}); replaced with U+FFFD")
    if _looks_binary(text):
        raise NotMarkdownError(name)
    text, controls = CONTROL_CHARS.subn("\ufffd", text)
    if controls:
        plural = "s" if controls > 1 else ""
        issues.append(f"{controls} control character{plural} (e.g. NUL) in {name}; replaced with U+FFFD")
    if text.startswith("\ufeff"):
        text = text[1:]
    return MarkdownText(text.replace("\r\n", "\n"), "; ".join(issues) or None)


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


# ---------------------------------------------------------------------------- sources


@dataclass(frozen=True, slots=True)
class EntryContent:
    """One entry's text as the index sees it.

    ``line_map[i]`` is the 1-based line in the original file of content line ``i + 1`` (transcripts
    flatten JSONL into one line per message, and results must cite JSONL lines); ``None`` = identity.
    ``line_dates[i]`` (optional) dates content line ``i + 1``; a chunk takes its first line's date.
    ``audience``: who may see the entry (:mod:`sessionmem.privacy`); the owner alone unless said.
    """

    text: str
    hash: str
    line_map: Sequence[int] | None = None
    line_dates: Sequence[str | None] | None = None
    issue: str | None = None
    audience: str = OWNER


class EntrySource(Protocol):
    """What the index syncs from. ``scan`` only stats; ``load`` reads one entry."""

    name: str  # the ``source`` column: "memory" | "sessions"

    def scan(self) -> list[MemoryFile]: ...

    def load(self, entry: MemoryFile) -> EntryContent: ...


class MarkdownSource:
    """The workspace's Markdown memory (MEMORY.md, memory/, extra paths)."""

    name = "memory"

    def __init__(self, workspace: Path, extra_paths: Sequence[str] = ()) -> None:
        self.workspace = Path(workspace)
        self.extra_paths = tuple(extra_paths)

    def scan(self) -> list[MemoryFile]:
        return list_memory_files(self.workspace, self.extra_paths)

    def load(self, entry: MemoryFile) -> EntryContent:
        read = read_markdown(entry.abs_path, entry.rel_path)
        audience = markdown_label(entry.rel_path)
        return EntryContent(read.text, content_hash(read.text), issue=read.issue, audience=audience)


SessionEntryBuilder = Callable[[Path], Any]


class TranscriptSource:
    """Session transcripts, indexed as ``sessions/<name>`` (reference §5), read from a
    :class:`~sessionmem.memory.sync.transcript_names.TranscriptShelf`: a sessions folder
    (``<sessions_dir>/*.jsonl``, what a path given here means) or a session store's own shelf.

    ``builder(path)`` (files only) flattens one transcript and returns an object with ``content``,
    ``line_map``, ``hash`` (and optionally ``dates``), or a ``(content, line_map, hash)`` tuple; by default
    the transcript is indexed append-only (:mod:`sessionmem.memory.sync.transcript_append`).

    Reset archives (``<id>.jsonl.reset.<time>``, see :func:`reset_archive_of`) are transcripts too,
    indexed as ``sessions/<archive name>``: users who opted into session search expect a conversation
    to stay searchable after ``/new``. They never grow again; :meth:`renamed_from` lets the index move
    the live file's rows to the archive instead of indexing it anew. Deleted sessions
    (``*.jsonl.deleted.*``) are left out.
    """

    name = "sessions"

    def __init__(
        self,
        transcripts: Path | TranscriptShelf,
        builder: SessionEntryBuilder | None = None,
        *,
        only: Iterable[str] | None = None,
    ) -> None:
        self.shelf: TranscriptShelf = (
            transcripts if isinstance(transcripts, TranscriptShelf) else FolderShelf(transcripts)
        )
        self._builder = builder
        self.only = None if only is None else frozenset(only)  # file names: a targeted pass

    def scan(self) -> list[MemoryFile]:
        folder = self.shelf.folder
        return [
            MemoryFile(
                folder / item.name if folder is not None else Path(item.name),
                f"sessions/{item.name}",
                "sessions",
                item.mtime_ns,
                item.size,
            )
            for item in self.shelf.scan(self.only)
        ]

    @staticmethod
    def renamed_from(rel_path: str) -> str | None:
        """The indexed path an archive was renamed from (``sessions/<id>.jsonl``), else None."""
        live = reset_archive_of(rel_path.removeprefix("sessions/"))
        return None if live is None else f"sessions/{live}"

    @property
    def append_only(self) -> bool:
        """The index may use :meth:`plan_append` (not with a custom ``builder``: it loads whole entries)."""
        return self._builder is None

    def plan_append(
        self, entry: MemoryFile, old_hash: str | None, tokens: int, overlap: int, default_date: str | None
    ) -> Any:
        """An append-only pass (``sessionmem.memory.sync.transcript_append``): only new lines are chunked."""
        from sessionmem.memory.sync.transcript_append import plan_shelved

        name = entry.rel_path.removeprefix("sessions/")
        return plan_shelved(self.shelf, name, old_hash, tokens, overlap, default_date)

    def load(self, entry: MemoryFile) -> EntryContent:
        builder = self._builder
        if builder is None or self.shelf.folder is None:
            from sessionmem.memory.sync.session_text import flatten_transcript

            data = self.shelf.read(entry.rel_path.removeprefix("sessions/"))
            built = flatten_transcript(data)
            audience = transcript_label(first_line_session_key(data))
            return EntryContent(built.content, built.hash, built.line_map, built.dates, audience=audience)
        built = builder(entry.abs_path)
        audience = getattr(built, "audience", None) or transcript_label(header_session_key(entry.abs_path))
        if isinstance(built, tuple):
            text, line_map, digest = built
            return EntryContent(text, digest, list(line_map), audience=audience)
        dates = getattr(built, "dates", None)
        return EntryContent(built.content, built.hash, list(built.line_map), dates, audience=audience)
