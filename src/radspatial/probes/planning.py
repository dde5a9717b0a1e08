"""Planning probe samples: one case's slices -> :class:`~radspatial.probes.tasks.Plan` records.

Pure: ``plan_task(task, slices, rng, rules)`` reads only its arguments, so a case plans the
same wherever it runs. What each task samples and why (balanced target cycling, one sample per
slice, the fixed organ pairs) is listed in :mod:`radspatial.probes.tasks`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import replace

import numpy as np
from scipy import ndimage

from radspatial.imaging.slices import VARIANTS, StructureStat, Variant, component_areas
from radspatial.probes.tasks import (
    GRID,
    MASKED,
    ORGAN_PAIRS,
    STANDARD,
    Dot,
    Plan,
    Rules,
    SliceView,
    count_class,
    eligible,
    paired_structures,
    relpos_class,
    symmetry_class,
)


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
    if task in MASKED:  # the source task's samples, drawn with the mask channel
        return [replace(p, task=task) for p in _PLANNERS[MASKED[task]](slices, rng, rules)]
    return _PLANNERS[task](slices, rng, rules)


def cap(items: list, rng: np.random.Generator, limit: int | None) -> list:
    """At most ``limit`` items, a random subset kept in order."""
    if limit is None or len(items) <= limit:
        return items
    keep = sorted(int(i) for i in rng.choice(len(items), limit, replace=False))
    return [items[i] for i in keep]
