"""DICOM Segmentation objects (SEG Storage) -> label ids, a RAS affine and segment names.

A SEG holds segments (numbered from 1, each with a ``SegmentLabel``) as binary or fractional
frames, or as one label map (``SegmentationType`` LABELMAP). The label id of a voxel is its
segment number; where binary segments overlap the higher number wins (as for TotalSegmentator
folders); fractional segments count from 0.5. highdicom sorts the frames into a regular volume
(indices slice, row, column -> LPS mm); a SEG that is not one regular volume is refused, and so
is one whose referenced series is not the CT's (:func:`check_references`). A SEG without its
empty frames is put back on the CT's slices (:func:`onto_ct_grid`). highdicom
(``pip install 'radspatial[masks]'``) is imported only when a file is read.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from radspatial.core.errors import InputError, first_line
from radspatial.imaging.nifti import check_affine, max_volume_bytes

SEG_SOP_CLASS = "1.2.840.10008.5.1.4.1.1.66.4"
LABELMAP_SOP_CLASS = "1.2.840.10008.5.1.4.1.1.66.7"
MISSING = "pip install 'radspatial[masks]' (highdicom) to read DICOM SEG masks"


def is_dicom_file(path: Path) -> bool:
    """A file with the DICOM preamble ('DICM' at byte 128)."""
    try:
        with open(path, "rb") as fh:
            return fh.read(132)[128:] == b"DICM"
    except OSError:
        return False


def _header(path: Path):
    import pydicom

    try:
        ds = pydicom.dcmread(path, stop_before_pixels=True)
    except Exception as exc:  # pydicom raises many types on bad bytes
        raise InputError(f"{path}: cannot read DICOM ({first_line(exc)})") from None
    sop = str(ds.get("SOPClassUID", ""))
    if sop not in (SEG_SOP_CLASS, LABELMAP_SOP_CLASS):
        what = f"modality {ds.get('Modality', '?')}, SOP class {sop or '?'}"
        raise InputError(f"{path}: not a DICOM Segmentation object ({what})")
    return ds


def segment_names(path: Path) -> dict[int, str]:
    """segment number -> SegmentLabel (or SegmentDescription) from the SEG's segment list."""
    names: dict[int, str] = {}
    for item in _header(path).get("SegmentSequence", []):
        try:
            number = int(item.SegmentNumber)
        except (AttributeError, TypeError, ValueError):
            raise InputError(f"{path}: a segment has no SegmentNumber") from None
        label = str(item.get("SegmentLabel", "") or item.get("SegmentDescription", "")).strip()
        names[number] = label or f"segment_{number}"
    if not names:
        raise InputError(f"{path}: DICOM SEG has no segments (empty SegmentSequence)")
    return names


def referenced_series(path: Path) -> set[str]:
    """SeriesInstanceUIDs of the images the SEG was drawn on."""
    ds = _header(path)
    return {str(s.SeriesInstanceUID) for s in ds.get("ReferencedSeriesSequence", [])}


def read_dicom_seg(path: Path) -> tuple[np.ndarray, np.ndarray, str]:
    """(label volume [column, row, slice] of segment numbers, RAS affine, SegmentationType)."""
    try:
        import highdicom as hd
    except ImportError:
        raise InputError(f"DICOM SEG mask: {MISSING}") from None
    _header(path)
    try:
        seg = hd.seg.segread(path)
    except Exception as exc:
        raise InputError(f"{path}: cannot read DICOM SEG ({first_line(exc)})") from None
    kind = str(seg.SegmentationType)
    rows, cols, frames = int(seg.Rows), int(seg.Columns), int(seg.NumberOfFrames)
    if rows * cols * frames * 2 > max_volume_bytes():
        raise InputError(f"{path}: {cols} x {rows} x {frames} voxels exceed the size limit")
    numbers = list(seg.get_segment_numbers())
    try:
        if kind == "LABELMAP":
            volume = seg.get_volume(combine_segments=True, relabel=False, dtype=np.uint16)
            labels = volume.array
        else:
            labels, volume = None, None
            for number in numbers:  # one segment at a time: the higher number wins overlaps
                v = seg.get_volume(segment_numbers=[number], rescale_fractional=True)
                arr = v.array[..., 0] if v.array.ndim == 4 else v.array
                if labels is None:
                    labels, volume = np.zeros(arr.shape, dtype=np.uint16), v
                labels[arr >= 0.5 if arr.dtype.kind == "f" else arr > 0] = number
    except Exception as exc:  # irregular frames, missing positions, bad pixel data
        raise InputError(
            f"{path}: DICOM SEG is not one regular volume ({first_line(exc)})"
        ) from None
    if labels is None or volume is None:
        raise InputError(f"{path}: DICOM SEG has no segments")
    # highdicom: indices (slice, row, column) -> LPS; ours: (column, row, slice) -> RAS
    ras = np.diag([-1.0, -1.0, 1.0, 1.0]) @ np.asarray(volume.affine, dtype=float)[:, [2, 1, 0, 3]]
    check_affine(path, ras, "DICOM SEG", InputError)
    return np.ascontiguousarray(labels.transpose(2, 1, 0)), ras, kind


def check_references(seg: Path, ct: Path) -> None:
    """InputError if ``seg`` (a DICOM SEG) references a series other than the DICOM CT's."""
    import pydicom

    wanted = referenced_series(seg)
    if not wanted or not ct.is_dir():
        return  # a NIfTI CT has no UIDs: the grid check is all there is
    for p in sorted(q for q in ct.iterdir() if q.is_file()):
        try:
            uid = str(pydicom.dcmread(p, stop_before_pixels=True).SeriesInstanceUID)
        except Exception:  # noqa: S112 (not DICOM: read_dicom_series has warned about it)
            continue
        if uid not in wanted:
            raise InputError(
                f"{seg}: DICOM SEG references series {', '.join(sorted(wanted))}, "
                f"not the CT series {uid} of {ct}"
            )
        return


def onto_ct_grid(
    path: Path, labels: np.ndarray, affine: np.ndarray, shape: tuple[int, ...], ct: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """A SEG that leaves out its empty frames (the default of dcmqi and highdicom) spans fewer
    slices than its CT: put its slab back on the CT's grid (both canonical RAS). Unchanged when
    the axes differ (the grid check then says how); InputError when its frames fall between
    the CT's voxels or outside the CT."""
    if labels.shape == tuple(shape) or not np.allclose(affine[:3, :3], ct[:3, :3], atol=1e-3):
        return labels, affine
    offset = (np.linalg.inv(ct) @ affine[:, 3])[:3]
    start = np.rint(offset).astype(int)
    end = start + np.array(labels.shape)
    if np.abs(offset - start).max() > 0.05 or (start < 0).any() or (end > np.array(shape)).any():
        raise InputError(
            f"{path}: DICOM SEG frames do not lie on the CT's voxels (offset "
            f"{np.round(offset, 2).tolist()} voxels, SEG {labels.shape} in CT {tuple(shape)})"
        )
    out = np.zeros(shape, dtype=labels.dtype)
    out[start[0] : end[0], start[1] : end[1], start[2] : end[2]] = labels
    return out, ct
