"""NRRD label maps (3D Slicer's ``.nrrd`` / ``.seg.nrrd``) -> label ids and a RAS affine.

The file's ``space`` names its patient frame (Slicer writes ``left-posterior-superior``);
``space directions`` holds one world vector per voxel axis and ``space origin`` the centre of
voxel (0, 0, 0). A file without them has no place in the patient and is refused, as is a
multi-layer ``.seg.nrrd`` (overlapping segments: export it as a label map). A ``.seg.nrrd``
names its segments (``SegmentN_Name`` / ``SegmentN_LabelValue``): :func:`nrrd_segment_names`.
pynrrd (``pip install 'radspatial[masks]'``) is imported only when a file is read.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from radspatial.core.errors import InputError, first_line
from radspatial.imaging.nifti import check_affine, max_volume_bytes

# world axis signs that turn each NRRD space into RAS
_SPACES = {
    "left-posterior-superior": (-1.0, -1.0, 1.0),
    "right-anterior-superior": (1.0, 1.0, 1.0),
    "left-anterior-superior": (-1.0, 1.0, 1.0),
}
_ALIASES = {"lps": "left-posterior-superior", "ras": "right-anterior-superior"}
_ALIASES["las"] = "left-anterior-superior"
MISSING = "pip install 'radspatial[masks]' (pynrrd) to read NRRD masks"


def _module():
    try:
        import nrrd
    except ImportError:
        raise InputError(f"NRRD mask: {MISSING}") from None
    return nrrd


def _header(path: Path) -> dict:
    nrrd = _module()
    try:
        return nrrd.read_header(str(path))
    except Exception as exc:  # pynrrd raises NRRDError, ValueError, OSError, ... on bad bytes
        raise InputError(f"{path}: cannot read NRRD header ({first_line(exc)})") from None


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
    nrrd = _module()
    header = _header(path)
    sizes = [int(s) for s in np.atleast_1d(header.get("sizes", []))]
    if int(header.get("dimension", len(sizes))) != 3 or len(sizes) != 3:
        kinds = header.get("kinds")
        raise InputError(
            f"{path}: NRRD has {len(sizes)} axes (kinds {kinds}), expected a 3D label map "
            "(a multi-layer .seg.nrrd holds overlapping segments: export a label map)"
        )
    affine, space = nrrd_affine(path, header)
    if int(np.prod(sizes)) * 2 > max_volume_bytes():
        raise InputError(f"{path}: {' x '.join(map(str, sizes))} voxels exceed the size limit")
    try:
        data, _ = nrrd.read(str(path))
    except Exception as exc:
        raise InputError(f"{path}: corrupt or truncated NRRD data ({first_line(exc)})") from None
    return np.asarray(data), affine, space


def nrrd_segment_names(path: Path) -> dict[int, str] | None:
    """label value -> segment name of a ``.seg.nrrd`` (Slicer's header fields), else None."""
    header = _header(path)
    names: dict[int, str] = {}
    for key, value in header.items():
        if key.startswith("Segment") and key.endswith("_Name"):
            prefix = key[: -len("_Name")]
            try:
                label = int(header.get(f"{prefix}_LabelValue", ""))
            except ValueError:
                raise InputError(f"{path}: {prefix}_LabelValue is not an integer") from None
            if str(value).strip():
                names[label] = str(value).strip()
    return names or None
