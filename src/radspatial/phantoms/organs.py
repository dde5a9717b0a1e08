"""Abdominal and lower-thoracic organs, in the anatomical frame (mm).

Positions are written for the reference adult (cavity half-width 124 mm, anterior extent
76 mm, posterior 108 mm) at heights in mm above the pubis, and scaled to each patient: x and y
with the cavity, z with the torso length. Each organ then gets its own random size, shift and
deformation. Every part here is ``visceral`` (mirrored in situs inversus) and clipped to the
body cavity; organs that touch the wall (liver, spleen, colon) are drawn a little too large
so that the cavity clip gives them the wall's shape.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from radspatial.phantoms.habitus import Habitus
from radspatial.phantoms.parts import Part
from radspatial.phantoms.shapes import Bumps, Ellipsoid, Tube, tube_through

Vec3 = tuple[float, float, float]
CAV = ("cavity",)
ABD = ("cavity", "below")  # in the cavity and under the diaphragm
LUMEN = {"wall": "bowel_wall", "wall_mm": 2.5, "clip": CAV}

# liver: (name, centre, radii, angles) of the overlapping lobes
LIVER = (
    ("right", (64, -4, 374), (84, 92, 84), (0, 0, -8)),
    ("left", (-6, 44, 394), (82, 38, 44), (0, 12, 18)),
    ("caudate", (14, -22, 388), (24, 22, 36), (0, 0, 0)),
    ("tip", (92, -2, 318), (46, 62, 44), (0, 0, 10)),
)
# hepatic veins (from the IVC) and portal branches (from the hilum), texture only
LIVER_VESSELS = (
    ((20, -24, 420), (92, -30, 402), 6.0),
    ((20, -24, 420), (58, 42, 408), 5.0),
    ((20, -24, 420), (-36, 34, 410), 5.0),
    ((38, 2, 350), (84, -4, 352), 5.0),
    ((38, 2, 350), (-14, 28, 374), 4.5),
    ((38, 2, 350), (80, 40, 340), 4.0),
)
# tubes: (x, y, z, radius) control points
STOMACH = ((-48, -12, 418, 36), (-64, 10, 388, 38), (-58, 34, 352, 32), (-32, 52, 326, 26),
           (-2, 52, 316, 19), (22, 42, 318, 12))  # fmt: skip
PANCREAS = ((30, -2, 288, 11), (38, 12, 302, 17), (12, 24, 318, 11), (-25, 18, 330, 12),
            (-60, 2, 340, 11), (-82, -16, 350, 9))  # fmt: skip
DUODENUM = ((24, 40, 318, 12), (50, 26, 320, 13), (62, 6, 304, 14), (64, 0, 272, 14),
            (48, 14, 252, 13), (10, 24, 246, 12), (-24, 16, 256, 12), (-32, 12, 280, 12),
            (-28, 20, 296, 11))  # fmt: skip
COLON = ((82, 5, 150, 32), (90, -10, 200, 28), (92, -20, 270, 26), (84, 0, 314, 26),
         (52, 46, 302, 25), (10, 62, 284, 24), (-40, 56, 296, 24), (-92, 14, 346, 24),
         (-98, -20, 318, 22), (-98, -26, 250, 21), (-94, -22, 180, 20), (-80, 4, 136, 19),
         (-40, 30, 118, 18), (0, 26, 124, 18), (-16, -30, 96, 18), (0, -56, 80, 20),
         (0, -62, 42, 22), (0, -52, 0, 16))  # fmt: skip
ESOPHAGUS = ((-4, -30, 475, 8), (-10, -24, 440, 8), (-24, -12, 420, 8), (-34, -8, 410, 8))
KIDNEY_IDS = {"left": 3, "right": 2}
KIDNEY_ASYMMETRY = 0.06  # sd of a log size factor per kidney, on top of the organ's own size
ADRENAL_IDS = {"left": 9, "right": 8}


def scaler(h: Habitus, name: str, jitter_mm: float = 6.0) -> tuple[Callable[..., Vec3], float]:
    """Reference (x, y, z) -> this patient (plus a random shift), and a random size factor."""
    a0, ba0, bp0 = h.cavity
    rng = h.rng(name)
    dx, dy, dz = rng.normal(0.0, jitter_mm, 3)
    size = float(np.clip(rng.normal(1.0, 0.07), 0.85, 1.15)) * h.frame

    def p(x: float, y: float, z: float) -> Vec3:
        sy = ba0 / 76.0 if y >= 0 else bp0 / 108.0
        return (x * a0 / 124.0 + dx, y * sy + dy, h.z(z) + dz)

    return p, size


def visceral(name: str, label: int | None, tissue: str, shape, **kw) -> Part:
    kw.setdefault("clip", ABD)
    return Part(name, label, tissue, shape, visceral=True, **kw)


def tube(h: Habitus, name: str, table, jitter_mm: float = 5.0) -> Tube:
    p, s = scaler(h, name, jitter_mm)
    return tube_through([p(x, y, z) for x, y, z, _ in table], [r * s for *_, r in table])


def liver(h: Habitus) -> list[Part]:
    p, s = scaler(h, "liver")
    rng = h.rng("liver_shape")
    parts = []
    for nm, c, r, ang in LIVER:
        e = Ellipsoid.make(p(*c), tuple(v * s for v in r), ang, bumps=Bumps.random(rng, 0.07))
        parts.append(visceral(f"liver_{nm}", 5, "liver", e, layer=32, organ="liver"))
    for k, (a, b, r0) in enumerate(LIVER_VESSELS):
        t = tube_through([p(*a), p(*b)], [r0, r0 * 0.45])
        parts.append(visceral(f"liver_vessel_{k}", None, "blood", t, layer=70, restrict=(5,)))
    pg, sg = scaler(h, "gallbladder", 8.0)
    gb = Ellipsoid.make(
        pg(44, 40, 318),
        (17 * sg, 19 * sg, 38 * sg),
        (-30, 0, 20),
        bumps=Bumps.random(h.rng("gb_shape"), 0.05),
    )
    parts.append(
        visceral("gallbladder", 4, "bile", gb, layer=36, wall="bowel_wall", wall_mm=1.5,
                 organ="gallbladder")
    )  # fmt: skip
    return parts


def spleen(h: Habitus) -> list[Part]:
    p, s = scaler(h, "spleen", 7.0)
    c = np.array(p(-100, -48, 372))
    bumps = Bumps.random(h.rng("spleen_shape"), 0.06)
    body = Ellipsoid.make(tuple(c), (24 * s, 56 * s, 56 * s), (0, -15, -148), bumps=bumps)
    # the hilum: a concave medial face, carved out of the spleen only
    inward = -np.array([np.cos(np.deg2rad(-148.0)), np.sin(np.deg2rad(-148.0)), 0.0])
    hilum = Ellipsoid.make(tuple(c + inward * 34 * s), (20 * s, 30 * s, 36 * s), (0, 0, -148))
    return [
        visceral("spleen", 1, "spleen", body, layer=32, organ="spleen"),
        visceral("spleen_hilum", 0, "visceral_fat", hilum, layer=32, restrict=(1,), organ="spleen"),
    ]


def kidneys(h: Habitus) -> list[Part]:
    """Kidneys (cortex, medulla, sinus fat, pelvis, renal vein) and adrenal glands."""
    parts: list[Part] = []
    for sx, side, z_ref in ((-1.0, "left", 325.0), (1.0, "right", 300.0)):
        lab, organ = KIDNEY_IDS[side], f"kidney_{side}"
        p, s = scaler(h, organ, 7.0)
        s *= h.side_factor(organ, KIDNEY_ASYMMETRY)  # one kidney often clearly the larger
        c = np.array(p(74 * sx, -50, z_ref))
        yaw = -30.0 * sx  # the hilum faces anteromedially
        ang = (0.0, -12.0 * sx, yaw)  # upper pole tilted medially
        bumps = Bumps.random(h.rng(f"{organ}_shape"), 0.04)
        kid = Ellipsoid.make(tuple(c), (30 * s, 24 * s, 56 * s), ang, bumps=bumps)
        hilum = -sx * np.array([np.cos(np.deg2rad(yaw)), np.sin(np.deg2rad(yaw)), 0.0])
        sinus = Ellipsoid.make(tuple(c + hilum * 18 * s), (15 * s, 12 * s, 30 * s), ang)
        pelvis = Ellipsoid.make(tuple(c + hilum * 29 * s), (8 * s, 6 * s, 13 * s), ang)
        cava = p(22, -14, z_ref - 4)
        via = p(-4, 16, z_ref) if sx < 0 else cava  # the left vein passes in front of the aorta
        vein = tube_through([tuple(c + hilum * 26 * s), via, cava], 5.0 * s)
        parts += [
            visceral(organ, lab, "kidney_medulla", kid, layer=34, organ=organ,
                     wall="kidney_cortex", wall_mm=7.0),
            visceral(f"{organ}_sinus", 0, "fat", sinus, layer=34, restrict=(lab,), organ=organ),
            visceral(f"{organ}_pelvis", 0, "urine", pelvis, layer=34, restrict=(0,), organ=organ),
            visceral(f"renal_vein_{side}", 0, "blood", vein, layer=39, organ=organ),
        ]  # fmt: skip
        pa, sa = scaler(h, f"adrenal_{side}", 4.0)
        base = (38 * sx, -30 if sx < 0 else -36, 372 if sx < 0 else 386)
        for k, (dx, dy, yaw_a) in enumerate(((0, 0, -30 * sx), (-5 * sx, -7, 25 * sx))):
            centre = pa(base[0] + dx, base[1] + dy, base[2] - 3 * k)
            limb = Ellipsoid.make(centre, (3.8 * sa, 13 * sa, 17 * sa), (0, 0, yaw_a))
            parts.append(visceral(f"adrenal_{side}_{k}", ADRENAL_IDS[side], "adrenal", limb,
                                  layer=35))  # fmt: skip
    return parts


def pelvic_and_thoracic(h: Habitus) -> list[Part]:
    """Urinary bladder; heart (with pericardial fat) above the diaphragm."""
    p, s = scaler(h, "urinary_bladder", 5.0)
    fill = float(h.rng("bladder_fill").uniform(0.6, 1.1))
    r = 36 * s * fill
    bladder = Ellipsoid.make(
        p(0, 26, 44 * fill), (48 * s * fill, r, r), bumps=Bumps.random(h.rng("bladder"), 0.04)
    )
    ph, sh = scaler(h, "heart", 6.0)
    heart = Ellipsoid.make(ph(-26, 36, 462), (62 * sh, 46 * sh, 52 * sh), (0, 0, -30))
    fat = Ellipsoid.make(ph(-26, 36, 462), (70 * sh, 54 * sh, 58 * sh), (0, 0, -30))
    chest = ("cavity", "above")
    return [
        visceral("urinary_bladder", 21, "urine", bladder, layer=36, clip=CAV, wall="muscle",
                 wall_mm=3.0, organ="urinary_bladder"),
        visceral("pericardial_fat", 0, "fat", fat, layer=29, clip=chest),
        visceral("heart", 51, "blood", heart, layer=30, clip=chest, wall="myocardium",
                 wall_mm=9.0),
    ]  # fmt: skip


def hollow(h: Habitus) -> list[Part]:
    """Stomach, esophagus, duodenum, colon, small bowel, pancreas."""
    rng = h.rng("stomach_fill")
    content, gas = str(rng.choice(["fluid", "food"])), float(rng.uniform(-0.1, 0.6))
    rng_c = h.rng("colon_content")
    sag = float(h.rng("colon_sag").uniform(0, 60))  # the transverse colon droops variably
    colon = tuple((x, y, z - (sag if y > 40 and z < 310 else 0), r) for x, y, z, r in COLON)
    parts = [
        visceral("stomach", 6, content, tube(h, "stomach", STOMACH, 6.0), layer=26,
                 wall="bowel_wall", wall_mm=4.0, gas=gas),
        visceral("esophagus", 15, "muscle", tube(h, "esophagus", ESOPHAGUS, 2.0), layer=45,
                 clip=CAV),
        visceral("duodenum", 19, "fluid", tube(h, "duodenum", DUODENUM, 4.0), layer=24,
                 gas=float(h.rng("duodenum_gas").uniform(0.3, 0.9)), **LUMEN),
        visceral("colon", 20, "stool", tube(h, "colon", colon, 8.0), layer=22,
                 gas=float(rng_c.uniform(-0.4, 0.4)), speckle="gas",
                 speckle_frac=float(rng_c.uniform(0.15, 0.35)), **LUMEN),
        visceral("pancreas", 7, "pancreas", tube(h, "pancreas", PANCREAS), layer=30,
                 speckle="fat", speckle_frac=0.12, speckle_mm=3.0),
    ]  # fmt: skip
    for k, loop in enumerate(small_bowel(h)):
        parts.append(visceral(f"small_bowel_{k}", 18, "fluid", loop, layer=20, gas=0.7, **LUMEN))
    return parts


def small_bowel(h: Habitus) -> list[Tube]:
    """Loops through the mid and lower abdomen (about 6 m): smooth random walks started on a
    lattice over the mesenteric region, so the loops fill it rather than clump."""
    rng = h.rng("small_bowel")
    p, _ = scaler(h, "small_bowel_region", 0.0)
    lo, hi = np.array(p(-88, -25, 95)), np.array(p(78, 72, 285))
    step, radius = 9.0, 13.5 * h.frame
    loops = []
    lattice = np.meshgrid([0.15, 0.4, 0.65, 0.9], [0.25, 0.75], [0.15, 0.4, 0.65, 0.9])
    for f in np.stack(lattice, -1).reshape(-1, 3):
        pos = lo + (hi - lo) * f + rng.normal(0, 8.0, 3)
        heading = rng.normal(0, 1, 3) * (1, 1, 0.3)
        pts = [pos.copy()]
        for _ in range(20):
            heading = heading / np.linalg.norm(heading) + rng.normal(0, 0.45, 3) * (1, 1, 0.4)
            heading[2] *= 0.8  # loops lie mostly in axial-ish planes
            nxt = pos + step * heading / np.linalg.norm(heading)
            heading[(nxt < lo) | (nxt > hi)] *= -1.0
            pos = np.clip(pos + step * heading / np.linalg.norm(heading), lo, hi)
            pts.append(pos.copy())
        loops.append(Tube(tuple(tuple(float(v) for v in q) for q in pts), (radius,) * len(pts)))
    return loops


def organ_parts(h: Habitus) -> list[Part]:
    return [*liver(h), *spleen(h), *kidneys(h), *pelvic_and_thoracic(h), *hollow(h)]
