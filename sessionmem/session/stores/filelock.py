"""Cross-process locks on lock files that are never deleted: ``flock`` (the ``filelock`` package where
there is no ``fcntl``).

:class:`StoreLock` guards sessions.json (``sessions.json.lock``): re-entrant within a thread, shared by
every store object on the same file in one process.

Why not OpenClaw's lock file (created ``O_EXCL``, holding ``{pid, createdAt}``, removed by whoever
judges it stale): judging and removing are two steps, so two waiters can both judge one stale file, and
the second removes the lock the first has just taken; a process killed between creating the file and
writing its body leaves a lock that only ages out; a slow holder past the stale age is robbed while it
still writes. With ``flock`` the kernel releases the lock when its holder dies, so there is nothing
stale to recover and nothing to race on: a dead holder's lock is free at once, whatever the file
contains, and a live one is never taken. A holder that hangs makes waiters fail with a timeout error
instead of writing over it. The file is never removed, so every process locks the same inode (if
someone removes or replaces it anyway, a waiter notices the inode changed and locks the new file).
These locks do not exclude OpenClaw processes, which use the ``O_EXCL`` protocol: do not point both at
one store at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # Windows: the filelock package instead
    fcntl = None  # type: ignore[assignment]

from sessionmem.errors import StoreLockTimeout, TurnLockTimeout
from sessionmem.safefs import PRIVATE_FILE_MODE, make_private_dirs


def try_lock_file(path: Path) -> Any:
    """Lock ``path`` (created if missing) without waiting: the locked handle, or None while another
    holder has it. Two handles conflict even within one process. Release with :func:`unlock_file`."""
    if fcntl is None:
        from filelock import FileLock, Timeout

        lock = FileLock(str(path), mode=PRIVATE_FILE_MODE)
        try:
            lock.acquire(timeout=0)
        except Timeout:
            return None
        return lock
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, PRIVATE_FILE_MODE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        # Trigger: the lock file was removed or replaced between our open and our flock (by hand,
        # or by a writer that speaks the O_EXCL protocol). Why: a lock on an unlinked inode
        # excludes nobody. Outcome: let it go and lock the file that is there now.
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)


def unlock_file(handle: Any) -> None:
    """Release a handle :func:`try_lock_file` returned (the lock file stays, for the next holder)."""
    if isinstance(handle, int):
        # Unlock before closing: a child forked meanwhile shares the descriptor, and closing ours
        # alone would leave the lock held until the child closes its copy.
        try:
            fcntl.flock(handle, fcntl.LOCK_UN)
        finally:
            os.close(handle)
    elif handle is not None:
        handle.release()


def lock_attempts(
    path: Path, timeout_s: float, on_taken: Callable[[Any], None], *, max_delay_s: float = 1.0
) -> Iterator[float]:
    """Try to lock ``path`` until it is taken (its handle passed to ``on_taken``), yielding the sleep
    due before each retry; ends without calling ``on_taken`` once ``timeout_s`` of sleeps add up.

    The caller sleeps (``time.sleep`` or ``asyncio.sleep``), so one loop serves threads and event loops.
    Sleeps back off ``min(max_delay_s, 50 ms * attempt)``. Waiting time is the sum of the sleeps, not a
    clock reading, so frozen clocks in tests cannot hang a waiter."""
    make_private_dirs(path.parent)
    handle = try_lock_file(path)
    waited, attempt = 0.0, 0
    while handle is None:
        if waited >= timeout_s:
            return
        attempt += 1
        delay = min(max_delay_s, 0.05 * attempt, timeout_s - waited)
        yield delay
        waited += delay
        handle = try_lock_file(path)
    on_taken(handle)


class _PathLock:
    """This process's hold on one lock file: a re-entrant thread lock, the nesting depth, the handle.

    Shared by every :class:`StoreLock` on the same file (keyed by real path), so two store objects for
    one file nest instead of waiting on each other: ``flock`` locks of two descriptors conflict even
    within one process.
    """

    def __init__(self) -> None:
        self.rlock = threading.RLock()
        self.depth = 0  # guarded by rlock
        self.handle: Any = None  # the locked descriptor (a FileLock without fcntl) while depth > 0


_REGISTRY_GUARD = threading.Lock()
_PATH_LOCKS: dict[str, _PathLock] = {}


def _path_lock_for(path: Path) -> _PathLock:
    key = os.path.realpath(path)  # one entry per file, whatever the symlinks
    with _REGISTRY_GUARD:
        return _PATH_LOCKS.setdefault(key, _PathLock())


def _reset_after_fork() -> None:
    # A forked child holds no locks, whatever its parent's threads held at fork time. It inherits the
    # parent's locked descriptors: close them without unlocking (an unlock would free the parent's lock).
    global _REGISTRY_GUARD
    _REGISTRY_GUARD = threading.Lock()
    for held in _PATH_LOCKS.values():
        if isinstance(held.handle, int):
            with contextlib.suppress(OSError):
                os.close(held.handle)
    _PATH_LOCKS.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


class StoreLock:
    """Cross-process lock (``flock`` on a lock file that is never deleted) plus an in-process RLock.

    Re-entrant within a thread. Contention backs off (:func:`lock_attempts`); after ``timeout_s`` of
    waiting it raises :class:`StoreLockTimeout`. See the module docstring for why ``flock``.
    """

    def __init__(self, path: Path, *, timeout_s: float = 10.0) -> None:
        self.path = path
        self.timeout_s = timeout_s
        self._held = _path_lock_for(path)

    def __enter__(self) -> StoreLock:
        held = self._held
        if not held.rlock.acquire(timeout=self.timeout_s):
            raise StoreLockTimeout(str(self.path), self.timeout_s)
        try:
            if held.depth == 0:
                self._acquire_file()
            held.depth += 1
        except BaseException:
            held.rlock.release()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        held = self._held
        try:
            held.depth -= 1
            if held.depth == 0:
                handle, held.handle = held.handle, None
                unlock_file(handle)
        finally:
            held.rlock.release()

    def _acquire_file(self) -> None:
        for delay in lock_attempts(self.path, self.timeout_s, self._took):
            time.sleep(delay)
        if self._held.handle is None:
            raise StoreLockTimeout(str(self.path), self.timeout_s)

    def _took(self, handle: Any) -> None:
        self._held.handle = handle


class TurnLock:
    """The cross-process lock around one turn of ``session_key``: ``async with`` (or ``with`` in
    threaded code). A second holder waits, backing off (:func:`lock_attempts`), and after ``timeout_s``
    raises :class:`TurnLockTimeout`; a holder that dies frees it at once.

    Turns are handed over in turn, not to whoever polls first. A runner with more turns queued would
    otherwise take the lock back the instant it let go (its next turn is already waiting), while a
    runner in another process sleeps between polls: that one could wait until its timeout. So a waiter
    first takes a second lock, the *door* (``<lock>.door``, held only while waiting), then the turn lock,
    then lets the door go. A holder coming back for its next turn finds the door held by the waiter and
    waits behind it; the waiter takes the turn lock as soon as it is free.
    """

    POLL_MAX_S = 0.1  # a waiter notices a free lock within this (turns are short with fast models)

    def __init__(self, path: Path, session_key: str, *, timeout_s: float) -> None:
        self.path = path
        self.door = path.with_name(path.name + ".door")
        self.session_key = session_key
        self.timeout_s = timeout_s
        self._handle: Any = None
        self._door_handle: Any = None

    async def __aenter__(self) -> None:
        for delay in self._attempts():
            await asyncio.sleep(delay)
        self._check_taken()

    async def __aexit__(self, *exc: object) -> None:
        self.release()

    def __enter__(self) -> None:
        for delay in self._attempts():
            time.sleep(delay)
        self._check_taken()

    def __exit__(self, *exc: object) -> None:
        self.release()

    def release(self) -> None:
        handle, self._handle = self._handle, None
        unlock_file(handle)

    def _attempts(self) -> Iterator[float]:
        """The door, then the turn lock, within ``timeout_s`` in all; the door is let go either way."""
        waited = 0.0
        try:
            for delay in lock_attempts(
                self.door, self.timeout_s, self._took_door, max_delay_s=self.POLL_MAX_S
            ):
                waited += delay
                yield delay
            if self._door_handle is None:
                return
            left = max(0.0, self.timeout_s - waited)
            yield from lock_attempts(self.path, left, self._took, max_delay_s=self.POLL_MAX_S)
        finally:
            door, self._door_handle = self._door_handle, None
            unlock_file(door)

    def _took_door(self, handle: Any) -> None:
        self._door_handle = handle

    def _took(self, handle: Any) -> None:
        self._handle = handle

    def _check_taken(self) -> None:
        if self._handle is None:
            raise TurnLockTimeout(self.session_key, str(self.path), self.timeout_s)
