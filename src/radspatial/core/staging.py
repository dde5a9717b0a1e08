"""Staged outputs: build a folder in ``OUT.partial`` and rename it to ``OUT`` only when complete."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from radspatial.core.errors import InputError, disk_error_line
from radspatial.core.executor import sigterm_as_interrupt
from radspatial.core.safepath import check_disjoint


@contextmanager
def staged(
    out: Path,
    overwrite: bool,
    inputs: dict[str, Path | None] | None = None,
    marker: tuple[str, str] | None = None,
) -> Iterator[Path]:
    """Build a folder in ``OUT.partial`` and rename it to ``OUT`` only if the block succeeds.

    A non-empty ``out`` is refused unless ``overwrite``, and so is an ``out`` that is, contains
    or lies inside one of ``inputs`` (flag -> path: ``--overwrite`` must never replace what
    the command reads), and, with ``marker`` (file name, what the folder is), a non-empty
    ``out`` without that file: ``--overwrite`` replaces only a folder the command wrote. On
    any error the staging folder is removed, so a half-written output never looks complete.
    """
    out = Path(out)
    check_disjoint(out, inputs or {})
    if marker is not None and overwrite:
        check_made_by(out, *marker)
    stage = prepare_out(out, overwrite)
    try:
        with sigterm_as_interrupt():
            yield stage
        swap_in(stage, out)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise


def swap_in(new: Path, out: Path) -> None:
    """Put folder ``new`` at ``out``: the old ``out`` is renamed aside, ``new`` renamed in, and
    only then the old one deleted; if the second rename fails the old one is put back."""
    old = None
    if out.exists() or out.is_symlink():
        old = out.with_name(f"{out.name}.old-{os.getpid()}")
        os.rename(out, old)
    try:
        os.rename(new, out)
    except BaseException:
        if old is not None:
            os.rename(old, out)
        raise
    if old is not None:
        if old.is_dir() and not old.is_symlink():
            shutil.rmtree(old, ignore_errors=True)
        else:
            old.unlink(missing_ok=True)


def check_made_by(out: Path, marker: str, what: str) -> None:
    """Refuse a non-empty folder ``out`` with nothing matching ``marker`` (a file name or glob
    pattern): it is not ``what`` (a folder this command wrote), so ``--overwrite`` must not
    delete it."""
    mine = not out.is_dir() or out.is_symlink() or not any(out.iterdir()) or any(out.glob(marker))
    if not mine:
        raise InputError(
            f"--out {out}: exists and is not {what} (no {marker}); --overwrite replaces "
            "only a folder this command wrote: remove it yourself or choose another --out"
        )


def check_out(out: Path) -> None:
    """Refuse output folders whose replacement would destroy more than a dataset."""
    resolved, cwd = out.resolve(), Path.cwd().resolve()
    if resolved == cwd or resolved in cwd.parents or not out.name or out.name in (".", ".."):
        raise InputError(
            f"--out {out}: is the current folder or one above it; name a new folder for the output"
        )


def check_out_folder(out: Path, overwrite: bool) -> None:
    """Refuse a non-empty ``out`` unless ``overwrite``, and outputs that are not folders."""
    check_out(out)
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise InputError(f"{out}: exists and is not a folder; remove it or choose another --out")
    if out.exists() and any(out.iterdir()) and not overwrite:
        raise FileExistsError(f"{out}: output folder exists and is not empty (use --overwrite)")


def prepare_out(out: Path, overwrite: bool) -> Path:
    """Refuse a non-empty ``out`` unless ``overwrite``; return a fresh staging folder."""
    out = Path(out)
    check_out_folder(out, overwrite)
    stage = out.with_name(out.name + ".partial")
    if stage.is_symlink() or (stage.exists() and not stage.is_dir()):
        raise InputError(f"{stage}: staging path exists and is not a folder; remove it")
    try:
        if stage.exists():
            shutil.rmtree(stage)
        stage.mkdir(parents=True)
    except OSError as exc:
        raise InputError(disk_error_line(exc, stage)) from None
    return stage
