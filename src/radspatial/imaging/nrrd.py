"""NRRD label maps (3D Slicer's ``.nrrd`` / ``.seg.nrrd``) -> label ids and a RAS affine.

The file's ``space`` names its patient frame (Slicer writes ``left-posterior-superior``);
``space directions`` holds one world vector per voxel axis and ``space origin`` the centre of
voxel (0, 0, 0). A file without them has no place in the patient and is refused, as is a
multi-layer ``.seg.nrrd`` (overlapping segments: export it as a label map). A ``.seg.nrrd``
names its segments (``SegmentN_Name`` / ``SegmentN_LabelValue``, one value per segment):
:func:`nrrd_segment_names` (names through the text gate, ``core.gates.file_text``;
label values 1..65535). ``kinds`` must make the three axes spatial and agree with the sizes.
pynrrd (``pip install 'radspatial[masks]'``) parses the header fields; the bytes are read,
bounded by the declared size, by :mod:`radspatial.imaging.nrrd_data` (detached data files,
skips, gzip/bzip2 caps).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from radspatial.core.errors import InputError, first_line
from radspatial.core.gates import file_text, number_from_file
from radspatial.core.textsafe import log_text
from radspatial.imaging.mask_formats import MaskReader, ignore_table, register_mask_reader
from radspatial.imaging.nifti import check_affine
from radspatial.imaging.nrrd_data import read_data, split_header

# world axis signs that turn each NRRD space into RAS
_SPACES = {
    "left-posterior-superior": (-1.0, -1.0, 1.0),
    "right-anterior-superior": (1.0, 1.0, 1.0),
    "left-anterior-superior": (-1.0, 1.0, 1.0),
}
_ALIASES = {"lps": "left-posterior-superior", "ras": "right-anterior-superior"}
_ALIASES["las"] = "left-anterior-superior"
# kinds with a fixed size (the NRRD spec); a label map's three axes are spatial
_FIXED_KINDS = {"2-vector": 2, "3-color": 3, "rgb-color": 3, "hsv-color": 3, "xyz-color": 3}
_FIXED_KINDS |= {"4-color": 4, "rgba-color": 4, "3-vector": 3, "3-gradient": 3, "3-normal": 3}
_FIXED_KINDS |= {"4-vector": 4, "quaternion": 4, "2d-symmetric-matrix": 3, "2d-matrix": 4}
_FIXED_KINDS |= {"2d-masked-symmetric-matrix": 4, "2d-masked-matrix": 5, "3d-matrix": 9}
_FIXED_KINDS |= {"3d-symmetric-matrix": 6, "3d-masked-symmetric-matrix": 7}
_FIXED_KINDS |= {"3d-masked-matrix": 10}
_SPATIAL_KINDS = {"domain", "space", "???", "none"}
MISSING = "pip install 'radspatial[masks]' (pynrrd) to read NRRD masks"


def _module():
    try:
        import nrrd
    except ImportError:
        raise InputError(f"NRRD mask: {MISSING}") from None
    return nrrd


def _header(path: Path) -> tuple[dict, int]:
    """(parsed header, offset of the data after it); at most 1 MiB of header text is read."""
    nrrd = _module()
    lines, end = split_header(path)
    try:
        return nrrd.read_header(lines), end
    except Exception as exc:  # pynrrd raises NRRDError, ValueError, StopIteration on bad bytes
        raise InputError(f"{path}: cannot read NRRD header ({first_line(exc)})") from None


def _check_kinds(path: Path, header: dict, sizes: list[int]) -> None:
    """Refuse ``kinds`` that make an axis something other than space (a colour, a vector) or
    contradict its size (``3-vector`` on an axis of 10)."""
    kinds = header.get("kinds")
    if kinds is None:
        return
    kinds = [str(k).strip() for k in np.atleast_1d(kinds)]
    if len(kinds) != len(sizes):
        raise InputError(f"{path}: NRRD has {len(kinds)} kinds for {len(sizes)} axes")
    for axis, (kind, size) in enumerate(zip(kinds, sizes, strict=True)):
        fixed = _FIXED_KINDS.get(kind.lower())
        if fixed is not None and fixed != size:
            raise InputError(
                f"{path}: NRRD axis {axis} is kind {log_text(kind)!r} (size {fixed}) "
                f"but has size {size}"
            )
        if kind.lower() not in _SPATIAL_KINDS:
            raise InputError(
                f"{path}: NRRD axis {axis} is kind {log_text(kind)!r}, not a spatial axis "
                "(a label map has three: domain or space)"
            )


def nrrd_affine(path: Path, header: dict) -> tuple[np.ndarray, str]:
    """(RAS affine of the voxel grid, the file's space name); InputError without space info."""
    space = str(header.get("space", "")).strip().lower()
    space = _ALIASES.get(space, space)
    if not space:
        raise InputError(f"{path}: NRRD has no 'space' field (no patient orientation)")
    if space not in _SPACES:
        raise InputError(f"{path}: NRRD space {space!r} is not one of {', '.join(_SPACES)}")
    directions, origin = header.get("space directions"), header.get("space origin")
    if directions is None or origin is None:
        raise InputError(f"{path}: NRRD lacks 'space directions' or 'space origin'")
    directions = np.asarray(directions, dtype=float)
    if directions.shape != (3, 3) or not np.isfinite(directions).all():
        raise InputError(f"{path}: NRRD 'space directions' must be three finite 3-vectors")
    affine = np.eye(4)
    affine[:3, :3] = directions.T  # row i of the header: world vector of voxel axis i
    affine[:3, 3] = np.asarray(origin, dtype=float)
    affine = np.diag([*_SPACES[space], 1.0]) @ affine
    check_affine(path, affine, "mask", InputError)
    return affine, space


def read_nrrd_labels(path: Path) -> tuple[np.ndarray, np.ndarray, str]:
    """(label volume [i, j, k] as in the file, RAS affine, the file's space name)."""
    header, end = _header(path)
    sizes = [int(s) for s in np.atleast_1d(header.get("sizes", []))]
    if int(header.get("dimension", len(sizes))) != 3 or len(sizes) != 3:
        kinds = header.get("kinds")
        raise InputError(
            f"{path}: NRRD has {len(sizes)} axes (kinds {kinds}), expected a 3D label map "
            "(a multi-layer .seg.nrrd holds overlapping segments: export a label map)"
        )
    _check_kinds(path, header, sizes)
    affine, space = nrrd_affine(path, header)
    return read_data(path, header, end), affine, space


def nrrd_segment_names(path: Path) -> dict[int, str] | None:
    """label value -> segment name of a ``.seg.nrrd`` (Slicer's header fields), else None."""
    header, _ = _header(path)
    names: dict[int, str] = {}
    owner: dict[tuple[str, int], str] = {}  # (layer, label value) -> segment
    for key, value in header.items():
        if key.startswith("Segment") and key.endswith("_Name"):
            prefix = key[: -len("_Name")]
            raw = str(header.get(f"{prefix}_LabelValue", "")).strip()
            label = int(raw) if raw.isascii() and raw.isdigit() and len(raw) < 12 else raw
            label = int(number_from_file(label, **_where(path, f"{prefix}_LabelValue")))
            layer = str(header.get(f"{prefix}_Layer", "0")).strip()
            if (layer, label) in owner:
                raise InputError(
                    f"{path}: segments {owner[layer, label]} and {prefix} share label value "
                    f"{label}; each segment needs its own"
                )
            owner[layer, label] = prefix
            if str(value).strip():
                names[label] = file_text(value, source=path, field=key)
    return names or None


def _where(path: Path, field: str) -> dict:
    """A label value's range for :func:`number_from_file`: 1..65535 (0 is background)."""
    return {"source": path, "field": field, "low": 1, "high": 65535, "integer": True}


def _names(path: Path) -> dict[int, str] | None:
    return nrrd_segment_names(path) if path.name.lower().endswith(".seg.nrrd") else None


_ENDINGS = (".nrrd", ".nhdr", ".seg.nrrd")
register_mask_reader(MaskReader("nrrd", _ENDINGS, ignore_table(read_nrrd_labels), names=_names))
