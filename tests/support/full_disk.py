"""A full disk, for real: a tmpfs of 512 KB mounted for one test (the ``disk`` fixture: room for a small
index and its WAL once the filler is gone), and helpers to fill it up (:func:`fill`), free a few pages of it
(:func:`free`) and see how much still fits in a file's last page (:func:`slack`).

Mounting a tmpfs needs root (CAP_SYS_ADMIN). Without it the tests that use ``disk`` skip, saying so; with
CI=true they fail instead, since the machines the project is tested on can mount one.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import IN_CI

PAGE = 4096  # tmpfs hands out whole pages: a new file needs one, an append within the last page none


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    """A 512 KB tmpfs mounted for this test."""
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    problem = None
    if os.geteuid() != 0:
        problem = "mounting a tmpfs needs root"
    else:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=512k,mode=0700", "tmpfs", str(mount_point)],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            problem = f"cannot mount a tmpfs: {done.stderr.strip()}"
    if problem:
        if IN_CI:
            pytest.fail(f"the disk-full tests must run in CI: {problem}")
        pytest.skip(problem)
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def fill(disk: Path) -> Path:
    """Fill the disk up with one file; returns it (remove it to free the space)."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"\0" * PAGE)
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"\0")
    finally:
        os.close(fd)
    with pytest.raises(OSError) as caught:
        (disk / "probe").write_bytes(b"x")
    assert caught.value.errno == errno.ENOSPC
    return filler


def free(disk: Path, pages: int) -> None:
    """Give ``pages`` pages back (the filler :func:`fill` wrote is cut by that much)."""
    filler = disk / "filler"
    os.truncate(filler, max(0, filler.stat().st_size - pages * PAGE))


def slack(path: Path) -> int:
    """Bytes that still fit in the file's last page (appends up to this need no new page)."""
    size = path.stat().st_size
    return (PAGE - size % PAGE) % PAGE
