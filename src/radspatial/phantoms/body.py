"""Body outline (skin, subcutaneous fat, muscle wall), body cavity, diaphragm and lung bases.

The cross-section is described in polar coordinates around the body axis: for every height z
the cavity radius R(theta) is a superellipse (flatter at the back, where the patient lies on
the table) and the wall layers have angle-dependent thickness (rectus bellies in front, the
flank muscles at the sides, the gluteal mass around the pelvis). Distances are radial, which
is close to normal distance for these convex outlines and lets the whole volume be layered
with one small table lookup per slice.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from radspatial.phantoms.habitus import Z_SPAN, Habitus
from radspatial.phantoms.shapes import Grid
from radspatial.phantoms.tissues import TISSUE_ID

N_THETA = 720
SKIN_MM = 2.5
DIAPHRAGM_MM = 4.0
LUNG_RIGHT, LUNG_LEFT = 14, 11  # lung_lower_lobe_right, lung_lower_lobe_left


def _smoothstep(x: np.ndarray | float, lo: float, hi: float) -> np.ndarray:
    t = np.clip((np.asarray(x, dtype=float) - lo) / (hi - lo), 0.0, 1.0)
    return t * t * (3 - 2 * t)


def _gauss_angle(deg: np.ndarray, centre: float, width: float) -> np.ndarray:
    """exp(-(d / width)^2) with d the wrapped angular distance (degrees) from ``centre``."""
    d = (deg - centre + 180.0) % 360.0 - 180.0
    return np.exp(-((d / width) ** 2))


def cavity_radius(h: Habitus, theta: np.ndarray, z: float) -> np.ndarray:
    """Radius (mm) of the body cavity at angles ``theta`` (0 = patient's right, pi/2 = front)."""
    a0, ba0, bp0 = h.cavity
    zr = z / h.length
    a = a0 * np.interp(
        zr,
        [-60, 0, 40, 80, 120, 170, 230, 300, 380, 470],
        [0.6, 0.6, 0.66, 0.78, 0.9, 0.98, 0.95, 0.99, 1.0, 0.97],
    )
    belly = 1.0 + 0.12 * h.visceral * float(np.exp(-(((zr - 210.0) / 70.0) ** 2)))
    ba = (
        ba0 * belly * np.interp(zr, [-60, 40, 120, 300, 420, 470], [0.9, 0.92, 1.0, 1.0, 1.06, 1.1])
    )
    bp = bp0 * np.interp(
        zr, [-60, 60, 140, 200, 330, 400, 470], [0.74, 0.78, 0.8, 0.8, 0.84, 0.96, 0.98]
    )
    c, s = np.abs(np.cos(theta)), np.sin(theta)
    b = np.where(s >= 0, ba, bp)
    n = np.where(s >= 0, 2.3, 3.0)
    return 1.0 / ((c / a) ** n + (np.abs(s) / b) ** n) ** (1.0 / n)


def wall(h: Habitus, theta: np.ndarray, z: float) -> tuple[np.ndarray, np.ndarray]:
    """Thickness (mm) of the muscle wall and of the subcutaneous fat at angles ``theta``."""
    zr = z / h.length
    deg = np.rad2deg(theta)
    rectus = _gauss_angle(deg, 80.0, 9.0) + _gauss_angle(deg, 100.0, 9.0)
    flank = np.cos(theta) ** 2
    back = _gauss_angle(deg, -90.0, 32.0)  # spine and back muscles
    posterolateral = _gauss_angle(deg, -35.0, 35.0) + _gauss_angle(deg, -145.0, 35.0)
    iliac = float(_smoothstep(-zr, -175.0, -110.0))  # 0 above the iliac crest, 1 below
    hip = float(_smoothstep(-zr, -90.0, -30.0))  # 1 at the hip joints
    thorax = float(_smoothstep(zr, 340.0, 420.0))
    muscle = h.muscle * (
        7.0
        + 6.0 * rectus * (1.0 - 0.5 * iliac)
        + 5.0 * flank
        + 40.0 * back * (1.0 - 0.6 * thorax)
        + iliac * (24.0 * flank + 34.0 * posterolateral)
        + hip * (44.0 * flank + 20.0 * posterolateral)
        + 5.0 * thorax * posterolateral
    )
    s = np.sin(theta)
    belly = float(np.exp(-(((zr - 200.0) / 90.0) ** 2)))
    fat = h.fat_mm * (1.0 + 0.5 * np.clip(s, 0, 1) * belly + 0.25 * np.cos(theta) ** 2)
    fat = fat * (1.0 - 0.25 * _gauss_angle(deg, -90.0, 25.0))  # thinner over the spine
    return muscle, fat


def diaphragm(h: Habitus, x: np.ndarray, y: np.ndarray, mirror: bool = False) -> np.ndarray:
    """Height (mm, anatomical z) of the diaphragm's upper surface; right dome higher."""
    sign = -1.0 if mirror else 1.0
    domes = []
    for side, apex in ((1.0, 428.0), (-1.0, 414.0)):
        cx = sign * side * 62.0 * h.frame
        d = 62.0 * ((x - cx) / (80.0 * h.frame)) ** 2 + 62.0 * ((y - 8.0) / (85.0 * h.frame)) ** 2
        domes.append(h.z(apex) - d)
    return np.maximum(domes[0], domes[1])


@dataclass(frozen=True, eq=False)
class Pose:
    """Anatomical mm -> world mm: scale to fit the field of view, rotate about z, shift."""

    fit: np.ndarray  # (3,) scale factors
    rot: np.ndarray  # (3, 3)
    shift: np.ndarray  # (3,)

    @property
    def matrix(self) -> np.ndarray:
        return self.rot @ np.diag(self.fit)

    def to_anat_xy(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        inv = np.linalg.inv(self.matrix)
        dx, dy = x - self.shift[0], y - self.shift[1]
        return inv[0, 0] * dx + inv[0, 1] * dy, inv[1, 0] * dx + inv[1, 1] * dy

    def to_anat_z(self, z: np.ndarray) -> np.ndarray:
        return (z - self.shift[2]) / self.fit[2]


def make_pose(h: Habitus, grid: Grid) -> Pose:
    """Centre the patient in the field of view; shrink only if the field is too small."""
    fov = np.array(grid.shape) * np.array(grid.spacing)
    a0, ba0, bp0 = h.cavity
    need_x = 2 * (a0 * 1.04 + 30.0 + 1.5 * h.fat_mm) + 20.0
    need_y = ba0 * 1.12 + bp0 + 50.0 + 2.5 * h.fat_mm + 20.0
    fit_xy = min(1.0, fov[0] / need_x, fov[1] / need_y)
    span = (Z_SPAN[1] - Z_SPAN[0]) * h.length
    fit_z = min(1.0, fov[2] / span)
    theta = np.deg2rad(h.rotation)
    rot = np.array(
        [[np.cos(theta), -np.sin(theta), 0], [np.sin(theta), np.cos(theta), 0], [0, 0, 1]]
    )
    z_mid = 0.5 * (Z_SPAN[0] + Z_SPAN[1]) * h.length
    centre = np.array(grid.origin) + 0.5 * (np.array(grid.shape) - 1) * np.array(grid.spacing)
    shift = np.array(
        [centre[0] + h.shift[0], centre[1] + h.shift[1] - 8.0, centre[2] - z_mid * fit_z]
    )
    return Pose(np.array([fit_xy, fit_xy, fit_z]), rot, shift)


@dataclass(frozen=True, eq=False)
class Body:
    """Per-grid lookup tables used to layer the body and to clip structures to the cavity."""

    grid: Grid
    pose: Pose
    r: np.ndarray  # (X, Y) anatomical radius from the body axis
    theta_bin: np.ndarray  # (X, Y) int
    cavity: np.ndarray  # (N_THETA, Z) cavity radius per angle and slice
    z_anat: np.ndarray  # (Z,)
    dome: np.ndarray  # (X, Y) diaphragm height, anatomical z

    def in_cavity(self, box: tuple[slice, slice, slice]) -> np.ndarray:
        tb, r = self.theta_bin[box[0], box[1]], self.r[box[0], box[1]]
        return r[:, :, None] < self.cavity[tb][:, :, box[2]]

    def below_diaphragm(self, box: tuple[slice, slice, slice], margin: float) -> np.ndarray:
        dome = self.dome[box[0], box[1]][:, :, None]
        return self.z_anat[box[2]][None, None, :] < dome - margin

    def above_diaphragm(self, box: tuple[slice, slice, slice], margin: float) -> np.ndarray:
        dome = self.dome[box[0], box[1]][:, :, None]
        return self.z_anat[box[2]][None, None, :] > dome + margin


def _scanner_table(
    h: Habitus, pose: Pose, x: np.ndarray, y: np.ndarray, z_anat: np.ndarray
) -> np.ndarray:
    """The scanner table's pixels (world-horizontal, under the patient's back), every slice."""
    down = np.array([-np.pi / 2])
    depth = max(
        float((cavity_radius(h, down, zz) + sum(wall(h, down, zz)))[0]) + SKIN_MM
        for zz in np.linspace(z_anat.min(), z_anat.max(), 12)
    )
    back = pose.shift[1] - pose.fit[1] * depth
    xw = x - pose.shift[0]
    top = back - 6.0 + 0.0006 * xw**2
    table = ((y < top) & (y > top - 2.5)) | ((y < top - 30.0) & (y > top - 34.0))
    table &= np.abs(xw) < 230.0
    return table


def _body_box(h: Habitus, pose: Pose, r: np.ndarray) -> tuple[slice, slice] | None:
    """The body's rows/columns (plus margin): everything outside is air or table."""
    reach = (h.cavity[0] + 120.0 + 3.0 * h.fat_mm) * pose.fit[0]
    rows = np.flatnonzero((r * pose.fit[0] < reach).any(axis=1))
    cols = np.flatnonzero((r * pose.fit[0] < reach).any(axis=0))
    return (slice(rows[0], rows[-1] + 1), slice(cols[0], cols[-1] + 1)) if rows.size else None


def build_body(
    h: Habitus, grid: Grid, pose: Pose, tissue: np.ndarray, seg: np.ndarray, mirror: bool
) -> Body:
    """Paint air, table, skin, fat, muscle wall, cavity fat, diaphragm and lung bases."""
    x, y = np.meshgrid(grid.axis(0), grid.axis(1), indexing="ij")
    xa, ya = pose.to_anat_xy(x, y)
    r = np.hypot(xa, ya).astype(np.float32)
    theta = np.arctan2(ya, xa)
    theta_bin = (np.round((theta + np.pi) / (2 * np.pi) * N_THETA).astype(np.int32)) % N_THETA
    angles = np.arange(N_THETA) * 2 * np.pi / N_THETA - np.pi
    z_anat = pose.to_anat_z(grid.axis(2).astype(float)).astype(np.float32)
    dome = diaphragm(h, xa, ya, mirror).astype(np.float32)
    cavity = np.empty((N_THETA, grid.shape[2]), np.float32)

    t = TISSUE_ID
    table = _scanner_table(h, pose, x, y, z_anat)
    lung_side = np.where(xa >= 0, LUNG_RIGHT, LUNG_LEFT).astype(seg.dtype)
    mediastinum = np.abs(xa) < 22.0 * h.frame
    xy = _body_box(h, pose, r)
    lateral = np.abs(np.cos(angles)) > 0.55
    order = np.array(
        [t["visceral_fat"], t["muscle"], t["fat"], t["skin"], t["air"], t["fat"]], np.uint8
    )
    for k in range(grid.shape[2]):
        zk = float(z_anat[k])
        cav = cavity_radius(h, angles, zk).astype(np.float32)
        mus, fat = wall(h, angles, zk)
        cavity[:, k] = cav
        sl_t = tissue[:, :, k]
        sl_t[table] = t["table"]
        if xy is None:
            continue
        tb, rr = theta_bin[xy], r[xy]
        r_cav = cav[tb]
        r_mus = (cav + mus.astype(np.float32))[tb]
        r_fat = r_mus + fat.astype(np.float32)[tb]
        layer = (rr >= r_cav).view(np.uint8) + (rr >= r_mus).view(np.uint8)
        # thin fat planes between the flank muscles (obliques, gluteal layers)
        thick = (mus > 12.0) & lateral
        if thick.any():
            plane = np.abs(rr - (r_cav + 0.45 * (r_mus - r_cav))) < 1.0
            plane &= thick[tb] & (layer == 1)
            layer[plane] = 5
        layer += (rr >= r_fat).view(np.uint8)
        layer += (rr >= r_fat + SKIN_MM).view(np.uint8)
        out = order[layer]
        out[table[xy] & (layer == 4)] = t["table"]
        inside = layer == 0
        dz = zk - dome[xy]
        out[inside & (np.abs(dz) <= DIAPHRAGM_MM)] = t["muscle"]
        lung = inside & (dz > DIAPHRAGM_MM) & ~mediastinum[xy] & (rr < r_cav - 3.0)
        out[lung] = t["lung"]
        sl_t[xy] = out
        if lung.any():
            sl_s = seg[:, :, k][xy]
            sl_s[lung] = lung_side[xy][lung]
    return Body(grid, pose, r, theta_bin, cavity, z_anat, dome)
