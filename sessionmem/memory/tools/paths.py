"""The one place that decides which paths the memory tools may read or write.

``memory_get`` takes a path from the model, so it is untrusted input. It may name:

- ``MEMORY.md``, ``memory.md`` or anything under ``memory/`` (Markdown only) inside the workspace;
- a Markdown file inside a configured extra path (a directory, or a single ``.md`` file);
- ``sessions/<name>.jsonl``, the path a session-transcript hit carries (DESIGN decision 8), or
  ``sessions/<name>.jsonl.reset.<time>``, a transcript archived by ``/new``/``/reset`` (still searched),
  when the transcripts are known: a sessions directory, or the shelf of a session store that keeps them
  elsewhere (PostgreSQL rows, named and read back as the same JSONL: ``transcript_names.TranscriptShelf``).
  The name must be exactly one of those two shapes
  (``transcript_names.is_transcript_name``): no folder, no ``..``, no ``.deleted.`` archive, nothing
  else there.

A ``..`` segment is refused outright, even one that folds back to an allowed file
(``memory/../MEMORY.md``): a path the tools hand out never has one, so a ``..`` is a traversal
attempt, not a name. The one exception is the form results carry for a file in an extra path
outside the workspace (``../vault/idea.md``): leading ``../`` segments only, and only when they land
in a configured extra path. Paths are then normalised lexically and checked against the roots
above. Symlinks are never followed: not the file, and not any folder between the root and the file
(OpenClaw's discovery skips symlinks, so a symlinked path can never be a legitimate search hit).
A missing file is allowed here; the reader decides what "missing" means (memory_get returns empty
text).

Who may read an allowed path is the other half of the question: :func:`audience_of` gives a target's
audience label (:mod:`sessionmem.privacy`), and :func:`check_visible` refuses what the reader may not see.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from sessionmem.errors import MemoryPathError
from sessionmem.memory.sync.sources import is_memory_path, normalize_extra_paths, normalize_rel_path
from sessionmem.memory.sync.transcript_names import FolderShelf, is_transcript_name, shelved_session_key
from sessionmem.privacy import Visibility, markdown_label, refusal, transcript_label

if TYPE_CHECKING:
    from sessionmem.memory.sync.transcript_names import TranscriptShelf

TargetKind = Literal["memory", "extra", "session"]

# A live transcript or an archive-looking name; _resolve_session then demands an exact transcript name.
_SESSION_RE = re.compile(r"^sessions/([^/\\\x00]+\.jsonl(?:\.(?:reset|deleted)\.[^/\\\x00]*)?)$")
_MARKDOWN_SUFFIX = ".md"


@dataclass(frozen=True, slots=True)
class MemoryTarget:
    """An allowed memory path: where it is on disk and how to show it to the model."""

    path: Path  # absolute, lexically normalised (no symlinks resolved); a transcript kept as rows: its name
    display: str  # workspace-relative with "/" (or "sessions/<transcript name>"); what results carry
    kind: TargetKind
    shelf: TranscriptShelf | None = None  # a transcript's shelf (kind "session")

    @property
    def name(self) -> str:
        """The file's (or the transcript's) name."""
        return self.path.name


def resolve_memory_target(
    workspace: Path,
    rel_or_abs: str,
    extra_paths: Iterable[str | os.PathLike[str]] = (),
    *,
    sessions_dir: Path | None = None,
    transcripts: TranscriptShelf | None = None,
) -> MemoryTarget:
    """Check a path a tool was given and say where it points; raise :class:`MemoryPathError` if refused.
    Transcripts are read from ``transcripts``, else from the folder ``sessions_dir``."""
    if not isinstance(rel_or_abs, str) or not rel_or_abs.strip():
        raise MemoryPathError(str(rel_or_abs), "path required")
    original = rel_or_abs
    norm = normalize_rel_path(rel_or_abs)
    leading_dotdot = _require_no_inner_dotdot(original, norm)
    session = _SESSION_RE.match(norm)
    if session is not None:
        if transcripts is None and sessions_dir is not None:
            transcripts = FolderShelf(sessions_dir)
        return _resolve_session(original, session.group(1), transcripts)

    ws_abs = Path(os.path.normpath(os.path.abspath(workspace)))
    raw = Path(norm).expanduser()
    candidate = Path(os.path.normpath(raw if raw.is_absolute() else ws_abs / raw))
    extras = normalize_extra_paths(ws_abs, extra_paths)

    rel = _relative_inside(candidate, ws_abs)
    if rel is None:
        # An absolute path may spell the workspace through its real path (e.g. /private/var on macOS).
        ws_real = Path(os.path.realpath(ws_abs))
        rel = _relative_inside(candidate, ws_real)
        if rel is not None:
            candidate = ws_abs / rel
    if leading_dotdot and (rel is not None or candidate == ws_abs):
        # "../workspace/MEMORY.md" climbs out and back in: not the form any result carries.
        raise MemoryPathError(original, _DOTDOT)
    if rel is not None and is_memory_path(rel):
        _require_markdown(original, candidate)
        _require_no_symlinks(original, ws_abs, candidate)
        _require_regular_if_present(original, candidate)
        return MemoryTarget(candidate, rel, "memory")

    extra = _match_extra(original, candidate, extras)
    if extra is not None:
        _require_markdown(original, candidate)
        if extra != candidate:
            _require_no_symlinks(original, extra, candidate)
        _require_regular_if_present(original, candidate)
        display = rel if rel is not None else Path(os.path.relpath(candidate, ws_abs)).as_posix()
        return MemoryTarget(candidate, display, "extra")

    if rel is None:
        raise MemoryPathError(original, "path escapes the workspace and is not in a configured extra path")
    raise MemoryPathError(
        original,
        "not a memory file (allowed: MEMORY.md, memory.md, memory/**/*.md, configured extra paths, "
        "sessions/<file>.jsonl, sessions/<file>.jsonl.reset.<time>)",
    )


def audience_of(target: MemoryTarget) -> str:
    """Who may see ``target``: a transcript by the session key its header names (a missing one counts
    as the owner's, so a refusal does not tell whether it exists), a Markdown file by its path."""
    if target.kind == "session" and target.shelf is not None:
        return transcript_label(shelved_session_key(target.shelf, target.name))
    return markdown_label(target.display)


def target_exists(target: MemoryTarget) -> bool:
    """Whether the file (or the transcript on its shelf) is there now."""
    if target.shelf is not None and target.shelf.folder is None:
        return bool(target.shelf.scan([target.name]))
    return target.path.is_file()


def check_visible(target: MemoryTarget, visibility: Visibility) -> MemoryTarget:
    """``target`` when ``visibility`` allows it, else raise :class:`MemoryPathError` saying so."""
    if not visibility.allows(audience_of(target)):
        raise MemoryPathError(target.display, refusal(visibility))
    return target


def resolve_memory_path(
    workspace: Path,
    rel_or_abs: str,
    extra_paths: Iterable[str | os.PathLike[str]] = (),
    *,
    sessions_dir: Path | None = None,
) -> Path:
    """The absolute path of an allowed memory file (see :func:`resolve_memory_target`)."""
    return resolve_memory_target(workspace, rel_or_abs, extra_paths, sessions_dir=sessions_dir).path


def writable_memory_path(workspace: Path, rel: str) -> Path:
    """Where a memory writer may write: ``MEMORY.md`` or ``memory/**/<name>.md``, workspace-relative only.

    Stricter than reading: no absolute paths, no extra paths, no ``memory.md`` (one root file to append to),
    and no ``..`` component at all, even one that would fold back inside ``memory/``.
    """
    if not isinstance(rel, str) or not rel.strip():
        raise MemoryPathError(str(rel), "path required")
    norm = normalize_rel_path(rel)
    parts = norm.split("/")
    if Path(norm).is_absolute() or norm.startswith("/"):
        raise MemoryPathError(rel, "memory writes take a workspace-relative path")
    if any(part in ("", ".", "..") for part in parts):
        raise MemoryPathError(rel, "path must not contain empty, '.' or '..' segments")
    if not (norm == "MEMORY.md" or (parts[0] == "memory" and len(parts) >= 2)):
        raise MemoryPathError(rel, "memory writes are limited to MEMORY.md and memory/*.md")
    ws_abs = Path(os.path.normpath(os.path.abspath(workspace)))
    target = ws_abs.joinpath(*parts)
    _require_markdown(rel, target)
    _require_no_symlinks(rel, ws_abs, target)
    _require_regular_if_present(rel, target)
    return target


# -- helpers ---------------------------------------------------------------------------------------------

_DOTDOT = "'..' segments are not allowed"


def _require_no_inner_dotdot(original: str, norm: str) -> bool:
    """Refuse a ``..`` segment anywhere but a relative path's leading run; True when there is such a run.

    The leading run is left for the caller, which admits it only into an extra path outside the workspace.
    """
    parts = norm.split("/")
    lead = 0
    while lead < len(parts) and parts[lead] == "..":
        lead += 1
    if ".." in parts[lead:]:
        raise MemoryPathError(original, _DOTDOT)
    return lead > 0


def _resolve_session(original: str, name: str, shelf: TranscriptShelf | None) -> MemoryTarget:
    if shelf is None:
        raise MemoryPathError(original, "session transcripts are not readable here (no sessions directory)")
    if ".." in name or not is_transcript_name(name):
        raise MemoryPathError(
            original, "invalid session transcript name (<id>.jsonl or <id>.jsonl.reset.<time> expected)"
        )
    if shelf.folder is None:  # rows in a database: the shelf resolves the name itself
        return MemoryTarget(Path(name), f"sessions/{name}", "session", shelf)
    root = Path(os.path.normpath(os.path.abspath(shelf.folder)))
    target = root / name
    if os.path.islink(target):
        raise MemoryPathError(original, "symlinks are not followed")
    _require_regular_if_present(original, target)
    return MemoryTarget(target, f"sessions/{name}", "session", shelf)


def _relative_inside(candidate: Path, root: Path) -> str | None:
    try:
        rel = candidate.relative_to(root)
    except ValueError:
        return None
    text = rel.as_posix()
    return None if text in ("", ".") else text


def _match_extra(original: str, candidate: Path, extras: list[Path]) -> Path | None:
    """The extra path that admits ``candidate``: a directory containing it or the same ``.md`` file."""
    for extra in extras:
        if candidate != extra and _relative_inside(candidate, extra) is None:
            continue
        if os.path.islink(extra):
            raise MemoryPathError(original, "configured extra path is a symlink; symlinks are not followed")
        if candidate == extra:
            if extra.suffix.lower() == _MARKDOWN_SUFFIX and not extra.is_dir():
                return extra
            continue
        if extra.is_dir():
            return extra
    return None


def _require_markdown(original: str, candidate: Path) -> None:
    if candidate.suffix.lower() != _MARKDOWN_SUFFIX:
        raise MemoryPathError(original, "not a Markdown (.md) file")


def _require_no_symlinks(original: str, root: Path, target: Path) -> None:
    """Refuse when the target or any folder between ``root`` (exclusive) and it is a symlink."""
    current = root
    for part in target.relative_to(root).parts:
        current = current / part
        if os.path.islink(current):
            raise MemoryPathError(original, "symlinks are not followed")
        if not os.path.lexists(current):
            return


def _require_regular_if_present(original: str, target: Path) -> None:
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        return
    except NotADirectoryError:
        raise MemoryPathError(original, "a parent of this path is not a directory") from None
    except OSError as exc:
        raise MemoryPathError(original, f"cannot inspect path ({exc.strerror or exc})") from None
    if stat.S_ISLNK(st.st_mode):
        raise MemoryPathError(original, "symlinks are not followed")
    if not stat.S_ISREG(st.st_mode):
        raise MemoryPathError(original, "not a regular file")
