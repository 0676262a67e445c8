"""Discovery and reading of Markdown memory files (reference §6.1)."""

from __future__ import annotations

import os
import time
from datetime import datetime
from pathlib import Path

import pytest

from sessionmem.memory.sync.sources import (
    MarkdownSource,
    NotMarkdownError,
    TranscriptSource,
    file_date,
    is_memory_path,
    list_memory_files,
    read_markdown,
)


def _write(path: Path, text: str = "# note\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _rels(workspace: Path, extra: tuple[str, ...] = ()) -> list[str]:
    return [f.rel_path for f in list_memory_files(workspace, extra)]


def test_finds_root_files_and_memory_tree_markdown_only(workspace: Path) -> None:
    _write(workspace / "MEMORY.md")
    _write(workspace / "memory" / "2026-01-02.md")
    _write(workspace / "memory" / "projects" / "alpha.md")
    _write(workspace / "memory" / "image.png", "not markdown")
    _write(workspace / "memory" / "notes.txt", "not markdown")
    _write(workspace / "README.md")  # not memory
    rels = _rels(workspace)
    assert rels == ["MEMORY.md", "memory/2026-01-02.md", "memory/projects/alpha.md"]


def test_skips_dependency_and_vcs_folders(workspace: Path) -> None:
    for folder in ("node_modules", ".git", ".venv", "venv", "__pycache__", ".tox"):
        _write(workspace / "memory" / folder / "x.md")
    _write(workspace / "memory" / "kept.md")
    assert _rels(workspace) == ["memory/kept.md"]


def test_symlinked_files_and_folders_are_ignored(workspace: Path, tmp_path: Path) -> None:
    outside = _write(tmp_path / "outside" / "secret.md")
    os.symlink(outside, workspace / "memory" / "link.md")
    os.symlink(outside.parent, workspace / "memory" / "linked-dir")
    os.symlink(outside, workspace / "MEMORY.md")
    _write(workspace / "memory" / "real.md")
    assert _rels(workspace) == ["memory/real.md"]
    # An extra path that is itself a symlink is ignored too.
    os.symlink(outside.parent, tmp_path / "extra-link")
    assert _rels(workspace, (str(tmp_path / "extra-link"),)) == ["memory/real.md"]


def test_symlinked_memory_folder_is_ignored(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    real = tmp_path / "real-memory"
    _write(real / "a.md")
    os.symlink(real, ws / "memory")
    assert _rels(ws) == []


def test_extra_paths_relative_absolute_files_folders_missing(workspace: Path, tmp_path: Path) -> None:
    _write(workspace / "notes" / "n1.md")
    _write(workspace / "notes" / "deep" / "n2.md")
    _write(workspace / "notes" / "n3.txt")
    single = _write(tmp_path / "elsewhere" / "single.md")
    _write(tmp_path / "elsewhere" / "single.txt")
    rels = _rels(
        workspace,
        ("  notes ", str(single), str(tmp_path / "elsewhere" / "single.txt"), "missing-dir", "", "gone.md"),
    )
    assert rels == ["notes/n1.md", "notes/deep/n2.md", "../elsewhere/single.md"]
    found = {f.rel_path: f for f in list_memory_files(workspace, ("notes", str(single)))}
    assert found["../elsewhere/single.md"].abs_path == single
    assert found["notes/n1.md"].size == len("# note\n")
    assert found["notes/n1.md"].mtime_ns == os.stat(workspace / "notes" / "n1.md").st_mtime_ns


def test_overlapping_extra_paths_are_deduplicated_by_real_path(workspace: Path) -> None:
    _write(workspace / "memory" / "a.md")
    _write(workspace / "notes" / "sub" / "b.md")
    rels = _rels(workspace, ("memory", "notes", "notes/sub", "notes/sub/b.md", str(workspace / "notes")))
    assert rels == ["memory/a.md", "notes/sub/b.md"]


def test_is_memory_path() -> None:
    assert is_memory_path("MEMORY.md")
    assert is_memory_path("./memory.md")
    assert is_memory_path("memory/2026-01-01.md")
    assert is_memory_path("memory\\x\\y.md")
    assert not is_memory_path("notes/memory/x.md")
    assert not is_memory_path("MEMORY.md.bak")


def test_file_date_from_name_or_local_mtime() -> None:
    mtime = time.mktime((2024, 5, 6, 23, 30, 0, 0, 0, -1))
    assert file_date("memory/2026-03-07.md", mtime) == "2026-03-07"
    assert file_date("memory/2026-03-07-standup.md", mtime) == "2026-03-07"
    assert file_date("memory/daily/2026-03/2026-03-08_1430.md", mtime) == "2026-03-08"
    assert file_date("memory/2026-13-45.md", mtime) == "2024-05-06"  # not a real date
    assert file_date("MEMORY.md", mtime) == datetime.fromtimestamp(mtime).date().isoformat() == "2024-05-06"


def test_read_markdown_rejects_binary(tmp_path: Path) -> None:
    path = tmp_path / "bin.md"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00IHDR")
    with pytest.raises(NotMarkdownError, match="binary content"):
        read_markdown(path)


def test_read_markdown_replaces_invalid_utf8_and_reports_it(tmp_path: Path) -> None:
    path = tmp_path / "bad.md"
    path.write_bytes("\ufeffcafé\r\nline two ".encode() + b"\xff\xfe tail\n")
    read = read_markdown(path, "memory/bad.md")
    assert read.text == "café\nline two \ufffd\ufffd tail\n"
    assert read.issue is not None and "invalid UTF-8 in memory/bad.md" in read.issue


def test_read_markdown_clean_file_has_no_issue(tmp_path: Path) -> None:
    path = _write(tmp_path / "ok.md", "中文 note\n")
    assert read_markdown(path).text == "中文 note\n"
    assert read_markdown(path).issue is None


def test_markdown_source_loads_with_hash(workspace: Path) -> None:
    _write(workspace / "memory" / "a.md", "alpha\n")
    source = MarkdownSource(workspace)
    (entry,) = source.scan()
    content = source.load(entry)
    assert content.text == "alpha\n"
    assert len(content.hash) == 64 and content.line_map is None


def test_transcript_source_lists_live_transcripts_and_reset_archives(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    _write(sessions / "abc.jsonl", "{}\n")
    _write(sessions / "abc.jsonl.reset.2026-01-01T00-00-00Z", "{}\n")
    _write(sessions / "old.jsonl.reset.2026-03-01T10-00-00.000Z", "{}\n")
    for left_out in (
        "gone.jsonl.deleted.2026-03-01T10-00-00.000Z",  # a deleted session is not searched
        "x.jsonl.reset.2026-03-01",  # not the archive name /new gives
        "x.jsonl.reset.2026-03-01T10-00-00.000Z.bak",
        ".hidden.jsonl",
        "notes.md",
    ):
        _write(sessions / left_out, "{}\n")
    seen: list[Path] = []

    def builder(path: Path) -> tuple[str, list[int], str]:
        seen.append(path)
        return "User: hi", [3], "h"

    source = TranscriptSource(sessions, builder)
    entries = source.scan()
    assert [(e.rel_path, e.source) for e in entries] == [
        ("sessions/abc.jsonl", "sessions"),
        ("sessions/abc.jsonl.reset.2026-01-01T00-00-00Z", "sessions"),
        ("sessions/old.jsonl.reset.2026-03-01T10-00-00.000Z", "sessions"),
    ]
    content = source.load(entries[0])
    assert (content.text, list(content.line_map or []), content.hash) == ("User: hi", [3], "h")
    assert seen == [sessions / "abc.jsonl"]
    # An archive names the live path it was renamed from; a live transcript names none.
    assert [source.renamed_from(e.rel_path) for e in entries] == [
        None,
        "sessions/abc.jsonl",
        "sessions/old.jsonl",
    ]


def test_scan_of_2000_files_finds_them_in_order(tmp_path: Path) -> None:
    ws = tmp_path / "big"
    for d in range(4):
        folder = ws / "memory" / f"d{d}"
        folder.mkdir(parents=True)
        for i in range(500):
            (folder / f"n{i}.md").write_bytes(b"x")
    files = list_memory_files(ws)
    assert len(files) == 2000
    assert files[0].rel_path == "memory/d0/n0.md" and files[-1].rel_path == "memory/d3/n99.md"
