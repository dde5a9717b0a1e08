"""A structure to paint (:class:`Part`) and how it is painted into the tissue and label volumes.

Parts are painted in ``layer`` order (painter's algorithm: a later part wins where two overlap),
each only inside its own bounding box. A part can also carve (``label=0``), or only texture
another structure (``label=None`` with ``restrict``), e.g. hepatic veins inside the liver.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from scipy import ndimage
from scipy.special import ndtri

from radspatial.phantoms.body import Body
from radspatial.phantoms.shapes import Grid, Shape
from radspatial.phantoms.tissues import TISSUE_ID


@dataclass(frozen=True)
class Part:
    name: str  # unique; keys the part's random generator
    label: int | None  # TotalSegmentator v2 id; 0 clears; None keeps labels (texture only)
    tissue: str
    shape: Shape
    layer: int = 30
    wall: str | None = None  # tissue of an outer wall / cortex ...
    wall_mm: float = 0.0  # ... this thick
    hollow_mm: float = 0.0  # > 0: paint only a shell this thick (a curved plate of bone)
    core: str | None = None  # tissue of the centre (rho < core_rho), e.g. a necrotic core
    core_rho: float = 0.5
    gas: float | None = None  # lumen: gas where up > gas (+ noise); None: no gas
    speckle: str | None = None  # a second tissue in blobs: gas bubbles in stool, trabeculae
    speckle_frac: float = 0.0  # ... filling this fraction of the part
    speckle_mm: float = 5.0  # ... blob size
    restrict: tuple[int, ...] = ()  # paint only over these labels
    clip: tuple[str, ...] = ()  # "cavity", "below" / "above" (the diaphragm)
    visceral: bool = False  # mirrored in situs inversus
    organ: str = ""  # group moved together in the displaced variant

    def moved(self, a: np.ndarray, b: np.ndarray, label: int | None = None) -> Part:
        """This part under p -> a @ p + b, optionally relabelled."""
        new_label = self.label if label is None else label
        return replace(self, shape=self.shape.transformed(a, b), label=new_label)


def _coarse_noise(
    rng: np.random.Generator, shape: tuple[int, ...], where: tuple[np.ndarray, ...], cell_vox
) -> np.ndarray:
    """Smooth noise (about unit sd) at the voxels ``where`` of a box of ``shape``.

    Normal values on a coarse lattice (one per ``cell_vox`` voxels), trilinearly interpolated
    at the requested voxels only: cost follows the structure's volume, not its bounding box.
    """
    cell = np.asarray(cell_vox, dtype=float)
    coarse = tuple(int(np.ceil(s / c)) + 2 for s, c in zip(shape, cell, strict=True))
    lattice = rng.standard_normal(coarse).astype(np.float32)
    coords = np.stack([w / c for w, c in zip(where, cell, strict=True)])
    return ndimage.map_coordinates(lattice, coords, order=1) * np.float32(1.6)


def paint(
    part: Part,
    grid: Grid,
    body: Body,
    tissue: np.ndarray,
    seg: np.ndarray,
    rng: np.random.Generator,
) -> int:
    """Paint one part (world coordinates); returns the number of voxels painted."""
    f = part.shape.rasterize(grid)
    if f is None:
        return 0
    mask = f.rho < 1.0
    box = f.box
    if "cavity" in part.clip:
        mask &= body.in_cavity(box)
    if "below" in part.clip:
        mask &= body.below_diaphragm(box, 4.0)
    if "above" in part.clip:
        mask &= body.above_diaphragm(box, 4.0)
    seg_box, tis_box = seg[box], tissue[box]
    if part.restrict:
        mask &= np.isin(seg_box, part.restrict)
    where = np.nonzero(mask)
    n = where[0].size
    if n == 0:
        return 0
    rho = f.rho[where]
    depth = (1.0 - rho) * (f.scale[where] if isinstance(f.scale, np.ndarray) else f.scale)
    keep = depth < part.hollow_mm if part.hollow_mm > 0 else None
    t = np.full(n, TISSUE_ID[part.tissue], np.uint8)
    mm = np.asarray(grid.spacing)
    if part.gas is not None:
        up = np.broadcast_to(f.up, mask.shape)[where] if isinstance(f.up, np.ndarray) else f.up
        level = part.gas + 0.35 * _coarse_noise(rng, mask.shape, where, 25.0 / mm)
        t[up > level] = TISSUE_ID["gas"]
    if part.speckle is not None and part.speckle_frac > 0:
        spots = _coarse_noise(rng, mask.shape, where, part.speckle_mm / mm)
        t[spots > ndtri(1.0 - part.speckle_frac)] = TISSUE_ID[part.speckle]
    if part.core is not None:
        t[rho < part.core_rho] = TISSUE_ID[part.core]
    if part.wall is not None and part.wall_mm > 0:
        thin = depth < part.wall_mm
        if part.hollow_mm > 0:
            thin |= depth > part.hollow_mm - part.wall_mm
        t[thin] = TISSUE_ID[part.wall]
    if keep is not None:
        where = tuple(w[keep] for w in where)
        t = t[keep]
    tis_box[where] = t
    if part.label is not None:
        seg_box[where] = part.label
    return int(t.size)
