"""Counterfactual anatomy: left-right mirrored (situs-inversus-like) cases from real volumes.

``mirror_case`` flips a CT and its mask along the voxel axis whose world direction is closest
to x (so it works for any orientation) and keeps the affine: the patient's anatomy is mirrored
in world space. Paired structures are then relabelled to the side they now lie on
(kidney_left <-> kidney_right, rib_left_3 <-> rib_right_3, iliac_artery_left <-> ..., every
table name with a left/right word), so every name stays anatomically true.

Two special cases:
- Names that need a side the table lacks get an extension id: TotalSegmentator has no
  ``lung_middle_lobe_left``, so the mirrored right middle lobe becomes id 201 of that name
  (:data:`EXTENSION_NAMES`). The mapping stays an involution: mirroring twice restores every
  voxel and every id.
- ``atrial_appendage_left`` is named after its (morphologically left) atrium, not its side;
  it keeps its id, as unpaired structures (liver, aorta, ...) do.

Example: ``mirror_case(Path("ct.nii.gz"), Path("seg.nii.gz"), Path("out/"))``.
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import nibabel as nib
import numpy as np

from radspatial.core.io import atomic_write_bytes, atomic_write_json
from radspatial.core.labels import BUILTIN_TABLES, load_table
from radspatial.imaging.volumes import InputError

MASS_ID = 200
EXTENSION_NAMES: dict[int, str] = {MASS_ID: "mass", 201: "lung_middle_lobe_left"}
MORPHOLOGICAL: frozenset[str] = frozenset({"atrial_appendage_left", "atrial_appendage_right"})
_SWAP = {"left": "right", "right": "left"}


def swap_side(name: str) -> str | None:
    """'rib_left_3' -> 'rib_right_3'; None for names without a side word."""
    words = name.split("_")
    if not any(w in _SWAP for w in words):
        return None
    return "_".join(_SWAP.get(w, w) for w in words)


def mirror_map(names: dict[int, str]) -> tuple[dict[int, int], dict[int, str]]:
    """Label id -> id after a left-right mirror, plus the extension ids it introduces.

    Only ids that change are listed. The map is an involution (applying it twice is the
    identity), also over the extension ids.
    """
    by_name = {n: i for i, n in names.items()}
    ext_by_name = {n: i for i, n in EXTENSION_NAMES.items()}
    out: dict[int, int] = {}
    extra: dict[int, str] = {}
    for i, name in sorted(names.items()):
        swapped = swap_side(name)
        if swapped is None or name in MORPHOLOGICAL or i in out:
            continue
        if swapped in by_name:
            j = by_name[swapped]
        else:
            j = ext_by_name.get(swapped) or max([*names, *EXTENSION_NAMES, *extra]) + 1
            if j in names:  # the table already uses the extension id for something else
                j = max([*names, *EXTENSION_NAMES, *extra]) + 1
            extra[j] = swapped
        out[i], out[j] = j, i
    return out, extra


def mirror_lut(mapping: dict[int, int], max_id: int) -> np.ndarray:
    """A lookup array old id -> new id covering ids 0..max(max_id, mapped ids)."""
    top = max([max_id, *mapping, *mapping.values()]) if mapping else max_id
    lut = np.arange(top + 1, dtype=np.int64)
    for a, b in mapping.items():
        lut[a] = b
    return lut


def lr_axis(affine: np.ndarray) -> int:
    """The voxel axis whose world direction is closest to the x (left-right) axis."""
    cols = np.asarray(affine, float)[:3, :3]
    cosines = np.abs(cols[0]) / np.linalg.norm(cols, axis=0)
    return int(np.argmax(cosines))


def mirror_arrays(
    ct: np.ndarray, seg: np.ndarray, affine: np.ndarray, mapping: dict[int, int]
) -> tuple[np.ndarray, np.ndarray]:
    """Flip both arrays along the left-right voxel axis and relabel ``seg`` (pure)."""
    axis = lr_axis(affine)
    ct_m = np.flip(ct, axis=axis)
    seg_m = np.flip(seg, axis=axis)
    if mapping and seg_m.size:
        lut = mirror_lut(mapping, int(seg_m.max()))
        seg_m = lut[seg_m].astype(seg.dtype)
    return np.ascontiguousarray(ct_m), np.ascontiguousarray(seg_m)


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (".nii.gz", ".nii"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return path.stem


def mirrored_paths(ct: Path, seg: Path, out: Path) -> tuple[Path, Path, Path]:
    """Where :func:`mirror_case` writes: CT, mask and the mask's labels JSON."""
    out = Path(out)
    return (
        out / f"{_stem(Path(ct))}_mirrored.nii.gz",
        out / f"{_stem(Path(seg))}_mirrored.nii.gz",
        out / f"{_stem(Path(seg))}_mirrored_labels.json",
    )


def _load(path: Path, what: str) -> nib.Nifti1Image:
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no such file")
    if path.is_dir():
        raise InputError(f"{path}: is a folder; mirror_case needs a NIfTI {what} file")
    try:
        img = nib.load(path)
        shape = img.shape
    except Exception as exc:  # nibabel raises several types for unreadable files
        raise InputError(f"{path}: cannot read {what} as NIfTI ({exc})") from None
    if len([s for s in shape if s != 1]) > 3 or len(shape) < 3:
        raise InputError(f"{path}: {what} has shape {shape}, expected a 3D volume")
    return img


def _encode(img: nib.Nifti1Image, raw: np.ndarray) -> bytes:
    """The image with new (raw, on-disk dtype) data and the same header and scaling."""
    proxy = img.dataobj
    slope = float(getattr(proxy, "slope", 1.0))
    inter = float(getattr(proxy, "inter", 0.0))
    new = type(img)(raw, img.affine, img.header.copy())
    if (slope, inter) != (1.0, 0.0):
        new.header.set_slope_inter(slope, inter)
    return gzip.compress(new.to_bytes(), compresslevel=1, mtime=0)


def mirror_case(ct: Path, seg: Path, out: Path, *, labels: str | None = None) -> tuple[Path, Path]:
    """Write a left-right mirrored copy of a case (CT + multilabel mask) into folder ``out``.

    ``ct`` is a NIfTI file (same affine, header and on-disk data types are kept) or a DICOM
    series folder (written as NIfTI on the canonical RAS+ grid, with the mask resampled to
    nothing: the mask must lie on the series' grid, as ``generate`` requires). Paired
    structures are relabelled by side (see the module docstring). Also writes the mask's
    label table as JSON (the input table plus any extension ids) next to it, and
    ``out/cases.csv`` (case_id, ct, seg, labels, variant) listing the original case as
    ``normal`` and the mirrored one as ``mirrored``, ready for ``generate --cases``.
    Returns the CT and mask paths; see :func:`mirrored_paths`.
    """
    ct, seg = Path(ct), Path(seg)
    try:
        table = load_table(labels, group=False)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    seg_img = _load(seg, "mask")
    seg_raw = np.asanyarray(seg_img.dataobj)
    if seg_raw.dtype.kind not in "ui" or (seg_raw.size and seg_raw.min() < 0):
        raise InputError(f"{seg}: mask must hold non-negative integer labels, not {seg_raw.dtype}")
    mapping, extra = mirror_map(table.names)
    present = set(np.unique(seg_raw).tolist())
    mapping = {a: b for a, b in mapping.items() if a in present or b in present}
    needed = max(mapping.values(), default=0)
    if needed > np.iinfo(seg_raw.dtype).max:
        raise InputError(
            f"{seg}: mirrored label id {needed} does not fit the mask's {seg_raw.dtype}"
        )
    ct_out, seg_out, labels_out = mirrored_paths(ct, seg, out)
    from radspatial.core.safepath import check_disjoint
    from radspatial.imaging.volumes import check_case_id

    inputs = {"--ct": ct, "--seg": seg, "--labels": Path(labels) if labels else None}
    for written in (ct_out, seg_out, labels_out, Path(out) / "cases.csv"):
        check_disjoint(written, inputs)  # a mirrored file never replaces what it reads

    for case_id in (_stem(ct), _stem(ct_out)):
        check_case_id(case_id, f"{ct}: the CT's name")
    mirror = _mirror_dicom if ct.is_dir() else _mirror_nifti
    ct_bytes, seg_bytes = mirror(ct, seg, seg_img, seg_raw, mapping)
    atomic_write_bytes(ct_out, ct_bytes)
    atomic_write_bytes(seg_out, seg_bytes)
    names = {**table.names, **extra}
    atomic_write_json(labels_out, {str(k): v for k, v in sorted(names.items())})
    uses_extension = any(mapping.get(i) in extra for i in present)
    table_spec = labels or "totalsegmentator"
    if table_spec not in BUILTIN_TABLES:
        table_spec = _from_csv(Path(table_spec), out)
    mirrored_labels = labels_out.name if uses_extension else table_spec
    rows = [
        (_stem(ct), _from_csv(ct, out), _from_csv(seg, out), table_spec, "normal"),
        (_stem(ct_out), ct_out.name, seg_out.name, mirrored_labels, "mirrored"),
    ]
    write_cases_csv(Path(out) / "cases.csv", rows)
    return ct_out, seg_out


def _from_csv(path: Path, out: Path) -> str:
    """``path`` as ``OUT/cases.csv`` names it, as given (symlinks not resolved): a file inside
    OUT or in a folder beside it (``../in/ct.nii.gz``) relative to OUT (how the CSV is read),
    so OUT and its neighbour move together; a file farther away (a shared data folder)
    absolute, so moving OUT does not break a ``../../..`` path to it."""
    given = os.path.abspath(path)
    try:
        rel = Path(os.path.relpath(given, os.path.abspath(out)))
    except ValueError:  # another drive
        return given
    return rel.as_posix() if rel.parts[:2].count("..") < 2 else given


def _mirror_nifti(
    ct: Path, seg: Path, seg_img: nib.Nifti1Image, seg_raw: np.ndarray, mapping: dict[int, int]
) -> tuple[bytes, bytes]:
    """Mirror a NIfTI CT and mask on their own grid; same header and on-disk data types."""
    ct_img = _load(ct, "CT")
    if ct_img.shape != seg_img.shape:
        raise InputError(f"{seg}: mask shape {seg_img.shape} != CT shape {ct_img.shape} ({ct})")
    if not np.allclose(ct_img.affine, seg_img.affine, atol=1e-3):
        raise InputError(f"{seg}: mask affine differs from the CT's ({ct})")
    ct_raw = np.asanyarray(getattr(ct_img.dataobj, "get_unscaled", lambda: ct_img.dataobj)())
    ct_m, seg_m = mirror_arrays(ct_raw, seg_raw, ct_img.affine, mapping)
    return _encode(ct_img, ct_m), _encode(seg_img, seg_m)


def _mirror_dicom(
    ct: Path, seg: Path, seg_img: nib.Nifti1Image, seg_raw: np.ndarray, mapping: dict[int, int]
) -> tuple[bytes, bytes]:
    """Mirror a DICOM series and its NIfTI mask on the canonical grid; both as NIfTI bytes."""
    from radspatial.imaging.volumes import _canonical, _grid_difference, load_ct

    hu, affine, _ = load_ct(ct)
    mask, mask_affine = _canonical(seg_raw, np.asarray(seg_img.affine, float), seg_raw.dtype)
    if mask.shape != hu.shape:
        raise InputError(f"{seg}: mask shape {mask.shape} != CT shape {hu.shape} ({ct})")
    if diff := _grid_difference(mask_affine, affine):
        raise InputError(f"{seg}: mask grid differs from CT {ct}: {diff}")
    ct_m, seg_m = mirror_arrays(hu, mask, affine, mapping)
    if np.array_equal(ct_m, np.round(ct_m)) and ct_m.min() >= -32768 and ct_m.max() <= 32767:
        ct_m = ct_m.astype(np.int16)  # DICOM HU are integers: half the bytes, same values
    ct_img = nib.Nifti1Image(ct_m, affine)
    seg_img2 = nib.Nifti1Image(seg_m, affine)
    for img in (ct_img, seg_img2):
        img.set_qform(affine, code=1)
        img.set_sform(affine, code=1)
    compress = lambda img: gzip.compress(img.to_bytes(), compresslevel=1, mtime=0)  # noqa: E731
    return compress(ct_img), compress(seg_img2)


CASES_COLUMNS = ("case_id", "ct", "seg", "labels", "variant")


def write_cases_csv(path: Path, rows: list[tuple[str, ...]]) -> None:
    """Write (or update, keyed by case_id) a cases CSV; rows of other cases are kept."""
    import csv
    import io

    kept: dict[str, tuple[str, ...]] = {}
    if path.is_file():
        try:
            with path.open(newline="", encoding="utf-8") as f:
                for row in csv.DictReader(f):
                    kept[row["case_id"]] = tuple(row.get(c) or "" for c in CASES_COLUMNS)
        except (OSError, UnicodeDecodeError, csv.Error, KeyError) as exc:
            raise InputError(f"{path}: exists and is not a cases CSV ({exc})") from None
    for row in rows:
        kept[row[0]] = row
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CASES_COLUMNS)
    writer.writerows(kept[k] for k in sorted(kept))
    atomic_write_bytes(path, buf.getvalue().encode())
