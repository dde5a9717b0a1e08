"""Great vessels and small-vessel texture, in the anatomical frame (mm).

Aorta and inferior vena cava follow the spine (their y is relative to the vertebral bodies);
the portal/splenic vein runs behind the pancreas; mesenteric and lung vessels only texture
the fat and the lungs. All are ``visceral`` (mirrored in situs inversus), unenhanced blood.
"""

from __future__ import annotations

import numpy as np

from radspatial.phantoms.habitus import Habitus
from radspatial.phantoms.organs import CAV, scaler, visceral
from radspatial.phantoms.parts import Part
from radspatial.phantoms.shapes import Tube, tube_through

# (z, x, y relative to the vertebral body centre, radius)
AORTA = ((490, -24, 2, 12.5), (440, -24, 4, 12.5), (395, -20, 10, 12), (350, -14, 20, 11.5),
         (310, -11, 27, 11), (260, -10, 29, 10.5), (215, -8, 29, 10),
         (190, -6, 28, 9.5))  # fmt: skip
IVC = ((440, 18, -16, 13), (400, 21, -8, 12), (350, 22, 8, 11.5), (300, 22, 18, 11),
       (250, 20, 20, 11), (200, 16, 18, 10.5), (168, 10, 16, 10))  # fmt: skip
# (x, y, z, radius), reference frame
PORTAL_SPLENIC = ((-80, -22, 352, 4.5), (-52, -4, 338, 5), (-20, 6, 328, 5.5), (8, 10, 318, 7),
                  (26, 6, 334, 7), (40, 2, 348, 6.5))  # fmt: skip
SMA = ((-10, 34, 318), (-6, 36, 290), (-2, 40, 230), (4, 44, 170))
SMV = ((12, 38, 170), (12, 34, 230), (10, 24, 300), (8, 12, 318))
ILIAC_IDS = {("artery", -1.0): 65, ("artery", 1.0): 66, ("vena", -1.0): 67, ("vena", 1.0): 68}


def _along_spine(h: Habitus, table) -> Tube:
    s = h.frame
    pts = [(x * s, float(h.spine_y(h.z(z))) + y * s, h.z(z)) for z, x, y, _ in table]
    return tube_through(pts, [r * s for *_, r in table])


def great_vessels(h: Habitus) -> list[Part]:
    s, z = h.frame, h.z
    aorta, ivc = _along_spine(h, AORTA), _along_spine(h, IVC)
    parts = [
        visceral("aorta", 52, "blood", aorta, layer=40, clip=CAV),
        visceral("inferior_vena_cava", 63, "blood", ivc, layer=40, clip=CAV),
    ]
    bif, conf = aorta.points[-1], ivc.points[-1]
    for sx in (-1.0, 1.0):
        artery = [bif, (sx * 26 * s, bif[1] - 4, z(160)), (sx * 52 * s, -12 * s, z(110)),
                  (sx * 70 * s, 8 * s, z(50)), (sx * 78 * s, 24 * s, z(-5))]  # fmt: skip
        vein = [conf, (sx * 34 * s, conf[1] - 10, z(130)), (sx * 58 * s, -20 * s, z(100)),
                (sx * 70 * s, 0.0, z(50)), (sx * 74 * s, 16 * s, z(-5))]  # fmt: skip
        for kind, pts, r, layer in (("artery", artery, 6.5, 41), ("vena", vein, 8.0, 40)):
            lab = ILIAC_IDS[(kind, sx)]
            t = tube_through(pts, r * s)
            parts.append(visceral(f"iliac_{kind}_{lab}", lab, "blood", t, layer=layer, clip=CAV))
    p, _ = scaler(h, "portal", 3.0)
    t = tube_through(
        [p(x, y, zz) for x, y, zz, _ in PORTAL_SPLENIC], [r * s for *_, r in PORTAL_SPLENIC]
    )
    parts.append(visceral("portal_splenic_vein", 64, "blood", t, layer=42))
    for name, pts, r in (("sma", SMA, 3.5), ("smv", SMV, 4.5)):
        parts.append(
            visceral(name, 0, "blood", tube_through([p(*q) for q in pts], r * s), layer=39)
        )
    return parts


def small_vessels(h: Habitus) -> list[Part]:
    """Mesenteric vessels fanning out in the fat, and vessels in the lung bases."""
    s, z = h.frame, h.z
    p, _ = scaler(h, "portal", 3.0)
    parts = []
    rng = h.rng("mesenteric_vessels")
    for k in range(30):
        a = np.array(p(0, 36, float(rng.uniform(160, 300))))
        d = np.array([rng.uniform(-1, 1), rng.uniform(-0.2, 0.8), rng.uniform(-0.6, 0.2)])
        b = a + 70.0 * d / np.linalg.norm(d)
        t = Tube((tuple(a), tuple(b)), (2.4, 1.0))
        parts.append(visceral(f"mesenteric_{k}", None, "blood", t, layer=70, restrict=(0,),
                              clip=CAV))  # fmt: skip
    rng = h.rng("lung_vessels")
    for sx in (1.0, -1.0):
        for k in range(18):
            a = np.array([sx * 40.0 * s, -5.0 * s, z(480)])
            end = (
                sx * rng.uniform(50, 125) * s,
                rng.uniform(-95, 40) * s,
                z(rng.uniform(330, 450)),
            )
            mid = 0.5 * (a + np.array(end)) + rng.normal(0, 10, 3)
            t = tube_through([tuple(a), tuple(mid), end], [3.2, 2.2, 1.0])
            parts.append(visceral(f"lung_vessel_{sx:+.0f}_{k}", None, "blood", t, layer=70,
                                  restrict=(11, 14), clip=CAV))  # fmt: skip
    return parts


def vessel_parts(h: Habitus) -> list[Part]:
    return [*great_vessels(h), *small_vessels(h)]
