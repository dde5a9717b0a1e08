"""CT-like training slices synthesised from label maps (the SynthSeg idea, adapted to CT).

A label map without its image still holds real anatomy: shapes, sizes, positions, sides. This
module draws a CT slice for it. Random parameters are drawn first (:func:`draw_params`, from a
``numpy`` generator: one :class:`SynthParams` per slice), then applied by a pure, deterministic
function (:func:`apply`), as TorchIO splits a transform's random draw from its application:
the same parameters always give the same image.

What is drawn, per slice (``draw_params``):

- a *contrast phase* (unenhanced to arterial): an enhancement factor ``e`` in [0, 2.2] adds
  ``e`` x the class's typical portal-venous enhancement (:data:`ENHANCEMENT`, textbook
  values, x U(0.6, 1.2) per class) to the HU measured on our real scans
  (``radspatial/data/ct_hu_table.json``, ``organs_hu``; patient A's scan is unenhanced:
  aorta 47 HU);
- per intensity class (liver, spleen, kidney, vessels, bone, lung, fat, muscle, bowel content,
  ...; :func:`intensity_class`) a mean around the table's mean (its spread between patients)
  and a texture spread (at most :data:`MAX_TEXTURE` HU; bone's smoother and brighter at the
  cortex); bowel and stomach content are air, fluid or soft tissue by draw;
- a *body outline* where the map has none: the labelled structures' closed, filled hull
  (for a partial map, one that labels organs only, first grown by 20-50 mm of unlabelled
  tissue), grown by a muscle wall and a subcutaneous fat layer of drawn thickness, then skin;
- image noise, blur, a lower in-plane resolution (down- then up-sampling), partial volume
  (the drawing is made at 2x and averaged down), and sometimes a smaller reconstruction field
  of view (air outside a disc).

The result is HU on the same grid as the labels; display windows, 8-bit quantisation (the
windowed-PNG round trip), the 8 rotation / flip views and zoom are added at training time by
``organs_augment`` exactly as for real slices.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from importlib import resources

import numpy as np

AIR = -1000.0
# typical enhancement over unenhanced CT in the portal venous phase (HU, textbook values):
# e = 1; arterial scans reach about e = 2 in the aorta
ENHANCEMENT = {
    "artery": 130.0,
    "vein": 120.0,
    "heart": 120.0,
    "liver": 55.0,
    "spleen": 70.0,
    "kidney": 120.0,
    "pancreas": 60.0,
    "gland": 40.0,
    "bowel_wall": 30.0,
}
PHASE_E = (0.0, 2.2)  # enhancement factor range (0: unenhanced, as patient A)
MAX_TEXTURE = {"bone": 120.0, "lumen": 25.0}  # HU; others 40
# name -> intensity class: first matching rule wins (substring of the TotalSegmentator name)
_CLASS_RULES = (
    ("lung", "lung"),
    ("trachea", "air_tube"),
    ("kidney_cyst", "fluid"),
    ("kidney", "kidney"),
    ("liver", "liver"),
    ("spleen", "spleen"),
    ("pancreas", "pancreas"),
    ("gallbladder", "fluid"),
    ("urinary_bladder", "fluid"),
    ("stomach", "lumen"),
    ("duodenum", "lumen"),
    ("small_bowel", "lumen"),
    ("colon", "lumen"),
    ("esophagus", "bowel_wall"),
    ("heart", "heart"),
    ("atrial", "heart"),
    ("aorta", "artery"),
    ("artery", "artery"),
    ("brachiocephalic_trunk", "artery"),
    ("pulmonary_vein", "artery"),
    ("vena", "vein"),
    ("vein", "vein"),
    ("cartilage", "cartilage"),
    ("spinal_cord", "cord"),
    ("brain", "cord"),
    ("gland", "gland"),
    ("prostate", "gland"),
    ("vertebrae", "bone"),
    ("rib", "bone"),
    ("sacrum", "bone"),
    ("hip", "bone"),
    ("femur", "bone"),
    ("humerus", "bone"),
    ("scapula", "bone"),
    ("clavicula", "bone"),
    ("sternum", "bone"),
    ("skull", "bone"),
)


def intensity_class(name: str) -> str:
    """The intensity class of a structure name (``muscle`` for anything not listed: the
    TotalSegmentator structures left are muscles)."""
    for key, cls in _CLASS_RULES:
        if key in name:
            return cls
    return "muscle"


@functools.cache
def hu_table() -> dict:
    """The shipped per-class HU statistics (``organs_hu`` measured them; provenance inside)."""
    text = resources.files("radspatial.data").joinpath("ct_hu_table.json").read_text()
    return json.loads(text)


@dataclass(frozen=True)
class SynthParams:
    """Everything random about one synthetic slice (``apply`` is deterministic given it)."""

    class_hu: tuple[tuple[str, float, float], ...]  # (class, mean HU, texture sd HU)
    fat_hu: float
    hull_mm: float  # unlabelled tissue around a partial map's organs
    fat_mm: float  # subcutaneous fat thickness
    wall_mm: float  # muscle wall thickness under it
    noise_hu: float
    blur_px: float
    res_factor: float  # in-plane resolution loss (1 = none)
    fov: float  # reconstruction disc radius / half image side (>= 1.5: none)
    texture_seed: int
    enhancement: float

    def hu_of(self, cls: str) -> tuple[float, float]:
        for c, mean, sd in self.class_hu:
            if c == cls:
                return mean, sd
        return 40.0, 10.0


def _class_mean(rng: np.random.Generator, cls: str, stats: dict, e: float) -> float:
    mean, between = stats["mean"], stats.get("between_sd", 15.0)
    if cls == "lumen":  # stomach / bowel content: air, fluid or soft tissue
        return float(rng.choice([-850.0, 10.0, 40.0, -300.0], p=[0.3, 0.3, 0.3, 0.1]))
    mean += e * ENHANCEMENT.get(cls, 0.0) * float(rng.uniform(0.6, 1.2))
    return float(mean + rng.normal(0.0, between))


def draw_params(
    rng: np.random.Generator, classes: tuple[str, ...], complete: bool = True
) -> SynthParams:
    """One slice's random parameters for the intensity ``classes`` it shows (``complete``:
    the map labels every structure of its level, so the body is close around them)."""
    table = hu_table()["classes"]
    e = float(rng.uniform(*PHASE_E))
    class_hu = []
    for cls in sorted(set(classes) | {"muscle"}):
        stats = table.get(cls, {"mean": 40.0, "within_sd": 15.0})
        sd = min(MAX_TEXTURE.get(cls, 40.0), stats.get("within_sd", 15.0))
        sd *= float(rng.uniform(0.4, 1.4))
        class_hu.append((cls, _class_mean(rng, cls, stats, e), sd))
    fat = table.get("fat", {"mean": -100.0, "between_sd": 10.0})
    fov = float(rng.uniform(0.8, 1.1)) if rng.random() < 0.25 else 2.0
    return SynthParams(
        class_hu=tuple(class_hu),
        fat_hu=float(fat["mean"] + rng.normal(0.0, fat.get("between_sd", 10.0))),
        hull_mm=0.0 if complete else float(rng.uniform(20.0, 50.0)),
        fat_mm=float(rng.uniform(4.0, 35.0)),
        wall_mm=float(rng.uniform(3.0, 12.0)),
        noise_hu=float(rng.uniform(3.0, 30.0)),
        blur_px=float(rng.uniform(0.0, 1.2)),
        res_factor=float(rng.uniform(1.0, 2.5)) if rng.random() < 0.4 else 1.0,
        fov=fov,
        texture_seed=int(rng.integers(0, 2**31 - 1)),
        enhancement=e,
    )


def body_outline(
    lab: np.ndarray, px_mm: float, wall_mm: float, fat_mm: float, hull_mm: float = 0.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(inner hull, muscle wall, subcutaneous fat) masks from the labelled pixels: the hull is
    their union closed over 20 mm, filled and grown by ``hull_mm``; the wall and the fat are
    rings grown around it."""
    from scipy import ndimage

    fg = lab > 0
    if not fg.any():
        z = np.zeros_like(fg)
        return z, z, z
    hull = disk_closing(fg, max(1, round(20.0 / px_mm)))
    hull = ndimage.binary_fill_holes(hull | fg)
    if hull_mm > 0:
        hull = ndimage.distance_transform_edt(~hull) * px_mm <= hull_mm
    dist = ndimage.distance_transform_edt(~hull) * px_mm
    wall = (dist > 0) & (dist <= wall_mm)
    fat = (dist > wall_mm) & (dist <= wall_mm + fat_mm)
    return hull, wall, fat


def disk_closing(fg: np.ndarray, r: int) -> np.ndarray:
    """``binary_closing`` of ``fg`` (padded: nothing lost at its edges) by a disk of radius
    ``r`` px, as two Euclidean distance transforms: the same pixels (a pixel is within ``r`` of
    another exactly when the disk holds their offset) in milliseconds, where the disk as a
    structuring element took seconds at 512 px (r ~ 128 px on a small label map)."""
    from scipy import ndimage

    pad = r + 1
    dilated = ndimage.distance_transform_edt(~np.pad(fg, pad)) <= r
    closed = ndimage.distance_transform_edt(np.pad(dilated, pad)) > r  # outside: background
    return closed[2 * pad : -2 * pad, 2 * pad : -2 * pad]


def _smooth_noise(rng: np.random.Generator, shape: tuple[int, int], sigma: float) -> np.ndarray:
    from scipy import ndimage

    n = ndimage.gaussian_filter(rng.standard_normal(shape), sigma)
    return n / (n.std() + 1e-6)


def apply(lab: np.ndarray, names: dict[int, str], px_mm: float, p: SynthParams) -> np.ndarray:
    """HU image (float32, ``lab``'s grid) of the label slice ``lab`` (grouped ids; ``names``:
    id -> structure name; other ids, e.g. the unknown value, are drawn as soft tissue),
    ``px_mm`` mm per pixel. Deterministic given ``p``."""
    from scipy import ndimage

    up = np.kron(lab, np.ones((2, 2), lab.dtype))  # drawn at 2x: partial volume when averaged
    rng = np.random.default_rng(p.texture_seed)
    hull, wall, fat = body_outline(up, px_mm / 2, p.wall_mm, p.fat_mm, p.hull_mm)
    hu = np.full(up.shape, AIR, np.float32)
    mix = _smooth_noise(rng, up.shape, 3.0)  # unlabelled interior: fat with soft-tissue islands
    hu[hull] = np.where(mix[hull] > 0.4, 30.0, p.fat_hu)
    hu[wall] = p.hu_of("muscle")[0]
    hu[fat] = p.fat_hu
    texture = _smooth_noise(rng, up.shape, 1.0)
    coarse = _smooth_noise(rng, up.shape, 2.5)  # bone: trabecular, smoother
    for label_id in np.unique(up).tolist():
        if label_id == 0 or label_id not in names:
            continue
        cls = intensity_class(names[label_id])
        mean, sd = p.hu_of(cls)
        m = up == label_id
        hu[m] = mean + sd * (coarse[m] if cls == "bone" else texture[m])
        if cls == "bone":  # cortex: a brighter rim
            rim = m & ~ndimage.binary_erosion(m)
            hu[rim] += 350.0
    skin = (ndimage.distance_transform_edt(hu > -500) <= 2) & (hu > -500)
    hu[skin] = 40.0
    hu = hu.reshape(lab.shape[0], 2, lab.shape[1], 2).mean(axis=(1, 3))
    return _degrade(hu, p, rng)


def _degrade(hu: np.ndarray, p: SynthParams, rng: np.random.Generator) -> np.ndarray:
    """Resolution loss, blur, noise and a field-of-view disc, in that order."""
    from scipy import ndimage

    if p.res_factor > 1.05:
        small = ndimage.zoom(hu, 1 / p.res_factor, order=1)
        hu = ndimage.zoom(small, np.array(hu.shape) / np.array(small.shape), order=1)
    if p.blur_px > 0.2:
        hu = ndimage.gaussian_filter(hu, p.blur_px)
    hu = hu + p.noise_hu * rng.standard_normal(hu.shape)
    if p.fov < 1.5:
        h, w = hu.shape
        y, x = np.ogrid[:h, :w]
        r = p.fov * min(h, w) / 2
        hu[(x - (w - 1) / 2) ** 2 + (y - (h - 1) / 2) ** 2 > r * r] = AIR
    return np.clip(hu, -1024.0, 3071.0).astype(np.float32)


def synth_slice(
    lab: np.ndarray,
    names: dict[int, str],
    px_mm: float,
    rng: np.random.Generator,
    complete: bool = True,
) -> tuple[np.ndarray, SynthParams]:
    """Draw parameters for ``lab`` from ``rng`` and apply them: (HU image, parameters)."""
    classes = tuple(intensity_class(names[i]) for i in np.unique(lab).tolist() if i in names)
    p = draw_params(rng, classes, complete)
    return apply(lab, names, px_mm, p), p


def mean_slice(
    lab: np.ndarray, names: dict[int, str], px_mm: float, complete: bool = True
) -> np.ndarray:
    """The deterministic 'typical' image of a label slice: every class at the table's mean
    (as measured, e = 1), mid-thickness fat and wall, no noise, blur or field-of-view cut.
    The atlas uses it as the grey of patients that have no image."""
    table = hu_table()["classes"]
    classes = sorted({intensity_class(n) for n in names.values()} | {"muscle"})
    class_hu = tuple(
        (c, float(table.get(c, {"mean": 40.0})["mean"]) if c != "lumen" else 10.0, 0.0)
        for c in classes
    )
    fat, hull = float(table["fat"]["mean"]), 0.0 if complete else 35.0
    p = SynthParams(class_hu, fat, hull, 15.0, 7.0, 0.0, 0.0, 1.0, 2.0, 0, 1.0)
    return apply(lab, names, px_mm, p)
