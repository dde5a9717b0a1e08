"""One writer per run folder, and SIGTERM handled like Ctrl-C.

``run_lock(out)`` takes an exclusive ``fcntl.flock`` on ``out/.lock`` for as long as the block
runs; a second ``radspatial eval`` on the same folder gets ``RunFolderBusy`` at once instead of
repeating (and paying for) every call. The lock dies with the process, so kill -9 never leaves a
stale lock behind. ``sigterm_as_interrupt()`` makes SIGTERM raise ``Terminated`` (a
``KeyboardInterrupt``), so the same cleanup runs for both signals.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

from radspatial.core.io import open_nofollow

LOCK_NAME = ".lock"


class RunFolderBusy(ValueError):
    """Another process holds the run folder's lock."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, delivered as an interrupt."""


@contextlib.contextmanager
def run_lock(out: Path) -> Iterator[Path]:
    """Hold an exclusive lock on the run folder ``out`` (which must exist) for the block."""
    try:
        import fcntl
    except ImportError:  # no flock (Windows): run unguarded
        yield out
        return
    path = Path(out) / LOCK_NAME
    fd = open_nofollow(path, os.O_RDWR)  # a symlinked .lock is refused, never truncated
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
            raise RunFolderBusy(
                f"{out}: another radspatial eval (pid {holder}) is writing to this run folder; "
                "wait for it to finish or choose another --out"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield out
    finally:
        os.close(fd)  # releases the lock


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises ``Terminated`` in the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
