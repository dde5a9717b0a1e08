"""Bones and trunk muscles: vertebrae, discs, spinal canal and cord, ribs, costal cartilages,
sternum, sacrum, hip bones, femora, autochthon, iliopsoas, gluteal and quadratus muscles.

All positions are in the anatomical frame (see ``habitus``), mm; ids are TotalSegmentator v2.
"""

from __future__ import annotations

import numpy as np

from radspatial.phantoms.body import cavity_radius, wall
from radspatial.phantoms.habitus import VERTEBRAE, Habitus
from radspatial.phantoms.parts import Part
from radspatial.phantoms.shapes import Bumps, Ellipsoid, tube_through

SIDES = ((1.0, "right"), (-1.0, "left"))  # +x is the patient's right (RAS+)
RIB_ID = {"left": 91, "right": 103}  # rib_<side>_N = base + N
# TotalSegmentator v2 ids of the skeleton's and muscles' structures
IDS = {
    "sacrum": 25, "spinal_cord": 79, "sternum": 116, "costal_cartilages": 117,
    ("femur", "left"): 75, ("femur", "right"): 76, ("hip", "left"): 77, ("hip", "right"): 78,
    ("gluteus_maximus", "left"): 80, ("gluteus_maximus", "right"): 81,
    ("gluteus_medius", "left"): 82, ("gluteus_medius", "right"): 83,
    ("autochthon", "left"): 86, ("autochthon", "right"): 87,
    ("iliopsoas", "left"): 88, ("iliopsoas", "right"): 89,
}  # fmt: skip
BONE = {
    "tissue": "cancellous_bone",
    "wall": "cortical_bone",
    "layer": 52,
    "speckle": "trabecular_bone",
    "speckle_frac": 0.3,
    "speckle_mm": 2.5,
}


def _lumbar(name: str) -> float:
    """1 for lumbar vertebrae and S1, 0 for thoracic; sizes blend between."""
    return 1.0 if name[len("vertebrae_") :][0] in "ls" else 0.0


def _canal(h: Habitus, z: float, lum: float) -> tuple[float, float]:
    """(y of the spinal canal centre, canal radius) at height z."""
    s = h.frame
    ry = (14.0 + 4.0 * lum) * s
    rc = (8.0 + 1.5 * lum) * s
    return float(h.spine_y(z)) - ry - rc - 1.0, rc


def vertebrae(h: Habitus) -> list[Part]:
    parts: list[Part] = []
    prev_top: float | None = None
    for label, name, lo_ref, hi_ref in VERTEBRAE:
        lo, hi = h.z(lo_ref), h.z(hi_ref)
        parts += _vertebra(h, label, name, lo, hi, prev_top)
        prev_top = hi
    return parts


def _vertebra(
    h: Habitus, label: int, name: str, lo: float, hi: float, prev_top: float | None
) -> list[Part]:
    """One vertebra: its body, the disc below it (down to ``prev_top``, the top of the
    vertebra below), then the S1 alae or the arch and processes."""
    s = h.frame
    zc, height = 0.5 * (lo + hi), hi - lo
    lum = _lumbar(name)
    rng = h.rng(name)
    yb = float(h.spine_y(zc))
    rx, ry = (17.0 + 7.0 * lum) * s, (14.0 + 4.0 * lum) * s
    b = Bumps.random(rng, 0.03)
    cut = 1.0 / 3.0
    body = Ellipsoid.make(
        (0.0, yb, zc),
        (rx, ry, 1.5 * height),
        bumps=b,
        cuts=(((0.0, 0.0, 1.0), cut), ((0.0, 0.0, -1.0), cut)),
    )
    parts = [Part(f"{name}_body", label, shape=body, wall_mm=1.5, **BONE)]
    if prev_top is not None and name != "vertebrae_s1":
        gap = lo - prev_top
        disc = Ellipsoid.make(
            (0.0, float(h.spine_y(lo - gap / 2)), lo - gap / 2),
            (rx * 0.98, ry * 0.98, gap * 0.75),
        )
        parts.append(Part(f"{name}_disc_below", 0, "disc", disc, layer=50))
    if name == "vertebrae_s1":
        ala = Ellipsoid.make((0.0, yb - 8.0 * s, zc - 2.0), (52.0 * s, 16.0 * s, 13.0), bumps=b)
        return [*parts, Part("s1_alae", label, shape=ala, wall_mm=1.5, **BONE)]
    return parts + _arch_and_processes(h, label, name, zc, height, lum)


def _arch_and_processes(
    h: Habitus, label: int, name: str, zc: float, height: float, lum: float
) -> list[Part]:
    """The neural arch around the canal, the spinous process and both transverse processes."""
    s = h.frame
    yc, rc = _canal(h, zc, lum)
    ring = Ellipsoid.make((0.0, yc, zc + 0.1 * height), (rc + 6.5 * s, rc + 6.0 * s, 0.45 * height))
    parts = [Part(f"{name}_arch", label, shape=ring, wall_mm=2.0, **BONE)]
    sp_len = (24.0 + 6.0 * (1 - lum)) * s
    tilt = 12.0 + 25.0 * (1 - lum)
    spinous = Ellipsoid.make(
        (0.0, yc - rc - 5.0 - sp_len / 2, zc - 0.25 * height),
        (5.0 * s, sp_len / 2 + 3.0, 0.3 * height + 4.0),
        (-tilt, 0.0, 0.0),
    )
    parts.append(Part(f"{name}_spinous", label, shape=spinous, wall_mm=1.5, **BONE))
    tp_len = (18.0 + 12.0 * lum * (1.0 - abs(zc - h.z(230.0)) / 150.0)) * s
    for sx, _ in SIDES:
        ang = sx * (-25.0 * (1 - lum) - 5.0)
        tp = Ellipsoid.make(
            (sx * (rc + 6.0 + tp_len / 2), yc + 1.0, zc + 0.1 * height),
            (tp_len / 2 + 3.0, 4.5 * s, 5.5),
            (0.0, 0.0, ang),
        )
        parts.append(Part(f"{name}_tp_{sx:+.0f}", label, shape=tp, wall_mm=1.5, **BONE))
    return parts


def canal_and_cord(h: Habitus) -> list[Part]:
    zs = np.linspace(h.z(30.0), h.z(520.0), 40)
    canal = [(0.0, _canal(h, z, 1.0 if z < h.z(320) else 0.0)[0], z) for z in zs]
    rc = [
        _canal(h, z, 1.0 if z < h.z(320) else 0.0)[1] * (0.55 if z < h.z(100) else 1.0) for z in zs
    ]
    z_conus = h.z(286.0)
    cord_pts = [(0.0, y + 1.0, z) for (_, y, z) in canal if z >= z_conus]
    cord_r = [5.0 * h.frame if z > z_conus + 30 else 2.5 * h.frame for (_, _, z) in cord_pts]
    return [
        Part("spinal_canal", 0, "csf", tube_through(canal, rc), layer=55),
        Part("spinal_cord", IDS["spinal_cord"], "cord", tube_through(cord_pts, cord_r), layer=56),
    ]


def ribs(h: Habitus) -> list[Part]:
    """Ribs 7-12 and the costal cartilages of ribs 7-10, following the inner body wall."""
    parts: list[Part] = []
    ends = {7: 72.0, 8: 58.0, 9: 44.0, 10: 28.0, 11: -8.0, 12: -38.0}  # anterior end, degrees
    for n, end in ends.items():
        _, lo, hi = next(v[1:] for v in VERTEBRAE if v[1] == f"vertebrae_t{n}")
        z0 = h.z(0.5 * (lo + hi))
        yb = float(h.spine_y(z0))
        drop = (95.0 + 8.0 * (n - 7)) * h.length
        for sx, side in SIDES:
            rng = h.rng(f"rib_{side}_{n}")
            start = -64.0 + rng.normal(0, 2)
            phis = np.linspace(start, end, 9)
            pts = [(sx * 20.0 * h.frame, yb - 4.0, z0), (sx * 42.0 * h.frame, yb - 30.0, z0 - 4.0)]
            for i, phi in enumerate(phis):
                frac = (i + 1) / len(phis)
                z = z0 - 8.0 - drop * frac**1.3
                th = np.deg2rad(np.array([phi]))
                r = float(cavity_radius(h, th, z)[0] + 0.45 * wall(h, th, z)[0][0])
                pts.append((sx * r * np.cos(th[0]), r * np.sin(th[0]), z))
            radius = (5.2 if n < 11 else 4.4) * h.frame
            rib = tube_through(pts, [radius * 0.8, *[radius] * (len(pts) - 1)])
            parts.append(Part(f"rib_{side}_{n}", RIB_ID[side] + n, shape=rib, wall_mm=1.3, **BONE))
            if n <= 10:  # cartilage from the rib's anterior end toward the xiphoid
                z_end = pts[-1][2]
                z_top = h.z(440.0 + 10.0 * (7 - n))
                cart = []
                for phi, frac in zip(np.linspace(end, 84.0, 5), np.linspace(0, 1, 5), strict=True):
                    z = z_end + (z_top - z_end) * frac**0.8
                    th = np.deg2rad(np.array([phi]))
                    r = float(cavity_radius(h, th, z)[0] + 0.45 * wall(h, th, z)[0][0])
                    cart.append((sx * r * np.cos(th[0]), r * np.sin(th[0]), z))
                parts.append(
                    Part(
                        f"cartilage_{side}_{n}",
                        IDS["costal_cartilages"],
                        "cartilage",
                        tube_through(cart, 4.5 * h.frame),
                        layer=51,
                    )
                )
    z_x = h.z(448.0)
    r_front = float(cavity_radius(h, np.array([np.pi / 2]), z_x)[0])
    xiphoid = Ellipsoid.make((0.0, r_front + 6.0, z_x), (11.0 * h.frame, 5.0, 22.0))
    parts.append(Part("sternum", IDS["sternum"], shape=xiphoid, wall_mm=1.2, **BONE))
    return parts


def pelvis(h: Habitus) -> list[Part]:
    """Sacrum, hip bones (ilium, acetabulum, pubis, ischium) and proximal femora."""
    parts = _sacrum(h)
    for sx, side in SIDES:
        parts += _hip_bone(h, sx, side)
        parts += _femur(h, sx, side)
    return parts


def _sacrum(h: Habitus) -> list[Part]:
    s, z = h.frame, h.z
    parts: list[Part] = []
    for k, (zz, w) in enumerate(((92.0, 46.0), (70.0, 40.0), (48.0, 31.0), (28.0, 20.0))):
        y = float(h.spine_y(z(zz)))
        e = Ellipsoid.make((0.0, y - 2.0, z(zz)), (w * s, 14.0 * s, 15.0), (8.0, 0.0, 0.0))
        parts.append(Part(f"sacrum_{k}", IDS["sacrum"], shape=e, wall_mm=1.5, **BONE))
    canal = tube_through(
        [(0.0, float(h.spine_y(z(z0))) - 10.0, z(z0)) for z0 in (30.0, 60.0, 96.0)], 5.0 * s
    )
    parts.append(Part("sacral_canal", 0, "csf", canal, layer=55))
    return parts


def _hip_bone(h: Habitus, sx: float, side: str) -> list[Part]:
    s, z = h.frame, h.z
    hip = IDS[("hip", side)]
    rng = h.rng(f"hip_{side}")
    # iliac wing: a curved plate cut from an ellipsoidal shell, widest at the crest,
    # running from the sacroiliac joint (posteromedial) to the anterior superior spine
    c35, s35, c75, s75 = np.cos(np.deg2rad(35)), np.sin(np.deg2rad(35)), 0.26, 0.97
    wing = Ellipsoid.make(
        (sx * 30.0 * s, -12.0 * s, z(172.0)),
        (90.0 * s, 70.0 * s, 130.0),
        (0.0, -20.0 * sx, 0.0),
        bumps=Bumps.random(rng, 0.03, freq=1.5),
        sector=(
            ((-s35 * sx, c35, 0.0), 0.0),
            ((-s75 * sx, -c75, 0.0), 0.0),
            ((0.0, 0.0, 1.0), 0.0),
            ((0.0, 0.0, -1.0), 0.8),
        ),
    )
    parts = [Part(f"ilium_{side}", hip, shape=wing, wall_mm=2.0, hollow_mm=9.0 * s, **BONE)]
    post = Ellipsoid.make(
        (sx * 56.0 * s, -64.0 * s, z(118.0)), (15.0 * s, 24.0 * s, 42.0), (0.0, 0.0, 30.0 * sx)
    )
    parts.append(Part(f"ilium_post_{side}", hip, shape=post, wall_mm=2.0, **BONE))
    body = tube_through(
        [
            (sx * 60.0 * s, -48.0 * s, z(80.0)),
            (sx * 74.0 * s, -22.0 * s, z(40.0)),
            (sx * 76.0 * s, -6.0 * s, z(18.0)),
        ],
        [16.0 * s, 18.0 * s, 20.0 * s],
    )
    parts.append(Part(f"ilium_body_{side}", hip, shape=body, wall_mm=2.0, **BONE))
    acetab = Ellipsoid.make((sx * 78.0 * s, -4.0 * s, z(14.0)), (27.0 * s, 30.0 * s, 30.0))
    parts.append(Part(f"acetabulum_{side}", hip, shape=acetab, wall_mm=2.5, **BONE))
    pubis = tube_through(
        [
            (sx * 70.0 * s, 18.0 * s, z(6.0)),
            (sx * 38.0 * s, 46.0 * s, z(-4.0)),
            (sx * 6.0 * s, 52.0 * s, z(-14.0)),
        ],
        9.0 * s,
    )
    parts.append(Part(f"pubis_{side}", hip, shape=pubis, wall_mm=1.5, **BONE))
    ischium = tube_through(
        [(sx * 68.0 * s, -26.0 * s, z(0.0)), (sx * 60.0 * s, -26.0 * s, z(-45.0))],
        [13.0 * s, 15.0 * s],
    )
    parts.append(Part(f"ischium_{side}", hip, shape=ischium, wall_mm=1.8, **BONE))
    return parts


def _femur(h: Habitus, sx: float, side: str) -> list[Part]:
    """Proximal femur: head, neck, greater trochanter and the upper shaft."""
    s, z = h.frame, h.z
    fem = IDS[("femur", side)]
    head = Ellipsoid.make((sx * 88.0 * s, -2.0 * s, z(14.0)), (23.0 * s,) * 3)
    neck = tube_through(
        [(sx * 88.0 * s, -2.0 * s, z(14.0)), (sx * 114.0 * s, -8.0 * s, z(-6.0))], 15.0 * s
    )
    troch = Ellipsoid.make((sx * 120.0 * s, -12.0 * s, z(-14.0)), (14.0 * s, 18.0 * s, 22.0))
    shaft = tube_through(
        [(sx * 116.0 * s, -6.0 * s, z(-14.0)), (sx * 112.0 * s, 2.0 * s, z(-90.0))], 14.0 * s
    )
    return [
        Part(f"femur_{nm}_{side}", fem, shape=shp, wall_mm=2.5, **{**BONE, "layer": 53})
        for nm, shp in (("head", head), ("neck", neck), ("troch", troch), ("shaft", shaft))
    ]


# Left/right asymmetry of the paired muscles (sd of a log size factor per side, see
# ``Habitus.side_factor``); the autochthon also varies per segment along the spine.
ASYMMETRY = {"autochthon": 0.08, "autochthon_segment": 0.08, "iliopsoas": 0.12, "gluteus": 0.1}


def muscles(h: Habitus) -> list[Part]:
    parts: list[Part] = []
    for sx, side in SIDES:
        parts += _autochthon(h, sx, side)
        parts += _iliopsoas(h, sx, side)
        parts += _glutei(h, sx, side)
        parts.append(_quadratus(h, sx, side))
    return parts


def _autochthon(h: Habitus, sx: float, side: str) -> list[Part]:
    """A chain of ellipsoids along the spine, thickest in the lumbar region."""
    s, z = h.frame, h.z
    ids = IDS[("autochthon", side)]
    m_ac = h.muscle * h.side_factor(f"autochthon_{side}", ASYMMETRY["autochthon"])
    parts = []
    for zz, (rx, ry) in (
        (470.0, (20, 17)),
        (420.0, (22, 18)),
        (370.0, (25, 20)),
        (320.0, (28, 23)),
        (270.0, (30, 25)),
        (220.0, (30, 25)),
        (170.0, (27, 22)),
        (125.0, (22, 16)),
        (90.0, (16, 11)),
    ):
        zc = z(zz)
        seg = h.side_factor(f"autochthon_{side}_{zz:.0f}", ASYMMETRY["autochthon_segment"])
        m = m_ac * seg
        yc, rc = _canal(h, zc, 1.0 if zz < 320 else 0.0)
        e = Ellipsoid.make(
            (sx * (rx * s * m + 6.0), yc - 8.0 - ry * s * m * 0.6, zc),
            (rx * s * m, ry * s * m, 34.0),
            bumps=Bumps.random(h.rng(f"ac{side}{zz}"), 0.04),
        )
        parts.append(Part(f"autochthon_{side}_{zz:.0f}", ids, "muscle", e, layer=10))
    return parts


def _iliopsoas(h: Habitus, sx: float, side: str) -> list[Part]:
    """Psoas from T12 down along the lumbar spine, joined by iliacus, to the groin."""
    s, z = h.frame, h.z
    ip = IDS[("iliopsoas", side)]
    m = h.muscle * h.side_factor(f"iliopsoas_{side}", ASYMMETRY["iliopsoas"])
    pts, rad = [], []
    for zz, dx, dy, r in (
        (335.0, 18, -2, 5),
        (300.0, 24, 4, 9),
        (255.0, 31, 8, 14),
        (210.0, 40, 10, 18),
        (165.0, 50, 14, 21),
    ):
        pts.append((sx * dx * s, float(h.spine_y(z(zz))) + dy * s, z(zz)))
        rad.append(r * s * m)
    pts += [
        (sx * 66.0 * s, -14.0 * s, z(110.0)),
        (sx * 72.0 * s, 8.0 * s, z(50.0)),
        (sx * 74.0 * s, 26.0 * s, z(0.0)),
        (sx * 82.0 * s, 22.0 * s, z(-50.0)),
    ]
    rad += [22.0 * s * m, 20.0 * s * m, 17.0 * s * m, 14.0 * s * m]
    iliacus = Ellipsoid.make(
        (sx * 92.0 * s, -18.0 * s, z(125.0)),
        (13.0 * s * m, 44.0 * s, 48.0),
        (0.0, 0.0, -13.0 * sx),
    )
    return [
        Part(f"psoas_{side}", ip, "muscle", tube_through(pts, rad), layer=10),
        Part(f"iliacus_{side}", ip, "muscle", iliacus, layer=10),
    ]


def _glutei(h: Habitus, sx: float, side: str) -> list[Part]:
    """Gluteus maximus in the posterior body wall, gluteus medius on the iliac wing."""
    s, z = h.frame, h.z
    g = h.side_factor(f"gluteus_{side}", ASYMMETRY["gluteus"])  # both in-plane radii
    m = h.muscle * g
    th = np.deg2rad(np.array([-90.0 + 48.0 * sx]))
    zg = z(40.0)
    r_in = float(cavity_radius(h, th, zg)[0])
    t_mus = float(wall(h, th, zg)[0][0])
    rg = r_in + 0.55 * t_mus
    gmax = Ellipsoid.make(
        (sx * rg * abs(np.cos(th[0])) * 1.05, rg * np.sin(th[0]) * 0.97, zg),
        (48.0 * s * m, (0.42 * t_mus + 4.0) * g, 85.0),
        (0.0, 0.0, -28.0 * sx),
    )
    gmed = Ellipsoid.make(
        (sx * 136.0 * s, -26.0 * s, z(120.0)),
        (17.0 * s * m, 44.0 * s * g, 58.0),
        (0.0, 0.0, -13.0 * sx),
    )
    return [
        Part(f"gluteus_maximus_{side}", IDS[("gluteus_maximus", side)], "muscle", gmax, layer=11),
        Part(f"gluteus_medius_{side}", IDS[("gluteus_medius", side)], "muscle", gmed, layer=11),
    ]


def _quadratus(h: Habitus, sx: float, side: str) -> Part:
    # sized by the gluteal side factor, as it always was (phantoms stay byte-identical)
    s, m = h.frame, h.muscle * h.side_factor(f"gluteus_{side}", ASYMMETRY["gluteus"])
    ql = Ellipsoid.make((sx * 60.0 * s, -78.0 * s, h.z(265.0)), (20.0 * s * m, 12.0 * s * m, 70.0))
    return Part(f"quadratus_{side}", 0, "muscle", ql, layer=10)


def skeleton_parts(h: Habitus) -> list[Part]:
    return [*muscles(h), *vertebrae(h), *canal_and_cord(h), *ribs(h), *pelvis(h)]
