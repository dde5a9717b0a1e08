"""Metrics from result rows: per run, across runs (mean +- std), Wilson CIs, breakdowns,
correctness in three frames (image, standard view, anatomical), McNemar between runs, and MIRP's
own statistics (``mirp``: computed by MIRP's rules for every run, whatever its protocol), and
plain-slice RQ1 with coverage (``rq1_plain``, ``eval/rq1_plain.py``).

Invalid answers (parsed None) count as wrong and are reported as the invalid rate. The headline
(``headline``) is relative position on RQ1-RQ3, as MIRP's "Overall"; the blank-image ablation
and the SPAR-VQA types have their own entries, not pooled into it. Errors (calls
that failed after every retry: no answer at all) are left out of every metric and counted
apart (``n_errors``).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from itertools import combinations
from typing import Any

from radspatial.core.metrics_blocks import (
    Agreement,
    FrameMetrics,
    GroupMetrics,
    PlainRQ1,
    TypeGroup,
)
from radspatial.core.metrics_record import Metrics
from radspatial.core.records import DEFAULT_TYPE, ResultRow, metric_row
from radspatial.eval.clusters import clustered_fields
from radspatial.eval.metrics import binary_metrics, mcnemar, mean_std, wilson_interval
from radspatial.eval.mirp import mirp_block
from radspatial.eval.rq1_plain import plain_rq1
from radspatial.eval.subgroups import subgroup_metrics
from radspatial.grading.summary import open_metrics
from radspatial.questions import chance_levels, is_mirp_type
from radspatial.questions.frames import AXES, anatomical_from_standard

Row = dict[str, Any]
_RELPOS = DEFAULT_TYPE  # a row that names no type


def _nan_to_none(x: float) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(x, 6)


def _is_open(row: Row) -> bool:
    """An open answer (a word or a count), counted by ``metric_row`` as right/wrong/none."""
    return "grade" in row


def _per_run(rows: Sequence[Row], runs: int, target: str) -> dict[int, Any]:
    """Run index -> binary metrics of its scored rows (runs without any left out)."""
    out = {}
    for run in range(runs):
        sub = [r for r in rows if r["run"] == run and r[target] is not None]
        if sub:
            out[run] = binary_metrics([r[target] for r in sub], [r["parsed"] for r in sub])
    return out


def group_metrics(rows: Sequence[Row], runs: int, *, target: str = "expected") -> dict[str, Any]:
    """Metrics of one group of rows (all runs), scored against ``target``.

    One answer model for yes/no and open questions: accuracy, its CI and the invalid rate count
    every item (an open item is right when its grade is 1); F1 and the yes rate are properties
    of yes/no answers, so a group with open items takes them from its yes/no items alone
    (None where it has none) and says so in ``answers`` ("open" or "mixed")."""
    by_run = _per_run(rows, runs, target)
    if not by_run:
        return {"n_items": 0}
    per_run = list(by_run.values())
    n_open = sum(_is_open(r) for r in rows)
    by_run_binary = (
        by_run if not n_open else _per_run([r for r in rows if not _is_open(r)], runs, target)
    )
    binary = list(by_run_binary.values())
    acc_mean, acc_std = mean_std([m.accuracy for m in per_run])
    f1_mean, f1_std = mean_std([m.f1 for m in binary]) if binary else (math.nan, math.nan)
    correct_total, n_total = sum(m.correct for m in per_run), sum(m.n for m in per_run)
    lo, hi = wilson_interval(correct_total, n_total)
    yes = [m.yes_rate for m in binary if not math.isnan(m.yes_rate)]
    out = {
        "n_items": per_run[0].n,
        "runs": len(per_run),
        "accuracy_mean": _nan_to_none(acc_mean),
        "accuracy_std": _nan_to_none(acc_std),
        "f1_mean": _nan_to_none(f1_mean),
        "f1_std": _nan_to_none(f1_std),
        "ci_low": _nan_to_none(lo),  # Wilson 95% on all runs' answers pooled
        "ci_high": _nan_to_none(hi),
        # cluster-robust beside it where items share a slice or consistency group (clusters.py)
        **clustered_fields(rows, target),
        "invalid_rate": _nan_to_none(sum(m.invalid_rate for m in per_run) / len(per_run)),
        "yes_rate": _nan_to_none(sum(yes) / len(yes)) if yes else None,
        "per_run": [m.to_json() for m in per_run],
    }
    if n_open:
        out["answers"] = "open" if n_open == len(rows) else "mixed"
        for run, m in zip(by_run, out["per_run"], strict=True):  # a run's yes/no items alone
            yes_no = by_run_binary[run].to_json() if run in by_run_binary else {}
            m["f1"], m["yes_rate"] = yes_no.get("f1"), yes_no.get("yes_rate")
    return out


def _by(rows: Sequence[Row], key: Callable[[Row], str | None], runs: int) -> dict[str, Any]:
    groups: dict[str, list[Row]] = defaultdict(list)
    for r in rows:
        k = key(r)
        if k is not None:
            groups[k].append(r)
    return {k: group_metrics(v, runs) for k, v in sorted(groups.items())}


def _setup_transform(r: Row) -> str | None:
    return f"{r['setup']}/{r['marker']}/{r['transform']}" if r["transform"] else None


# the ``by_*`` sections of metrics.json: name -> the group key of a row (None: left out)
_SECTIONS: dict[str, Callable[[Row], str | None]] = {
    "by_setup_marker": lambda r: f"{r['setup']}/{r['marker']}",
    "by_setup": lambda r: r["setup"],
    "by_question_type_setup_marker": (
        lambda r: f"{r.get('question_type', _RELPOS)}|{r['setup']}/{r['marker']}"
    ),
    "by_relation": lambda r: r["relation"],
    "by_transform": lambda r: r["transform"],
    "by_setup_transform": _setup_transform,
    "by_variant": lambda r: r["variant"],
    "by_pair": lambda r: r["pair"],
}


def _frame_rows(rows: Sequence[Row]) -> list[Row]:
    """Rows with the standard and anatomical answers (older runs: ``expected_canonical`` is
    the standard view; the anatomical answer follows from it)."""
    out = []
    for r in rows:
        if "expected_standard" not in r and "expected_canonical" in r:
            std = r["expected_canonical"]
            r = {
                **r,
                "expected_standard": std,
                "expected_anatomical": anatomical_from_standard(r["relation"], std),
            }
        out.append(r)
    return out


def frame_metrics(rows: Sequence[Row], runs: int) -> dict[str, Any]:
    """Correctness in three frames per relation axis, on all items and where frames disagree.

    ``image``: the shown (rotated/flipped) image; ``standard``: the same words read in standard
    radiological view; ``anatomical``: the patient's frame (MIRP's RQ3(1): "left" is the
    patient's left). ``conflict_*`` keep the items whose image answer differs from the
    anatomical one (MIRP's "not aligned"; ``aligned_image`` the others), ``view_conflict_*``
    those whose image answer differs from the standard view's. A model that recites anatomy
    scores high on ``anatomical`` and low on ``image`` there. Left/right is MIRP's; above/below
    (anterior/posterior) is our extension.
    """
    out: dict[str, Any] = {}
    rows = _frame_rows(rows)
    for axis in AXES:
        sub = [
            r
            for r in rows
            if r["relation"] in axis.relations
            and r.get("expected_standard") is not None
            and r.get("expected_anatomical") is not None
        ]
        if not sub:
            continue
        conflict = [r for r in sub if r["expected"] != r["expected_anatomical"]]
        aligned = [r for r in sub if r["expected"] == r["expected_anatomical"]]
        view = [r for r in sub if r["expected"] != r["expected_standard"]]
        out[axis.name] = {
            "image": group_metrics(sub, runs),
            "standard": group_metrics(sub, runs, target="expected_standard"),
            "anatomical": group_metrics(sub, runs, target="expected_anatomical"),
            "aligned_image": group_metrics(aligned, runs),
            "conflict_image": group_metrics(conflict, runs),
            "conflict_anatomical": group_metrics(conflict, runs, target="expected_anatomical"),
            "view_conflict_image": group_metrics(view, runs),
            "view_conflict_standard": group_metrics(view, runs, target="expected_standard"),
        }
    return out


def _is_headline(r: Row) -> bool:
    return is_mirp_type(r.get("question_type")) and r["setup"] in ("rq1", "rq2", "rq3")


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


def _groups(section: dict[str, Any]) -> dict[str, GroupMetrics]:
    return {k: GroupMetrics.from_json(g, f"group {k}") for k, g in section.items()}


def _frames(axes: dict[str, Any]) -> dict[str, FrameMetrics]:
    return {axis: FrameMetrics.from_json(f, f"frames {axis}") for axis, f in axes.items()}


def _typed_rows(rows: Sequence[Row]) -> list[ResultRow]:
    return [r if isinstance(r, ResultRow) else ResultRow.from_json(r) for r in rows]


def compute_metrics(
    rows: Sequence[Row], *, model: str, runs: int, by_plane: bool = True
) -> Metrics:
    """Every metric of one run folder (``metrics.json``: ``Metrics.to_json()``). Items of
    coronal/sagittal slices add ``by_plane`` (these metrics again per plane) and consistency
    groups ``consistency`` (``eval/consistency.py``); MIRP's block is computed on axial items
    only (MIRP's slices and definitions)."""
    errors = sum(1 for r in rows if r.get("error"))
    rows = [r for r in rows if not r.get("error")]  # no answer: neither right nor wrong
    rows = [metric_row(r) for r in rows]  # open rows: right, wrong or no answer
    axial = [r for r in rows if not r.get("plane")]
    chance = chance_levels()
    return Metrics(
        model=model,
        runs=runs,
        n_rows=len(rows) + errors,
        n_errors=errors,
        overall=GroupMetrics.from_json(group_metrics(rows, runs), "overall"),
        headline=GroupMetrics.from_json(
            group_metrics([r for r in rows if _is_headline(r)], runs), "headline"
        ),
        # coverage and accuracy on answered, with CIs
        rq1_plain=PlainRQ1.from_json(plain_rq1(rows, runs), "rq1_plain"),
        **{name: _groups(_by(rows, key, runs)) for name, key in _SECTIONS.items()},
        by_question_type={
            k: TypeGroup.from_json({**v, "chance": chance.get(k)}, f"type {k}")
            for k, v in _by(rows, lambda r: r.get("question_type", _RELPOS), runs).items()
        },
        frames={
            setup: _frames(frame_metrics([r for r in rows if r["setup"] == setup], runs))
            for setup in ("rq1", "rq2", "rq3")
            if any(r["setup"] == setup for r in rows)
        },
        run_agreement={k: Agreement.from_json(v, k) for k, v in run_agreement(rows, runs).items()},
        mirp=mirp_block(axial, runs) if all("parsed_mirp" in r for r in axial) else {},
        subgroups=subgroup_metrics(_typed_rows(rows)),
        open=open_metrics(rows) if any(_is_open(r) for r in rows) else None,
        **_plane_and_group_metrics(rows, model, runs, by_plane),
    )


def _plane_and_group_metrics(rows: Sequence[Row], model: str, runs: int, by_plane: bool) -> dict:
    from radspatial.eval.consistency import consistency_metrics

    out: dict[str, Any] = {}
    if by_plane and any(r.get("plane") for r in rows):
        planes: dict[str, list[Row]] = defaultdict(list)
        for r in rows:
            planes[r.get("plane") or "axial"].append(r)
        out["by_plane"] = {
            p: compute_metrics(sub, model=model, runs=runs, by_plane=False)
            for p, sub in sorted(planes.items())
        }
    if any(r.get("group") for r in rows):
        out["consistency"] = consistency_metrics(_typed_rows(rows))
    return out
