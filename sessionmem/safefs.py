"""Writing files inside a folder without ever leaving it, and with the transcripts' private mode.

Every file sessionmem creates is created here or with :data:`PRIVATE_FILE_MODE` (0600: the memory
files, the index and its locks hold the same private text as the transcripts). Every folder it creates
is made by :func:`make_private_dirs` (or :func:`folder_under`, which uses the same mode),
:data:`PRIVATE_DIR_MODE` (0700): a folder's names are private too (``memory/peers/<chat>/`` lists
people's ids, the ``/new`` files their conversations' slugs, ``sessions/`` the session ids).

Writes into the agent's workspace (daily logs, MEMORY.md and its history, the ``/new`` hook's file,
the flush) go through :func:`open_under` and the helpers on top of it:

Trigger: a memory file or a folder on its way is a symlink (or is swapped for one between a check
and the open), or a hard link to a file elsewhere.
Why: checking a path and then opening it lets a symlink planted in between redirect the write
anywhere on the machine (an append test saw about 1% of 3,000 appends land outside).
Outcome: the path is walked one component at a time from an open descriptor of the root, every
component opened with ``O_NOFOLLOW`` relative to the previous one (``openat``), so no symlink is
ever followed below the root; the opened file is then checked (``fstat``): a regular file with a
single link. Anything else raises :class:`UnsafeWriteError` and nothing is written. The root itself
(the workspace the user configured) may be a symlink.

Writes are whole or nothing, and a failure says which file and why:

Trigger: the disk fills up (or another write error) in the middle of a write. Why: the kernel writes what
fits and refuses the rest, which would leave a torn note at the end of a daily log, or a half-written
file. Outcome: an append (:func:`append_under`, :func:`write_at_end`) is cut back to the size the file
had (a file it created is removed), a replace (:func:`replace_under`) or a new file
(:func:`create_new_under`) is written to a temp file first, removed on failure, so the old file stays;
either way a :class:`~sessionmem.errors.FileWriteError` names the file and the reason ("no space left on
device").
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import stat
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

from sessionmem.errors import FileWriteError, UnsafeWriteError, os_error_reason

try:
    import fcntl
except ImportError:  # Windows: appends are still single writes
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

PRIVATE_FILE_MODE = 0o600
PRIVATE_DIR_MODE = 0o700
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_WALKS = os.open in os.supports_dir_fd and bool(_NOFOLLOW and _DIRECTORY)
_REFUSALS = (errno.ELOOP, errno.ENOTDIR, errno.EMLINK)


def create_private(path: str | os.PathLike[str]) -> None:
    """Create ``path`` empty with mode 0600 unless it exists (a database file before SQLite opens it:
    SQLite gives its ``-wal``/``-shm`` files the database file's mode)."""
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _CLOEXEC, PRIVATE_FILE_MODE))


def make_private_dirs(path: str | os.PathLike[str]) -> None:
    """Create folder ``path`` and its missing parents, each with mode 0700 (``os.makedirs`` gives the
    parents the umask's mode); an existing folder is left as it is."""
    try:
        os.mkdir(path, PRIVATE_DIR_MODE)
    except FileExistsError:
        if not os.path.isdir(path):
            raise
    except FileNotFoundError:
        parent = os.path.dirname(os.path.abspath(path))
        if parent == os.path.abspath(path):
            raise
        make_private_dirs(parent)
        with contextlib.suppress(FileExistsError):  # made by another thread or process meanwhile
            os.mkdir(path, PRIVATE_DIR_MODE)


def narrow_to_private(*paths: str | os.PathLike[str]) -> None:
    """Give each existing file among ``paths`` mode 0600 when it is readable by others (files an
    earlier version created 0644)."""
    for path in paths:
        with contextlib.suppress(OSError):
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) & 0o077:
                os.chmod(path, PRIVATE_FILE_MODE)


def _parts(rel: str) -> list[str]:
    parts = rel.replace("\\", "/").split("/")
    if not rel or any(p in ("", ".", "..") for p in parts) or rel.startswith("/"):
        raise UnsafeWriteError(rel, "not a plain relative path")
    return parts


@contextlib.contextmanager
def folder_under(root: str | os.PathLike[str], rel_dir: str, *, create: bool = True) -> Iterator[int]:
    """An open descriptor of ``root/rel_dir`` reached without following a symlink below ``root``;
    missing folders (the root too) are created when ``create``. ``rel_dir`` "" is the root itself."""
    if create:
        make_private_dirs(root)
    fd = os.open(root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    try:
        for part in _parts(rel_dir) if rel_dir else []:
            child = _enter(fd, part, rel_dir, create)
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def _enter(parent: int, name: str, rel: str, create: bool) -> int:
    """Open folder ``name`` in ``parent`` without following a symlink, creating it when missing."""
    for attempt in (1, 2):
        try:
            return os.open(name, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=parent)
        except FileNotFoundError:
            if not create or attempt == 2:
                raise
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, PRIVATE_DIR_MODE, dir_fd=parent)
        except OSError as exc:
            if exc.errno in _REFUSALS:
                raise UnsafeWriteError(rel, f"{name} is a symlink or not a folder") from None
            raise
    raise AssertionError("unreachable")  # pragma: no cover


def open_under(root: str | os.PathLike[str], rel: str, flags: int, *, create_dirs: bool = True) -> int:
    """Open ``root/rel`` with ``flags`` (0600 when created), never following a symlink below ``root``;
    the opened file must be a regular file with one link. Returns the descriptor."""
    parts = _parts(rel)
    if not _WALKS:  # pragma: no cover - platforms without openat: lexical check, then O_NOFOLLOW
        return _open_checked_lexically(Path(root), parts, flags)
    with folder_under(root, "/".join(parts[:-1]), create=create_dirs) as folder:
        try:
            fd = os.open(parts[-1], flags | _NOFOLLOW | _CLOEXEC, PRIVATE_FILE_MODE, dir_fd=folder)
        except OSError as exc:
            if exc.errno in _REFUSALS:
                raise UnsafeWriteError(rel, "it is a symlink") from None
            raise
    return _checked(fd, rel)


def _checked(fd: int, rel: str) -> int:
    st = os.fstat(fd)
    problem = None
    if not stat.S_ISREG(st.st_mode):
        problem = "not a regular file"
    elif st.st_nlink > 1:
        problem = "it has other hard links (a write would change a file elsewhere)"
    if problem:
        os.close(fd)
        raise UnsafeWriteError(rel, problem)
    return fd


def _open_checked_lexically(root: Path, parts: list[str], flags: int) -> int:  # pragma: no cover
    current = root
    for part in parts[:-1]:
        current = current / part
        if current.is_symlink():
            raise UnsafeWriteError("/".join(parts), f"{part} is a symlink")
        make_private_dirs(current)
    return _checked(os.open(current / parts[-1], flags | _NOFOLLOW, PRIVATE_FILE_MODE), "/".join(parts))


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


@contextlib.contextmanager
def failing_as_write_error(name: str) -> Iterator[None]:
    """Raise an :class:`OSError` from the block as a :class:`~sessionmem.errors.FileWriteError` naming
    ``name`` (refusals, :class:`~sessionmem.errors.UnsafeWriteError`, pass through as they are)."""
    try:
        yield
    except FileWriteError:
        raise
    except OSError as exc:
        raise FileWriteError(name, os_error_reason(exc), error_number=exc.errno) from exc


def write_at_end(fd: int, data: bytes, size: int, name: str) -> None:
    """Write ``data`` at the end of ``fd`` (``size`` bytes long before) whole, or cut the file back to
    ``size`` and raise a :class:`~sessionmem.errors.FileWriteError` naming ``name``. The caller holds the
    file's lock (no other writer appends in between)."""
    written = 0
    try:
        while written < len(data):
            n = os.write(fd, data[written:])
            if n == 0:  # no progress and no error: treat like a full disk rather than loop
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            written += n
    except OSError as exc:
        try:
            os.ftruncate(fd, size)
        except OSError:
            log.error("could not roll back a partial write to %s", name, exc_info=True)
        detail = f"{written} of {len(data)} bytes written, rolled back"
        raise FileWriteError(name, os_error_reason(exc), error_number=exc.errno, detail=detail) from exc


def append_under(root: str | os.PathLike[str], rel: str, build: Callable[[bytes], bytes | None]) -> bool:
    """Append to ``root/rel`` (opened as :func:`open_under` does, created 0600 when missing) the bytes
    ``build(current content)`` returns, under the file's lock; None appends nothing (returns False).
    Whole or nothing (:func:`write_at_end`); a file created for an append that failed is removed."""
    with failing_as_write_error(rel):
        fd = open_under(root, rel, os.O_RDWR | os.O_APPEND | os.O_CREAT)
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)  # a concurrent appender's text is never cut back with ours
        current = read_all(fd)
        data = build(current)
        if data is None:
            return False
        try:
            write_at_end(fd, data, len(current), rel)
        except FileWriteError:
            if not current:
                _remove_if_empty(root, rel, fd)
            raise
    finally:
        os.close(fd)
    return True


def _remove_if_empty(root: str | os.PathLike[str], rel: str, fd: int) -> None:
    """Remove ``root/rel`` when it is still the empty file open as ``fd`` (created for a failed append)."""
    parts = _parts(rel)
    with contextlib.suppress(OSError), folder_under(root, "/".join(parts[:-1]), create=False) as folder:
        mine, there = os.fstat(fd), os.stat(parts[-1], dir_fd=folder, follow_symlinks=False)
        if mine.st_size == 0 and (mine.st_dev, mine.st_ino) == (there.st_dev, there.st_ino):
            os.unlink(parts[-1], dir_fd=folder)


def read_all(fd: int) -> bytes:
    chunks = []
    os.lseek(fd, 0, os.SEEK_SET)
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    return b"".join(chunks)


def _write_temp(folder: int, name: str, data: bytes) -> str:
    """``data`` written and synced to a new 0600 ``.<name>.tmp-<random>`` in ``folder``; its name."""
    tmp = f".{name}.tmp-{os.urandom(6).hex()}"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
    fd = os.open(tmp, flags, PRIVATE_FILE_MODE, dir_fd=folder)
    try:
        write_all(fd, data)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=folder)
        raise
    os.close(fd)
    return tmp


def replace_under(root: str | os.PathLike[str], rel: str, data: bytes) -> None:
    """Replace ``root/rel`` with ``data`` atomically (a 0600 temp file renamed over it, in the same
    folder reached without symlinks). An existing symlink or hard-linked file there is refused."""
    parts = _parts(rel)
    name = parts[-1]
    with failing_as_write_error(rel), folder_under(root, "/".join(parts[:-1])) as folder:
        with contextlib.suppress(FileNotFoundError):
            st = os.stat(name, dir_fd=folder, follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode) or not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
                raise UnsafeWriteError(rel, "it is a symlink, a hard link or not a regular file")
        tmp = _write_temp(folder, name, data)
        try:
            os.replace(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=folder)
            raise
        with contextlib.suppress(OSError):
            os.fsync(folder)


def create_new_under(
    root: str | os.PathLike[str],
    rel_dir: str,
    stem: str,
    data: bytes,
    *,
    suffix: str = ".md",
    attempts: int = 1000,
) -> str:
    """Write ``data`` to a new file ``rel_dir/stem.md`` (or ``stem-2.md``, ``stem-3.md``… when taken),
    never overwriting; returns its path relative to ``root``. The text is written to a temp file and
    hard-linked into place, so a reader never sees a half-written file."""
    first = f"{rel_dir}/{stem}{suffix}" if rel_dir else f"{stem}{suffix}"
    with failing_as_write_error(first), folder_under(root, rel_dir) as folder:
        tmp = _write_temp(folder, stem, data)
        try:
            for attempt in range(1, attempts + 1):
                name = f"{stem}{suffix}" if attempt == 1 else f"{stem}-{attempt}{suffix}"
                if _place(folder, tmp, name, data):
                    return f"{rel_dir}/{name}" if rel_dir else name
            raise FileExistsError(f"no free name for {stem}{suffix} in {rel_dir} after {attempts} tries")
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=folder)


def _place(folder: int, tmp: str, name: str, data: bytes) -> bool:
    """Link ``tmp`` as ``name`` (False when taken); an exclusive create where hard links are not allowed."""
    try:
        os.link(tmp, name, src_dir_fd=folder, dst_dir_fd=folder, follow_symlinks=False)
        return True
    except FileExistsError:
        return False
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
            raise
    try:
        fd = os.open(
            name,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC,
            PRIVATE_FILE_MODE,
            dir_fd=folder,
        )
    except FileExistsError:
        return False
    try:
        write_at_end(fd, data, 0, name)
    except FileWriteError:
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=folder)
        raise
    finally:
        os.close(fd)
    return True


def remove_tree_under(root: str | os.PathLike[str], rel_dir: str, *, dry_run: bool = False) -> list[str]:
    """Remove the folder ``root/rel_dir`` and all it holds, reached and walked without following a
    symlink (a symlink inside is removed itself, never what it points to); returns the ``root``-relative
    paths of the files removed (``dry_run``: of those that would be), sorted. A missing folder: ``[]``.

    Walked with a stack of open folder descriptors, not recursion: a folder nested deeper than Python's
    recursion limit is removed like any other."""
    parts = _parts(rel_dir)
    found: list[str] = []
    try:
        with folder_under(root, "/".join(parts[:-1]), create=False) as parent:
            if not stat.S_ISDIR(os.stat(parts[-1], dir_fd=parent, follow_symlinks=False).st_mode):
                if not dry_run:  # a symlink (or a file) where the folder should be: itself goes
                    os.unlink(parts[-1], dir_fd=parent)
                return [rel_dir]
            top = os.open(parts[-1], os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=parent)
            stack: list[tuple[int, str, list[str]]] = [(top, rel_dir, sorted(os.listdir(top)))]
            try:
                while stack:
                    fd, prefix, names = stack[-1]
                    if not names:  # every entry of this folder done: remove it from its parent
                        stack.pop()
                        os.close(fd)
                        if not dry_run:
                            holder = stack[-1][0] if stack else parent
                            name = prefix.rsplit("/", 1)[-1]
                            with contextlib.suppress(FileNotFoundError):
                                os.rmdir(name, dir_fd=holder)
                        continue
                    name = names.pop()
                    try:
                        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                        if stat.S_ISDIR(st.st_mode):
                            child = os.open(name, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=fd)
                            stack.append((child, f"{prefix}/{name}", sorted(os.listdir(child))))
                            continue
                        found.append(f"{prefix}/{name}")
                        if not dry_run:
                            os.unlink(name, dir_fd=fd)
                    except FileNotFoundError:  # removed meanwhile
                        continue
            finally:
                for fd, _, _ in stack:
                    os.close(fd)
    except FileNotFoundError:
        return sorted(found)
    except OSError as exc:
        if exc.errno in _REFUSALS:
            raise UnsafeWriteError(rel_dir, "it is a symlink or not a folder") from None
        raise
    return sorted(found)


# --- whole files replaced atomically (the session stores, transcripts copied in) ---

_ATOMIC_TEMP_RE = re.compile(r"\.[0-9a-f]{32}\.tmp")


def atomic_temp_path(path: Path) -> Path:
    """A new temp file name for an atomic write of ``path``: ``<name>.<32 hex>.tmp`` beside it."""
    return path.with_name(f"{path.name}.{uuid.uuid4().hex}.tmp")


def is_atomic_temp_of(name: str, target: str) -> bool:
    """True when ``name`` is one of :func:`atomic_temp_path`'s names for a file called ``target``."""
    return name.startswith(target) and _ATOMIC_TEMP_RE.fullmatch(name, len(target)) is not None


def atomic_write_bytes(path: Path, data: bytes, *, mode: int = PRIVATE_FILE_MODE) -> None:
    """Write ``data`` to ``path`` so that readers see the old content or the new, never a mix.

    Temp file in the same folder (same filesystem, so ``os.replace`` is atomic), fsync, replace,
    then fsync the folder so the rename itself survives a power cut.
    """
    make_private_dirs(path.parent)
    tmp = atomic_temp_path(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        try:
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fsync_folder(path.parent)


def fsync_folder(folder: Path) -> None:
    """Make the renames and removals in ``folder`` survive a power cut (best effort: some file systems
    cannot sync a folder)."""
    with contextlib.suppress(OSError):
        dfd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
