"""One DICOM CT series folder -> a float32 HU volume and its RAS affine (not yet canonical).

Slices are sorted by their position along the slice normal (not by InstanceNumber); a folder
with other modalities, several series, repeated positions or a gap is refused with an
:class:`InputError` naming the file. A caller that renders only axial slices may accept uneven
spacing (``uneven=True``: one warning, the true positions kept in :class:`SeriesGeometry`);
coronal/sagittal planes and resampling need the regular grid, so the default refuses it.
:func:`read_series_geometry` reads the same geometry without pixel data (for an RTSTRUCT,
``imaging/rtstruct.py``). pydicom is imported only when a series is read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from radspatial.core.errors import InputError, first_line
from radspatial.core.textsafe import log_text
from radspatial.imaging.nifti import check_affine, max_volume_bytes

if TYPE_CHECKING:  # pydicom itself is imported only when a series is read
    from pydicom.dataset import Dataset

Warn = Callable[[str], None]
Slice = tuple[Path, "Dataset"]  # (file, pydicom Dataset)

_GEOMETRY = {"ImageOrientationPatient": 6, "PixelSpacing": 2, "ImagePositionPatient": 3}
_RESCALE = (("RescaleSlope", 1.0), ("RescaleIntercept", 0.0))
UNEVEN_HINT = (
    "only generate --planes axial accepts uneven spacing (coronal and sagittal slices and "
    "resampling need a regular grid)"
)


@dataclass(frozen=True, eq=False)
class SeriesGeometry:
    """Where a series' slices lie, in the order of the volume's axis k."""

    rows: int
    cols: int
    iop: np.ndarray  # (6,) row direction, column direction (LPS)
    pixel_spacing: np.ndarray  # (2,) between rows, between columns (mm)
    positions: np.ndarray  # (n, 3) ImagePositionPatient of slice k (LPS mm)
    uids: tuple[str, ...]  # SOPInstanceUID of slice k
    frame_of_reference: str  # the first slice's FrameOfReferenceUID ('' if none)
    ras: np.ndarray  # 4x4 RAS affine of (column, row, k); k's step is the mean when uneven
    uneven: bool  # the steps between slices differ (accepted only when asked for)

    def info(self) -> dict:
        """What a case records of it: the slice count and, when uneven, each slice's world z
        (mm) in canonical order (inferior -> superior; LPS z is RAS z)."""
        info: dict = {"n_slices": len(self.uids)}
        if self.uneven:
            info["slice_positions_mm"] = [round(float(z), 4) for z in sorted(self.positions[:, 2])]
        return info


def read_dicom_series(
    folder: Path, warn: Warn, *, uneven: bool = False
) -> tuple[np.ndarray, SeriesGeometry]:
    """One CT series folder -> (volume[i, j, k] HU, its geometry), not yet canonical.

    i runs along the IOP row direction (pixel column index), j along the column direction
    (pixel row index), k along the slice normal, sorted by position, not by InstanceNumber.
    ``uneven``: accept unevenly spaced slices (one warning) instead of refusing a gap.
    """
    slices = _read_slices(folder, warn)
    geometry, order = _geometry(folder, slices, warn, uneven)
    if geometry.rows * geometry.cols * len(slices) * 4 > max_volume_bytes():
        raise InputError(
            f"{folder}: {geometry.cols} x {geometry.rows} x {len(slices)} voxels exceed "
            "the size limit"
        )
    volume = _pixels(slices, order, geometry.rows, geometry.cols)
    if not np.isfinite(volume).all():
        raise InputError(f"{folder}: CT has NaN or infinite voxel values")
    return volume, geometry


def read_series_geometry(folder: Path, *, uneven: bool = False) -> SeriesGeometry:
    """The series' geometry and slice UIDs, its pixel data left unread (nothing warned:
    :func:`read_dicom_series` has said what it skipped)."""
    slices = _read_slices(folder, lambda _: None, pixels=False)
    return _geometry(folder, slices, lambda _: None, uneven)[0]


def _geometry(
    folder: Path, slices: list[Slice], warn: Warn, uneven: bool
) -> tuple[SeriesGeometry, np.ndarray]:
    (rows, cols), iop, pixel_spacing, positions = _common_geometry(slices)
    normal = np.cross(iop[:3], iop[3:])
    order, irregular = _order_by_position(folder, slices, positions, normal, uneven)
    first, last = positions[order[0]], positions[order[-1]]
    ras = _ras_affine(iop, pixel_spacing, first, last, len(slices))
    check_affine(folder, ras, "DICOM series", InputError)
    if irregular and int(np.argmax(np.abs(ras[:3, 2]))) != 2:
        raise InputError(f"{folder}: {irregular}; its slices are not axial, so no axial "
                         "slice can be rendered from it")  # fmt: skip
    if irregular:
        warn(f"{folder}: {irregular}; accepted for axial slices only, at their true positions")
    uids = tuple(str(slices[i][1].get("SOPInstanceUID", "")) for i in order)
    frame = str(slices[0][1].get("FrameOfReferenceUID", ""))
    ordered = np.array([positions[i] for i in order])
    geometry = SeriesGeometry(
        rows, cols, iop, pixel_spacing, ordered, uids, frame, ras, bool(irregular)
    )
    return geometry, order


class Skipped:
    """What a series folder holds besides its slices: a count by reason and one example each,
    said in one line (a folder of 10,000 junk files is one warning, not 10,000)."""

    def __init__(self) -> None:
        self.by: dict[str, tuple[int, str]] = {}

    @property
    def count(self) -> int:
        return sum(n for n, _ in self.by.values())

    def add(self, why: str, path: Path, detail: str = "") -> None:
        n, example = self.by.get(why, (0, ""))
        self.by[why] = (n + 1, example or log_text(path.name) + (f": {detail}" if detail else ""))

    def __str__(self) -> str:
        parts = [f"{n} {why} (e.g. {example})" for why, (n, example) in self.by.items()]
        return f"skipped {self.count} entries: " + "; ".join(parts)


def _read_slices(folder: Path, warn: Warn, *, pixels: bool = True) -> list[Slice]:
    """The folder's image files of one CT series (other files skipped with a warning);
    ``pixels=False`` leaves the pixel data in the files (read lazily, never here)."""
    import pydicom

    slices: list[Slice] = []
    skipped = Skipped()
    for p in sorted(folder.iterdir()):
        if not p.is_file():  # a sub-folder, a FIFO, a dangling symlink or a symlink loop
            skipped.add("not a regular file", p)
            continue
        try:
            ds = pydicom.dcmread(p, defer_size=None if pixels else 4096)
        except Exception as exc:  # pydicom raises many types for non-DICOM bytes
            skipped.add("not DICOM", p, first_line(exc))
            continue
        if "PixelData" not in ds:
            skipped.add("DICOM without an image (e.g. DICOMDIR)", p)
            continue
        slices.append((p, ds))
    if skipped.count:
        warn(f"{folder}: {skipped}")
    if not slices:
        raise InputError(f"{folder}: no DICOM image files in this folder")
    modalities = sorted({str(ds.get("Modality", "")) for _, ds in slices})
    if modalities != ["CT"]:
        raise InputError(f"{folder}: DICOM modality {log_text('/'.join(modalities))}, expected CT")
    uids = {str(ds.get("SeriesInstanceUID", "")) for _, ds in slices}
    if len(uids) > 1:
        raise InputError(f"{folder}: {len(uids)} series (SeriesInstanceUID) in one folder")
    if len(slices) < 2:
        raise InputError(f"{folder}: only one DICOM slice, a CT volume needs at least two")
    return slices


def _dicom_geometry(path: Path, ds) -> tuple[tuple[int, int], np.ndarray, np.ndarray, np.ndarray]:
    """(rows, columns), IOP (6,), PixelSpacing (2,), IPP (3,) of one slice."""
    need = f"Rows/Columns/{'/'.join(_GEOMETRY)}"
    try:
        iop, spacing, ipp = (np.array([float(v) for v in ds[kw].value]) for kw in _GEOMETRY)
        size = (int(ds.Rows), int(ds.Columns))
    except (KeyError, AttributeError, TypeError, ValueError):
        raise InputError(f"{path}: DICOM slice lacks {need}") from None
    if (iop.size, spacing.size, ipp.size) != tuple(_GEOMETRY.values()):
        raise InputError(f"{path}: DICOM slice has malformed {need}")
    if not all(np.isfinite(v).all() for v in (iop, spacing, ipp)):
        raise InputError(f"{path}: DICOM slice has NaN or infinite {need}")
    if (spacing <= 0).any():
        raise InputError(f"{path}: DICOM PixelSpacing {spacing.tolist()} must be > 0")
    row, col = iop[:3], iop[3:]
    if min(np.linalg.norm(row), np.linalg.norm(col), np.linalg.norm(np.cross(row, col))) < 1e-3:
        raise InputError(f"{path}: DICOM ImageOrientationPatient {iop.tolist()} is degenerate")
    return size, iop, spacing, ipp


def _common_geometry(
    slices: list[Slice],
) -> tuple[tuple[int, int], np.ndarray, np.ndarray, list[np.ndarray]]:
    """The first slice's size, IOP and PixelSpacing (every slice must share them), and each
    slice's IPP."""
    (rows, cols), iop, pixel_spacing, _ = _dicom_geometry(*slices[0])
    positions = []
    for p, ds in slices:
        size, o, s, ipp = _dicom_geometry(p, ds)
        same = np.allclose(o, iop, atol=1e-4) and np.allclose(s, pixel_spacing, rtol=1e-4)
        if size != (rows, cols) or not same:
            raise InputError(f"{p}: size/orientation/pixel spacing differ from {slices[0][0].name}")
        positions.append(ipp)
    return (rows, cols), iop, pixel_spacing, positions


def _order_by_position(
    folder: Path, slices: list[Slice], positions: list[np.ndarray], normal: np.ndarray, uneven: bool
) -> tuple[np.ndarray, str]:
    """(slice indices sorted along ``normal``, '' or what is uneven); InputError on a repeated
    position, and on a gap unless ``uneven``."""
    along = np.array(positions) @ normal
    order = np.argsort(along, kind="stable")
    along, steps = along[order], np.diff(along[order])
    names = [slices[i][0].name for i in order]
    if (steps < 1e-3).any():
        k = int(np.argmax(steps < 1e-3))
        raise InputError(
            f"{folder}: two slices at the same position {along[k]:.2f} mm "
            f"({names[k]}, {names[k + 1]})"
        )
    median = float(np.median(steps))
    irregular = np.abs(steps - median) > 0.1 * median
    if not irregular.any():
        return order, ""
    k = int(np.argmax(irregular))
    what = (
        f"uneven slice spacing: {steps[k]:.2f} mm between slices at {along[k]:.2f} and "
        f"{along[k + 1]:.2f} mm ({names[k]}, {names[k + 1]}), median {median:.2f} mm"
    )
    if not uneven:
        raise InputError(f"{folder}: gap in the series ({what}); {UNEVEN_HINT}")
    return order, what


def _pixels(slices: list[Slice], order: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """HU volume (columns, rows, slices), rescaled, in ``order``."""
    volume = np.empty((cols, rows, len(slices)), dtype=np.float32, order="F")
    for k, idx in enumerate(order):
        p, ds = slices[idx]
        try:
            pixels = ds.pixel_array
        except Exception as exc:  # missing decoder, truncated pixel data, ...
            raise InputError(f"{p}: cannot decode DICOM pixel data ({first_line(exc)})") from None
        if pixels.shape != (rows, cols):
            raise InputError(f"{p}: pixel data shape {pixels.shape}, expected ({rows}, {cols})")
        slope, intercept = (np.float32(ds.get(kw) or d) for kw, d in _RESCALE)
        volume[:, :, k] = pixels.T.astype(np.float32) * slope + intercept
    return volume


def _ras_affine(
    iop: np.ndarray, pixel_spacing: np.ndarray, first: np.ndarray, last: np.ndarray, n: int
) -> np.ndarray:
    lps = np.eye(4)
    lps[:3, 0] = iop[:3] * pixel_spacing[1]  # PixelSpacing = (between rows, between columns)
    lps[:3, 1] = iop[3:] * pixel_spacing[0]
    lps[:3, 2] = (last - first) / (n - 1)
    lps[:3, 3] = first
    return np.diag([-1.0, -1.0, 1.0, 1.0]) @ lps  # DICOM patient space is LPS
