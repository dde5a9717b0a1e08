"""A saved probe task model's ``model.json`` read as untrusted input.

The loader builds a head from the file's spec and loads an encoder from the folder it names;
here every field is checked first: a JSON object of the expected format, the encoder folder
inside the run folder (no absolute path, ``..`` or symlink out), a head spec whose sizes are
integers within bounds (a head of 10^9 units would allocate gigabytes), so a hostile or
damaged file is a ``ValueError`` naming it (one line, exit 2), never a traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from radspatial.core.datafiles import read_json
from radspatial.core.safepath import inside

MAX_INT = 16_384  # any size in a head spec (dim, hidden units, layers, classes)
MAX_CELLS = 65_536  # product of the grid or the output shape


def read_task_meta(folder: Path, fmt: str) -> tuple[dict[str, Any], Path]:
    """(checked model.json of ``folder``, the encoder folder it names)."""
    path = Path(folder) / "model.json"
    meta = read_json(path, want=dict)
    if meta.get("format") != fmt:
        raise ValueError(f"{path}: format {meta.get('format')!r:.60} is not {fmt!r}")
    encoder = _encoder(Path(folder), meta.get("encoder"), path)
    head, info = meta.get("head"), meta.get("task_info")
    if not isinstance(info, dict) or not isinstance(info.get("kind"), str):
        raise ValueError(f"{path}: task_info must be an object with a kind")
    if not isinstance(head, dict) or not isinstance(head.get("name"), str):
        raise ValueError(f"{path}: head must be an object with a name and kwargs")
    kwargs = head.get("kwargs")
    if not isinstance(kwargs, dict):
        raise ValueError(f"{path}: head.kwargs must be an object")
    _bounded(path, kwargs, "head.kwargs")
    for key in ("grid", "out_shape"):
        cells = 1
        for n in kwargs.get(key) or []:
            cells *= n if isinstance(n, int) else 1
        if cells > MAX_CELLS:
            raise ValueError(f"{path}: head.kwargs.{key} has {cells} cells, over {MAX_CELLS}")
    return meta, encoder


def _encoder(folder: Path, rel: object, path: Path) -> Path:
    """The encoder folder: the task's own (``.``) or the run's shared one (``../../encoder``
    from ``run/models/<task>``); refused when it leads out of the run folder."""
    root = folder.parent.parent if folder.parent.name == "models" else folder
    if not isinstance(rel, str) or not rel.strip():
        raise ValueError(f"{path}: encoder must be a relative folder name")
    within = (folder.relative_to(root) / rel).as_posix()
    return inside(root, within, where=str(path), what="encoder")


def _bounded(path: Path, value: object, where: str) -> None:
    """Every number in ``value`` finite and every integer in 0..MAX_INT."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return
    if isinstance(value, int):
        if not 0 <= value <= MAX_INT:
            raise ValueError(f"{path}: {where} is {value}, outside 0..{MAX_INT}")
    elif isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"{path}: {where} is not a finite number")
    elif isinstance(value, list):
        for k, v in enumerate(value):
            _bounded(path, v, f"{where}[{k}]")
    elif isinstance(value, dict):
        for k, v in value.items():
            _bounded(path, v, f"{where}.{k}")
