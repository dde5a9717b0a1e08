"""One writer per run folder, and SIGTERM handled like Ctrl-C.

``run_lock(out)`` holds ``core/locks.folder_lock`` on ``out/.lock`` for as long as the block
runs; a second ``radspatial eval`` on the same folder gets ``RunFolderBusy`` at once instead of
repeating (and paying for) every call. ``sigterm_as_interrupt`` and ``Terminated`` are
``core/executor``'s (one handler for every command), re-exported here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from radspatial.core.executor import Terminated, sigterm_as_interrupt
from radspatial.core.locks import folder_lock

__all__ = ["LOCK_NAME", "RunFolderBusy", "Terminated", "run_lock", "sigterm_as_interrupt"]

LOCK_NAME = ".lock"


class RunFolderBusy(ValueError):
    """Another process holds the run folder's lock."""


@contextlib.contextmanager
def run_lock(out: Path) -> Iterator[Path]:
    """Hold an exclusive lock on the run folder ``out`` (which must exist) for the block."""

    def busy(holder: str) -> RunFolderBusy:
        return RunFolderBusy(
            f"{out}: another radspatial eval (pid {holder}) is writing to this run folder; "
            "wait for it to finish or choose another --out"
        )

    with folder_lock(Path(out) / LOCK_NAME, busy):
        yield out
