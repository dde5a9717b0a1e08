"""Errors that end a run with one line naming the file and the problem."""

from __future__ import annotations

import errno
from pathlib import Path


class InputError(ValueError):
    """Bad user input; str(err) is one line naming the file and the problem (CLI exits 2)."""


def disk_error_line(exc: OSError, where: Path) -> str:
    """One line for an OSError of the output disk (full, read-only, no permission)."""
    path = exc.filename or where
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"{path}: no space left on the output disk (free some space and rerun)"
    return f"{path}: cannot write the output ({exc.strerror or exc})"


def os_error_line(exc: OSError) -> str:
    """One line for any OSError: the disk line when the disk is full, else file and reason."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return disk_error_line(exc, Path(exc.filename or "."))
    if exc.filename is None:  # raised with a message of its own (which names the file)
        return first_line(exc)
    return f"{exc.filename}: {exc.strerror or first_line(exc)}"


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (its type name when the message is empty)."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
