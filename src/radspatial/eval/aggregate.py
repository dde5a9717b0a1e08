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

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields, replace
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
from radspatial.core.records import ResultRow
from radspatial.core.stats import mcnemar, mean_std, wilson_interval
from radspatial.eval.clusters import clustered_fields
from radspatial.eval.metric_hooks import METRIC_HOOKS, per_run, rounded
from radspatial.eval.mirp import mirp_block
from radspatial.eval.rq1_plain import plain_rq1
from radspatial.eval.subgroups import subgroup_metrics
from radspatial.grading.summary import answers_label, open_metrics
from radspatial.imaging.planes import DEFAULT_PLANE
from radspatial.questions import chance_levels, is_mirp_type, metric_hooks_of
from radspatial.questions.frames import AXES, anatomical_from_standard


def group_metrics(
    rows: Sequence[ResultRow], runs: int, *, target: str = "expected", where: str = "group"
) -> GroupMetrics:
    """Metrics of one group of rows (all runs), scored against ``target``
    (``ResultRow.scored``).

    One answer model for yes/no and open questions: accuracy, its CI and the invalid rate count
    every item (an open item is right when its grade is 1). What else the group reports, its
    rows' question types add (``eval/metric_hooks``: F1 and the yes rate for yes/no types,
    from their items alone); a group with open items says so in ``answers`` ("open" or
    "mixed")."""
    by_run = per_run(rows, runs, target)
    if not by_run:
        return GroupMetrics(n_items=0)
    runs_scored = list(by_run.values())
    acc_mean, acc_std = mean_std([m.accuracy for m in runs_scored])
    correct_total, n_total = sum(m.correct for m in runs_scored), sum(m.n for m in runs_scored)
    lo, hi = wilson_interval(correct_total, n_total)
    run_values: dict[int, dict[str, Any]] = {
        run: {k: m.to_json()[k] for k in _RUN_FIELDS} for run, m in by_run.items()
    }
    out: dict[str, Any] = {
        "n_items": runs_scored[0].n,
        "runs": len(runs_scored),
        "accuracy_mean": rounded(acc_mean),
        "accuracy_std": rounded(acc_std),
        "ci_low": rounded(lo),  # Wilson 95% on all runs' answers pooled
        "ci_high": rounded(hi),
        # cluster-robust beside it where items share a slice or consistency group (clusters.py)
        **clustered_fields(rows, target),
        "invalid_rate": rounded(sum(m.invalid_rate for m in runs_scored) / len(runs_scored)),
    }
    if label := answers_label(rows):
        out["answers"] = label
    for name, sub in _hook_rows(rows).items():
        added = METRIC_HOOKS.get(name)(sub, runs, target)
        out.update(added.group)
        for run, values in run_values.items():
            values.update(dict.fromkeys(added.run_fields) | dict(added.per_run.get(run, {})))
    out["per_run"] = list(run_values.values())
    return GroupMetrics.from_json(out, where)


# the fields of a run's scores that count every item (the hooks add the others)
_RUN_FIELDS = ("n", "n_valid", "correct", "accuracy", "invalid_rate", "ci_low", "ci_high")


def _hook_rows(rows: Sequence[ResultRow]) -> dict[str, list[ResultRow]]:
    """Hook name -> the rows whose question type names it (``questions.metric_hooks_of``: a
    type no longer registered takes the default of its rows' answer kind)."""
    hooks: dict[tuple[str, str], tuple[str, ...]] = {}
    out: dict[str, list[ResultRow]] = defaultdict(list)
    for r in rows:
        key = (r.question_type, r.kind)
        if key not in hooks:
            hooks[key] = metric_hooks_of(*key)
        for name in hooks[key]:
            out[name].append(r)
    return out


def _by(
    rows: Sequence[ResultRow], key: Callable[[ResultRow], str | None], runs: int, where: str
) -> dict[str, GroupMetrics]:
    groups: dict[str, list[ResultRow]] = defaultdict(list)
    for r in rows:
        k = key(r)
        if k is not None:
            groups[k].append(r)
    return {k: group_metrics(v, runs, where=f"{where} {k}") for k, v in sorted(groups.items())}


def _setup_transform(r: ResultRow) -> str | None:
    return f"{r.setup}/{r.marker}/{r.transform}" if r.transform else None


# the ``by_*`` sections of metrics.json: name -> the group key of a row (None: left out)
_SECTIONS: dict[str, Callable[[ResultRow], str | None]] = {
    "by_setup_marker": lambda r: f"{r.setup}/{r.marker}",
    "by_setup": lambda r: r.setup,
    "by_question_type_setup_marker": lambda r: f"{r.question_type}|{r.setup}/{r.marker}",
    "by_relation": lambda r: r.relation,
    "by_transform": lambda r: r.transform,
    "by_setup_transform": _setup_transform,
    "by_variant": lambda r: r.variant,
    "by_pair": lambda r: r.pair,
    "by_decidable": lambda r: DECIDABLE_KEYS.get(r.decidable),
}
# None (unknown): in neither
DECIDABLE_KEYS: dict[bool | None, str] = {True: "decidable", False: "undecidable"}


def _frame_row(r: ResultRow) -> ResultRow:
    """The row with its anatomical answer (a row of a run before the frames had names:
    ``expected_canonical`` is the standard view; the anatomical answer follows from it)."""
    if not r.legacy_frames or r.relation is None:
        return r
    return replace(r, expected_anatomical=anatomical_from_standard(r.relation, r.expected_standard))


def frame_metrics(rows: Sequence[ResultRow], runs: int) -> dict[str, FrameMetrics]:
    """Correctness in three frames per relation axis, on all items and where frames disagree.

    ``image``: the shown (rotated/flipped) image; ``standard``: the same words read in standard
    radiological view; ``anatomical``: the patient's frame (MIRP's RQ3(1): "left" is the
    patient's left). ``conflict_*`` keep the items whose image answer differs from the
    anatomical one (MIRP's "not aligned"; ``aligned_image`` the others), ``view_conflict_*``
    those whose image answer differs from the standard view's. A model that recites anatomy
    scores high on ``anatomical`` and low on ``image`` there. Left/right is MIRP's; above/below
    (anterior/posterior) is our extension.
    """
    out: dict[str, FrameMetrics] = {}
    rows = [_frame_row(r) for r in rows]
    for axis in AXES:
        sub = [
            r
            for r in rows
            if r.relation in axis.relations
            and r.scored("expected_standard") is not None
            and r.scored("expected_anatomical") is not None
        ]
        if not sub:
            continue
        conflict = [r for r in sub if r.expected != r.expected_anatomical]
        aligned = [r for r in sub if r.expected == r.expected_anatomical]
        view = [r for r in sub if r.expected != r.expected_standard]
        views = {
            "image": (sub, "expected"),
            "standard": (sub, "expected_standard"),
            "anatomical": (sub, "expected_anatomical"),
            "aligned_image": (aligned, "expected"),
            "conflict_image": (conflict, "expected"),
            "conflict_anatomical": (conflict, "expected_anatomical"),
            "view_conflict_image": (view, "expected"),
            "view_conflict_standard": (view, "expected_standard"),
        }
        out[axis.name] = FrameMetrics(
            {
                k: group_metrics(v, runs, target=t, where=f"frames {axis.name}: {k}")
                for k, (v, t) in views.items()
            }
        )
    return out


def _is_headline(r: ResultRow) -> bool:
    return is_mirp_type(r.question_type) and r.setup in ("rq1", "rq2", "rq3")


def run_agreement(rows: Sequence[ResultRow], runs: int) -> dict[str, Agreement]:
    """McNemar's test between each pair of runs on the same items."""
    by_run: dict[int, dict[str, bool]] = defaultdict(dict)
    for r in rows:
        by_run[r.run][r.id] = bool(r.correct)
    out = {}
    for a, b in combinations(range(runs), 2):
        ids = sorted(set(by_run[a]) & set(by_run[b]))
        if ids:
            t = mcnemar([by_run[a][i] for i in ids], [by_run[b][i] for i in ids])
            out[f"{a}_vs_{b}"] = Agreement(t.b, t.c, t.statistic, t.p_value, t.method)
    return out


def typed_rows(rows: Sequence[ResultRow | Mapping[str, Any]]) -> list[ResultRow]:
    """Result rows as records (a row read from a file or built as JSON: ``from_json``)."""
    return [r if isinstance(r, ResultRow) else ResultRow.from_json(dict(r)) for r in rows]


def compute_metrics(
    rows: Sequence[ResultRow | Mapping[str, Any]],
    *,
    model: str,
    runs: int,
    by_plane: bool = True,
) -> Metrics:
    """Every metric of one run folder (``metrics.json``: ``Metrics.to_json()``) from its result
    rows (``ResultRow``; rows as JSON objects are read with ``ResultRow.from_json``). Items of
    coronal/sagittal slices add ``by_plane`` (these metrics again per plane) and consistency
    groups ``consistency`` (``eval/consistency.py``); MIRP's block is computed on axial items
    only (MIRP's slices and definitions)."""
    typed = typed_rows(rows)
    errors = sum(1 for r in typed if r.error)
    typed = [r for r in typed if not r.error]  # no answer: neither right nor wrong
    axial = [r for r in typed if not r.plane]
    chance = chance_levels()
    types = _by(typed, lambda r: r.question_type, runs, "type")
    # one field of Metrics per _SECTIONS name (each a dict of GroupMetrics), named at run time
    sections: dict[str, Any] = {n: _by(typed, key, runs, n) for n, key in _SECTIONS.items()}
    return Metrics(
        model=model,
        runs=runs,
        n_rows=len(typed) + errors,
        n_errors=errors,
        overall=group_metrics(typed, runs, where="overall"),
        headline=group_metrics([r for r in typed if _is_headline(r)], runs, where="headline"),
        # coverage and accuracy on answered, with CIs
        rq1_plain=PlainRQ1.from_json(plain_rq1(typed, runs), "rq1_plain"),
        **sections,
        by_question_type={
            k: TypeGroup(**_fields(g), chance=chance.get(k)) for k, g in types.items()
        },
        frames={
            setup: frame_metrics([r for r in typed if r.setup == setup], runs)
            for setup in ("rq1", "rq2", "rq3")
            if any(r.setup == setup for r in typed)
        },
        run_agreement=run_agreement(typed, runs),
        mirp=mirp_block(axial, runs),
        subgroups=subgroup_metrics(typed),
        open=open_metrics(typed) or None,
        **_plane_and_group_metrics(typed, model, runs, by_plane),
    )


def _fields(g: GroupMetrics) -> dict[str, Any]:
    return {f.name: getattr(g, f.name) for f in fields(g)}


def _plane_and_group_metrics(
    rows: Sequence[ResultRow], model: str, runs: int, by_plane: bool
) -> dict[str, Any]:
    from radspatial.eval.consistency import consistency_metrics

    out: dict[str, Any] = {}
    if by_plane and any(r.plane for r in rows):
        planes: dict[str, list[ResultRow]] = defaultdict(list)
        for r in rows:
            planes[r.plane or DEFAULT_PLANE].append(r)
        out["by_plane"] = {
            p: compute_metrics(sub, model=model, runs=runs, by_plane=False)
            for p, sub in sorted(planes.items())
        }
    if any(r.group for r in rows):
        out["consistency"] = consistency_metrics(rows)
    return out
