"""Errors that end a run with one line naming the file and the problem."""

from __future__ import annotations

import errno
from collections.abc import Collection
from pathlib import Path

from radspatial.core.textsafe import log_text


class InputError(ValueError):
    """Bad user input; str(err) is one line naming the file and the problem (CLI exits 2)."""


def check_one_of(value: object, allowed: Collection[str], what: str) -> None:
    """ValueError ``"<what> must be one of a, b, got 'x'"`` unless ``value`` is in ``allowed``."""
    if value not in allowed:
        raise ValueError(f"{what} must be one of {', '.join(allowed)}, got {value!r}")


def disk_error_line(exc: OSError, where: Path) -> str:
    """One line for an OSError of the output disk (full, read-only, no permission)."""
    path = exc.filename or where
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"{path}: no space left on the output disk (free some space and rerun)"
    return f"{path}: cannot write the output ({exc.strerror or exc})"


def os_error_line(exc: OSError, out: Path | None = None) -> str:
    """One line for any OSError: the disk line when the disk is full, else file and reason.
    ``out`` (the command's output folder) names a full disk whose error carries no file name."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        where = exc.filename or (Path(out).resolve() if out is not None else Path.cwd())
        return disk_error_line(exc, Path(where))
    if exc.filename is None:  # raised with a message of its own (which names the file)
        return first_line(exc)
    return f"{exc.filename}: {exc.strerror or first_line(exc)}"


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (its type name when the message is empty),
    control characters escaped: a library's message often quotes the bytes of the file it
    choked on (a UID, a header line), and those must not drive the terminal."""
    text = str(exc).strip().splitlines()
    return log_text(text[0]) if text else type(exc).__name__
