"""Tissues and their Hounsfield values (unenhanced CT), plus the expected mean HU per structure.

The phantoms imitate an **unenhanced (native) abdominal CT**, like the bundled TotalSegmentator
example: blood, liver, spleen and muscle differ by only 10-20 HU, vessels are not bright.
Each tissue has a mean HU; every phantom shifts each mean by a few HU (its own "scanner
calibration" and patient), then adds correlated noise and partial-volume blur.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Tissue:
    name: str
    hu: float  # mean HU before per-phantom jitter
    jitter: float = 4.0  # +- HU drawn per phantom


TISSUES: tuple[Tissue, ...] = (
    Tissue("air", -1000.0, 0.0),  # index 0: outside the body
    Tissue("gas", -990.0, 5.0),  # bowel / stomach gas
    Tissue("lung", -860.0, 25.0),
    Tissue("fat", -100.0, 8.0),  # subcutaneous, retroperitoneal, renal sinus
    Tissue("visceral_fat", -95.0, 8.0),  # intraperitoneal fat between organs
    Tissue("skin", 30.0),
    Tissue("muscle", 50.0),
    Tissue("liver", 60.0, 6.0),
    Tissue("spleen", 48.0),
    Tissue("kidney_cortex", 36.0),
    Tissue("kidney_medulla", 28.0),
    Tissue("pancreas", 40.0),
    Tissue("adrenal", 28.0),
    Tissue("blood", 42.0),  # unenhanced vessels and heart chambers
    Tissue("myocardium", 48.0),
    Tissue("bile", 8.0),
    Tissue("urine", 8.0),
    Tissue("bowel_wall", 42.0),
    Tissue("fluid", 14.0, 6.0),  # small-bowel and gastric fluid
    Tissue("food", 30.0, 10.0),  # gastric content
    Tissue("stool", -60.0, 20.0),  # colonic content (mottled with gas bubbles)
    Tissue("cortical_bone", 850.0, 80.0),
    Tissue("cancellous_bone", 160.0, 30.0),
    Tissue("trabecular_bone", 330.0, 40.0),
    Tissue("disc", 85.0),
    Tissue("cartilage", 110.0, 15.0),
    Tissue("csf", 10.0),
    Tissue("cord", 32.0),
    Tissue("mass", 38.0),
    Tissue("necrosis", 15.0),
    Tissue("table", 150.0, 0.0),  # scanner couch
)

TISSUE_ID: dict[str, int] = {t.name: i for i, t in enumerate(TISSUES)}

# Documented mean HU under each structure's mask (after noise and blur), name -> (lo, hi).
# Composite structures (bowel with gas, bones with cortex and marrow) have wide ranges.
EXPECTED_HU: dict[str, tuple[float, float]] = {
    "liver": (45.0, 75.0),
    "spleen": (35.0, 62.0),
    "kidney": (20.0, 45.0),
    "pancreas": (15.0, 50.0),
    "gallbladder": (-5.0, 30.0),
    "urinary_bladder": (-5.0, 30.0),
    "aorta": (30.0, 75.0),
    "inferior_vena_cava": (30.0, 60.0),
    "portal_vein_and_splenic_vein": (25.0, 60.0),
    "iliac": (25.0, 75.0),
    "muscle": (35.0, 65.0),  # autochthon, iliopsoas, gluteus
    "spinal_cord": (15.0, 50.0),
    "vertebrae": (250.0, 550.0),
    "rib": (250.0, 700.0),
    "lung": (-880.0, -700.0),
    "stomach": (-700.0, 40.0),
    "colon": (-800.0, 0.0),
    "small_bowel": (-150.0, 40.0),
    "duodenum": (-400.0, 40.0),
    "heart": (35.0, 60.0),
    "mass": (20.0, 45.0),
}
