"""DICOM RT Structure Sets (RTSTRUCT) -> label ids on the CT's own slices.

A structure set holds ROIs (``StructureSetROISequence``: number, name, frame of reference) and
their contours (``ROIContourSequence``): polygons in patient coordinates (LPS mm), each naming
the CT image it was drawn on (``ContourImageSequence``). Each closed planar contour is filled
on the slice its ReferencedSOPInstanceUID names, never on the slice nearest its z: real files'
z values need not equal the slice positions (``../shared/data/gstt_thorax``). Points go to
pixels through that slice's ImagePositionPatient, ImageOrientationPatient and PixelSpacing;
the fill is the even-odd rule at pixel centres over all contours of a ROI on a slice
(``imaging/rtstruct_fill.py``: holes). POINT and OPEN_PLANAR contours are skipped with one
warning. The structure set's frame of reference must be the CT's.

ROI names are matched to the label table by name, case-insensitively (``normalize_name``):
``--labels totalsegmentator`` (plus TotalSegmentator v1's five heart structures,
``core.labels.TOTALSEG_V1_HEART``), any id -> name table, or a JSON object ROI name ->
structure name; without ``--labels`` the ROI names are the structures. Contoured ROIs that
match nothing are named in one warning and skipped; none matching is an error. Overlaps: the
higher label id wins. Bounded: the file's size, the ROIs, contours and points
(``MAX_*``), and the crossings one slice's fill may make. pydicom is imported when read.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from radspatial.core.errors import InputError, first_line
from radspatial.core.labels import LabelTable, load_table, normalize_name, with_v1_heart
from radspatial.core.textsafe import log_text
from radspatial.imaging.dicom import SeriesGeometry, read_series_geometry
from radspatial.imaging.dicom_kind import RTSTRUCT_SOP_CLASS, dicom_mask_reader
from radspatial.imaging.mask_formats import MaskReader, Warn, register_mask_reader
from radspatial.imaging.rtstruct_fill import TooComplex, fill_even_odd, outline_pixels

MAX_FILE_BYTES = 256 << 20
MAX_ROIS = 5_000
MAX_CONTOURS = 200_000  # 100 structures x 2,000 slices
MAX_CONTOUR_POINTS = 100_000  # one contour; a real one has hundreds to a few thousand
MAX_POINTS = 5_000_000  # the whole file
MAX_NAME = 64  # an ROI name is a DICOM LO: at most 64 characters
_CONTOUR_DATA = 0x30060050
_DS_BYTES = 17  # one DS value with its separator at most


def _dataset(path: Path):
    """The structure set, parsed (contour data left as raw bytes), size-checked first."""
    import pydicom

    try:
        size = os.stat(path).st_size
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({first_line(exc)})") from None
    if size > MAX_FILE_BYTES:
        raise InputError(f"{path}: RTSTRUCT of {size >> 20} MiB, over {MAX_FILE_BYTES >> 20} MiB")
    try:
        ds = pydicom.dcmread(path)
    except Exception as exc:  # pydicom raises many types on bad bytes
        raise InputError(f"{path}: cannot read DICOM ({first_line(exc)})") from None
    if str(ds.get("SOPClassUID", "")) != RTSTRUCT_SOP_CLASS:
        raise InputError(f"{path}: not a DICOM RT Structure Set (SOP class {RTSTRUCT_SOP_CLASS})")
    return ds


def _int(path: Path, item, keyword: str, where: str) -> int:
    try:
        return int(item.get(keyword))
    except (TypeError, ValueError):
        shown = log_text(repr(item.get(keyword)))[:40]
        raise InputError(f"{path}: {where} {keyword} {shown} is not a number") from None


def _sequence(path: Path, ds, keyword: str) -> list:
    try:
        return list(ds.get(keyword) or [])
    except Exception as exc:  # a malformed sequence fails when first parsed
        raise InputError(f"{path}: cannot read {keyword} ({first_line(exc)})") from None


def contoured_rois(path: Path, ds=None) -> dict[int, tuple[str, list]]:
    """ROI number -> (name, contour items) of each ROI with at least one contour; duplicate
    ROI numbers, contours of an ROI the set does not declare, too many ROIs or contours and
    names that are not one short line of text are refused."""
    ds = _dataset(path) if ds is None else ds
    rois = _sequence(path, ds, "StructureSetROISequence")
    if len(rois) > MAX_ROIS:
        raise InputError(f"{path}: RTSTRUCT has {len(rois)} ROIs, over {MAX_ROIS}")
    names: dict[int, str] = {}
    for item in rois:
        number = _int(path, item, "ROINumber", "an ROI's")
        if number in names:
            raise InputError(f"{path}: two ROIs have ROINumber {number}; each needs its own")
        names[number] = _roi_name(path, number, item.get("ROIName"))
    out: dict[int, tuple[str, list]] = {}
    n_contours = 0
    for item in _sequence(path, ds, "ROIContourSequence"):
        number = _int(path, item, "ReferencedROINumber", "an ROI contour's")
        if number not in names:
            raise InputError(f"{path}: contours of ROI {number}, which the set does not declare")
        if number in out:
            raise InputError(f"{path}: ROI {number} has two ROIContourSequence items")
        contours = _sequence(path, item, "ContourSequence")
        n_contours += len(contours)
        if n_contours > MAX_CONTOURS:
            raise InputError(f"{path}: RTSTRUCT has over {MAX_CONTOURS} contours")
        if contours:
            out[number] = (names[number], contours)
    if not out:
        raise InputError(f"{path}: RTSTRUCT has no contours ({len(names)} ROI(s), none drawn)")
    return out


def _roi_name(path: Path, number: int, raw: object) -> str:
    text = str(raw or "").strip()
    if len(text) > MAX_NAME or any(not c.isprintable() for c in text):
        shown = log_text(text)[:80]
        raise InputError(f"{path}: ROI {number} name {shown!r} is not one line of text")
    return text or f"roi_{number}"


def roi_table_names(path: Path) -> dict[int, str]:
    """label id -> structure name of the contoured ROIs' own names (ids 1..n by name)."""
    found = sorted({normalize_name(n) for n, _ in contoured_rois(path).values()} - {""})
    return {i: name for i, name in enumerate(found, start=1)}


def _name_map(spec: str) -> dict[str, str] | None:
    """A JSON object ROI name -> structure name (normalized both), None for any other spec."""
    path = Path(spec)
    if not path.is_file() or path.suffix.lower() != ".json":
        return None
    from radspatial.core.datafiles import loads, read_text_bounded

    raw = loads(read_text_bounded(path), path)
    if not isinstance(raw, dict) or not raw or any(k.isdigit() or k == "extends" for k in raw):
        return None  # an id -> name table (load_table reads and checks it)
    if not all(isinstance(v, str) and normalize_name(v) for v in raw.values()):
        raise ValueError(f"{path}: ROI name map values must be structure names")
    return {normalize_name(k): normalize_name(v) for k, v in raw.items()}


def table_for(path: Path, spec: str | None, group: bool | None, warn: Warn) -> LabelTable:
    """The label table of an RTSTRUCT read with ``--labels spec`` (module docstring)."""
    if spec is None:
        return LabelTable(f"rtstruct:{path.name}", roi_table_names(path))
    aliases = _name_map(spec)
    if aliases is not None:
        names = sorted(set(aliases.values()))
        return LabelTable(spec, {i: name for i, name in enumerate(names, start=1)})
    table = load_table(spec, group=group)
    if table.name == "totalsegmentator":
        table = with_v1_heart(table)
    return table


def _ids_by_name(table: LabelTable) -> dict[str, int]:
    """structure name -> source label id, the names grouping merged included (rib_left_6)."""
    ids = {name: i for i, name in table.names.items()}
    if table.grouping:
        ungrouped = load_table(table.name, group=False).names
        ids.update({name: i for i, name in ungrouped.items() if i in table.remap})
    return ids


def match_rois(path: Path, rois: dict[int, tuple[str, list]], table: LabelTable, warn: Warn):
    """ROI number -> label id of the ROIs ``table`` names; one warning lists the others."""
    aliases = _name_map(table.name) or {}
    ids = _ids_by_name(table)
    matched, unmatched = {}, []
    for number, (name, _) in sorted(rois.items()):
        key = normalize_name(name)
        label = ids.get(aliases.get(key, key))
        if label is None:
            unmatched.append(name)
        else:
            matched[number] = label
    shown = log_text(", ".join(unmatched[:12]) + (" ..." if len(unmatched) > 12 else ""))
    if not matched:
        raise InputError(
            f"{path}: none of its {len(rois)} contoured ROIs is a structure of table "
            f"{table.name} ({shown}); give a JSON of ROI name -> structure name as --labels"
        )
    if unmatched:
        warn(
            f"{path}: {len(unmatched)} contoured ROI(s) not in table {table.name}, skipped: {shown}"
        )
    return matched


def _points(path: Path, item, where: str) -> np.ndarray:
    """(m, 3) finite contour points, parsed from the raw DS bytes (bounded before parsing)."""
    elem = item.get_item(_CONTOUR_DATA)
    value = None if elem is None else elem.value
    if value is None or len(value) == 0:
        raise InputError(f"{path}: {where} has no ContourData")
    tokens: list[Any]  # bytes from the file; anything from a dataset built in memory
    if isinstance(value, bytes | bytearray):
        if len(value) > MAX_CONTOUR_POINTS * 3 * _DS_BYTES:
            raise InputError(f"{path}: {where} has over {MAX_CONTOUR_POINTS} points")
        tokens = bytes(value).split(b"\\")
    else:  # already converted (a dataset built in memory)
        tokens = list(value) if not isinstance(value, str | float | int) else [value]
    if len(tokens) % 3 or len(tokens) // 3 > MAX_CONTOUR_POINTS:
        raise InputError(
            f"{path}: {where} has {len(tokens)} ContourData values: not x, y, z triplets "
            f"or over {MAX_CONTOUR_POINTS} points"
        )
    try:
        points = np.array([float(t) for t in tokens], dtype=float).reshape(-1, 3)
    except (TypeError, ValueError):
        raise InputError(f"{path}: {where} ContourData is not numbers") from None
    if not np.isfinite(points).all():
        raise InputError(f"{path}: {where} ContourData has NaN or infinite values")
    return points


def _slice_of(path: Path, item, where: str, slices: dict[str, int]) -> int:
    refs = list(item.get("ContourImageSequence") or [])
    uid = str(refs[0].get("ReferencedSOPInstanceUID", "") if refs else "").strip()
    if not uid:
        raise InputError(
            f"{path}: {where} names no image (ContourImageSequence ReferencedSOPInstanceUID)"
        )
    if uid not in slices:
        raise InputError(
            f"{path}: {where} references image {log_text(uid)[:80]}, not a slice of the CT"
        )
    return slices[uid]


def _to_pixels(points: np.ndarray, geo: SeriesGeometry, k: int) -> np.ndarray:
    """(m, 2) x = column, y = row (pixel centres at integers) on slice ``k``."""
    offset = points - geo.positions[k]
    x = offset @ geo.iop[:3] / geo.pixel_spacing[1]  # PixelSpacing: (between rows, columns)
    y = offset @ geo.iop[3:] / geo.pixel_spacing[0]
    return np.stack([x, y], axis=1)


def _check_frame(path: Path, ds, geo: SeriesGeometry, ct: Path) -> None:
    frames = {
        str(f.get("FrameOfReferenceUID", "")).strip()
        for f in _sequence(path, ds, "ReferencedFrameOfReferenceSequence")
    }
    frames |= {
        str(r.get("ReferencedFrameOfReferenceUID", "")).strip()
        for r in _sequence(path, ds, "StructureSetROISequence")
    }
    frames.discard("")
    if not frames:
        raise InputError(f"{path}: RTSTRUCT names no frame of reference (FrameOfReferenceUID)")
    if geo.frame_of_reference and frames != {geo.frame_of_reference}:
        shown = log_text(", ".join(sorted(frames)))[:200]
        raise InputError(
            f"{path}: RTSTRUCT frame of reference {shown} is not the CT's "
            f"{log_text(geo.frame_of_reference)} ({ct})"
        )


def read_on_ct(path: Path, ct: Path, table: LabelTable, warn: Warn):
    """(labels [column, row, slice] on the DICOM CT ``ct``'s grid, its RAS affine)."""
    if not Path(ct).is_dir():
        raise InputError(
            f"{path}: an RTSTRUCT is drawn on DICOM slices; --ct must be their series' "
            f"folder, not {ct}"
        )
    ds = _dataset(path)
    geo = read_series_geometry(Path(ct), uneven=True)  # load_ct has applied the spacing rule
    _check_frame(path, ds, geo, Path(ct))
    rois = contoured_rois(path, ds)
    matched = match_rois(path, rois, table, warn)
    slices = {uid: k for k, uid in enumerate(geo.uids)}
    labels = np.zeros((geo.cols, geo.rows, len(geo.uids)), dtype=np.uint16)
    skipped, n_points = 0, 0
    for number, label in sorted(matched.items(), key=lambda x: (x[1], x[0])):  # higher id wins
        name, contours = rois[number]
        per_slice: dict[int, list[np.ndarray]] = {}
        for c, item in enumerate(contours, start=1):
            where = f"ROI {number} ({log_text(name)}) contour {c}"
            if str(item.get("ContourGeometricType", "")).strip() != "CLOSED_PLANAR":
                skipped += 1
                continue
            k = _slice_of(path, item, where, slices)
            points = _points(path, item, where)
            n_points += len(points)
            if n_points > MAX_POINTS:
                raise InputError(f"{path}: RTSTRUCT has over {MAX_POINTS} contour points")
            pixels = _to_pixels(points, geo, k)
            _check_inside(path, pixels, geo, where)
            per_slice.setdefault(k, []).append(pixels)
        for k, polygons in per_slice.items():
            try:
                mask = fill_even_odd(polygons, geo.rows, geo.cols)
                mask |= outline_pixels(polygons, geo.rows, geo.cols)
            except TooComplex as exc:
                raise InputError(f"{path}: ROI {number} on slice {k}: {exc}") from None
            labels[:, :, k][mask.T] = label
    if skipped:
        warn(f"{path}: {skipped} contour(s) not CLOSED_PLANAR (points, open lines) skipped")
    return labels, geo.ras


def _check_inside(path: Path, pixels: np.ndarray, geo: SeriesGeometry, where: str) -> None:
    lo, hi = pixels.min(axis=0), pixels.max(axis=0)
    if (hi < -0.5).any() or lo[0] > geo.cols - 0.5 or lo[1] > geo.rows - 0.5:
        raise InputError(f"{path}: {where} lies outside the CT image ({geo.cols} x {geo.rows})")


def _needs_ct(path: Path, table: LabelTable, warn: Warn):
    raise InputError(f"{path}: an RTSTRUCT is read with its CT series (--ct)")


register_mask_reader(
    MaskReader(
        "rtstruct",
        (".dcm",),
        _needs_ct,
        sniff=lambda p: dicom_mask_reader(p) == "rtstruct",
        on_ct=read_on_ct,
        table=table_for,
    )
)
