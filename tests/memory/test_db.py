"""Opening the index database and the lock that serialises syncs across processes."""

from __future__ import annotations

import fcntl
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

from sessionmem.memory.store.database import connect, process_lock


def _hold(lock_path: str, log_path: str, tag: str) -> None:
    with process_lock(lock_path):
        with open(log_path, "a") as log:
            log.write(f"{tag} in\n")
        time.sleep(0.2)
        with open(log_path, "a") as log:
            log.write(f"{tag} out\n")


def test_two_processes_take_the_lock_one_after_the_other(tmp_path: Path) -> None:
    lock, log = str(tmp_path / "index.lock"), str(tmp_path / "log")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_hold, args=(lock, log, tag)) for tag in ("a", "b")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    lines = Path(log).read_text().split()
    assert len(lines) == 8  # "a in a out b in b out" (some order), never interleaved
    pairs = [lines[i : i + 4] for i in (0, 4)]
    assert all(p[0] == p[2] and p[1] == "in" and p[3] == "out" for p in pairs)


def test_the_lock_is_reentrant_and_released_by_a_dying_holder(tmp_path: Path) -> None:
    lock_path = tmp_path / "index.lock"
    lock = process_lock(lock_path)
    with lock, lock:  # nested use in one thread does not deadlock
        pass
    code = (
        "import os, sys; from sessionmem.memory.store.database import process_lock; "
        f"process_lock({str(lock_path)!r}).__enter__(); os._exit(0)"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=30)
    fd = os.open(lock_path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free: BlockingIOError if the dead held it
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
    with process_lock(lock_path):
        pass


def test_sqlite_vec_loads_without_importing_numpy(tmp_path: Path) -> None:
    code = (
        "import sys; from sessionmem.memory.store.database import connect; "
        f"conn, vec = connect({str(tmp_path / 'x.sqlite')!r}); "
        "print(vec.loaded, 'numpy' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "False"]
    conn, vec = connect(tmp_path / "y.sqlite")
    assert vec.loaded and conn.execute("SELECT vec_version()").fetchone()[0].startswith("v")
