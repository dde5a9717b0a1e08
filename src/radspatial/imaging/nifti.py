"""Bounded NIfTI reading for untrusted files: size checked before data is decompressed.

A ``.nii.gz`` header is inflated alone first; if it declares more than ``max_volume_bytes()``
of voxel data (``RADSPATIAL_MAX_VOLUME_BYTES``, default 2 GiB) the file is refused before any
data is decompressed, and the data stream is inflated with a cap at the declared size, so a
gzip bomb costs at most what its header admits. The whole stream is still inflated, so the
gzip CRC and length are checked (a damaged file would otherwise load silently).

:func:`check_affine` also refuses a grid more than ``RADSPATIAL_MAX_OBLIQUE_DEG`` (default 10)
degrees oblique: slices are cut along voxel axes and labelled as axial/left/right, which an
oblique grid makes untrue; we refuse rather than resample (a resampled mask moves boundaries).
"""

from __future__ import annotations

import io
import os
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np

DEFAULT_MAX_VOLUME_BYTES = 2 << 30
DEFAULT_MAX_OBLIQUE_DEG = 10.0
_CHUNK = 1 << 20
_SLACK = 1 << 20  # bytes past the declared data tolerated (padding), still inflated and checked
_NIFTI2_MAGIC = (b"\x1c\x02\x00\x00", b"\x00\x00\x02\x1c")  # sizeof_hdr 540, either endian


def max_volume_bytes() -> int:
    raw = os.environ.get("RADSPATIAL_MAX_VOLUME_BYTES")
    try:
        return int(raw) if raw else DEFAULT_MAX_VOLUME_BYTES
    except ValueError:
        return DEFAULT_MAX_VOLUME_BYTES


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} PiB"


def declared_bytes(header) -> tuple[int, str]:
    """(bytes of voxel data, 'X x Y x Z dtype') a NIfTI header declares."""
    shape = tuple(int(s) for s in header.get_data_shape())
    dtype = np.dtype(header.get_data_dtype())
    n = int(np.prod(shape, dtype=object)) * dtype.itemsize if shape else 0
    return n, f"{' x '.join(str(s) for s in shape)} {dtype.name}"


def check_declared_size(path: Path, header, fail: Callable[[str], Exception]) -> int:
    """Refuse a header declaring more voxel data than the limit; return the declared bytes."""
    n, what = declared_bytes(header)
    limit = max_volume_bytes()
    if n > limit:
        raise fail(
            f"{path}: header declares {what} ({_human(n)}), above the limit of {_human(limit)} "
            "(set RADSPATIAL_MAX_VOLUME_BYTES to allow more)"
        )
    return n


def _inflate(path: Path, limit: int, fail: Callable[[str], Exception]) -> bytes:
    """Whole gzip stream (all members) of ``path``, refusing output beyond ``limit`` bytes."""
    out = bytearray()
    d = zlib.decompressobj(wbits=31)
    with open(path, "rb") as fh:
        data = fh.read(_CHUNK)
        while data:
            out += d.decompress(data, limit - len(out) + 1)
            if len(out) > limit:
                raise fail(f"{path}: decompresses to more data than its header declares")
            if d.unconsumed_tail:
                data = d.unconsumed_tail
            elif d.eof:
                data = d.unused_data or fh.read(_CHUNK)
                if not data.strip(b"\0"):  # end of file, or zero padding after the last member
                    break
                d = zlib.decompressobj(wbits=31)  # another gzip member follows
            else:
                data = fh.read(_CHUNK)
    if not d.eof:
        raise fail(f"{path}: truncated gzip stream (compressed data ends early)")
    return bytes(out)


def _header_prefix(path: Path) -> bytes:
    """The first 540 inflated bytes (a NIfTI-2 header; NIfTI-1 needs 348)."""
    d = zlib.decompressobj(wbits=31)
    out = b""
    with open(path, "rb") as fh:
        while len(out) < 540:
            chunk = d.unconsumed_tail or fh.read(1 << 16)
            if not chunk:
                break
            out += d.decompress(chunk, 540 - len(out))
            if d.eof:
                break
    return out


def load_nifti_gz(path: Path, fail: Callable[[str], Exception]):
    """A ``.nii.gz`` image, its declared size checked before its data is inflated."""
    import nibabel as nib

    prefix = _header_prefix(path)
    nifti2 = prefix[:4] in _NIFTI2_MAGIC
    header_class = nib.Nifti2Header if nifti2 else nib.Nifti1Header
    size = header_class.template_dtype.itemsize  # the fixed header alone, no extensions
    header = header_class.from_fileobj(io.BytesIO(prefix[:size]))
    n = check_declared_size(path, header, fail)
    total = int(header.get("vox_offset", 0) or 0) + n
    raw = _inflate(path, max(total, len(prefix)) + _SLACK, fail)
    image_class = nib.Nifti2Image if nifti2 else nib.Nifti1Image
    return image_class.from_bytes(raw)


MAX_SPACING_MM = 1e4  # 10 m a voxel: anything larger is a corrupt number, not a scan
MAX_ORIGIN_MM = 1e7  # 10 km from the scanner's origin


def check_affine(path: Path, affine: np.ndarray, what: str, fail: Callable[[str], Exception]):
    """Refuse a voxel-to-world affine that is not finite or maps a volume to a plane."""
    a = np.asarray(affine, dtype=float)
    if a.shape != (4, 4) or not np.isfinite(a).all():
        raise fail(f"{path}: {what} affine has NaN or infinite values")
    if np.abs(a[:3, :3]).max() > MAX_SPACING_MM or np.abs(a[:3, 3]).max() > MAX_ORIGIN_MM:
        big = np.abs(a[:3, :3]).max(axis=0).tolist(), np.abs(a[:3, 3]).max()
        raise fail(
            f"{path}: {what} voxel size {big[0]} or origin {big[1]:g} mm is out of range "
            f"(at most {MAX_SPACING_MM:g} mm a voxel, {MAX_ORIGIN_MM:g} mm from the origin)"
        )
    spacing = np.linalg.norm(a[:3, :3], axis=0)
    if (spacing <= 1e-6).any():
        raise fail(f"{path}: {what} voxel spacing {np.round(spacing, 6).tolist()} mm has a zero")
    if abs(np.linalg.det(a[:3, :3] / spacing)) < 1e-3:
        raise fail(f"{path}: {what} affine is singular (axes are parallel)")
    angle = obliquity_deg(a)
    if angle > max_oblique_deg():
        raise fail(
            f"{path}: {what} is oblique: a voxel axis is {angle:.1f} degrees off the patient "
            f"axes (limit {max_oblique_deg():g}; slices would be shown as if axial; resample it "
            "to an axis-aligned grid or set RADSPATIAL_MAX_OBLIQUE_DEG)"
        )


def max_oblique_deg() -> float:
    """How far (degrees) a voxel axis may lean off its patient axis (RADSPATIAL_MAX_OBLIQUE_DEG,
    default 10: a gantry tilt of a few degrees passes, a 30-45 degree oblique does not)."""
    try:
        value = float(os.environ.get("RADSPATIAL_MAX_OBLIQUE_DEG") or DEFAULT_MAX_OBLIQUE_DEG)
    except ValueError:
        return DEFAULT_MAX_OBLIQUE_DEG
    return value if np.isfinite(value) and value >= 0 else DEFAULT_MAX_OBLIQUE_DEG


def obliquity_deg(affine: np.ndarray) -> float:
    """The largest angle (degrees) between a voxel axis and the patient axis it is shown as."""
    r = np.asarray(affine, dtype=float)[:3, :3]
    cos = np.abs(r / np.linalg.norm(r, axis=0)).max(axis=0).clip(0.0, 1.0)
    return float(np.degrees(np.arccos(cos)).max())
