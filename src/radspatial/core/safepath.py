"""Containment for paths read from data files: a dataset may only point inside its own folder.

A manifest row, a MIRP ``qa.json`` entry or any other untrusted file names images and masks by
relative path. ``inside(root, rel, where=...)`` returns ``root / rel`` only when that path, with
every symlink resolved, stays inside ``root`` (also resolved); absolute paths, ``..`` escapes and
symlinks leading out are refused with a ``PathEscapeError`` naming the file and row.

    >>> inside(Path("bench"), "RQ1/images/a.png", where="bench/manifest.jsonl: line 3")
    PosixPath('bench/RQ1/images/a.png')

The same module holds the other rules about where files are: ``check_disjoint(out, inputs)``
refuses an ``--out`` that is, contains or lies inside an input (so ``--overwrite`` can never
delete what the command reads), and ``check_image_bytes`` an image whose bytes are not what
its name says (a GIF named ``.png``). FIFOs and devices are refused where a file is read by
``core.datafiles`` (a FIFO would hang the reader).
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath, PureWindowsPath

from radspatial.core.jobspec import ParamError


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


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


class OverlapError(ParamError, PathEscapeError):
    """An output that is, contains or lies inside an input: a :class:`ParamError` about the
    output's and the input's parameters (worded in the caller's terms), and a path refusal."""


def check_disjoint(out: Path, inputs: dict[str, Path | None], *, out_param: str = "out") -> None:
    """Refuse ``out`` when it is, contains or lies inside one of ``inputs`` (parameter -> path),
    with every symlink resolved: replacing ``out`` would delete or change that input. A key is
    a job parameter (``data``; ``--data`` is read as ``data``) or a plain description (``run
    #2``, ``case1 ct``); the refusal is an :class:`OverlapError` naming ``out_param`` and the
    input's parameter, so each face words them (``--out``/``--data``, ``out=``/``data=``)."""
    real_out = _real(out)
    for key, path in inputs.items():
        if path is None:
            continue
        real_in = _real(path)
        if real_out == real_in or real_in in real_out.parents or real_out in real_in.parents:
            how = (
                "is"
                if real_out == real_in
                else ("lies inside" if real_in in real_out.parents else "contains")
            )
            name = key[2:].replace("-", "_") if key.startswith("--") else key
            param = name if name.isidentifier() else None
            what = "{" + param + "}" if param else key
            raise OverlapError(
                (out_param, param) if param else out_param,
                f"{{{out_param}}} {out}: {how} the input {what} {path}; writing there would "
                f"replace the input (choose another {{{out_param}}})",
            )


_SIGNATURES = {".png": (b"\x89PNG\r\n\x1a\n",), ".jpg": (b"\xff\xd8",), ".jpeg": (b"\xff\xd8",)}


def check_image_bytes(path: Path, data: bytes) -> None:
    """Refuse image bytes that are not the format the file name says (``.png``, ``.jpg``)."""
    signatures = _SIGNATURES.get(Path(path).suffix.lower())
    if signatures and not data.startswith(signatures):
        kind = Path(path).suffix.lower().lstrip(".").upper()
        raise PathEscapeError(f"{path}: not a {kind} image (its bytes are another format)")


def recorded_root(run_dir: Path, data: object) -> Path | None:
    """The dataset folder a run folder's run.json names (``data``): absolute since eval records
    it so; a relative one (older runs) is taken as given if it exists here, else from the run
    folder's parent. None when there is none."""
    if not isinstance(data, str) or not data.strip() or "\x00" in data:
        return None
    root = Path(data)
    return root if root.is_absolute() or root.is_dir() else Path(run_dir).parent / root


def linkable(root: Path | None, image: object) -> Path | None:
    """``image`` (a results row's path) as an existing file inside the dataset ``root``, else
    None: nothing outside the dataset is linked or even probed."""
    if root is None or not isinstance(image, str) or not image or "\x00" in image:
        return None
    path = Path(image)
    real_root, real = _real(root), _real(path if path.is_absolute() else Path.cwd() / path)
    if real_root not in real.parents:
        return None
    return path if real.is_file() else None
