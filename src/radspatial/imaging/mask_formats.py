"""Masks that are not NIfTI: NRRD label maps (``.nrrd``, ``.seg.nrrd``) and DICOM SEG.

``imaging.volumes.load_seg`` asks :func:`read_other_mask` first; a file it does not claim is read
as NIfTI. Both formats come back as integer labels on a RAS affine, so they are aligned to the
CT by the same grid checks (and error messages) as NIfTI masks. :func:`embedded_table` is the
label table a file names itself (a SEG's segment labels, a ``.seg.nrrd``'s segment names), used
when no ``--labels`` is given; :func:`check_user_table` warns where a given table disagrees with
the names in the file.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from radspatial.core.labels import LabelTable, normalize_name
from radspatial.imaging import dicom_seg, nrrd

Warn = Callable[[str], None]


def mask_format(path: Path) -> str | None:
    """'nrrd', 'dicom_seg', or None (NIfTI, or a folder)."""
    if not path.is_file():
        return None
    if path.name.lower().endswith((".nrrd", ".nhdr")):
        return "nrrd"
    if path.name.lower().endswith(".dcm") or dicom_seg.is_dicom_file(path):
        return "dicom_seg"
    return None


def read_other_mask(path: Path) -> tuple[np.ndarray, np.ndarray, str] | None:
    """(labels [i, j, k], RAS affine, format) of a NRRD or DICOM SEG mask; None for NIfTI."""
    fmt = mask_format(path)
    if fmt == "nrrd":
        data, affine, _ = nrrd.read_nrrd_labels(path)
        return data, affine, fmt
    if fmt == "dicom_seg":
        data, affine, _ = dicom_seg.read_dicom_seg(path)
        return data, affine, fmt
    return None


def file_names(path: Path) -> dict[int, str] | None:
    """label id -> name as the file itself states them (None: the file names nothing)."""
    fmt = mask_format(path)
    if fmt == "dicom_seg":
        return dicom_seg.segment_names(path)
    if fmt == "nrrd" and path.name.lower().endswith(".seg.nrrd"):
        return nrrd.nrrd_segment_names(path)
    return None


def embedded_table(path: Path) -> LabelTable | None:
    """The file's own names as a label table (named '<format>:<file name>'), or None."""
    names = file_names(path)
    if not names:
        return None
    fmt = mask_format(path)
    return LabelTable(f"{fmt}:{path.name}", {k: normalize_name(v) for k, v in names.items()})


def check_user_table(path: Path, table: LabelTable, warn: Warn) -> None:
    """Warn about each id whose name in ``table`` differs from the name the file gives it."""
    for label_id, name in sorted((file_names(path) or {}).items()):
        given = table.names.get(table.apply(label_id))
        if given is not None and given != normalize_name(name):
            warn(f"{path}: label {label_id} is {name!r} in the file, {given!r} in {table.name}")
