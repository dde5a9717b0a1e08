"""SPAR probe tasks (Levels 1-3): definitions, per-slice sample planning, labels, chance levels.

Planning is pure: ``plan_task(task, slices, rng, rules)`` turns one case's per-slice structure
stats into :class:`Plan` records (which slice, which structures, which rotation/flip variant,
where the dots go, the target); ``probes.build`` renders them. ``finalize_task`` runs once all
cases are planned and split: it fills targets that need the training split (``size``), and
computes each task's :class:`TaskInfo` (counts, chance level).

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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import ndimage

from radspatial.core.labels import side_pairs
from radspatial.core.rules import RELPOS_DOMINANCE, QuestionRules
from radspatial.imaging.markers import dot_extent, marker_area
from radspatial.imaging.slices import (
    VARIANTS,
    StructureStat,
    Variant,
    component_areas,
    referenceable,
)

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
    "size": TaskDef(3, "classification", ("q1", "q2", "q3", "q4"), 0.25),
    "distance": TaskDef(3, "classification", ("red_blue", "green_yellow"), 0.5),
    "count": TaskDef(3, "classification", COUNT_CLASSES, None),
    "relpos_organ": TaskDef(3, "classification", ("left", "right", "above", "below"), 0.25),
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
}


@dataclass(frozen=True)
class Rules:
    """Probe image sizes, and the benchmark's thresholds (``core.rules``, px of a 512 px image)
    scaled from ``reference`` px to ``size``."""

    size: int
    crop: int
    reference: int = REFERENCE_PX
    thresholds: QuestionRules = field(default_factory=QuestionRules)
    dominance: float = RELPOS_DOMINANCE

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
        return 2 * marker_area(self.size)

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


def _cycle(rng: np.random.Generator, k: int) -> Iterator[int]:
    """Class indices in successive shuffled orders: balanced over every k draws."""
    while True:
        yield from (int(i) for i in rng.permutation(k))


def _variant(rng: np.random.Generator) -> str:
    return VARIANTS[int(rng.integers(len(VARIANTS)))]


def _dot(colour: str, s: StructureStat, variant: str, rules: Rules) -> Dot:
    shown = Variant(variant).apply_point(s.marker_xy, rules.size)
    return Dot(colour, s.label_id, rules.drawn(shown))


def crop_plans(slices: Sequence[SliceView], rules: Rules) -> list[tuple[int, StructureStat]]:
    return [(v.z, s) for v in slices for s in eligible(v, rules)]


def _plan_localize(crops, rng, rules) -> list[Plan]:
    plans = []
    for z, s in crops:
        target = [round((c + 0.5) / rules.size, 6) for c in s.center_xy]
        info = {"center_xy": [round(c, 3) for c in s.center_xy], "area_px": round(s.area_px, 2)}
        plans.append(Plan("localize", z, STANDARD, (s.label_id,), target, info=info))
    return plans


def _plan_permutation(crops, rng, rules) -> list[Plan]:
    plans = []
    for z, s in crops:
        perm = tuple(int(i) for i in rng.permutation(GRID * GRID))
        plans.append(Plan("permutation", z, STANDARD, (s.label_id,), list(perm), perm=perm))
    return plans


def _plan_relpos(slices, rng, rules) -> list[Plan]:
    plans, targets = [], _cycle(rng, 4)
    min_dist = rules.min_distance
    for view in slices:
        ok = eligible(view, rules)
        pairs = [
            (a, b)
            for i, a in enumerate(ok)
            for b in ok[i + 1 :]
            if math.dist(a.marker_xy, b.marker_xy) >= min_dist
        ]
        for p in rng.permutation(len(pairs)):
            options = []
            for red, blue in (pairs[p], pairs[p][::-1]):
                for v in VARIANTS:
                    dots = (_dot("red", red, v, rules), _dot("blue", blue, v, rules))
                    cls = relpos_class(dots[0].xy, dots[1].xy, rules)
                    if cls is not None:
                        options.append((cls, v, dots))
            if not options:
                continue
            t = next(targets)
            hits = [o for o in options if o[0] == t] or options
            cls, v, dots = hits[int(rng.integers(len(hits)))]
            ids = (dots[0].label_id, dots[1].label_id)
            plans.append(Plan("relpos", view.z, v, ids, cls, dots))
            break
    return plans


def _plan_orient(slices, rng, rules) -> list[Plan]:
    plans, targets = [], _cycle(rng, len(VARIANTS))
    for view in slices:
        if eligible(view, rules):
            t = next(targets)
            plans.append(Plan("orient", view.z, VARIANTS[t], (), t))
    return plans


def _plan_symmetry(slices, rng, rules) -> list[Plan]:
    plans = []
    for view in slices:
        ok = {s.label_id: s for s in eligible(view, rules)}
        for base, left, right in paired_structures(view.names):
            if left in ok and right in ok:
                al, ar = ok[left].area_px, ok[right].area_px
                t = symmetry_class(al, ar, rules.equal_tolerance)
                info = {"pair": base, "area_px": [round(al, 2), round(ar, 2)]}
                plans.append(Plan("symmetry", view.z, STANDARD, (left, right), t, info=info))
                break
    return plans


def _plan_size(slices, rng, rules) -> list[Plan]:
    plans = []
    for view in slices:
        ok = eligible(view, rules)
        if ok:
            s, v = ok[int(rng.integers(len(ok)))], _variant(rng)
            info = {
                "area_px": round(s.area_px, 2),
                "area_fraction": round(s.area_px / rules.size**2, 8),
            }
            dots = (_dot("red", s, v, rules),)
            plans.append(Plan("size", view.z, v, (s.label_id,), None, dots, info=info))
    return plans


def _plan_distance(slices, rng, rules, tries: int = 20) -> list[Plan]:
    plans, targets = [], _cycle(rng, 2)
    min_dist, apart = rules.min_distance, 2 * rules.dot_radius + 2
    for view in slices:
        ok = eligible(view, rules)
        if len(ok) < 4:
            continue
        for _ in range(tries):
            pick, v = [ok[int(i)] for i in rng.choice(len(ok), 4, replace=False)], _variant(rng)
            xy = [_dot("red", s, v, rules).xy for s in pick]
            d1, d2 = math.dist(xy[0], xy[1]), math.dist(xy[2], xy[3])
            if (
                min(d1, d2) < min_dist
                or abs(d1 - d2) < rules.equal_tolerance * max(d1, d2)
                or any(math.dist(p, q) < apart for i, p in enumerate(xy) for q in xy[:i])
            ):
                continue
            t = next(targets)
            if (d1 > d2) != (t == 0):  # swap which pair gets red/blue
                pick, xy, d1, d2 = pick[2:] + pick[:2], xy[2:] + xy[:2], d2, d1
            colours = ("red", "blue", "green", "yellow")
            dots = tuple(Dot(c, s.label_id, p) for c, s, p in zip(colours, pick, xy, strict=True))
            info = {"distances_px": [round(d1, 3), round(d2, 3)]}
            ids = tuple(s.label_id for s in pick)
            plans.append(Plan("distance", view.z, v, ids, t, dots, info=info))
            break
    return plans


def _plan_count(slices, rng, rules) -> list[Plan]:
    plans = []
    min_comp = rules.min_component
    for view in slices:
        by_class: dict[int, list[tuple[StructureStat, int]]] = {}
        boxes = ndimage.find_objects(view.lab)
        for label_id, s in sorted(view.stats.items()):
            if label_id not in view.names or s.area_px < rules.min_area:
                continue
            areas = component_areas(view.lab, label_id, boxes[label_id - 1], view.px_area)
            n = sum(a >= min_comp for a in areas)
            if n:
                by_class.setdefault(count_class(n), []).append((s, n))
        if not by_class:
            continue
        classes = sorted(by_class)
        t = classes[int(rng.integers(len(classes)))]
        s, n = by_class[t][int(rng.integers(len(by_class[t])))]
        v = _variant(rng)
        dots, info = (_dot("red", s, v, rules),), {"n_components": n}
        plans.append(Plan("count", view.z, v, (s.label_id,), t, dots, info=info))
    return plans


def organ_pair(view: SliceView, rules: Rules) -> tuple[StructureStat, StructureStat] | None:
    """The first :data:`ORGAN_PAIRS` pair referenceable in the slice and >= 50 px (@512) apart."""
    ok = {view.names[s.label_id]: s for s in eligible(view, rules)}
    min_dist = rules.min_distance
    for ref, tgt in ORGAN_PAIRS:
        if ref in ok and tgt in ok and math.dist(ok[ref].center_xy, ok[tgt].center_xy) >= min_dist:
            return ok[ref], ok[tgt]
    return None


def _plan_relpos_organ(slices, rng, rules) -> list[Plan]:
    plans, targets = [], _cycle(rng, 4)
    for view in slices:
        pair = organ_pair(view, rules)
        if pair is None:
            continue
        options = []
        for v in VARIANTS:
            ref, tgt = (Variant(v).apply_point(s.center_xy, rules.size) for s in pair)
            cls = relpos_class(ref, tgt, rules)
            if cls is not None:
                options.append((cls, v, ref, tgt))
        if not options:  # dominant axis ambiguous: the same in every variant
            continue
        t = next(targets)
        hits = [o for o in options if o[0] == t] or options
        cls, v, ref, tgt = hits[int(rng.integers(len(hits)))]
        info = {
            "pair": f"{view.names[pair[0].label_id]}->{view.names[pair[1].label_id]}",
            "centers_xy": [[round(c, 3) for c in ref], [round(c, 3) for c in tgt]],
        }
        ids = (pair[0].label_id, pair[1].label_id)
        plans.append(Plan("relpos_organ", view.z, v, ids, cls, info=info))
    return plans


_PLANNERS = {
    "relpos": _plan_relpos,
    "relpos_organ": _plan_relpos_organ,
    "orient": _plan_orient,
    "symmetry": _plan_symmetry,
    "size": _plan_size,
    "distance": _plan_distance,
    "count": _plan_count,
}


def plan_task(
    task: str,
    slices: Sequence[SliceView],
    rng: np.random.Generator,
    rules: Rules,
    crops: Sequence[tuple[int, StructureStat]] = (),
) -> list[Plan]:
    """All samples of one task for one case (``crops`` for localize/permutation)."""
    if task == "localize":
        return _plan_localize(crops, rng, rules)
    if task == "permutation":
        return _plan_permutation(crops, rng, rules)
    return _PLANNERS[task](slices, rng, rules)


def cap(items: list, rng: np.random.Generator, limit: int | None) -> list:
    """At most ``limit`` items, a random subset kept in order."""
    if limit is None or len(items) <= limit:
        return items
    keep = sorted(int(i) for i in rng.choice(len(items), limit, replace=False))
    return [items[i] for i in keep]
