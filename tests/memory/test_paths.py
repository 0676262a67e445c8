"""Which paths the memory tools may read and write (reference §6.1, §10; DESIGN decision 8)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sessionmem.errors import MemoryPathError
from sessionmem.memory.tools.paths import (
    is_memory_path,
    normalize_extra_paths,
    resolve_memory_path,
    resolve_memory_target,
    writable_memory_path,
)


def _write(path: Path, text: str = "note\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _refused(workspace: Path, value: str, **kwargs: object) -> str:
    with pytest.raises(MemoryPathError) as info:
        resolve_memory_target(workspace, value, **kwargs)  # type: ignore[arg-type]
    return info.value.reason


DOTDOT = "'..' segments are not allowed"


@pytest.mark.parametrize(
    ("rel", "expected"),
    [
        ("MEMORY.md", True),
        ("memory.md", True),
        ("./MEMORY.md", True),
        ("memory/2026-01-05.md", True),
        ("memory\\projects\\a.md", True),
        ("memory", False),
        ("memoryx/a.md", False),
        ("notes/a.md", False),
        ("Memory.MD", False),
    ],
)
def test_is_memory_path_follows_openclaw(rel: str, expected: bool) -> None:
    assert is_memory_path(rel) is expected


def test_root_files_and_memory_tree_resolve_inside_workspace(workspace: Path) -> None:
    _write(workspace / "MEMORY.md")
    _write(workspace / "memory" / "deep" / "2026-01-05.md")
    target = resolve_memory_target(workspace, "memory/deep/2026-01-05.md")
    assert target.path == workspace / "memory" / "deep" / "2026-01-05.md"
    assert target.display == "memory/deep/2026-01-05.md"
    assert target.kind == "memory"
    assert resolve_memory_path(workspace, "./MEMORY.md") == workspace / "MEMORY.md"


def test_absolute_path_into_workspace_is_shown_relative(workspace: Path) -> None:
    note = _write(workspace / "memory" / "a.md")
    target = resolve_memory_target(workspace, str(note))
    assert target.display == "memory/a.md"


def test_missing_memory_file_is_allowed_for_the_reader_to_report_empty(workspace: Path) -> None:
    assert resolve_memory_path(workspace, "memory/nope.md") == workspace / "memory" / "nope.md"


@pytest.mark.parametrize(
    "value",
    [
        "memory/../../outside.md",
        "memory/../../../etc/passwd.md",
        "memory/../MEMORY.md",
        "memory/sub/../a.md",
        "memory\\..\\MEMORY.md",
        "./memory/../MEMORY.md",
        "../workspace/MEMORY.md",
        "../workspace/memory/a.md",
    ],
)
def test_dotdot_segments_are_refused_even_when_they_fold_back_inside(workspace: Path, value: str) -> None:
    _write(workspace.parent / "outside.md")
    _write(workspace / "MEMORY.md")
    _write(workspace / "memory" / "a.md")
    assert DOTDOT in _refused(workspace, value)


def test_absolute_path_with_dotdot_is_refused(workspace: Path) -> None:
    _write(workspace / "MEMORY.md")
    assert DOTDOT in _refused(workspace, f"{workspace}/memory/../MEMORY.md")


def test_leading_dotdot_outside_any_extra_path_escapes(workspace: Path) -> None:
    _write(workspace.parent / "outside.md")
    assert "escapes the workspace" in _refused(workspace, "../outside.md")


def test_dotdot_inside_an_extra_path_display_is_refused(workspace: Path, tmp_path: Path) -> None:
    _write(tmp_path / "vault" / "idea.md")
    extras = [str(tmp_path / "vault")]
    assert resolve_memory_target(workspace, "../vault/idea.md", extra_paths=extras).kind == "extra"
    assert DOTDOT in _refused(workspace, "../vault/sub/../idea.md", extra_paths=extras)


def test_absolute_path_elsewhere_is_refused(workspace: Path, tmp_path: Path) -> None:
    other = _write(tmp_path / "elsewhere" / "MEMORY.md")
    assert "escapes the workspace" in _refused(workspace, str(other))


@pytest.mark.parametrize("value", ["AGENTS.md", "notes/a.md", "sessions.json"])
def test_other_workspace_files_are_refused(workspace: Path, value: str) -> None:
    _write(workspace / value)
    assert "not a memory file" in _refused(workspace, value)


@pytest.mark.parametrize("value", ["memory/data.json", "memory/image.png", "memory/notes.txt"])
def test_non_markdown_under_memory_is_refused(workspace: Path, value: str) -> None:
    _write(workspace / value)
    assert _refused(workspace, value) == "not a Markdown (.md) file"


def test_empty_path_is_refused(workspace: Path) -> None:
    assert _refused(workspace, "  ") == "path required"


def test_symlinked_file_is_refused(workspace: Path, tmp_path: Path) -> None:
    real = _write(tmp_path / "real.md", "secret\n")
    (workspace / "memory" / "link.md").symlink_to(real)
    assert _refused(workspace, "memory/link.md") == "symlinks are not followed"


def test_symlink_pointing_inside_workspace_is_still_refused(workspace: Path) -> None:
    _write(workspace / "memory" / "real.md")
    os.symlink(workspace / "memory" / "real.md", workspace / "MEMORY.md")
    assert _refused(workspace, "MEMORY.md") == "symlinks are not followed"


def test_symlinked_parent_directory_is_refused(workspace: Path, tmp_path: Path) -> None:
    _write(tmp_path / "outside" / "x.md")
    (workspace / "memory" / "linked").symlink_to(tmp_path / "outside", target_is_directory=True)
    assert _refused(workspace, "memory/linked/x.md") == "symlinks are not followed"


def test_symlinked_memory_folder_is_refused(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    _write(tmp_path / "shared" / "a.md")
    (ws / "memory").symlink_to(tmp_path / "shared", target_is_directory=True)
    assert _refused(ws, "memory/a.md") == "symlinks are not followed"


def test_directory_named_like_markdown_is_refused(workspace: Path) -> None:
    (workspace / "memory" / "folder.md").mkdir()
    assert _refused(workspace, "memory/folder.md") == "not a regular file"


def test_extra_directory_admits_markdown_inside_it(workspace: Path, tmp_path: Path) -> None:
    note = _write(tmp_path / "vault" / "sub" / "idea.md")
    target = resolve_memory_target(workspace, str(note), extra_paths=[str(tmp_path / "vault")])
    assert target.kind == "extra"
    assert target.path == note
    # The relative form results carry for files outside the workspace resolves back to the same file.
    again = resolve_memory_target(workspace, target.display, extra_paths=[str(tmp_path / "vault")])
    assert again.path == note


def test_relative_extra_path_inside_workspace(workspace: Path) -> None:
    _write(workspace / "notes" / "a.md")
    target = resolve_memory_target(workspace, "notes/a.md", extra_paths=["  notes  ", ""])
    assert (target.kind, target.display) == ("extra", "notes/a.md")


def test_extra_single_file_admits_only_itself(workspace: Path, tmp_path: Path) -> None:
    single = _write(tmp_path / "vault" / "one.md")
    _write(tmp_path / "vault" / "two.md")
    assert resolve_memory_path(workspace, str(single), extra_paths=[str(single)]) == single
    assert "escapes the workspace" in _refused(
        workspace, str(tmp_path / "vault" / "two.md"), extra_paths=[str(single)]
    )


def test_extra_path_still_requires_markdown(workspace: Path, tmp_path: Path) -> None:
    data = _write(tmp_path / "vault" / "data.csv")
    assert (
        _refused(workspace, str(data), extra_paths=[str(tmp_path / "vault")]) == "not a Markdown (.md) file"
    )


def test_symlinked_extra_path_is_refused(workspace: Path, tmp_path: Path) -> None:
    _write(tmp_path / "vault" / "a.md")
    (tmp_path / "vault-link").symlink_to(tmp_path / "vault", target_is_directory=True)
    reason = _refused(
        workspace, str(tmp_path / "vault-link" / "a.md"), extra_paths=[str(tmp_path / "vault-link")]
    )
    assert "symlink" in reason


def test_symlinked_folder_inside_extra_path_is_refused(workspace: Path, tmp_path: Path) -> None:
    _write(tmp_path / "elsewhere" / "a.md")
    (tmp_path / "vault").mkdir()
    (tmp_path / "vault" / "link").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    reason = _refused(
        workspace, str(tmp_path / "vault" / "link" / "a.md"), extra_paths=[str(tmp_path / "vault")]
    )
    assert reason == "symlinks are not followed"


def test_extra_paths_are_trimmed_resolved_and_deduplicated(workspace: Path, tmp_path: Path) -> None:
    absolute = str(tmp_path / "vault")
    got = normalize_extra_paths(workspace, [" notes ", "", absolute, "notes/", absolute + "/"])
    assert got == [workspace / "notes", tmp_path / "vault"]


def test_session_paths_resolve_into_the_sessions_dir(workspace: Path, tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    _write(sessions / "abc-123.jsonl", "{}\n")
    target = resolve_memory_target(workspace, "sessions/abc-123.jsonl", sessions_dir=sessions)
    assert (target.path, target.display, target.kind) == (
        sessions / "abc-123.jsonl",
        "sessions/abc-123.jsonl",
        "session",
    )


def test_session_paths_need_a_sessions_dir(workspace: Path) -> None:
    assert "no sessions directory" in _refused(workspace, "sessions/abc.jsonl")


@pytest.mark.parametrize(
    "value",
    ["sessions/../sessions.json", "sessions/../../x.jsonl", "sessions/sub/x.jsonl", "sessions/..jsonl"],
)
def test_session_paths_cannot_traverse(workspace: Path, tmp_path: Path, value: str) -> None:
    with pytest.raises(MemoryPathError):
        resolve_memory_target(workspace, value, sessions_dir=tmp_path / "sessions")


def test_symlinked_session_file_is_refused(workspace: Path, tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    real = _write(tmp_path / "other.jsonl", "{}\n")
    sessions.mkdir()
    (sessions / "s.jsonl").symlink_to(real)
    assert _refused(workspace, "sessions/s.jsonl", sessions_dir=sessions) == "symlinks are not followed"


def test_reset_archives_resolve_like_transcripts(workspace: Path, tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    name = "abc-123.jsonl.reset.2026-03-01T10-00-00.000Z"
    _write(sessions / name, "{}\n")
    target = resolve_memory_target(workspace, f"sessions/{name}", sessions_dir=sessions)
    assert (target.path, target.display, target.kind) == (sessions / name, f"sessions/{name}", "session")


@pytest.mark.parametrize(
    "value",
    [
        "sessions/s.jsonl.reset.2026-01-01",  # not the archive name /new gives
        "sessions/s.jsonl.reset.2026-03-01T10-00-00.000Zjunk",
        "sessions/s.jsonl.reset.2026-03-01T10-00-00.000Z/x",
        "sessions/s.jsonl.deleted.2026-03-01T10-00-00.000Z",  # deleted sessions are not readable
        "sessions/.s.jsonl.reset.2026-03-01T10-00-00.000Z",
        "sessions/..jsonl.reset.2026-03-01T10-00-00.000Z",
        "sessions/../s.jsonl.reset.2026-03-01T10-00-00.000Z",
        "sessions/s.jsonl.reset.x.jsonl.reset.2026-03-01T10-00-00.000Z",
    ],
)
def test_only_exact_reset_archive_names_are_session_paths(
    workspace: Path, tmp_path: Path, value: str
) -> None:
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    with pytest.raises(MemoryPathError):
        resolve_memory_target(workspace, value, sessions_dir=sessions)


def test_symlinked_archive_is_refused(workspace: Path, tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    real = _write(tmp_path / "other.jsonl", "{}\n")
    sessions.mkdir()
    name = "s.jsonl.reset.2026-03-01T10-00-00.000Z"
    (sessions / name).symlink_to(real)
    assert _refused(workspace, f"sessions/{name}", sessions_dir=sessions) == "symlinks are not followed"


@pytest.mark.parametrize("rel", ["MEMORY.md", "memory/2026-01-05.md", "memory/daily/2026-01/2026-01-05.md"])
def test_writable_paths(workspace: Path, rel: str) -> None:
    assert writable_memory_path(workspace, rel) == workspace / rel


@pytest.mark.parametrize(
    "rel",
    ["memory.md", "AGENTS.md", "memory/../MEMORY.md", "memory/a.txt", "memory", "/etc/x.md", "memory//a.md"],
)
def test_writers_are_limited_to_memory_md_and_memory_folder(workspace: Path, rel: str) -> None:
    with pytest.raises(MemoryPathError):
        writable_memory_path(workspace, rel)


def test_writer_refuses_symlinked_memory_file(workspace: Path, tmp_path: Path) -> None:
    (workspace / "memory" / "2026-01-05.md").symlink_to(_write(tmp_path / "target.md"))
    with pytest.raises(MemoryPathError, match="symlinks"):
        writable_memory_path(workspace, "memory/2026-01-05.md")
