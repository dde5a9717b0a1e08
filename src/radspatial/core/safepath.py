"""Containment for paths read from data files: a dataset may only point inside its own folder.

A manifest row, a MIRP ``qa.json`` entry or any other untrusted file names images and masks by
relative path. ``inside(root, rel, where=...)`` returns ``root / rel`` only when that path, with
every symlink resolved, stays inside ``root`` (also resolved); absolute paths, ``..`` escapes and
symlinks leading out are refused with a ``PathEscapeError`` naming the file and row.

    >>> inside(Path("bench"), "RQ1/images/a.png", where="bench/manifest.jsonl: line 3")
    PosixPath('bench/RQ1/images/a.png')
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath, PureWindowsPath


class PathEscapeError(ValueError):
    """A path from a data file that is absolute or resolves outside its dataset folder."""


def inside(root: Path, rel: object, *, where: str, what: str = "path") -> Path:
    """``root / rel``, refused unless it resolves inside ``root``.

    ``where`` names the file and row for the error (``"ds/manifest.jsonl: line 3"``), ``what``
    the field (``"image"``). The returned path is the plain join (not resolved), so callers keep
    the names they had.
    """
    if not isinstance(rel, str) or not rel.strip() or "\x00" in rel:
        raise PathEscapeError(f"{where}: {what} must be a non-empty relative path, got {rel!r}")
    if PurePosixPath(rel).is_absolute() or PureWindowsPath(rel).is_absolute():
        raise PathEscapeError(
            f"{where}: {what} {rel!r} is an absolute path; paths must stay inside {root}"
        )
    root = Path(root)
    path = root / rel
    real_root = Path(os.path.realpath(root))
    real = Path(os.path.realpath(path))
    if real != real_root and real_root not in real.parents:
        raise PathEscapeError(
            f"{where}: {what} {rel!r} resolves to {real}, outside the dataset folder {root}"
        )
    return path
