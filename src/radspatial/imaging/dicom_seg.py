"""DICOM Segmentation objects (SEG Storage) -> label ids, a RAS affine and segment names.

A SEG holds segments (numbered from 1, each with a ``SegmentLabel``) as binary or fractional
frames, or as one label map (``SegmentationType`` LABELMAP). The label id of a voxel is its
segment number; where binary segments overlap the higher number wins (as for TotalSegmentator
folders); fractional segments count from 0.5. highdicom sorts the frames into a regular volume
(indices slice, row, column -> LPS mm); a SEG that is not one regular volume is refused, and so
is one whose referenced series (or, without one, frame of reference) is not the CT's
(:func:`check_references`). Its header is checked before highdicom parses anything
(:mod:`radspatial.imaging.dicom_seg_header`: frames, segments, pixel data length, finite
geometry, UIDs). A SEG without its empty frames is put back on the CT's slices
(:func:`onto_ct_grid`). highdicom
(``pip install 'radspatial[masks]'``) is imported only when a file is read.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from radspatial.core.errors import InputError, first_line
from radspatial.core.gates import file_text
from radspatial.core.textsafe import log_text
from radspatial.imaging.dicom_kind import dicom_mask_reader
from radspatial.imaging.dicom_seg_header import check_pixels, one_uid, read_summary
from radspatial.imaging.mask_formats import MaskReader, ignore_table, register_mask_reader
from radspatial.imaging.nifti import check_affine

MISSING = "pip install 'radspatial[masks]' (highdicom) to read DICOM SEG masks"


def is_dicom_file(path: Path) -> bool:
    """A file with the DICOM preamble ('DICM' at byte 128)."""
    try:
        with open(path, "rb") as fh:
            return fh.read(132)[128:] == b"DICM"
    except OSError:
        return False


def _header(path: Path):
    return read_summary(path)


def segment_names(path: Path) -> dict[int, str]:
    """segment number -> SegmentLabel (or SegmentDescription) from the SEG's segment list;
    two segments with one number (one label value) are refused."""
    names: dict[int, str] = {}
    for item in _header(path).get("SegmentSequence", []):
        try:
            number = int(item.SegmentNumber)
        except (AttributeError, TypeError, ValueError):
            raise InputError(f"{path}: a segment has no SegmentNumber") from None
        if number in names:
            raise InputError(
                f"{path}: two segments have SegmentNumber {number}; each needs its own"
            )
        field = "SegmentLabel" if item.get("SegmentLabel") else "SegmentDescription"
        label = str(item.get(field, "") or "")
        where = f"segment {number}'s {field}"
        names[number] = file_text(label, source=path, field=where) if label.strip() else ""
        names[number] = names[number] or f"segment_{number}"
    if not names:
        raise InputError(f"{path}: DICOM SEG has no segments (empty SegmentSequence)")
    return names


def referenced_series(path: Path) -> set[str]:
    """SeriesInstanceUIDs of the images the SEG was drawn on (each checked to be one UID)."""
    ds = _header(path)
    return {
        one_uid(path, s.get("SeriesInstanceUID"), "ReferencedSeriesSequence SeriesInstanceUID")
        for s in ds.get("ReferencedSeriesSequence", [])
    }


def read_dicom_seg(path: Path) -> tuple[np.ndarray, np.ndarray, str]:
    """(label volume [column, row, slice] of segment numbers, RAS affine, SegmentationType)."""
    try:
        import highdicom as hd
    except ImportError:
        raise InputError(f"DICOM SEG mask: {MISSING}") from None
    ds = _header(path)  # size, frames, segments, geometry: refused before anything is parsed
    referenced_series(path)  # each referenced UID is one UID
    if ds.get("FrameOfReferenceUID") is None:
        raise InputError(f"{path}: DICOM SEG has no FrameOfReferenceUID (no place in the patient)")
    one_uid(path, ds.FrameOfReferenceUID, "FrameOfReferenceUID")
    check_pixels(path, int(ds.NumberOfFrames))
    try:
        seg = hd.seg.segread(path)
    except Exception as exc:
        raise InputError(f"{path}: cannot read DICOM SEG ({first_line(exc)})") from None
    kind = str(seg.SegmentationType)
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
    """InputError if ``seg`` (a DICOM SEG) was drawn on another series than the DICOM CT's:
    by its ReferencedSeriesSequence, or without one by its FrameOfReferenceUID; a SEG with
    neither cannot be placed and is refused."""
    if not ct.is_dir():
        return  # a NIfTI CT has no UIDs: the grid check is all there is
    wanted = referenced_series(seg)
    ct_ds = _first_ct_slice(ct)
    if ct_ds is None:
        return
    if wanted:
        uid = str(ct_ds.get("SeriesInstanceUID", ""))
        if uid not in wanted:
            raise InputError(
                f"{seg}: DICOM SEG references series {log_text(', '.join(sorted(wanted)))}, "
                f"not the CT series {log_text(uid)} of {ct}"
            )
        return
    frame = _header(seg).get("FrameOfReferenceUID")
    if frame is None:
        raise InputError(
            f"{seg}: DICOM SEG names neither its series (ReferencedSeriesSequence) nor its "
            f"frame of reference, so it cannot be matched to the CT {ct}"
        )
    mine = one_uid(seg, frame, "FrameOfReferenceUID")
    theirs = str(ct_ds.get("FrameOfReferenceUID", ""))
    if mine != theirs:
        raise InputError(
            f"{seg}: DICOM SEG has no ReferencedSeriesSequence and its frame of reference "
            f"{mine} is not the CT's {log_text(theirs) or '(none)'} ({ct})"
        )


def _first_ct_slice(ct: Path):
    import pydicom

    for p in sorted(q for q in ct.iterdir() if q.is_file()):
        try:
            return pydicom.dcmread(p, stop_before_pixels=True)
        except Exception:  # noqa: S112 (not DICOM: read_dicom_series has warned about it)
            continue
    return None


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


def _align(seg: Path, ct: Path, labels: np.ndarray, affine: np.ndarray, shape, ct_affine):
    """A SEG drawn on the CT's series (:func:`check_references`), on the CT's slices; a SEG
    that names no series is matched by its frame of reference alone, and is said to be."""
    check_references(seg, ct)
    if ct.is_dir() and not referenced_series(seg):
        logging.getLogger(__name__).warning(
            "%s: DICOM SEG has no ReferencedSeriesSequence; it is matched to the CT by its "
            "frame of reference only (any series of that frame of reference would pass)",
            seg,
        )
    return onto_ct_grid(seg, labels, affine, shape, ct_affine)


register_mask_reader(
    MaskReader(
        "dicom_seg",
        (".dcm",),
        ignore_table(read_dicom_seg),
        sniff=lambda p: dicom_mask_reader(p) == "dicom_seg",
        names=segment_names,
        align=_align,
    )
)
