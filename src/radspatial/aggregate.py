"""Metrics from result rows: per run, across runs (mean +- std), Wilson CIs, breakdowns,
image-frame vs canonical-frame (anatomical) correctness, McNemar between runs.

Invalid answers (parsed None) count as wrong and are reported as the invalid rate. Errors (calls
that failed after every retry: no answer at all) are left out of every metric and counted apart
(``n_errors``).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from itertools import combinations
from typing import Any

from radspatial.questions import chance_levels
from radspatial.scoring import binary_metrics, mcnemar, mean_std, wilson_interval

Row = dict[str, Any]
_RELPOS = "relative_position"


def _nan_to_none(x: float) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(x, 6)


def group_metrics(rows: Sequence[Row], runs: int, *, target: str = "expected") -> dict[str, Any]:
    """Metrics of one group of rows (all runs), scored against ``target``."""
    per_run = []
    correct_total = n_total = 0
    for run in range(runs):
        sub = [r for r in rows if r["run"] == run and r[target] is not None]
        if not sub:
            continue
        m = binary_metrics([r[target] for r in sub], [r["parsed"] for r in sub])
        per_run.append(m)
        correct_total += m.correct
        n_total += m.n
    if not per_run:
        return {"n_items": 0}
    acc_mean, acc_std = mean_std([m.accuracy for m in per_run])
    f1_mean, f1_std = mean_std([m.f1 for m in per_run])
    lo, hi = wilson_interval(correct_total, n_total)
    yes = [m.yes_rate for m in per_run if not math.isnan(m.yes_rate)]
    return {
        "n_items": per_run[0].n,
        "runs": len(per_run),
        "accuracy_mean": _nan_to_none(acc_mean),
        "accuracy_std": _nan_to_none(acc_std),
        "f1_mean": _nan_to_none(f1_mean),
        "f1_std": _nan_to_none(f1_std),
        "ci_low": _nan_to_none(lo),  # Wilson 95% on all runs' answers pooled
        "ci_high": _nan_to_none(hi),
        "invalid_rate": _nan_to_none(sum(m.invalid_rate for m in per_run) / len(per_run)),
        "yes_rate": _nan_to_none(sum(yes) / len(yes)) if yes else None,
        "per_run": [m.to_json() for m in per_run],
    }


def _by(rows: Sequence[Row], key: Callable[[Row], str | None], runs: int) -> dict[str, Any]:
    groups: dict[str, list[Row]] = defaultdict(list)
    for r in rows:
        k = key(r)
        if k is not None:
            groups[k].append(r)
    return {k: group_metrics(v, runs) for k, v in sorted(groups.items())}


_AXES = {"left_right": ("left_of", "right_of"), "above_below": ("above", "below")}


def frame_metrics(rows: Sequence[Row], runs: int) -> dict[str, Any]:
    """Image-frame vs canonical-frame correctness per relation axis.

    ``conflict`` keeps the items whose answer in the shown image differs from the answer in
    standard view: there, a model that recites anatomy scores high on ``canonical`` and low on
    ``image``. Left/right is MIRP's RQ3(1); above/below is our extension.
    """
    out: dict[str, Any] = {}
    for axis, relations in _AXES.items():
        sub = [
            r for r in rows if r["relation"] in relations and r["expected_canonical"] is not None
        ]
        if not sub:
            continue
        conflict = [r for r in sub if r["expected"] != r["expected_canonical"]]
        out[axis] = {
            "image": group_metrics(sub, runs),
            "canonical": group_metrics(sub, runs, target="expected_canonical"),
            "conflict_image": group_metrics(conflict, runs),
            "conflict_canonical": group_metrics(conflict, runs, target="expected_canonical"),
        }
    return out


def run_agreement(rows: Sequence[Row], runs: int) -> dict[str, Any]:
    """McNemar's test between each pair of runs on the same items."""
    by_run: dict[int, dict[str, bool]] = defaultdict(dict)
    for r in rows:
        by_run[r["run"]][r["id"]] = bool(r["correct"])
    out = {}
    for a, b in combinations(range(runs), 2):
        ids = sorted(set(by_run[a]) & set(by_run[b]))
        if ids:
            t = mcnemar([by_run[a][i] for i in ids], [by_run[b][i] for i in ids])
            out[f"{a}_vs_{b}"] = {
                "b": t.b,
                "c": t.c,
                "statistic": t.statistic,
                "p_value": t.p_value,
                "method": t.method,
            }
    return out


def compute_metrics(rows: Sequence[Row], *, model: str, runs: int) -> dict[str, Any]:
    errors = sum(1 for r in rows if r.get("error"))
    rows = [r for r in rows if not r.get("error")]  # no answer: neither right nor wrong
    return {
        "model": model,
        "runs": runs,
        "n_rows": len(rows) + errors,
        "errors": errors,
        "n_errors": errors,
        "overall": group_metrics(rows, runs),
        "by_setup_marker": _by(rows, lambda r: f"{r['setup']}/{r['marker']}", runs),
        "by_setup": _by(rows, lambda r: r["setup"], runs),
        "by_question_type": {
            k: {**v, "chance": chance_levels().get(k)}
            for k, v in _by(rows, lambda r: r.get("question_type", _RELPOS), runs).items()
        },
        "by_question_type_setup_marker": _by(
            rows, lambda r: f"{r.get('question_type', _RELPOS)}|{r['setup']}/{r['marker']}", runs
        ),
        "by_relation": _by(rows, lambda r: r["relation"], runs),
        "by_transform": _by(rows, lambda r: r["transform"], runs),
        "by_setup_transform": _by(
            rows,
            lambda r: f"{r['setup']}/{r['marker']}/{r['transform']}" if r["transform"] else None,
            runs,
        ),
        "by_variant": _by(rows, lambda r: r["variant"], runs),
        "by_pair": _by(rows, lambda r: r["pair"], runs),
        "frames": {
            setup: frame_metrics([r for r in rows if r["setup"] == setup], runs)
            for setup in ("rq1", "rq2", "rq3")
            if any(r["setup"] == setup for r in rows)
        },
        "run_agreement": run_agreement(rows, runs),
    }
