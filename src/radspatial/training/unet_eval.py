"""Evaluation of a ``unet`` model on a dataset made with ``--export-masks``: per-structure Dice
(pixels pooled over slices) and centroid error, and RQ1 accuracy of ``verify_relation`` on its
centres against the ``mask`` oracle's."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from radspatial.agent.localizers.mask.mask_localizer import MaskLocalizer
from radspatial.nets import unet
from radspatial.questions import is_mirp_type
from radspatial.questions.records import Context, Ref
from radspatial.questions.relative_position import verify_relation


@dataclass
class _Tally:
    """Running counts for one structure over the evaluated slices."""

    tp: int = 0
    fp: int = 0
    fn: int = 0
    present: int = 0  # slices whose ground truth has it
    found: int = 0  # ... where the localizer found it
    false_slices: int = 0  # slices without it where the network predicted it
    errors: list[float] = field(default_factory=list)  # centroid error, px


def _largest_centroid(region: np.ndarray) -> tuple[float, float]:
    from scipy import ndimage

    comp, _ = ndimage.label(region, structure=np.ones((3, 3), bool))
    ys, xs = np.nonzero(comp == np.argmax(np.bincount(comp.ravel())[1:]) + 1)
    return float(xs.mean()), float(ys.mean())


def _score_slice(
    model: unet.UNetModel, pred: unet.Prediction, mask: np.ndarray, tallies: dict[int, _Tally]
) -> None:
    """Pixel counts, and centroid error: the largest predicted component against the largest
    ground-truth component (the same rule; for single-component structures, the only ones RQ1
    asks about, that is the ``mask`` oracle's centre)."""
    ids = (set(np.unique(mask).tolist()) - {0}) | {i for i, _ in model.classes[1:]}
    for label_id in ids:
        cls = model.class_of(label_id)
        gt = mask == label_id
        pr = pred.labels == cls if cls is not None else np.zeros_like(gt)
        t = tallies[label_id]
        t.tp += int((gt & pr).sum())
        t.fp += int((~gt & pr).sum())
        t.fn += int((gt & ~pr).sum())
        if not gt.any():
            t.false_slices += int(pr.any())
            continue
        t.present += 1
        found = None if cls is None else unet.found_for_class(pred, cls, label_id, "eval")
        if found is not None:
            t.found += 1
            t.errors.append(math.dist(found.xy, _largest_centroid(gt)))


def _score_questions(
    model: unet.UNetModel,
    pred: unet.Prediction,
    image: np.ndarray,
    mask: np.ndarray,
    rows: tuple[dict, ...],
    counts: Counter,
) -> None:
    """RQ1 questions decided by ``verify_relation`` on unet centres (refs by name) and, for
    reference, on the ``mask`` oracle's centres."""
    oracle = MaskLocalizer()
    for row in rows:
        if not is_mirp_type(row.get("question_type")):
            counts["skipped_other_types"] += 1  # SPAR-VQA rows: sizes, counts, ... not scored here
            continue
        objs = (row["object1"], row["object2"])
        found = unet.locate_refs(model, pred, [Ref(name=o["name"]) for o in objs])
        refs = [Ref(marker="numbers", text=str(o["label_id"])) for o in objs]
        truth = oracle.locate(image, refs, Context(mask=mask))
        for key, (f1, f2) in (("unet", found), ("oracle", truth)):
            answer = verify_relation(row["relation"], f1, f2).answer
            counts[f"{key}_correct"] += int(answer == row["answer"])
            counts[f"{key}_abstain"] += int(answer is None)
        counts["n"] += 1


def _question_summary(counts: Counter) -> dict[str, Any]:
    n = counts["n"]
    out: dict[str, Any] = {"n": n, "skipped_other_types": counts["skipped_other_types"]}
    for key in ("unet", "oracle"):
        correct, abstain = counts[f"{key}_correct"], counts[f"{key}_abstain"]
        out[key] = {
            "accuracy": round(correct / n, 4) if n else None,  # abstain counts as wrong
            "abstain_rate": round(abstain / n, 4) if n else None,
            "accuracy_answered": round(correct / (n - abstain), 4) if n > abstain else None,
        }
    return out


def _structure_summary(label_id: int, name: str, t: _Tally, in_model: bool) -> dict[str, Any]:
    denom = 2 * t.tp + t.fp + t.fn
    err = np.asarray(t.errors)
    return {
        "label_id": label_id,
        "name": name,
        "in_model": in_model,
        "dice": round(2 * t.tp / denom, 4) if denom else None,
        "n_slices_present": t.present,
        "n_found": t.found,
        "n_false_slices": t.false_slices,
        "centroid_error_px": None
        if not err.size
        else {
            "mean": round(float(err.mean()), 2),
            "median": round(float(np.median(err)), 2),
            "max": round(float(err.max()), 2),
        },
    }


def evaluate_unet(
    model_dir: Path, data: Path, *, split: str = "all", device: str = "cpu"
) -> dict[str, Any]:
    """Per-structure Dice (pixels pooled over slices) and centroid error, plus RQ1 accuracy.

    ``split="val"`` keeps the slices the model was validated on (same dataset only); ``"all"``
    every RQ1 slice of ``data`` (another volume).
    """
    model = unet.load_model(model_dir, device)
    items = unet.read_slices(data)
    if split == "val":
        keep = set(model.config["split"].get("val", []))
        items = [it for it in items if it.base_name in keep]
    elif split != "all":
        raise ValueError(f"split must be 'val' or 'all', got {split!r}")
    names = {**unet.label_names(data, items), **dict(model.classes)}
    tallies: dict[int, _Tally] = defaultdict(_Tally)
    counts: Counter = Counter()
    for item in items:
        image, mask = unet.load_pair(data, item)
        pred = model.predict(image)
        _score_slice(model, pred, mask, tallies)
        _score_questions(model, pred, image, mask, item.rows, counts)
    structures = {
        names.get(i, f"label_{i}"): _structure_summary(
            i, names.get(i, f"label_{i}"), tallies[i], model.class_of(i) is not None
        )
        for i in sorted(tallies)
    }
    scored = [s for s in structures.values() if s["n_slices_present"] and s["in_model"]]
    return {
        "model": str(model_dir),
        "data": str(data),
        "split": split,
        "n_slices": len(items),
        "slices": [it.base_name for it in items],
        "mean_dice": round(float(np.mean([s["dice"] for s in scored])), 4) if scored else None,
        "dice": {n: s["dice"] for n, s in structures.items() if s["n_slices_present"]},
        "structures": structures,
        "questions": _question_summary(counts),
    }
