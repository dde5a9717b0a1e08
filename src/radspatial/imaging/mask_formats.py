"""Mask readers: one registry (:data:`MASK_READERS`) of the formats a mask may come in, each
declaring the file endings it reads (as nnU-Net's reader/writer registry), how it recognises a
file whose ending says nothing, its loader, the label names the file states and how it is put
on the CT's grid.

Built in: NIfTI (``.nii.gz``, ``.nii``; also any other file no reader claims) and the
TotalSegmentator folder (``imaging/volumes.py``), NRRD (``.nrrd``, ``.nhdr``, ``.seg.nrrd``,
``imaging/nrrd.py``), DICOM SEG (``.dcm`` or the DICOM preamble, ``imaging/dicom_seg.py``) and
DICOM RTSTRUCT (the same, told apart by SOP class, ``imaging/dicom_kind.py``;
``imaging/rtstruct.py``: drawn on the CT's slices, so it is read with the CT, ``on_ct``).
``imaging.volumes.load_seg`` asks :func:`reader_for`; every reader returns integer labels on a
RAS affine, so all masks are checked by the same grid checks (and error messages). A new format
is one module calling ``register_mask_reader(MaskReader(...))`` (docs/architecture.md).

:func:`embedded_table` is the label table a file names itself (a SEG's segment labels, a
``.seg.nrrd``'s segment names), used when no ``--labels`` is given; :func:`check_user_table`
warns where a given table disagrees with the names in the file. A reader that matches its
structures to the table by name (RTSTRUCT ROI names) builds the table itself (``table``);
:func:`case_table` chooses.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from radspatial.core.errors import InputError, first_line
from radspatial.core.labels import LabelTable, load_table, normalize_name, structure_name
from radspatial.core.registry import Registry

if TYPE_CHECKING:
    import numpy as np

Warn = Callable[[str], None]
# (mask path, label table, warn) -> (labels [i, j, k], 4x4 RAS affine); InputError on bad input
Read = Callable[[Path, LabelTable, Warn], "tuple[np.ndarray, np.ndarray]"]
# (mask path, CT path, labels, affine, CT shape, CT affine) -> labels and affine on the CT's grid
Align = Callable[..., "tuple[np.ndarray, np.ndarray]"]
# (mask path, CT path, label table, warn) -> labels and affine on the CT's grid
ReadOnCt = Callable[[Path, Path, LabelTable, Warn], "tuple[np.ndarray, np.ndarray]"]
# (mask path, --labels spec or None, grouping, warn) -> the label table (ValueError/InputError)
TableFor = Callable[[Path, "str | None", "bool | None", Warn], LabelTable]


@dataclass(frozen=True)
class MaskReader:
    """One mask format. ``name`` is what the manifest records (``seg_format``)."""

    name: str
    endings: tuple[str, ...]  # lower-case file-name endings it reads (longest match wins)
    read: Read
    sniff: Callable[[Path], bool] | None = None  # a file whose ending names no reader
    folder: bool = False  # reads a folder instead of a file
    fallback: bool = False  # any other file (folder) is read as this one
    names: Callable[[Path], dict[int, str] | None] | None = None  # id -> name, as the file says
    align: Align | None = None  # after the CT is read (a DICOM SEG: its references, its slab)
    on_ct: ReadOnCt | None = None  # read with the CT instead of ``read`` (RTSTRUCT)
    table: TableFor | None = None  # matches structures by name: builds the case's table


MASK_READERS: Registry[MaskReader] = Registry(
    "mask format", ("nrrd", "dicom_seg", "rtstruct", "volumes"), package="radspatial.imaging"
)


def register_mask_reader(reader: MaskReader) -> MaskReader:
    return MASK_READERS.add(reader.name, reader)


def reader_for(path: Path) -> MaskReader:
    """The reader of ``path``: by its ending, else by its content (``sniff``), else the
    fallback of its kind (NIfTI for files, the TotalSegmentator folder for folders); readers
    sharing an ending (``.dcm``) are told apart by their ``sniff``. Something
    that is neither a file nor a folder (a FIFO) goes to the file fallback unopened, which
    refuses it."""
    folder = path.is_dir()
    readers = [r for _, r in MASK_READERS.items() if r.folder == folder]
    if folder or path.is_file():
        low = path.name.lower()
        ends = [(len(e), r.name, r) for r in readers for e in r.endings if low.endswith(e)]
        if ends:
            best = max(n for n, _, _ in ends)
            tied = [r for n, _, r in sorted(ends, key=lambda x: x[1]) if n == best]
            if len(tied) > 1:
                tied = [r for r in tied if r.sniff and r.sniff(path)] or tied
            return tied[0]
        if not folder and (sniffed := [r for r in readers if r.sniff and r.sniff(path)]):
            return sniffed[0]
    fallback = [r for r in readers if r.fallback]
    if not fallback:
        raise ValueError(f"{path}: no mask reader for a {'folder' if folder else 'file'}")
    return fallback[0]


def file_names(path: Path) -> dict[int, str] | None:
    """label id -> name as the file itself states them (None: the file names nothing)."""
    reader = reader_for(path)
    return reader.names(path) if reader.names else None


def embedded_table(path: Path) -> LabelTable | None:
    """The file's own names as a label table (named '<format>:<file name>'), or None."""
    names = file_names(path)
    if not names:
        return None
    fmt = reader_for(path).name
    vocab = {k: structure_name(v, source=path, field=f"label {k}'s name") for k, v in names.items()}
    return LabelTable(f"{fmt}:{path.name}", vocab)


def check_user_table(path: Path, table: LabelTable, warn: Warn) -> None:
    """Warn about each id whose name in ``table`` differs from the name the file gives it."""
    for label_id, name in sorted((file_names(path) or {}).items()):
        given = table.names.get(table.apply(label_id))
        if given is not None and given != normalize_name(name):
            warn(f"{path}: label {label_id} is {name!r} in the file, {given!r} in {table.name}")


def read_mask(
    reader: MaskReader, path: Path, table: LabelTable, warn: Warn, ct: Path | None
) -> tuple[np.ndarray, np.ndarray]:
    """``reader``'s labels and affine; a reader that needs the CT (``on_ct``) gets ``ct``."""
    if reader.on_ct is None:
        return reader.read(path, table, warn)
    if ct is None:
        raise InputError(f"{path}: a {reader.name} mask is read with its CT (--ct)")
    return reader.on_ct(path, ct, table, warn)


def case_table(
    seg: Path, spec: str | None, group: bool | None, warn: Warn
) -> tuple[LabelTable, LabelTable | None]:
    """(the label table of the mask ``seg`` given ``--labels spec``, the same table when it is
    the file's own names, else None): the reader's own choice when it matches by name, else
    the file's names without a spec, else the table ``spec`` names (checked against them)."""
    reader = reader_for(seg)
    try:
        if reader.table is not None:
            table = reader.table(seg, spec, group, warn)
            return table, (table if spec is None else None)
        own = embedded_table(seg) if spec is None else None
        table = own or load_table(spec, group=group)
    except ValueError as exc:
        raise InputError(first_line(exc)) from None
    if own is None:
        check_user_table(seg, table, warn)
    return table, own


def ignore_table(read: Callable[[Path], Any]) -> Read:
    """A ``Read`` from a loader that needs only the path (its first two results)."""
    return lambda path, table, warn: tuple(read(path)[:2])
