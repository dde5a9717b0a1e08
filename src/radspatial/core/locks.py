"""One writer per output folder: an exclusive ``fcntl.flock`` on a lock file in it.

``folder_lock(path, busy)`` holds the lock for the block, with the holder's pid written in the
file (so the refusal can name it). The lock dies with the process, so kill -9 never leaves a
stale lock behind; a symlinked lock file is refused, never written through. ``wait_s`` lets a
second writer wait for a first that is just exiting (a killed run's workers); after it, or at
once, ``busy(holder pid)`` is raised. Without ``fcntl`` (Windows) the block runs unguarded.
``radspatial eval`` locks its run folder (``eval/runguard.run_lock``), ``radspatial generate``
its staging folder (``bench/stage.locked_stage``).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from radspatial.core.io import open_nofollow


@contextlib.contextmanager
def folder_lock(
    path: Path, busy: Callable[[str], Exception], *, wait_s: float = 0.0
) -> Iterator[None]:
    """Hold an exclusive lock on the file ``path`` (created if missing) for the block."""
    try:
        import fcntl
    except ImportError:  # no flock (Windows): run unguarded
        yield
        return
    fd = open_nofollow(Path(path), os.O_RDWR)
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
                    raise busy(holder) from None
                time.sleep(0.1)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock
