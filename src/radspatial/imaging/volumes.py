"""CT + organ mask loading (NIfTI, DICOM series, TotalSegmentator folder; masks also as NRRD or
DICOM SEG, ``imaging.mask_formats``) in canonical RAS+.

Every volume leaves this module in nibabel's "closest canonical" voxel order: axis 0 grows toward
the patient's Right, axis 1 toward Anterior, axis 2 toward Superior (``aff2axcodes == RAS``).
Bad input raises :class:`InputError` with one line naming the file and the problem.
Example: ``vol = load_case(Case("ex", Path("ct.nii.gz"), Path("seg.nii.gz")))``.
"""

from __future__ import annotations

import csv
import hashlib
import logging
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import nibabel as nib
import numpy as np
from nibabel.filebasedimages import ImageFileError
from nibabel.spatialimages import HeaderDataError
from nibabel.wrapstruct import WrapStructError

from radspatial.core.errors import InputError, first_line
from radspatial.core.io import sha256_file
from radspatial.core.labels import (
    BUILTIN_TABLES,
    LabelTable,
    load_table,
    normalize_name,
    table_misuse,
)
from radspatial.imaging import mask_formats
from radspatial.imaging.dicom import Warn, read_dicom_series
from radspatial.imaging.mask_formats import MaskReader, register_mask_reader
from radspatial.imaging.nifti import check_affine, check_declared_size, load_nifti_gz

log = logging.getLogger(__name__)

# What a damaged .nii.gz raises, often only once the data (not the header) is read.
_READ_ERRORS: tuple[type[Exception], ...] = (OSError, EOFError, zlib.error, ValueError)
_READ_ERRORS += (ImageFileError, HeaderDataError, WrapStructError)

# A case id becomes part of file names: letters, digits, '.', '_', '-', not starting with '.'.
_CASE_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}")
CASE_ID_RULE = "letters, digits, '.', '_', '-', not starting with '.', at most 128 characters"


def check_case_id(case_id: str, where: str) -> str:
    """``case_id`` if it is safe in a file name, else InputError naming ``where`` it came from."""
    if not isinstance(case_id, str) or not _CASE_ID.fullmatch(case_id):
        raise InputError(f"{where}: case id {case_id!r} is not allowed ({CASE_ID_RULE})")
    return case_id


@dataclass(frozen=True)
class Case:
    case_id: str
    ct: Path  # NIfTI file or a DICOM series folder
    seg: Path  # multilabel NIfTI/NRRD, DICOM SEG or a TotalSegmentator per-structure folder
    # table name or JSON path; None: the mask file's own names (DICOM SEG), else TotalSegmentator
    labels: str | None = None
    variant: str = "normal"  # anatomy variant tag recorded in the manifest

    def __post_init__(self) -> None:
        check_case_id(self.case_id, "case")
        object.__setattr__(self, "ct", Path(self.ct))
        object.__setattr__(self, "seg", Path(self.seg))


@dataclass(frozen=True, eq=False)
class Volume:
    case_id: str
    ct: np.ndarray  # (X, Y, Z) float32 HU, canonical RAS+
    seg: np.ndarray  # (X, Y, Z) uint16 label ids after grouping; 0 = background
    affine: np.ndarray  # 4x4 canonical affine, RAS+ world mm
    spacing: tuple[float, float, float]
    table: LabelTable
    variant: str
    source: dict  # JSON-safe provenance (paths, hashes, formats, orientations, skipped ids)


def _axcodes(affine: np.ndarray) -> str:
    return "".join(str(c) for c in nib.aff2axcodes(affine))


def _canonical(
    data: np.ndarray, affine: np.ndarray, dtype: type, lut: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Reorder/flip axes to closest canonical RAS+ (as nibabel.as_closest_canonical).

    Casts (or maps through ``lut``) in the same pass into one new array, so a 512x512x300
    volume costs one allocation and no float64 copy.
    """
    ornt = nib.orientations.io_orientation(affine)
    view = nib.orientations.apply_orientation(data, ornt)
    if lut is not None:
        out = lut[view]  # fancy indexing: ~10x faster than np.take on uint8 indices
    else:
        out = np.empty(view.shape, dtype=dtype, order="F")  # nibabel's (Fortran) order
        out[...] = view
    return out, affine @ nib.orientations.inv_ornt_aff(ornt, data.shape)


def _spacing(affine: np.ndarray) -> np.ndarray:
    return np.linalg.norm(affine[:3, :3], axis=0)


def _grid_difference(a: np.ndarray, b: np.ndarray) -> str | None:
    """What differs between two voxel grids' affines (None if they agree within tolerance)."""
    sa, sb = _spacing(a), _spacing(b)
    if not np.allclose(sa, sb, rtol=1e-3, atol=0):
        return f"spacing {np.round(sa, 4).tolist()} != {np.round(sb, 4).tolist()} mm"
    if np.abs(a[:3, :3] / sa - b[:3, :3] / sb).max() > 1e-3:
        return "axis directions differ"
    if np.abs(a[:3, 3] - b[:3, 3]).max() > 0.5:
        return f"origin {np.round(a[:3, 3], 2).tolist()} != {np.round(b[:3, 3], 2).tolist()} mm"
    return None


def _require(path: Path) -> None:
    if not path.exists():
        raise InputError(f"{path}: no such file or folder")


def _open_nifti(path: Path, what: str) -> tuple[nib.spatialimages.SpatialImage, tuple[int, ...]]:
    """Open an image (data decoded on demand) and return it with its 3D shape."""
    _require(path)
    if path.is_dir():
        raise InputError(f"{path}: is a folder, expected a NIfTI {what} file")
    if not path.is_file():  # a FIFO would block the reader forever
        raise InputError(f"{path}: not a regular file (a FIFO or device), expected a NIfTI {what}")
    try:
        with nib.imageglobals.LoggingOutputSuppressor():  # header fixes: not for our stderr
            img = _load_bounded(path)
    except InputError:
        raise
    except _READ_ERRORS + (MemoryError,) as exc:
        raise InputError(f"{path}: cannot read {what} as NIfTI ({first_line(exc)})") from None
    shape = tuple(int(s) for s in img.shape)
    while len(shape) > 3 and shape[-1] == 1:  # (X, Y, Z, 1) is still one volume
        shape = shape[:-1]
    if len(shape) != 3:
        raise InputError(f"{path}: {what} has shape {tuple(img.shape)}, expected a 3D volume")
    check_affine(path, img.affine, what, InputError)
    return img, shape


def _load_bounded(path: Path) -> nib.spatialimages.SpatialImage:
    if path.name.endswith(".nii.gz"):
        # nibabel stops before the gzip trailer, so a corrupted .nii.gz would load silently;
        # inflating it whole (size-checked first, see imaging/nifti.py) checks CRC and length.
        return load_nifti_gz(path, InputError)
    img = nib.load(path)
    if not isinstance(img, nib.spatialimages.SpatialImage):  # e.g. a CIFTI-2 .nii: no grid
        raise InputError(f"{path}: not a volume (nibabel reads a {type(img).__name__})")
    check_declared_size(path, img.header, InputError)
    return img


def _read_data(path: Path, read: Callable[..., np.ndarray], *args: object) -> np.ndarray:
    try:
        return read(*args)
    except _READ_ERRORS as exc:
        raise InputError(f"{path}: corrupt or truncated image data ({first_line(exc)})") from None


def load_ct(
    path: Path, *, warn: Warn = log.warning, uneven: bool = False
) -> tuple[np.ndarray, np.ndarray, dict]:
    """Load a CT (NIfTI file or DICOM series folder) as canonical float32 HU, affine, info;
    ``uneven``: accept uneven DICOM slices, true z in ``info["slice_positions_mm"]``."""
    path = Path(path)
    _require(path)
    if path.is_dir():
        data, geo = read_dicom_series(path, warn, uneven=uneven)
        info = {"ct_format": "dicom", "ct_orientation": _axcodes(geo.ras), **geo.info()}
        return (*_canonical(data, geo.ras, np.float32), info)
    img, shape = _open_nifti(path, "CT")
    affine = np.asarray(img.affine, dtype=float)
    info = {"ct_format": "nifti", "ct_orientation": _axcodes(affine)}
    # Same values as img.get_fdata(dtype=np.float32) (scl_slope/scl_inter applied), but scaled
    # in place on the one canonical float32 copy: nibabel's scaled read is several times slower.
    proxy = cast(nib.arrayproxy.ArrayProxy, img.dataobj)  # read on demand, unscaled
    raw = _read_data(path, proxy.get_unscaled).reshape(shape)
    data, affine = _canonical(raw, affine, np.float32)
    slope, inter = float(proxy.slope), float(proxy.inter)
    if not (np.isfinite(slope) and np.isfinite(inter)):
        raise InputError(f"{path}: CT scaling scl_slope={slope}, scl_inter={inter} is not finite")
    if slope != 1.0:
        data *= np.float32(slope)
    if inter != 0.0:
        data += np.float32(inter)
    if data.dtype.kind == "f" and not np.isfinite(data).all():
        bad = int(np.count_nonzero(~np.isfinite(data)))
        raise InputError(f"{path}: CT has {bad} NaN or infinite voxel(s)")
    return data, affine, info


def _label_lut(table: LabelTable, max_id: int) -> tuple[np.ndarray, np.ndarray]:
    """Lookup arrays: source id -> grouped id (0 for unknown ids), and which ids are unknown."""
    known = set(table.names) | set(table.remap)
    unknown = np.array([i != 0 and i not in known for i in range(max_id + 1)])
    lut = np.array([table.apply(i) for i in range(max_id + 1)], dtype=np.uint16)
    lut[unknown] = 0
    return lut, unknown


def _integer_labels(path: Path, data: np.ndarray) -> np.ndarray:
    if data.dtype.kind == "f":
        bad = data != np.rint(data)
        if bad.any():
            raise InputError(f"{path}: mask has non-integer value {data[bad].flat[0].item()!r}")
    if data.dtype.kind not in "uif":
        raise InputError(f"{path}: mask has data type {data.dtype}, expected integer labels")
    if data.size and data.min() < 0:
        raise InputError(f"{path}: mask has negative label {data.min().item()!r}")
    if data.size and data.max() > np.iinfo(np.uint16).max:
        raise InputError(f"{path}: mask has label {data.max().item()!r} > 65535")
    return data if data.dtype in (np.uint8, np.uint16) else data.astype(np.uint16)


def _totalseg_folder(folder: Path, table: LabelTable, warn: Warn) -> tuple[np.ndarray, np.ndarray]:
    """TotalSegmentator's per-structure files -> one multilabel volume (overlaps: higher id)."""
    if table.name != "totalsegmentator":
        raise InputError(f"{folder}: a TotalSegmentator folder needs the totalsegmentator table")
    ids = {name: i for i, name in load_table("totalsegmentator", group=False).names.items()}
    files = []
    for p in sorted(folder.glob("*.nii.gz")):
        name = normalize_name(p.name[: -len(".nii.gz")])
        if name in ids:
            files.append((ids[name], p))
        else:
            warn(f"{p}: {name!r} is not a TotalSegmentator structure, skipped")
    if not files:
        raise InputError(f"{folder}: no <structure>.nii.gz files with TotalSegmentator names")
    files.sort()
    labels: np.ndarray | None = None
    affine = np.eye(4)
    first = files[0][1]
    for label_id, p in files:
        img, shape = _open_nifti(p, "mask")
        if labels is None:
            labels, affine = np.zeros(shape, dtype=np.uint16), np.asarray(img.affine, float)
        elif shape != labels.shape:
            raise InputError(f"{p}: mask shape {shape} != {first.name} shape {labels.shape}")
        elif diff := _grid_difference(np.asarray(img.affine, float), affine):
            raise InputError(f"{p}: grid differs from {first.name}: {diff}")
        data = _read_data(p, np.asanyarray, img.dataobj).reshape(shape)
        labels[data != 0] = label_id
    assert labels is not None
    return labels, affine


def _nifti_mask(path: Path, table: LabelTable, warn: Warn) -> tuple[np.ndarray, np.ndarray]:
    img, shape = _open_nifti(path, "mask")
    data = _read_data(path, lambda: np.asanyarray(img.dataobj)).reshape(shape)
    return data, np.asarray(img.affine, dtype=float)


# the formats read here (mask_formats.MASK_READERS): NIfTI, also any file no reader claims
register_mask_reader(MaskReader("nifti", (".nii.gz", ".nii"), _nifti_mask, fallback=True))
register_mask_reader(MaskReader("totalseg_dir", (), _totalseg_folder, folder=True, fallback=True))


def load_seg(
    path: Path, table: LabelTable, *, warn: Warn = log.warning, ct: Path | None = None
) -> tuple[np.ndarray, np.ndarray, dict]:
    """Load a mask (multilabel NIfTI/NRRD, DICOM SEG or RTSTRUCT, TotalSegmentator folder) as
    canonical grouped uint16 ids (an RTSTRUCT is drawn on the slices of the CT ``ct``).

    Ids not in ``table`` are zeroed with a warning; then ``table``'s grouping is applied.
    """
    path = Path(path)
    _require(path)
    reader = mask_formats.reader_for(path)  # by ending, content, else NIfTI / the folder
    data, affine = mask_formats.read_mask(reader, path, table, warn, ct)
    labels, orientation, seg_format = _integer_labels(path, data), _axcodes(affine), reader.name
    lut, unknown = _label_lut(table, int(labels.max()) if labels.size else 0)
    skipped: list[int] = []
    if unknown.any():
        skipped = [int(i) for i in np.unique(labels[unknown[labels]])]
    present = set(np.flatnonzero(np.bincount(labels.ravel())).tolist())
    if misuse := table_misuse(present, table):
        raise InputError(f"{path}: wrong label table? {misuse}")
    if skipped:
        warn(f"{path}: label ids {skipped} are not in table {table.name}, set to background")
    grouped, affine = _canonical(labels, affine, np.uint16, lut)
    if not grouped.any():
        raise InputError(f"{path}: mask is empty (no labelled voxel of table {table.name})")
    info = {"seg_format": seg_format, "seg_orientation": orientation, "skipped_label_ids": skipped}
    return grouped, affine, info


def load_case(
    case: Case, *, group: bool | None = None, warn: Warn = log.warning, uneven: bool = False
) -> Volume:
    """Load one case's CT and mask on one canonical RAS+ grid; InputError on bad input;
    ``uneven``: accept a DICOM series with uneven slice spacing (axial slices only)."""
    table, own = mask_formats.case_table(case.seg, case.labels, group, warn)
    ct, ct_affine, ct_info = load_ct(case.ct, warn=warn, uneven=uneven)
    seg, seg_affine, seg_info = load_seg(case.seg, table, warn=warn, ct=case.ct)
    if (align := mask_formats.MASK_READERS.get(seg_info["seg_format"]).align) is not None:
        seg, seg_affine = align(case.seg, case.ct, seg, seg_affine, ct.shape, ct_affine)
    if seg.shape != ct.shape:
        raise InputError(f"{case.seg}: mask shape {seg.shape} != CT shape {ct.shape} ({case.ct})")
    if diff := _grid_difference(seg_affine, ct_affine):
        raise InputError(f"{case.seg}: mask grid differs from CT {case.ct}: {diff}")
    source = {
        "case_id": case.case_id,
        "ct": str(case.ct),
        "seg": str(case.seg),
        "ct_sha256": sha256_path(case.ct),
        "seg_sha256": sha256_path(case.seg),
        **ct_info,
        **seg_info,
        "labels": table.name,
        "grouping": table.grouping,
        **({"label_names": {str(k): v for k, v in own.names.items()}} if own else {}),
    }
    sx, sy, sz = (float(s) for s in _spacing(ct_affine))
    return Volume(case.case_id, ct, seg, ct_affine, (sx, sy, sz), table, case.variant, source)


def read_cases_csv(path: Path, *, labels: str | None = None) -> list[Case]:
    """Cases from a CSV with columns ct, seg and optional labels, case_id, variant.

    Relative paths are relative to the CSV's folder. ``labels`` (``generate --labels``) is the
    label table of rows with no ``labels`` value; a row naming another table is an error.
    """
    path = Path(path)
    default = _table_spec(labels) if labels is not None else None
    _require(path)
    try:
        with path.open(newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            rows = list(reader)
            columns = {(c or "").strip() for c in reader.fieldnames or []}
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"{path}: cannot read CSV ({first_line(exc)})") from None
    missing = [c for c in ("ct", "seg") if c not in columns]
    if missing:
        raise InputError(f"{path}: missing column(s) {', '.join(missing)}")

    def resolve(value: str) -> Path:
        p = Path(value).expanduser()
        return p if p.is_absolute() else path.parent / p

    cases: list[Case] = []
    seen: dict[str, int] = {}
    for line, raw in enumerate(rows, start=2):
        if None in raw:  # DictReader files surplus fields under the key None
            n = len(raw) - 1 + len(raw[None])
            raise InputError(f"{path}: line {line}: {n} fields, the header has {len(raw) - 1}")
        row = {(k or "").strip(): (v or "").strip() for k, v in raw.items()}
        if not row["ct"] or not row["seg"]:
            raise InputError(f"{path}: line {line}: empty ct or seg")
        ct, row_labels = resolve(row["ct"]), row.get("labels") or None
        if row_labels is not None and row_labels not in BUILTIN_TABLES:
            row_labels = str(resolve(row_labels))
        if row_labels is None:
            row_labels = default
        elif default is not None and _table_spec(row_labels) != default:
            raise InputError(
                f"{path}: line {line}: labels {row_labels!r} conflicts with --labels {labels!r}"
                " (leave the column empty to use --labels)"
            )
        case_id = row.get("case_id") or re.sub(r"\.nii(\.gz)?$", "", ct.name)
        check_case_id(case_id, f"{path}: line {line}")
        if case_id in seen:
            raise InputError(
                f"{path}: duplicate case_id {case_id!r} (lines {seen[case_id]}, {line})"
            )
        seen[case_id] = line
        variant = row.get("variant") or "normal"
        cases.append(Case(case_id, ct, resolve(row["seg"]), row_labels, variant))
    if not cases:
        raise InputError(f"{path}: no cases")
    return cases


def _table_spec(spec: str) -> str:
    """A label table spec comparable with another: a built-in name, or a resolved JSON path."""
    return spec if spec in BUILTIN_TABLES else str(Path(spec).expanduser().resolve())


def sha256_path(path: Path) -> str:
    """sha256 of a file's bytes; for a folder, over sorted (relative name, file sha256) pairs."""
    path = Path(path)
    _require(path)
    if path.is_file():
        return sha256_file(path)
    h = hashlib.sha256()
    for p in sorted(q for q in path.rglob("*") if q.is_file()):
        h.update(f"{p.relative_to(path).as_posix()}\0{sha256_file(p)}\n".encode())
    return h.hexdigest()
