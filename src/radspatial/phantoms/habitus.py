"""The random part of a phantom: body habitus and per-structure variation, all from one seed.

``draw_habitus(rng)`` is the only place global randomness is drawn; structures draw their own
small variations from ``habitus.rng(name)`` (a generator keyed by the structure's name), so
adding a structure never changes another one. Everything else is deterministic given the
:class:`Habitus`, which is JSON-safe and recorded in ``Phantom.meta``.

Anatomical frame (mm, before the global pose): x toward the patient's right, y anterior,
z superior with z = 0 at the top of the pubic symphysis. The reference adult spans
z = -50 (upper thighs) .. 450 (lung bases, T9) -- 500 mm, the default field of view.
"""

from __future__ import annotations

import zlib
from dataclasses import asdict, dataclass

import numpy as np

# Vertebra (TotalSegmentator v2 id, name, bottom, top) at torso length 1.0, mm above the pubis.
VERTEBRAE: tuple[tuple[int, str, float, float], ...] = (
    (26, "vertebrae_s1", 102.0, 130.0), (27, "vertebrae_l5", 140.0, 168.0),
    (28, "vertebrae_l4", 178.0, 206.0), (29, "vertebrae_l3", 216.0, 244.0),
    (30, "vertebrae_l2", 254.0, 282.0), (31, "vertebrae_l1", 292.0, 319.0),
    (32, "vertebrae_t12", 327.0, 351.0), (33, "vertebrae_t11", 357.0, 380.0),
    (34, "vertebrae_t10", 386.0, 408.0), (35, "vertebrae_t9", 414.0, 435.0),
    (36, "vertebrae_t8", 441.0, 461.0), (37, "vertebrae_t7", 467.0, 486.0),
    (38, "vertebrae_t6", 492.0, 510.0),
)  # fmt: skip
Z_SPAN = (-50.0, 450.0)  # reference field of view along z (mm, torso length 1.0)

# Anterior surface of the spine's centre line (vertebral body centre y) along z: lumbar
# lordosis brings L3/L4 forward, the sacrum slopes back.
_SPINE_Z = np.array([-60.0, 20.0, 70.0, 116.0, 154.0, 192.0, 230.0, 268.0, 306.0, 340.0, 400.0])
_SPINE_Y = np.array([-86.0, -84.0, -74.0, -58.0, -44.0, -37.0, -35.0, -38.0, -43.0, -48.0, -52.0])


@dataclass(frozen=True)
class Habitus:
    key: int  # keys every per-structure generator
    frame: float  # overall size (organ sizes and cavity)
    length: float  # torso length (z)
    fat_mm: float  # subcutaneous fat thickness
    visceral: float  # 0 (lean) .. 1 (much intra-abdominal fat)
    muscle: float  # muscle bulk factor
    shift: tuple[float, float]  # patient position on the table (x, y) mm
    rotation: float  # degrees about z
    noise_sd: float  # HU, image noise
    hu_offsets: tuple[float, ...]  # per tissue (see tissues.TISSUES)

    def rng(self, name: str) -> np.random.Generator:
        """The generator of one structure (or one random choice), keyed by name."""
        return np.random.default_rng([self.key, zlib.crc32(name.encode())])

    def side_factor(self, name: str, sd: float) -> float:
        """Size factor of one side of a paired structure: log-normal (sd in log units, cut at
        2.5 sd), keyed by ``name``, so the two sides of a pair differ per patient (atrophy,
        hypertrophy, handedness) and the ``symmetry`` probe has both larger sides to find."""
        z = float(np.clip(self.rng(f"side/{name}").normal(0.0, 1.0), -2.5, 2.5))
        return float(np.exp(sd * z))

    def to_json(self) -> dict:
        d = asdict(self)
        d["shift"], d["hu_offsets"] = list(self.shift), [round(v, 3) for v in self.hu_offsets]
        return d

    # --- deterministic anatomy helpers --------------------------------------------------

    def z(self, z_ref: float) -> float:
        """Reference height (mm above the pubis) -> this patient's height."""
        return z_ref * self.length

    def vertebra(self, name: str) -> tuple[float, float]:
        """(bottom, top) of a vertebral body, mm."""
        for _, n, lo, hi in VERTEBRAE:
            if n == name:
                return self.z(lo), self.z(hi)
        raise KeyError(name)

    def spine_y(self, z: float | np.ndarray) -> float | np.ndarray:
        """y (mm) of the vertebral body centre at height z."""
        return np.interp(np.asarray(z) / self.length, _SPINE_Z, _SPINE_Y) * self.frame

    @property
    def cavity(self) -> tuple[float, float, float]:
        """Half-width, anterior and posterior extent of the body cavity at the upper abdomen."""
        grow = 1.0 + 0.12 * self.visceral
        return 124.0 * self.frame * grow, 76.0 * self.frame * grow, 108.0 * self.frame


def draw_habitus(rng: np.random.Generator, n_tissues: int) -> Habitus:
    """Draw one patient's global parameters."""
    fat = float(np.clip(rng.lognormal(np.log(18.0), 0.5), 6.0, 70.0))
    return Habitus(
        key=int(rng.integers(2**62)),
        frame=float(np.clip(rng.normal(1.0, 0.05), 0.88, 1.12)),
        length=float(np.clip(rng.normal(1.0, 0.035), 0.92, 1.08)),
        fat_mm=fat,
        visceral=float(np.clip(rng.beta(2.0, 3.0) + (fat - 18.0) / 80.0, 0.0, 1.0)),
        muscle=float(np.clip(rng.normal(1.0, 0.12), 0.7, 1.3)),
        shift=(float(rng.normal(0.0, 6.0)), float(rng.normal(0.0, 5.0))),
        rotation=float(rng.normal(0.0, 2.0)),
        noise_sd=float(rng.uniform(9.0, 16.0)),
        hu_offsets=tuple(float(v) for v in rng.uniform(-1.0, 1.0, n_tissues)),
    )
