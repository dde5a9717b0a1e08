"""The metrics a question type adds to every group of its rows, beside accuracy.

Accuracy, its Wilson interval and the invalid rate count every scored item alike
(``aggregate.group_metrics``). What else a group reports is asked of the rows' question types:
each names its hooks (``QuestionType.metric_hooks``: by default ``("yes_no",)`` for a yes/no
type and none for an open one), and each hook gets the group's rows of the types that name it,
pooled. The built-in ``yes_no`` hook gives F1 of "yes" and the yes rate (``f1_mean``,
``f1_std``, ``yes_rate``; ``f1`` and ``yes_rate`` per run), so a group of yes/no and open items
takes them from its yes/no items alone.

A plugin type adds a metric of its own with no change here: it registers a hook
(``@register_metric_hook("name")``) and names it in its ``metric_hooks``; the hook's fields
land in ``metrics.json`` beside the others (``GroupMetrics.extra``, ``RunScores.extra``).
``tests/test_metric_hooks.py`` does this from outside the package.

    >>> sorted(METRIC_HOOKS.names())
    ['yes_no']
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from radspatial.core.records import ResultRow
from radspatial.core.registry import Registry
from radspatial.core.stats import mean_std
from radspatial.eval.metrics import BinaryMetrics, binary_metrics


@dataclass(frozen=True)
class HookMetrics:
    """What one hook adds to a group: its fields (``group``) and each run's (``per_run``: run
    index -> fields; a run it has no entry for gets None in the fields of ``run_fields``)."""

    group: Mapping[str, Any] = field(default_factory=dict)
    per_run: Mapping[int, Mapping[str, Any]] = field(default_factory=dict)
    run_fields: tuple[str, ...] = ()


# (rows of the group whose type names the hook, runs, target field) -> what it adds
MetricHook = Callable[[Sequence[ResultRow], int, str], HookMetrics]
METRIC_HOOKS: Registry[MetricHook] = Registry("metric hook")


def register_metric_hook(name: str) -> Callable[[MetricHook], MetricHook]:
    """Decorator: ``@register_metric_hook("name")`` on ``hook(rows, runs, target)``."""
    return METRIC_HOOKS.register(name)


def rounded(x: float | None) -> float | None:
    """A metric as written: 6 decimals, nan as None."""
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(x, 6)


Pair = Callable[[ResultRow, str], "tuple[Any, Any] | None"]


def per_run(
    rows: Sequence[ResultRow], runs: int, target: str, pair: Pair = ResultRow.scored
) -> dict[int, BinaryMetrics]:
    """Run index -> binary metrics of its rows against ``target``, each row as ``pair`` gives
    it (``ResultRow.scored``: ``(1, outcome)``, what accuracy counts; ``ResultRow.said``: the
    answers asked and read, what the yes/no rates count); runs without any left out."""
    out = {}
    for run in range(runs):
        pairs = [s for r in rows if r.run == run and (s := pair(r, target)) is not None]
        if pairs:
            out[run] = binary_metrics([e for e, _ in pairs], [p for _, p in pairs])
    return out


@register_metric_hook("yes_no")
def yes_no_rates(rows: Sequence[ResultRow], runs: int, target: str) -> HookMetrics:
    """F1 of "yes" (mean and std over runs) and the yes rate (mean over runs of the valid
    answers' share of "yes") of yes/no answers."""
    by_run = per_run(rows, runs, target, ResultRow.said)
    binary = list(by_run.values())
    f1_mean, f1_std = mean_std([m.f1 for m in binary]) if binary else (math.nan, math.nan)
    yes = [m.yes_rate for m in binary if not math.isnan(m.yes_rate)]
    group = {
        "f1_mean": rounded(f1_mean),
        "f1_std": rounded(f1_std),
        "yes_rate": rounded(sum(yes) / len(yes)) if yes else None,
    }
    runs_out = {}
    for run, m in by_run.items():
        values = m.to_json()
        runs_out[run] = {"f1": values["f1"], "yes_rate": values["yes_rate"]}
    return HookMetrics(group, runs_out, ("f1", "yes_rate"))
