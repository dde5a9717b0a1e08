"""Shape primitives for phantoms: smoothly deformed ellipsoids and tubes on a voxel grid.

Every primitive lives in world millimetres (RAS+: x toward the patient's right, y anterior,
z superior) and is rasterised only inside its own bounding box, so a 512 x 512 x 200 phantom
costs about as much as its organs' volume, not 50 x the full grid.

A rasterised primitive is a :class:`Field`: ``rho`` (< 1 inside, 1 on the surface, like a
normalised radius), ``scale`` (mm per unit of rho near the surface, to cut walls of a given
thickness) and ``up`` (-1 posterior .. +1 anterior within the cross-section, for gas levels).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

Vec3 = tuple[float, float, float]
Box = tuple[slice, slice, slice]


@dataclass(frozen=True)
class Grid:
    """A canonical RAS+ voxel grid: world = origin + index * spacing (no rotation)."""

    shape: tuple[int, int, int]
    spacing: Vec3
    origin: Vec3  # world mm of voxel (0, 0, 0)

    @property
    def affine(self) -> np.ndarray:
        aff = np.diag([*self.spacing, 1.0])
        aff[:3, 3] = self.origin
        return aff

    def axis(self, k: int, sl: slice | None = None) -> np.ndarray:
        """World coordinates (float32) of the voxel centres along axis ``k``."""
        idx = np.arange(self.shape[k])[sl if sl is not None else slice(None)]
        return (self.origin[k] + idx * self.spacing[k]).astype(np.float32)

    def box(self, lo: np.ndarray, hi: np.ndarray) -> Box | None:
        """Voxel slices covering the world box [lo, hi], clipped; None if outside the grid."""
        out = []
        for k in range(3):
            a = int(np.floor((lo[k] - self.origin[k]) / self.spacing[k]))
            b = int(np.ceil((hi[k] - self.origin[k]) / self.spacing[k])) + 1
            a, b = max(a, 0), min(b, self.shape[k])
            if a >= b:
                return None
            out.append(slice(a, b))
        return (out[0], out[1], out[2])

    def coords(self, box: Box) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Broadcastable world coordinates of a box: shapes (n,1,1), (1,n,1), (1,1,n)."""
        x, y, z = (self.axis(k, box[k]) for k in range(3))
        return x[:, None, None], y[None, :, None], z[None, None, :]


@dataclass(frozen=True, eq=False)
class Field:
    box: Box
    rho: np.ndarray  # float32, < 1 inside
    scale: np.ndarray | float  # mm per unit rho near the surface
    up: np.ndarray | float  # -1 posterior .. +1 anterior

    @property
    def inside(self) -> np.ndarray:
        return self.rho < 1.0


@dataclass(frozen=True)
class Bumps:
    """Smooth radial deformation: 1 + sum(a_k cos(w_k . q + phi_k)), q in unit-sphere coords."""

    waves: tuple[Vec3, ...]
    amps: tuple[float, ...]
    phases: tuple[float, ...]

    @classmethod
    def random(cls, rng: np.random.Generator, amount: float, n: int = 6, freq: float = 2.0):
        waves = rng.normal(0.0, freq, (n, 3))
        amps = rng.uniform(0.3, 1.0, n)
        amps *= amount / amps.sum()
        phases = rng.uniform(0, 2 * np.pi, n)
        return cls(
            tuple(tuple(float(v) for v in w) for w in waves),
            tuple(float(a) for a in amps),
            tuple(float(p) for p in phases),
        )

    @property
    def bound(self) -> float:
        return float(sum(abs(a) for a in self.amps))

    def factor(self, qx: np.ndarray, qy: np.ndarray, qz: np.ndarray) -> np.ndarray:
        out = np.ones(np.broadcast_shapes(qx.shape, qy.shape, qz.shape), np.float32)
        for (wx, wy, wz), a, p in zip(self.waves, self.amps, self.phases, strict=True):
            out += np.float32(a) * np.cos(qx * wx + qy * wy + qz * wz + np.float32(p))
        return out


def rotation(angles_deg: Vec3) -> np.ndarray:
    """Rotation matrix from angles (degrees) about x, then y, then z (extrinsic)."""
    ax, ay, az = np.deg2rad(angles_deg)
    rx = np.array([[1, 0, 0], [0, np.cos(ax), -np.sin(ax)], [0, np.sin(ax), np.cos(ax)]])
    ry = np.array([[np.cos(ay), 0, np.sin(ay)], [0, 1, 0], [-np.sin(ay), 0, np.cos(ay)]])
    rz = np.array([[np.cos(az), -np.sin(az), 0], [np.sin(az), np.cos(az), 0], [0, 0, 1]])
    return rz @ ry @ rx


@dataclass(frozen=True)
class Ellipsoid:
    """Unit sphere mapped by ``matrix`` (3x3, columns = world axes of the radii) to ``center``.

    ``cuts``: planes in unit-sphere coordinates; inside also requires ``q . n <= d``
    (flat vertebral endplates, an organ's flat face); the cut face counts as surface (it gets
    the wall). ``sector``: the same kind of planes, but a hard limit without a wall there
    (a curved plate cut out of a shell). ``bumps`` deform the surface smoothly.
    """

    center: Vec3
    matrix: tuple[Vec3, Vec3, Vec3]
    bumps: Bumps | None = None
    cuts: tuple[tuple[Vec3, float], ...] = ()
    sector: tuple[tuple[Vec3, float], ...] = ()

    @classmethod
    def make(
        cls,
        center: Vec3,
        radii: Vec3,
        angles: Vec3 = (0.0, 0.0, 0.0),
        *,
        bumps: Bumps | None = None,
        cuts: tuple[tuple[Vec3, float], ...] = (),
        sector: tuple[tuple[Vec3, float], ...] = (),
    ) -> Ellipsoid:
        m = rotation(angles) @ np.diag(radii)
        return cls(_vec(center), _mat(m), bumps, cuts, sector)

    def transformed(self, a: np.ndarray, b: np.ndarray) -> Ellipsoid:
        """The image of this ellipsoid under world p -> a @ p + b."""
        c = a @ np.asarray(self.center) + b
        m = _mat(a @ np.asarray(self.matrix))
        return Ellipsoid(_vec(c), m, self.bumps, self.cuts, self.sector)

    def rasterize(self, grid: Grid) -> Field | None:
        m = np.asarray(self.matrix)
        grow = 1.0 + (self.bumps.bound if self.bumps else 0.0)
        half = np.linalg.norm(m, axis=1) * grow
        c = np.asarray(self.center)
        lo, hi = c - half, c + half
        if self.sector:  # the bounding box of the kept part only, from points of the ball
            q = _BALL
            for n, d in self.sector:
                q = q[q @ np.asarray(n) <= d + 0.05]
            if len(q) == 0:
                return None
            pts = q @ m.T * grow
            lo, hi = c + pts.min(0) - 0.05 * half, c + pts.max(0) + 0.05 * half
        box = grid.box(lo, hi)
        if box is None:
            return None
        x, y, z = grid.coords(box)
        dx, dy, dz = x - np.float32(c[0]), y - np.float32(c[1]), z - np.float32(c[2])
        inv = np.linalg.inv(m).astype(np.float32)
        qx = inv[0, 0] * dx + inv[0, 1] * dy + inv[0, 2] * dz
        qy = inv[1, 0] * dx + inv[1, 1] * dy + inv[1, 2] * dz
        qz = inv[2, 0] * dx + inv[2, 1] * dy + inv[2, 2] * dz
        rho = np.sqrt(qx * qx + qy * qy + qz * qz)
        if self.bumps is not None:
            rho /= self.bumps.factor(qx, qy, qz)
        for (nx, ny, nz), d in self.cuts:
            rho = np.maximum(rho, 1.0 + 4.0 * (qx * nx + qy * ny + qz * nz - np.float32(d)))
        for (nx, ny, nz), d in self.sector:
            rho = np.where(qx * nx + qy * ny + qz * nz > d, np.float32(np.inf), rho)
        scale = float(np.linalg.svd(m, compute_uv=False).min())
        up = np.clip(dy / np.float32(max(half[1], 1e-3)), -1, 1)
        return Field(box, rho.astype(np.float32, copy=False), scale, up)


@dataclass(frozen=True)
class Tube:
    """A tube: union of capsules between consecutive centreline points, radius interpolated."""

    points: tuple[Vec3, ...]
    radii: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.points) != len(self.radii) or len(self.points) < 2:
            raise ValueError("a tube needs >= 2 points and one radius per point")

    def transformed(self, a: np.ndarray, b: np.ndarray) -> Tube:
        pts = np.asarray(self.points) @ a.T + b
        s = abs(float(np.linalg.det(a))) ** (1.0 / 3.0)
        return Tube(tuple(_vec(p) for p in pts), tuple(float(r) * s for r in self.radii))

    def rasterize(self, grid: Grid) -> Field | None:
        pts = np.asarray(self.points, dtype=np.float32)
        rad = np.asarray(self.radii, dtype=np.float32)
        reach = rad.max()
        box = grid.box(pts.min(0) - reach, pts.max(0) + reach)
        if box is None:
            return None
        dims = np.array([s.stop - s.start for s in box])
        rho = np.full(tuple(dims), np.inf, np.float32)
        scale = np.ones(tuple(dims), np.float32)
        up = np.zeros(tuple(dims), np.float32)
        xs, ys, zs = grid.coords(box)
        # every segment's sub-box, in indices of this box, computed at once
        r_seg = np.maximum(rad[:-1], rad[1:])[:, None]
        lo = np.minimum(pts[:-1], pts[1:]) - r_seg
        hi = np.maximum(pts[:-1], pts[1:]) + r_seg
        origin, step = np.asarray(grid.origin), np.asarray(grid.spacing)
        first = np.array([s.start for s in box])
        i0 = np.clip(np.floor((lo - origin) / step).astype(int) - first, 0, dims)
        i1 = np.clip(np.ceil((hi - origin) / step).astype(int) + 1 - first, 0, dims)
        for k in range(len(pts) - 1):
            if (i1[k] <= i0[k]).any():
                continue
            sl = (slice(i0[k, 0], i1[k, 0]), slice(i0[k, 1], i1[k, 1]), slice(i0[k, 2], i1[k, 2]))
            x, y, z = xs[sl[0]], ys[:, sl[1]], zs[:, :, sl[2]]
            a, ab = pts[k], pts[k + 1] - pts[k]
            ra, dr = rad[k], rad[k + 1] - rad[k]
            length2 = np.float32(max(float(ab @ ab), 1e-9))
            t = ((x - a[0]) * ab[0] + (y - a[1]) * ab[1] + (z - a[2]) * ab[2]) / length2
            np.clip(t, 0.0, 1.0, out=t)
            dy = y - (a[1] + t * ab[1])
            rr = ra + t * dr
            seg_rho = np.sqrt((x - a[0] - t * ab[0]) ** 2 + dy**2 + (z - a[2] - t * ab[2]) ** 2)
            seg_rho /= rr
            cur = rho[sl]
            better = seg_rho < cur
            cur[better] = seg_rho[better]
            scale[sl][better] = rr[better]
            up[sl][better] = (dy / rr)[better]
        return Field(box, rho, scale, np.clip(up, -1, 1))


Shape = Ellipsoid | Tube


def _ball_points(n: int = 4000) -> np.ndarray:
    """Deterministic points filling the unit ball (sphere surface included)."""
    k = np.arange(n) + 0.5
    phi = np.arccos(1 - 2 * k / n)
    theta = np.pi * (1 + 5**0.5) * k
    sphere = np.stack([np.cos(theta) * np.sin(phi), np.sin(theta) * np.sin(phi), np.cos(phi)], 1)
    radii = np.r_[np.ones(n // 2), ((np.arange(n - n // 2) + 0.5) / (n - n // 2)) ** (1 / 3)]
    return sphere * radii[:, None]


_BALL = _ball_points()


def spline(points: list[Vec3] | np.ndarray, step: float = 4.0) -> np.ndarray:
    """Points along a smooth (Catmull-Rom) curve through ``points``, about ``step`` mm apart."""
    p = np.asarray(points, dtype=float)
    if len(p) < 3:
        n = max(2, int(np.linalg.norm(p[-1] - p[0]) / step) + 1)
        return p[0] + np.linspace(0, 1, n)[:, None] * (p[-1] - p[0])
    ext = np.vstack([2 * p[0] - p[1], p, 2 * p[-1] - p[-2]])
    out = [p[:1]]
    for i in range(1, len(ext) - 2):
        p0, p1, p2, p3 = ext[i - 1 : i + 3]
        n = max(2, int(np.linalg.norm(p2 - p1) / step) + 1)
        t = np.linspace(0, 1, n)[1:, None]
        out.append(
            0.5
            * (
                2 * p1
                + (-p0 + p2) * t
                + (2 * p0 - 5 * p1 + 4 * p2 - p3) * t**2
                + (-p0 + 3 * p1 - 3 * p2 + p3) * t**3
            )
        )
    return np.vstack(out)


def tube_through(points: list[Vec3], radii: list[float] | float, step: float | None = None) -> Tube:
    """A tube along a smooth curve through ``points``; radii per control point (or one)."""
    ctrl = np.asarray(points, dtype=float)
    r_ctrl = np.broadcast_to(np.asarray(radii, dtype=float), (len(ctrl),))
    step = step if step is not None else max(6.0, 1.5 * float(r_ctrl.min()))
    curve = spline(ctrl, step)
    # radius by arc length, interpolated between control points' arc positions
    arc = np.r_[0, np.cumsum(np.linalg.norm(np.diff(curve, axis=0), axis=1))]
    ctrl_arc = np.array([arc[np.argmin(np.linalg.norm(curve - c, axis=1))] for c in ctrl])
    ctrl_arc = np.maximum.accumulate(ctrl_arc)
    r = np.interp(arc, ctrl_arc, r_ctrl)
    return Tube(tuple(_vec(p) for p in curve), tuple(float(v) for v in r))


def _vec(v) -> Vec3:
    return (float(v[0]), float(v[1]), float(v[2]))


def _mat(m: np.ndarray) -> tuple[Vec3, Vec3, Vec3]:
    return (_vec(m[0]), _vec(m[1]), _vec(m[2]))
