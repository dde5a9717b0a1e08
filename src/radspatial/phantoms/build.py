"""``make_phantom``: one synthetic abdominal CT with its TotalSegmentator-v2 mask.

Pipeline (random part first, then deterministic): draw the habitus from the seed -> lay out
the structures (``skeleton``, ``organs``, ``vessels``) in the anatomical frame -> apply the variant
(mirror the viscera, or push an organ aside with a mass) -> pose the patient in the field of
view -> paint body layers and parts into a tissue map and the label map -> tissue map to HU
with per-phantom calibration, partial-volume blur and correlated noise.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
from scipy import ndimage

from radspatial.bench.counterfactual import MASS_ID, mirror_map
from radspatial.core.labels import load_table
from radspatial.phantoms.body import build_body, make_pose
from radspatial.phantoms.habitus import Habitus, draw_habitus
from radspatial.phantoms.organs import organ_parts
from radspatial.phantoms.parts import Part, paint
from radspatial.phantoms.shapes import Bumps, Ellipsoid, Grid, rotation
from radspatial.phantoms.skeleton import skeleton_parts
from radspatial.phantoms.tissues import TISSUES
from radspatial.phantoms.vessels import vessel_parts

VARIANTS: tuple[str, ...] = ("normal", "situs_inversus", "displaced")
DEFAULT_SHAPE = (512, 512, 200)
DEFAULT_FOV = (409.6, 409.6, 500.0)  # mm; spacing=None spreads this over the shape
_MIRROR_X = np.diag([-1.0, 1.0, 1.0])

# displaced variant: organ -> direction (anatomical frame) from the mass toward the organ,
# i.e. where the organ is pushed. An adrenal/upper-pole mass pushes a kidney down and out.
_PUSH: dict[str, tuple[float, float, float]] = {
    "kidney_left": (-0.45, -0.1, -0.9),
    "kidney_right": (0.45, -0.1, -0.9),
    "spleen": (-0.6, -0.5, 0.4),
    "urinary_bladder": (0.0, 0.55, -0.5),
}


@dataclass(frozen=True, eq=False)
class Phantom:
    case_id: str
    ct: np.ndarray  # (X, Y, Z) int16 HU, canonical RAS+
    seg: np.ndarray  # (X, Y, Z) uint8 TotalSegmentator v2 ids (+ 200 mass), same grid
    affine: np.ndarray  # 4x4 RAS+ world mm
    variant: str
    meta: dict  # JSON-safe: seed, habitus, variant details, voxel count per label


def phantom_rng(seed: int, case_id: str) -> np.random.Generator:
    """One generator per (seed, case id), as ``generate.keyed_rng``."""
    digest = hashlib.sha256(case_id.encode()).digest()
    return np.random.default_rng([seed, int.from_bytes(digest[:8], "little")])


def make_grid(shape: tuple[int, int, int], spacing: tuple[float, float, float] | None) -> Grid:
    if len(shape) != 3 or min(shape) < 8:
        raise ValueError(f"phantom shape must be 3 sizes >= 8, got {shape}")
    if spacing is None:
        spacing = tuple(f / n for f, n in zip(DEFAULT_FOV, shape, strict=True))
    if len(spacing) != 3 or min(spacing) <= 0:
        raise ValueError(f"phantom spacing must be 3 positive sizes (mm), got {spacing}")
    sp = tuple(float(v) for v in spacing)
    origin = tuple(-0.5 * (n - 1) * s for n, s in zip(shape, sp, strict=True))
    return Grid(tuple(int(n) for n in shape), sp, origin)


def layout(h: Habitus) -> list[Part]:
    """All parts in the anatomical frame, in painting order; each organ slightly turned."""
    parts = [*skeleton_parts(h), *organ_parts(h), *vessel_parts(h)]
    for organ in sorted({p.organ for p in parts if p.organ}):
        angles = h.rng(f"turn/{organ}").normal(0.0, 5.0, 3)  # degrees, about the organ centre
        a = rotation(tuple(float(v) for v in angles))
        c = _centre([p for p in parts if p.organ == organ and p.label not in (None, 0)])
        parts = [p.moved(a, c - a @ c) if p.organ == organ else p for p in parts]
    return sorted(parts, key=lambda p: p.layer)  # stable: list order within a layer


def situs_inversus(parts: list[Part]) -> list[Part]:
    """Mirror the viscera left-right; paired names follow the side they end up on."""
    mapping, _ = mirror_map(load_table("totalsegmentator", group=False).names)
    out = []
    for p in parts:
        if not p.visceral:
            out.append(p)
            continue
        lab = mapping.get(p.label, p.label) if p.label else p.label
        out.append(p.moved(_MIRROR_X, np.zeros(3), lab))
    return out


def _centre(parts: list[Part]) -> np.ndarray:
    pts = []
    for p in parts:
        pts.append(np.asarray(getattr(p.shape, "center", None) or np.mean(p.shape.points, axis=0)))
    return np.mean(pts, axis=0)


def displace(h: Habitus, parts: list[Part]) -> tuple[list[Part], dict]:
    """Push one organ aside with a round mass (label 200) placed where the organ was."""
    rng = h.rng("displaced")
    organ = str(rng.choice(sorted(_PUSH)))
    group = [p for p in parts if p.organ == organ and p.label not in (None, 0)]
    centre = _centre(group)
    d = np.asarray(_PUSH[organ]) / np.linalg.norm(_PUSH[organ])
    r_mass = float(rng.uniform(26.0, 40.0)) * h.frame
    shift = d * (0.8 * r_mass + 10.0)
    squash = 0.85
    a = np.eye(3) - (1.0 - squash) * np.outer(d, d)
    b = centre + shift - a @ centre
    moved = [p.moved(a, b) if p.organ == organ else p for p in parts]
    mass_c = centre - d * (0.35 * r_mass)
    mass = Part(
        "mass",
        MASS_ID,
        "mass",
        Ellipsoid.make(
            tuple(mass_c), (r_mass, r_mass * 0.9, r_mass), bumps=Bumps.random(rng, 0.08)
        ),
        layer=48,
        core="necrosis",
        core_rho=float(rng.uniform(0.2, 0.55)),
        clip=("cavity",),
        organ="mass",
    )
    info = {
        "organ": organ,
        "mass_label": MASS_ID,
        "mass_center_anat_mm": [round(float(v), 2) for v in mass_c],
        "mass_radius_mm": round(r_mass, 2),
        "shift_anat_mm": [round(float(v), 2) for v in shift],
    }
    return [*moved, mass], info


def tissue_to_hu(
    tissue: np.ndarray, h: Habitus, rng: np.random.Generator, grid: Grid
) -> np.ndarray:
    """HU image: calibrated tissue means, partial-volume blur, correlated noise; int16.

    Works on Fortran-ordered volumes (as painted) through their transposed C views, which
    keeps every pass contiguous.
    """
    means = np.array(
        [t.hu + t.jitter * o for t, o in zip(TISSUES, h.hu_offsets, strict=True)], np.float32
    )
    hu = means[tissue.T].T  # Fortran order, like ``tissue``
    # noise drawn on a grid 2x coarser in-plane, then blurred with the image: CT-like grain
    nx, ny, nz = tissue.shape
    noise = rng.standard_normal((nz, (ny + 1) // 2, (nx + 1) // 2), dtype=np.float32).T
    noise *= np.float32(h.noise_sd * 1.5)
    for ox in (0, 1):
        for oy in (0, 1):
            hu[ox::2, oy::2, :] += noise[: (nx - ox + 1) // 2, : (ny - oy + 1) // 2, :]
    # [1, 2, 1] / 4 in-plane: about a Gaussian of 0.7 voxel, the scanner's partial volume
    # (only on fine grids: a coarse voxel already averages more than the scanner blurs)
    kernel = np.array([0.25, 0.5, 0.25], np.float32)
    for axis in (0, 1):
        if grid.spacing[axis] <= 1.25:
            ndimage.correlate1d(hu, kernel, axis=axis, output=hu, mode="nearest")
    np.clip(hu, -1024, 3071, out=hu)
    np.rint(hu, out=hu)
    return hu.astype(np.int16, order="F")


def make_phantom(
    case_id: str,
    *,
    seed: int,
    shape: tuple[int, int, int] = DEFAULT_SHAPE,
    spacing: tuple[float, float, float] | None = None,
    variant: str = "normal",
) -> Phantom:
    """One phantom; deterministic per (seed, case_id, variant, shape, spacing).

    ``spacing=None`` spreads a 409.6 x 409.6 x 500 mm field of view over ``shape``
    (0.8 x 0.8 x 2.5 mm at the default 512 x 512 x 200). The anatomy is in real millimetres
    and is shrunk only when the field of view is too small for it. The same (seed, case_id)
    gives the same patient in every variant, so variants form matched pairs.
    """
    if variant not in VARIANTS:
        raise ValueError(f"unknown phantom variant {variant!r}; expected one of {VARIANTS}")
    grid = make_grid(shape, spacing)
    rng = phantom_rng(seed, case_id)
    h = draw_habitus(rng, len(TISSUES))
    pose = make_pose(h, grid)
    parts = layout(h)
    details: dict = {}
    if variant == "situs_inversus":
        parts = situs_inversus(parts)
    elif variant == "displaced":
        parts, details = displace(h, parts)
    parts = sorted(parts, key=lambda p: p.layer)
    tissue = np.zeros(grid.shape, np.uint8, order="F")
    seg = np.zeros(grid.shape, np.uint8, order="F")
    body = build_body(h, grid, pose, tissue, seg, mirror=variant == "situs_inversus")
    matrix, shift = pose.matrix, pose.shift
    for part in parts:
        paint(part.moved(matrix, shift), grid, body, tissue, seg, h.rng(f"paint/{part.name}"))
    ct = tissue_to_hu(tissue, h, h.rng("noise"), grid)
    counts = np.bincount(seg.ravel(order="K"), minlength=256)
    meta = {
        "case_id": case_id,
        "seed": seed,
        "variant": variant,
        "shape": list(grid.shape),
        "spacing_mm": list(grid.spacing),
        "fit_scale": [round(float(v), 4) for v in pose.fit],
        "habitus": h.to_json(),
        "contrast_phase": "unenhanced",
        "variant_details": details,
        "label_voxels": {int(i): int(counts[i]) for i in np.flatnonzero(counts) if i},
    }
    return Phantom(case_id, ct, seg, grid.affine, variant, meta)
