"""Cluster-robust intervals for accuracies over correlated items.

The 8 views of one consistency group, and the questions asked of one slice (its pairs, setups
and markers, every run), are not independent draws: a model that misreads a slice misreads
most of its questions. The Wilson interval treats them as independent and is too narrow then.
``cluster_of`` names each result row's cluster (its consistency group, else its slice) and
``clustered_interval`` gives the mean's cluster-robust standard error and a normal 95% interval.

The standard error is the sandwich (CR1) form for a mean, with the small-sample factor
G / (G - 1) for G clusters::

    se^2 = G / (G - 1) * sum_g (sum_{i in g} (y_i - mean))^2 / N^2

With every item its own cluster it equals the usual ``sd(y, ddof=1) / sqrt(N)``.

A standard error of 0 is not an interval: it happens when every cluster's accuracy equals the
overall one (each consistency group 4 of 8 right, or every answer right, or every one wrong),
and a cluster bootstrap is of zero width there too. Then the clustered interval is the Wilson
one and the group says why (``ci_cluster_fallback``). inspect_ai's
``stderr(cluster=...)`` is this same formula (the inspect tasks name the ``cluster`` metadata);
lmms-eval 0.7.3's ``stderr_clustered`` (the export's ``cluster_key``) sums the same cross-terms
but takes the diagonal with ddof=1 and no G / (G - 1) factor, so the two differ by O(1/G).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from radspatial.core.records import ResultRow

_SLICE_RE = re.compile(r"^(?P<slice>.+?_slice\d+)")
Z95 = 1.959964


def cluster_of(row: Mapping[str, Any]) -> str | None:
    """A row's cluster: ``group:<id>`` (its consistency group), else ``slice:<case_sliceNNN>``
    (the slice of its image, from the item id ``setup/marker/<base_name>/qK``; a base name
    without a slice number is its own cluster), None for an id of another shape.

    Example:
        >>> cluster_of({"id": "rq2/numbers/ex_slice040_size/q1"})
        'slice:ex_slice040'
    """
    return cluster_key(str(row.get("id", "")), row.get("group"), row.get("plane"))


def cluster_key(item_id: str, group: str | None, plane: str | None) -> str | None:
    """``cluster_of`` from an item's id, consistency group and plane."""
    if group:
        return f"group:{group}"
    parts = item_id.split("/")
    if len(parts) < 4:
        return None
    match = _SLICE_RE.match(parts[2])
    name = match["slice"] if match else parts[2]
    return f"slice:{name}" if not plane else f"slice:{plane}/{name}"


@dataclass(frozen=True)
class ClusteredCI:
    mean: float
    se: float
    low: float  # clipped to [0, 1]
    high: float
    n: int
    n_clusters: int


def clustered_interval(
    values: Sequence[float], clusters: Sequence[Any], *, z: float = Z95
) -> ClusteredCI | None:
    """The mean of ``values`` with its cluster-robust SE and interval (None under 2 clusters;
    a row whose cluster is None is a cluster of its own).

    Example:
        >>> c = clustered_interval([1, 1, 0, 0], ["a", "a", "b", "b"])
        >>> round(c.se, 4)
        0.5
    """
    n = len(values)
    if n != len(clusters):
        raise ValueError(f"{n} values but {len(clusters)} cluster ids")
    if n == 0:
        return None
    mean = math.fsum(values) / n
    sums: dict[Any, float] = {}
    for i, (v, c) in enumerate(zip(values, clusters, strict=True)):
        key = ("row", i) if c is None else ("id", c)
        sums[key] = sums.get(key, 0.0) + (v - mean)
    g = len(sums)
    if g < 2:
        return None
    se = math.sqrt(g / (g - 1) * math.fsum(s * s for s in sums.values())) / n
    low, high = max(0.0, mean - z * se), min(1.0, mean + z * se)
    return ClusteredCI(mean, se, low, high, n, g)


def clustered_fields(rows: Sequence[ResultRow], target: str) -> dict[str, Any]:
    """``group_metrics``' clustered entries for rows scored against ``target``
    (``ResultRow.scored``; invalid answers wrong), all runs pooled: empty unless some cluster
    holds more than one answer."""
    values, ids = [], []
    for r in rows:
        if (pair := r.scored(target)) is not None:
            values.append(float(pair[1] == pair[0]))
            ids.append(cluster_key(r.id, r.group, r.plane))
    named = [c for c in ids if c is not None]
    if len(set(named)) == len(named):  # no cluster repeats: the Wilson interval is the one
        return {}
    ci = clustered_interval(values, ids)
    if ci is None:
        return {}
    low, high, fallback = ci.low, ci.high, {}
    if ci.se < 1e-12:  # a zero-width "interval": the Wilson one, and the reason
        from radspatial.eval.metrics import wilson_interval

        low, high = wilson_interval(round(math.fsum(values)), len(values))
        fallback = {"ci_cluster_fallback": _degenerate(ci)}
    return {
        "se_cluster": round(ci.se, 6),
        "ci_cluster_low": round(low, 6),
        "ci_cluster_high": round(high, 6),
        "n_clusters": ci.n_clusters,
        "cluster_by": "+".join(sorted({c.split(":", 1)[0] for c in named})),
    } | fallback


def _degenerate(ci: ClusteredCI) -> str:
    """Why a clustered standard error is 0, in a line."""
    if ci.mean in (0.0, 1.0):
        every = "right" if ci.mean == 1.0 else "wrong"
        return f"CR1 standard error 0 (every answer {every}): Wilson interval instead"
    return (
        f"CR1 standard error 0 (each of the {ci.n_clusters} clusters has the overall accuracy "
        f"{100 * ci.mean:.1f}%): Wilson interval instead"
    )
