"""Axial slices: radiological display, windowing, resampling, the 8 MIRP variants, structure stats.

Frames (see docs/format.md):
- canonical voxel order is RAS+ (axis 0 grows toward the patient's right, axis 1 anterior);
- the *canonical frame* is the standard radiological view: patient's right on image left,
  anterior at the top, resampled to a square ``size`` x ``size`` image;
- the *shown frame* is the canonical frame after one of the 8 rotation/flip variants.
Pixel coordinates are (x, y), x to the right, y downward, pixel centres at integers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PIL import Image
from scipy import ndimage

from radspatial.core.errors import check_one_of

# MIRP codes: A = horizontally flipped, B = not; 1..4 = 0, 90, 180, 270 degrees
# counter-clockwise (as seen on screen), applied after the flip.
VARIANTS: tuple[str, ...] = ("A1", "A2", "A3", "A4", "B1", "B2", "B3", "B4")


@dataclass(frozen=True)
class Variant:
    code: str

    def __post_init__(self) -> None:
        check_one_of(self.code, VARIANTS, "rotation/flip variant")

    @property
    def flip(self) -> bool:
        return self.code[0] == "A"

    @property
    def quarter_turns(self) -> int:
        return int(self.code[1]) - 1

    @property
    def long_name(self) -> str:
        flip = "Horizontal flip" if self.flip else "No flip"
        return f"{flip} and {90 * self.quarter_turns} degree rotation"

    def apply_image(self, img: np.ndarray) -> np.ndarray:
        """Canonical-frame image (H, W[, C]) -> shown frame."""
        out = img[:, ::-1] if self.flip else img
        return np.ascontiguousarray(np.rot90(out, self.quarter_turns))

    def apply_point(self, xy: tuple[float, float], size: int) -> tuple[float, float]:
        """Canonical-frame (x, y) -> shown frame, for a square image of ``size`` px."""
        x, y = xy
        m = size - 1
        if self.flip:
            x = m - x
        for _ in range(self.quarter_turns):  # one CCW quarter turn: (x, y) -> (y, m - x)
            x, y = y, m - x
        return (x, y)

    def invert_point(self, xy: tuple[float, float], size: int) -> tuple[float, float]:
        """Shown frame (x, y) -> canonical frame."""
        x, y = xy
        m = size - 1
        for _ in range(self.quarter_turns):  # one CW quarter turn undoes a CCW one
            x, y = m - y, x
        if self.flip:
            x = m - x
        return (x, y)


@dataclass(frozen=True)
class Geometry:
    """How a canonical axial slice (X, Y voxels) maps onto the square output image."""

    size: int
    content_w: int  # output px covered by the slice, columns
    content_h: int
    pad_x: int
    pad_y: int
    n_cols: int  # native display columns (= X)
    n_rows: int  # native display rows (= Y)

    @classmethod
    def for_slice(cls, shape_xy: tuple[int, int], spacing_xy: tuple[float, float], size: int):
        nx, ny = shape_xy
        width_mm, height_mm = nx * spacing_xy[0], ny * spacing_xy[1]
        scale = size / max(width_mm, height_mm)
        cw = max(1, min(size, round(width_mm * scale)))
        ch = max(1, min(size, round(height_mm * scale)))
        return cls(size, cw, ch, (size - cw) // 2, (size - ch) // 2, nx, ny)

    @property
    def px_per_col(self) -> float:
        return self.content_w / self.n_cols

    @property
    def px_per_row(self) -> float:
        return self.content_h / self.n_rows

    def to_output(self, col: float, row: float) -> tuple[float, float]:
        """Native display (col, row) pixel-centre coordinates -> canonical-frame output (x, y)."""
        x = self.pad_x + (col + 0.5) * self.px_per_col - 0.5
        y = self.pad_y + (row + 0.5) * self.px_per_row - 0.5
        return (x, y)


def to_display(slice_xy: np.ndarray) -> np.ndarray:
    """A canonical RAS axial slice indexed [i, j] -> radiological display [row, col].

    Row 0 is the most anterior voxel (j = Y-1), column 0 the patient's rightmost (i = X-1).
    """
    return slice_xy[::-1, ::-1].T


def window_to_uint8(hu: np.ndarray, width: float, level: float) -> np.ndarray:
    lo = level - width / 2.0
    scaled = (hu.astype(np.float32, copy=False) - lo) * (255.0 / width)
    return np.clip(scaled + 0.5, 0, 255).astype(np.uint8)


PERCENTILES = (1.0, 99.0)  # MR display: black and white points, percent of all voxels


def percentile_window(
    volume: np.ndarray, pct: tuple[float, float] = PERCENTILES
) -> tuple[float, float]:
    """(width, level) mapping the volume's ``pct[0]``-th percentile to black and ``pct[1]``-th
    to white: MR has no absolute units, so each volume is shown by its own intensity spread
    (one window for every slice of it, so slices compare). ValueError when the two are equal:
    every slice would be one flat grey."""
    lo, hi = (float(v) for v in np.percentile(volume, pct))
    if not hi > lo:
        raise ValueError(
            f"intensities are constant ({lo:g} from the {pct[0]:g}th to the {pct[1]:g}th "
            "percentile): every slice would be blank"
        )
    width = hi - lo
    return (round(width, 4), round(lo + width / 2, 4))


def render_gray(display_hu: np.ndarray, geom: Geometry, window: tuple[float, float]) -> np.ndarray:
    """Windowed, resampled (bilinear), padded canonical-frame image, uint8 (size, size)."""
    gray = window_to_uint8(display_hu, *window)
    img = Image.fromarray(gray)
    if (geom.content_w, geom.content_h) != (geom.n_cols, geom.n_rows):
        img = img.resize((geom.content_w, geom.content_h), Image.Resampling.BILINEAR)
    out, arr = np.zeros((geom.size, geom.size), np.uint8), np.asarray(img)
    out[geom.pad_y : geom.pad_y + geom.content_h, geom.pad_x : geom.pad_x + geom.content_w] = arr
    return out


def render_labels(display_lab: np.ndarray, geom: Geometry) -> np.ndarray:
    """Nearest-neighbour resampled, padded canonical-frame label image, uint16 (size, size)."""
    img = Image.fromarray(display_lab.astype(np.int32))
    if (geom.content_w, geom.content_h) != (geom.n_cols, geom.n_rows):
        img = img.resize((geom.content_w, geom.content_h), Image.Resampling.NEAREST)
    out = np.zeros((geom.size, geom.size), np.uint16)
    out[geom.pad_y : geom.pad_y + geom.content_h, geom.pad_x : geom.pad_x + geom.content_w] = (
        np.asarray(img)
    )
    return out


@dataclass(frozen=True)
class StructureStat:
    """One structure in one slice, coordinates in the canonical output frame."""

    label_id: int
    n_components: int
    area_px: float  # in output pixels
    center_xy: tuple[float, float]  # centre of mass
    marker_xy: tuple[float, float]  # centre of mass, or the deepest interior point if outside
    inside: bool  # whether the centre of mass lies inside the structure


_EIGHT = np.ones((3, 3), bool)


def structure_stats(display_lab: np.ndarray, geom: Geometry) -> dict[int, StructureStat]:
    """Stats for every label present in a native-resolution display slice.

    One ``find_objects`` pass gives each label's bounding box; area, centre, components
    (8-connectivity) and the interior point are then computed inside that box only.
    """
    if not display_lab.size or not display_lab.any():
        return {}
    px_area = geom.px_per_col * geom.px_per_row
    out: dict[int, StructureStat] = {}
    for lab_id, box in enumerate(ndimage.find_objects(display_lab), start=1):
        if box is None:
            continue
        mask = display_lab[box] == lab_id
        per_row, per_col = mask.sum(axis=1), mask.sum(axis=0)
        n = int(per_row.sum())
        r0, c0 = box[0].start, box[1].start
        cr = r0 + float(per_row @ np.arange(per_row.size)) / n
        cc = c0 + float(per_col @ np.arange(per_col.size)) / n
        _, n_comp = ndimage.label(mask, structure=_EIGHT)
        ir, ic = int(round(cr)) - r0, int(round(cc)) - c0
        inside = 0 <= ir < mask.shape[0] and 0 <= ic < mask.shape[1] and bool(mask[ir, ic])
        if inside:
            mc, mr = cc, cr
        else:  # concave organ: the interior point farthest from the boundary
            dist = ndimage.distance_transform_edt(np.pad(mask, 1))[1:-1, 1:-1]
            pr, pc = np.unravel_index(int(np.argmax(dist)), dist.shape)
            mc, mr = float(pc + c0), float(pr + r0)
        out[lab_id] = StructureStat(
            label_id=lab_id,
            n_components=int(n_comp),
            area_px=float(n * px_area),
            center_xy=geom.to_output(cc, cr),
            marker_xy=geom.to_output(mc, mr),
            inside=inside,
        )
    return out


def referenceable(
    stats: dict[int, StructureStat], names: dict[int, str], min_area: float
) -> list[StructureStat]:
    """Structures a marker or a crop may point at, by label id: named in the table, one
    connected component, area >= ``min_area`` (the generator and the probes use twice the
    largest marker's area, ``2 * markers.marker_area(size)``)."""
    return [
        s
        for _, s in sorted(stats.items())
        if s.n_components == 1 and s.area_px >= min_area and s.label_id in names
    ]


def component_areas(
    labels: np.ndarray,
    label_id: int,
    box: tuple[slice, ...] | None = None,
    scale: float = 1.0,
) -> list[float]:
    """Areas of the 8-connected components of one label (inside ``box``), largest first;
    ``scale`` converts a pixel of ``labels`` to output px."""
    mask = (labels if box is None else labels[box]) == label_id
    comp, n = ndimage.label(mask, structure=_EIGHT)
    areas = np.bincount(comp.ravel(), minlength=n + 1)[1:] * scale
    return sorted((float(a) for a in areas), reverse=True)
