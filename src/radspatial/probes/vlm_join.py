"""The probes of each VLM stage joined item by item with the model's answers.

A stage "knows" an item when its probe is right for at least two of the three seeds. Per stage
and read-out: accuracy (Wilson 95% CI; per-seed mean and sd), the 2x2 table of stage knows /
model answers right, and McNemar's test on it (``eval/metrics.mcnemar``: b = the stage knows
and the answer is wrong, c = the reverse), overall and per setup, marker and view (the shown
rotation/flip). The chain encoder -> projector -> language model -> answer is then walked:
each step's McNemar test between the two neighbours' per-item correctness, and the first step
where accuracy drops with p < 0.05 is where the information is lost (none: no such step).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from radspatial.core.stats import mcnemar, wilson_interval

ALPHA = 0.05
GROUPS = ("setup", "marker", "view")


def knows(predictions: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Right for at least two of three seeds (a majority of the seeds in general)."""
    right = predictions == targets[None, :]
    return right.sum(0) * 2 > right.shape[0]


def _accuracy(right: Sequence[bool]) -> dict[str, Any]:
    k, n = int(sum(bool(r) for r in right)), len(right)
    lo, hi = wilson_interval(k, n)
    return {"n": n, "correct": k, "accuracy": k / n if n else None, "ci95": [lo, hi]}


def table2x2(stage: Sequence[bool], answer: Sequence[bool]) -> dict[str, Any]:
    """Counts of (stage knows, model right) and McNemar's test of the two."""
    pairs = list(zip(stage, answer, strict=True))
    test = mcnemar(stage, answer)
    return {
        "knows_right": sum(s and a for s, a in pairs),
        "knows_wrong": sum(s and not a for s, a in pairs),
        "not_knows_right": sum(a and not s for s, a in pairs),
        "not_knows_wrong": sum(not s and not a for s, a in pairs),
        "mcnemar_p": test.p_value,
        "mcnemar_method": test.method,
    }


def stage_summary(
    right: np.ndarray, seed_right: np.ndarray, answer: np.ndarray, meta: Sequence[dict]
) -> dict[str, Any]:
    """One stage and read-out: accuracy, per-seed spread, 2x2 + McNemar overall and by group."""
    per_seed = seed_right.mean(axis=1)
    out = {
        **_accuracy(right.tolist()),
        "seed_accuracy": [float(a) for a in per_seed],
        "seed_mean": float(per_seed.mean()),
        "seed_sd": float(per_seed.std(ddof=1)) if len(per_seed) > 1 else 0.0,
        "vs_answer": table2x2(right.tolist(), answer.tolist()),
        "by": {},
    }
    for key in GROUPS:
        values = sorted({str(m[key]) for m in meta})
        rows = {}
        for v in values:
            pick = np.array([str(m[key]) == v for m in meta])
            rows[v] = {
                **_accuracy(right[pick].tolist()),
                "vs_answer": table2x2(right[pick].tolist(), answer[pick].tolist()),
            }
        out["by"][key] = rows
    return out


def chain(steps: Sequence[tuple[str, np.ndarray]]) -> dict[str, Any]:
    """The walk along the stages: each step's accuracy change and McNemar test, and the first
    step that loses information (accuracy drops, p < ``ALPHA``)."""
    walk, lost = [], None
    for (a, ra), (b, rb) in zip(steps, steps[1:], strict=False):
        test = mcnemar(ra.tolist(), rb.tolist())
        drop = float(ra.mean() - rb.mean())
        walk.append({"from": a, "to": b, "drop": drop, "b": test.b, "c": test.c,
                     "mcnemar_p": test.p_value})  # fmt: skip
        if lost is None and drop > 0 and test.p_value < ALPHA:
            lost = f"{a} -> {b}"
    return {"steps": walk, "lost_at": lost}


def item_rows(
    meta: Sequence[dict],
    stages: dict[str, dict[str, np.ndarray]],
    targets: np.ndarray,
    answer: np.ndarray,
) -> list[dict[str, Any]]:
    """items.jsonl: per item, one row per stage (read-outs' knows and per-seed predictions),
    then its ``answer`` row (the model's correctness)."""
    rows = []
    for i, m in enumerate(meta):
        for stage, preds in stages.items():
            row = {"id": m["id"], "stage": stage, **{k: m[k] for k in (*GROUPS, "relation")}}
            row["target"] = int(targets[i])
            for readout, p in preds.items():
                row[readout] = {
                    "right": bool(knows(p[:, i : i + 1], targets[i : i + 1])[0]),
                    "predictions": [int(v) for v in p[:, i]],
                }
            row["model_right"] = bool(answer[i])
            rows.append(row)
        head = {"id": m["id"], "stage": "answer", **{k: m[k] for k in (*GROUPS, "relation")}}
        rows.append({**head, "target": int(targets[i]), "model_right": bool(answer[i])})
    return rows


def summarize(
    stages: dict[str, dict[str, np.ndarray]], targets: np.ndarray, answer: np.ndarray, meta
) -> dict[str, Any]:
    """summary.json's numbers: per stage and read-out, the answer, chance and majority rows,
    and the chain per read-out."""
    out: dict[str, Any] = {"stages": {}, "answer": _accuracy(answer.tolist()), "chance": 0.5}
    majority = None
    for stage, preds in stages.items():
        out["stages"][stage] = {}
        for readout, p in preds.items():
            if readout == "majority":
                majority = p
                continue
            right = knows(p, targets)
            seed_right = p == targets[None, :]
            out["stages"][stage][readout] = stage_summary(right, seed_right, answer, meta)
    if majority is not None:
        out["majority"] = _accuracy(knows(majority, targets).tolist())
    readouts = sorted({r for s in out["stages"].values() for r in s})
    out["chain"] = {
        r: chain(
            [(s, knows(stages[s][r], targets)) for s in stages if r in stages[s]]
            + [("answer", answer.astype(bool))]
        )
        for r in readouts
    }
    return out
