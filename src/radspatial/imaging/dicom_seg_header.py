"""What a DICOM SEG declares, checked before its frames are parsed or its pixels decoded.

A SEG's per-frame functional groups (one item per frame) and its pixel data come last in the
file; :func:`read_summary` reads only what precedes them, and at most ``MAX_HEADER_BYTES`` of it,
so a file declaring 10^7 frames or 65,535 segments is refused in a second or two, not after
minutes and gigabytes of parsing (``MAX_FRAMES``, ``MAX_SEGMENTS``, the size limit of
``RADSPATIAL_MAX_VOLUME_BYTES``).
:func:`check_pixels` then compares the pixel data's length with what the frames need and refuses
non-finite geometry with one line instead of a library's internals. :func:`one_uid` reads
UIDs (a referenced series, a frame of reference) as they must be: one value of digits and dots.
"""

from __future__ import annotations

import io
import os
import re
from pathlib import Path

import numpy as np

from radspatial.core.errors import InputError, first_line
from radspatial.core.textsafe import log_text
from radspatial.imaging.dicom_kind import describe, dicom_class
from radspatial.imaging.nifti import max_volume_bytes

SEG_SOP_CLASS = "1.2.840.10008.5.1.4.1.1.66.4"
LABELMAP_SOP_CLASS = "1.2.840.10008.5.1.4.1.1.66.7"
MAX_FRAMES = 200_000  # 117 TotalSegmentator structures x 1,700 slices
MAX_SEGMENTS = 1_000
MAX_HEADER_BYTES = 1 << 20  # all before the per-frame groups: ~1,000 segments of 1 KB each
_PER_FRAME = 0x52009230  # PerFrameFunctionalGroupsSequence: everything after it is per frame
_PIXEL_DATA = 0x7FE00010
_FRAME_BYTES = 4096  # a frame's functional groups (position, source image, segment) in bytes
_UID = re.compile(r"[0-9]+(\.[0-9]+)*")
_NATIVE = {"1.2.840.10008.1.2", "1.2.840.10008.1.2.1", "1.2.840.10008.1.2.2"}


def _bounded_read(path: Path, stop_tag: int, budget: int, over: str):
    """(dataset up to the first tag >= ``stop_tag``, that element's length or None), parsing at
    most ``budget`` bytes of the file; InputError ``over`` when the tag lies beyond them."""
    from pydicom.filereader import read_partial

    reached: list[int] = []

    def stop(tag: int, vr: object, length: int) -> bool:
        if tag >= stop_tag and not reached:
            reached.append(length)
        return bool(reached)

    try:
        with open(path, "rb") as fh:
            head, size = fh.read(budget), os.fstat(fh.fileno()).st_size
        ds = read_partial(io.BytesIO(head), stop_when=stop)
        failed = None
    except Exception as exc:  # pydicom raises many types on bad bytes
        failed = first_line(exc)
    if not reached and size > budget:
        raise InputError(f"{path}: DICOM SEG {over}")
    if failed is not None:
        raise InputError(f"{path}: cannot read DICOM ({failed})")
    return ds, (reached[0] if reached else None)


def read_summary(path: Path):
    """The SEG's dataset up to its per-frame groups, refused if not a SEG (named by what it
    is, from its first bytes) or too large."""
    kind = dicom_class(path)
    if kind is not None and kind[0] and kind[0] not in (SEG_SOP_CLASS, LABELMAP_SOP_CLASS):
        raise InputError(
            f"{path}: not a DICOM Segmentation object nor an RTSTRUCT: {describe(kind)}"
        )
    over = f"header (its segment list before the frames) is over {MAX_HEADER_BYTES >> 20} MiB"
    ds, _ = _bounded_read(path, _PER_FRAME, MAX_HEADER_BYTES, f"{over}: too many segments?")
    sop = str(ds.get("SOPClassUID", ""))
    if sop not in (SEG_SOP_CLASS, LABELMAP_SOP_CLASS):
        what = f"modality {ds.get('Modality', '?')}, SOP class {sop or '?'}"
        raise InputError(f"{path}: not a DICOM Segmentation object ({log_text(what)})")
    seg_type = str(ds.get("SegmentationType", "")).strip().upper()
    allowed = ("LABELMAP",) if sop == LABELMAP_SOP_CLASS else ("BINARY", "FRACTIONAL")
    if seg_type not in allowed:
        storage = "Label Map" if sop == LABELMAP_SOP_CLASS else "binary/fractional"
        raise InputError(
            f"{path}: DICOM SEG SegmentationType {log_text(repr(seg_type))[:40]} does not fit its "
            f"SOP class ({storage} Segmentation Storage expects {' or '.join(allowed)})"
        )
    n_segments = len(ds.get("SegmentSequence", []))
    if n_segments > MAX_SEGMENTS:
        raise InputError(f"{path}: DICOM SEG has {n_segments} segments, over {MAX_SEGMENTS}")
    rows, cols, frames = (_count(path, ds, kw) for kw in ("Rows", "Columns", "NumberOfFrames"))
    if frames > MAX_FRAMES:
        raise InputError(f"{path}: DICOM SEG declares {frames} frames, over {MAX_FRAMES}")
    if rows * cols * frames * 2 > max_volume_bytes():
        raise InputError(f"{path}: {cols} x {rows} x {frames} voxels exceed the size limit")
    for group in ds.get("SharedFunctionalGroupsSequence", []):
        _finite_geometry(path, group, "shared functional groups")
    return ds


def _count(path: Path, ds, keyword: str) -> int:
    value = ds.get(keyword)
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise InputError(
            f"{path}: DICOM SEG {keyword} {log_text(repr(value))} is not a number"
        ) from None
    if n < 1:
        raise InputError(f"{path}: DICOM SEG {keyword} is {n}, must be at least 1")
    return n


def _finite_geometry(path: Path, group, where: str) -> None:
    """Refuse NaN, infinite or missing numbers in a functional group's orientation, spacing
    and position."""
    fields = (
        ("PlaneOrientationSequence", "ImageOrientationPatient", 6),
        ("PixelMeasuresSequence", "PixelSpacing", 2),
        ("PlanePositionSequence", "ImagePositionPatient", 3),
    )
    for seq, keyword, n in fields:
        for item in group.get(seq, []):
            raw = item.get(keyword)  # a MultiValue of numbers when well formed
            try:
                values = np.array([float(v) for v in raw], dtype=float)
            except (TypeError, ValueError):
                values = np.array([])
            if values.size != n or not np.isfinite(values).all():
                shown = log_text(repr(raw))[:80]
                raise InputError(
                    f"{path}: DICOM SEG {keyword} in its {where} is {shown}, "
                    f"expected {n} finite numbers"
                )


def check_pixels(path: Path, frames: int) -> None:
    """Refuse a SEG whose per-frame groups are more than its ``frames`` (as read by
    :func:`read_summary`) need, whose geometry is not finite, or whose pixel data are missing or
    shorter than the frames need; nothing past the pixel data's length is read."""
    budget = MAX_HEADER_BYTES + frames * _FRAME_BYTES
    over = f"per-frame groups are larger than its {frames} frame(s) need"
    ds, length = _bounded_read(path, _PIXEL_DATA, budget, over)
    groups = ds.get("PerFrameFunctionalGroupsSequence", [])
    if groups and len(groups) != frames:
        raise InputError(f"{path}: DICOM SEG has {len(groups)} per-frame items for {frames} frames")
    for k, group in enumerate(groups):
        _finite_geometry(path, group, f"frame {k + 1}")
    if length is None:
        raise InputError(f"{path}: DICOM SEG has no pixel data")
    syntax = str(getattr(ds.file_meta, "TransferSyntaxUID", ""))
    if syntax not in _NATIVE or length == 0xFFFFFFFF:
        if not length:
            raise InputError(f"{path}: DICOM SEG pixel data are empty")
        return  # compressed: the decoder checks its own frames
    bits = int(ds.get("BitsAllocated") or 1)
    voxels = int(ds.Rows) * int(ds.Columns) * int(ds.NumberOfFrames)
    need = (voxels * bits + 7) // 8
    if length < need:
        raise InputError(
            f"{path}: DICOM SEG pixel data hold {length} bytes, its {int(ds.NumberOfFrames)} "
            f"frame(s) of {int(ds.Rows)} x {int(ds.Columns)} need {need}"
        )


def one_uid(path: Path, value: object, what: str) -> str:
    """One UID (digits and dots, at most 64 characters) or InputError naming ``what``."""
    if value is not None and not isinstance(value, str | bytes) and hasattr(value, "__len__"):
        raise InputError(f"{path}: {what} has {len(value)} values, expected one UID")
    uid = str(value or "").strip()
    if not uid or len(uid) > 64 or not _UID.fullmatch(uid):
        raise InputError(f"{path}: {what} {log_text(repr(uid))} is not a DICOM UID")
    return uid
