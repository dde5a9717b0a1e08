"""Probe dataset splits (by case) and the per-task finishing pass over all cases' rows.

Splits are by case: cases are ordered by sha256("<seed>:<case id>") and cut into train/val/test
by the split fractions (largest remainder). Every split with a non-zero fraction gets at least
one case when there are enough cases, in the priority test, train, val: with one case
everything is test, with two one train and one test. The split counts depend on the number of
cases, so adding cases can move a case to another split (its images and targets stay the same,
except ``size`` targets, whose quartile edges come from the training split).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

import numpy as np

from radspatial.probes.data import SPLIT_NAMES, TaskInfo
from radspatial.probes.tasks import DESCRIPTIONS, GRID, REFERENCE_PX, TASKS


def split_counts(n: int, fractions: Sequence[float]) -> dict[str, int]:
    """Cases per split: largest remainder, then at least one per non-empty split if possible."""
    total = sum(fractions)
    quota = [n * f / total for f in fractions]
    counts = [math.floor(q) for q in quota]
    for i in sorted(range(3), key=lambda i: (counts[i] - quota[i], i))[: n - sum(counts)]:
        counts[i] += 1
    need = [i for i in (2, 0, 1) if fractions[i] > 0][:n]  # test, train, val
    for i in need:
        if counts[i] == 0:
            donor = max(
                (j for j in range(3) if counts[j] > (1 if j in need else 0)),
                key=lambda j: (counts[j], -j),
            )
            counts[donor] -= 1
            counts[i] += 1
    return dict(zip(SPLIT_NAMES, counts, strict=True))


def assign_splits(case_ids: Sequence[str], seed: int, fractions: Sequence[float]) -> dict[str, str]:
    """case id -> split: cases ordered by a hash of (seed, case id), cut by the fractions."""
    order = sorted(case_ids, key=lambda c: (hashlib.sha256(f"{seed}:{c}".encode()).hexdigest(), c))
    out: dict[str, str] = {}
    start = 0
    for split, k in split_counts(len(order), fractions).items():
        out.update({c: split for c in order[start : start + k]})
        start += k
    return out


def finalize_task(task: str, rows: list[dict]) -> tuple[list[dict], TaskInfo]:
    """Fill training-split-derived targets (size) and compute the task's TaskInfo."""
    d = TASKS[task]
    train = [r for r in rows if r["split"] == "train"]
    ref, stats_from = (train, "train") if train else (rows, "all")
    extra: dict = {"stats_from": stats_from}
    if task == "size":
        fracs = [r["meta"]["area_fraction"] for r in ref]
        edges = [round(float(e), 8) for e in np.quantile(fracs, [0.25, 0.5, 0.75])] if fracs else []
        rows = [{**r, "target": _quartile(r["meta"]["area_fraction"], edges)} for r in rows]
        extra["quartile_edges"] = edges
    counts = {s: sum(r["split"] == s for r in rows) for s in SPLIT_NAMES}
    chance = d.chance
    by_metric: dict[str, float] = {}
    if d.classes is not None:
        rows = [{**r, "meta": {**r["meta"], "class": d.classes[r["target"]]}} for r in rows]
        cc = {s: [0] * len(d.classes) for s in SPLIT_NAMES}
        for r in rows:
            cc[r["split"]][r["target"]] += 1
        extra["class_counts"] = cc
        if task == "count" and ref:
            chance = float(max(np.bincount([r["target"] for r in ref]))) / len(ref)
    elif task == "localize" and rows:
        mean = np.mean([r["target"] for r in ref], axis=0)
        test = [r for r in rows if r["split"] == "test"] or rows
        err = np.linalg.norm(np.array([r["target"] for r in test]) - mean, axis=1)
        chance = round(float(err.mean()) * REFERENCE_PX, 4)
        extra["mean_target"] = [round(float(m), 6) for m in mean]
    if chance is not None:
        by_metric[d.metric] = chance
    if task == "permutation":
        by_metric["tile_accuracy"] = 1 / GRID**2
    if task == "orient":
        by_metric["flip_accuracy"] = 0.5
    info = TaskInfo(
        level=d.level,
        kind=d.kind,
        n_classes=len(d.classes) if d.classes else None,
        classes=list(d.classes) if d.classes else None,
        chance=chance,
        metric=d.metric,
        reference_size_px=REFERENCE_PX if task == "localize" else None,
        counts=counts,
        description=DESCRIPTIONS[task],
        chance_by_metric=by_metric,
        **extra,
    )
    return rows, info


def _quartile(fraction: float, edges: Sequence[float]) -> int:
    return int(np.searchsorted(edges, fraction, side="right")) if edges else 0
