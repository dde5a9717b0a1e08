"""SPAR probe tasks (Levels 1-3): definitions, thresholds, sample records, labels, chance levels.

``probes.planning.plan_task`` turns one case's per-slice structure stats into :class:`Plan`
records (which slice, which structures, which rotation/flip variant, where the dots go, the
target); ``probes.build`` renders them. ``probes.splits.finalize_task`` runs once all cases are
planned and split: it fills targets that need the training split (``size``), and computes each
task's :class:`TaskInfo` (counts, chance level).

Choices where docs/probes.md leaves room (all recorded in probes.json):

- Classification targets are class *indices* into ``TaskInfo.classes``; ``meta["class"]`` holds
  the name. ``localize`` targets are ``[(x + 0.5) / size, (y + 0.5) / size]`` of the centre of
  mass (pixel centres at integers), so [0, 1] spans the whole image.
- Structures referenced by a crop or a dot: one connected component and area >= twice the
  largest marker's area (the generator's rule). ``count`` drops the single-component rule and
  counts 8-connected components of at least ``min_component_ref`` px (at 512 px) so that a
  segmentation speck is not a component.
- Geometric thresholds are given at a 512 px reference and scaled to ``size``: relpos/distance
  pairs at least 50 px apart, relpos dominant axis >= 1.5x the other and >= 10 px.
- Dots sit at the generator's marker point (centre of mass, or the deepest interior point of a
  concave structure), drawn like ``markers.draw_marks``; labels use the drawn (clamped, rounded)
  positions, so they hold for the pixels the encoder sees.
- Whole-slice tasks take at most one sample per slice; relpos, orient and distance cycle their
  target through shuffled class orders (balanced), count first draws a class among those present
  in the slice, then a structure. Crop tasks take every referenced structure of every slice.
  ``localize`` and ``permutation`` share the same crops.
- ``symmetry``: the first pair, in the order of :data:`PAIR_PRIORITY` then alphabetically, whose
  two sides are both referenceable in the slice; ``left``/``right`` are the patient's sides;
  ``equal`` when |left - right| < 10% of the larger area.
- ``relpos_organ``: no markers. The pair is the first of :data:`ORGAN_PAIRS` whose two
  structures are referenceable (as above) and >= 50 px (@512) apart, so it is a function of the
  slice; its relation uses the centres of mass in the shown frame and ``relpos_class``; target
  cycling and the variant choice as relpos. ``meta["pair"]`` = "<reference>-><target>".
- Statistics "from the training split" (size quartile edges, localize mean, count majority) fall
  back to all samples when the training split has none for that task (``stats_from: "all"``);
  the localize chance is evaluated on the test split, or on all samples when it is empty.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from radspatial.core.labels import side_pairs
from radspatial.core.rules import MIN_SIZE_FACTOR, RELPOS_DOMINANCE, QuestionRules
from radspatial.imaging.markers import dot_extent, marker_area
from radspatial.imaging.slices import VARIANTS, StructureStat, referenceable

TASK_NAMES: tuple[str, ...] = (
    "localize",
    "permutation",
    "relpos",
    "orient",
    "symmetry",
    "size",
    "distance",
    "count",
    "relpos_organ",
)
# SPAR-Bench's class sets (Tables 1, 5; docs/probes.md): opt-in tasks whose samples are the
# source task's images with the targets mapped (relpos: left/right only, binary; orient: the
# four rotations and "mirrored"); the earlier 4- and 8-class forms keep their names
DERIVED: dict[str, tuple[str, dict[str, str]]] = {
    "relpos2": ("relpos", {"left": "left", "right": "right"}),
    "orient5": (
        "orient",
        {"B1": "standard", "B2": "rotated_90_ccw", "B3": "rotated_180", "B4": "rotated_90_cw"}
        | {f"A{k}": "mirrored" for k in range(1, 5)},
    ),
}
# SPAR's named next step: the symmetry samples (same slices, pairs, targets) drawn with the
# paired structures' mask in the blue channel (the grey slice stays in red and green, so no
# image information is lost): separates finding the organs from comparing them. Opt-in.
MASKED: dict[str, str] = {"symmetry_mask": "symmetry"}
ALL_TASKS: tuple[str, ...] = (*TASK_NAMES, *DERIVED, *MASKED)
SPLITS: tuple[str, ...] = ("train", "val", "test")
STANDARD = "B1"  # no flip, no rotation: the standard radiological view
GRID = 4  # permutation: GRID x GRID tiles
REFERENCE_PX = 512  # px sizes in docs/probes.md (localize error, thresholds) are at 512 px
PAIR_PRIORITY: tuple[str, ...] = ("kidney", "autochthon", "iliopsoas")
COUNT_CLASSES: tuple[str, ...] = ("1", "2", "3", "4", "5+")
CROP_TASKS: tuple[str, ...] = ("localize", "permutation")  # one sample per (slice, structure)
# relpos_organ: (reference, target) by name; a slice uses the first pair both of whose structures
# are referenceable and far enough apart. All three point from the patient's right to the
# patient's left in normal anatomy (image right in the standard radiological view).
ORGAN_PAIRS: tuple[tuple[str, str], ...] = (
    ("liver", "spleen"),
    ("kidney_right", "kidney_left"),
    ("liver", "stomach"),
)


@dataclass(frozen=True)
class TaskDef:
    level: int
    kind: str  # regression | classification | permutation
    classes: tuple[str, ...] | None
    chance: float | None  # None: computed from the data (localize, count)
    metric: str = "accuracy"


TASKS: dict[str, TaskDef] = {
    "localize": TaskDef(1, "regression", None, None, "mean_euclidean_distance_px"),
    "permutation": TaskDef(
        2, "permutation", None, 1 / math.factorial(GRID * GRID), "permutation_accuracy"
    ),
    "relpos": TaskDef(3, "classification", ("left", "right", "above", "below"), 0.25),
    "orient": TaskDef(3, "classification", VARIANTS, 1 / 8),
    "symmetry": TaskDef(3, "classification", ("left", "right", "equal"), 1 / 3),
    "symmetry_mask": TaskDef(3, "classification", ("left", "right", "equal"), 1 / 3),
    "size": TaskDef(3, "classification", ("q1", "q2", "q3", "q4"), 0.25),
    "distance": TaskDef(3, "classification", ("red_blue", "green_yellow"), 0.5),
    "count": TaskDef(3, "classification", COUNT_CLASSES, None),
    "relpos_organ": TaskDef(3, "classification", ("left", "right", "above", "below"), 0.25),
    "relpos2": TaskDef(3, "classification", ("left", "right"), 0.5),
    "orient5": TaskDef(
        3,
        "classification",
        ("standard", "rotated_90_ccw", "rotated_180", "rotated_90_cw", "mirrored"),
        0.2,
    ),
}
DESCRIPTIONS: dict[str, str] = {
    "localize": "organ crop -> organ centre [x, y] in the standard-view slice, in [0, 1]",
    "permutation": "shuffled 4x4 tiles of the organ crop -> perm[i] = original position of tile i",
    "relpos": "blue dot left/right/above/below the red dot in the shown image",
    "orient": "rotation/flip variant of the slice (A = flipped, 1..4 = 0/90/180/270 deg CCW)",
    "symmetry": "which side of a paired structure has the larger area (patient's side)",
    "size": "quartile of the red-dotted structure's area fraction (training-split edges)",
    "distance": "which dot pair is farther apart",
    "count": "connected components of the red-dotted structure in the slice",
    "relpos_organ": "no markers: where the second structure of a fixed named pair (liver->spleen,"
    " kidney_right->kidney_left, liver->stomach; first present) lies from the first, as shown",
    "symmetry_mask": "symmetry with the pair's mask as an input channel (blue; grey slice in"
    " red and green)",
    "relpos2": "SPAR's binary relative position: the relpos samples whose blue dot is left or"
    " right of the red dot",
    "orient5": "SPAR's five orientation classes: the orient samples as standard, rotated 90 ccw,"
    " 180, 90 cw, or mirrored (any rotation)",
}


def derive_rows(task: str, source_rows: list[dict]) -> list[dict]:
    """A derived task's rows from its source task's rows (same images, targets mapped)."""
    source, mapping = DERIVED[task]
    src_classes, classes = TASKS[source].classes, TASKS[task].classes
    assert src_classes is not None and classes is not None
    out = []
    for r in source_rows:
        code = src_classes[int(r["target"])]
        cls = mapping.get(code)
        # orient5: 4 of the 8 variants are mirrored; one in four of those samples is kept
        # (chosen by a hash of the id) so the five classes are about equally frequent
        if cls == "mirrored" and zlib.crc32(r["id"].encode()) % 4 != int(code[1]) - 1:
            continue
        if cls is not None:
            meta = {**r["meta"], "source_task": source}
            out.append({**r, "target": classes.index(cls), "meta": meta})
    return out


@dataclass(frozen=True)
class Rules:
    """Probe image sizes, and the benchmark's thresholds (``core.rules``, px of a 512 px image)
    scaled from ``reference`` px to ``size``."""

    size: int
    crop: int
    reference: int = REFERENCE_PX
    thresholds: QuestionRules = field(default_factory=QuestionRules)
    dominance: float = RELPOS_DOMINANCE
    # crop tasks: "keep" the tissue around the organ inside its bounding box, or "remove" it
    # (pixels outside the organ's mask black: SPAR-Bench's "tiles ... removed context")
    context: str = "keep"

    def px(self, ref_px: float) -> float:
        return ref_px * self.size / self.reference

    @property
    def min_distance(self) -> float:
        """Smallest distance between a pair's centres (relpos, distance, relpos_organ), px."""
        return self.px(self.thresholds.min_distance_px)

    @property
    def margin(self) -> float:
        """Smallest offset along relpos's dominant axis, px."""
        return self.px(self.thresholds.margin_px)

    @property
    def equal_tolerance(self) -> float:
        return self.thresholds.size_tolerance

    @property
    def min_component(self) -> float:
        """Smallest component ``count`` counts, output px (scales with the image area)."""
        return self.thresholds.min_component_px * (self.size / self.reference) ** 2

    @property
    def min_area(self) -> float:
        return MIN_SIZE_FACTOR * marker_area(self.size)

    @property
    def dot_radius(self) -> int:
        """Outer radius of a drawn dot (disc plus white ring), as ``markers.draw_marks`` draws."""
        return dot_extent(self.size)

    def drawn(self, xy: tuple[float, float]) -> tuple[int, int]:
        """Where a dot centred at shown-frame ``xy`` is drawn (clamped inside, rounded)."""
        h = self.dot_radius
        return (
            round(min(max(xy[0], h), self.size - 1 - h)),
            round(min(max(xy[1], h), self.size - 1 - h)),
        )


@dataclass(frozen=True, eq=False)
class SliceView:
    """One axial slice of a case: native display labels and their structure stats."""

    z: int
    lab: np.ndarray  # native radiological display labels [row, col]
    stats: dict[int, StructureStat]  # canonical output frame at Rules.size
    px_area: float  # output px per native pixel
    names: dict[int, str]


@dataclass(frozen=True)
class Dot:
    colour: str
    label_id: int
    xy: tuple[int, int]  # drawn centre, shown frame


@dataclass(frozen=True)
class Plan:
    """One sample before rendering."""

    task: str
    z: int
    variant: str
    label_ids: tuple[int, ...]
    target: Any  # JSON-safe; None until finalize_task for size
    dots: tuple[Dot, ...] = ()
    perm: tuple[int, ...] | None = None
    info: dict = field(default_factory=dict)  # task-specific meta

    @property
    def key(self) -> str:
        """Unique within (case, task): the slice, and the structure for crop tasks."""
        if self.task in CROP_TASKS:
            return f"z{self.z:03d}_l{self.label_ids[0]}"
        return f"z{self.z:03d}"


def eligible(view: SliceView, rules: Rules) -> list[StructureStat]:
    """Structures that may carry a dot or a crop: the generator's ``slices.referenceable``."""
    return referenceable(view.stats, view.names, rules.min_area)


def relpos_class(red: Sequence[float], blue: Sequence[float], rules: Rules) -> int | None:
    """Index into relpos classes of where blue lies from red, or None when ambiguous."""
    dx, dy = blue[0] - red[0], blue[1] - red[1]
    ax, ay, margin = abs(dx), abs(dy), rules.margin
    if ax >= rules.dominance * ay and ax >= margin:
        return 0 if dx < 0 else 1
    if ay >= rules.dominance * ax and ay >= margin:
        return 2 if dy < 0 else 3
    return None


def symmetry_class(area_left: float, area_right: float, tolerance: float) -> int:
    if abs(area_left - area_right) < tolerance * max(area_left, area_right):
        return 2
    return 0 if area_left > area_right else 1


def count_class(n_components: int) -> int:
    return min(n_components, len(COUNT_CLASSES)) - 1


def paired_structures(names: dict[int, str]) -> list[tuple[str, int, int]]:
    """(base name, left id, right id) of every left/right pair in a table, in priority order."""
    rank = {b: i for i, b in enumerate(PAIR_PRIORITY)}
    return sorted(side_pairs(names), key=lambda p: (rank.get(p[0], len(rank)), p[0]))
