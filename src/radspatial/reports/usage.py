"""Report sections for what a run cost and how sure its accuracy is: token usage, latency and
cost per model (``metrics.json`` ``usage``, ``eval.usage``), and the cluster-robust interval
beside the Wilson one where items share a slice or consistency group (``eval.clusters``).
Appended to ``summary.md`` by ``reports.build.build_report``; a value of the wrong type prints as a
dash (metrics files are read, not trusted)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from radspatial.core.textsafe import Markup, md_table

DASH = "–"


def _number(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x):
        return None
    return float(x)


def _int(x: Any) -> str:
    v = _number(x)
    return DASH if v is None else f"{int(v):,}"


def _fixed(x: Any, digits: int, unit: str = "") -> str:
    v = _number(x)
    return DASH if v is None else f"{v:.{digits}f}{unit}"


def _pct(x: Any) -> str:
    v = _number(x)
    return DASH if v is None else f"{100 * v:.1f}"


def usage_markdown(runs: Sequence[Any]) -> str:
    """Token totals, latency percentiles and cost per model (runs with a ``usage`` block)."""
    rows, inspect = [], False
    for r in runs:
        u = r.metrics.usage
        if u is None:
            continue
        # nothing reported (a baseline, an lmms-eval log): unknown, not 0
        tokens = _int if u.calls_with_usage else (lambda _: DASH)
        star = "*" if r.info.get("source") == "inspect" else ""
        inspect = inspect or bool(star)
        rows.append(
            [
                r.label,
                f"{_int(u.calls)} ({_int(u.calls_with_usage)})",
                tokens(u.prompt_tokens),
                tokens(u.completion_tokens),
                tokens(u.reasoning_tokens),
                _fixed(u.latency_s_p50, 3) + star,
                _fixed(u.latency_s_p95, 3) + star,
                _fixed(u.cost_usd, 4),
            ]
        )
    if not rows:
        return ""
    header = ["Model", "Calls (with usage)", "Prompt tokens", "Completion tokens"]
    header += ["Reasoning tokens", "Latency p50 (s)", "Latency p95 (s)", "Cost (USD)"]
    return (
        "\n## Usage, latency and cost\n\nTokens as each reply reported them (OpenAI-compatible "
        "`usage`; hf: counted), summed over the run's successful calls (a resumed run keeps its "
        "earlier calls' usage); calls in brackets: those that reported any. Latency: one call, "
        "retries excluded. Cost: with `eval --price input=...,output=...` (USD per million "
        "tokens; reasoning tokens are completion tokens; `import inspect` and `import "
        "lmms-eval` take it too). A dash: nothing reported (tokens), or not priced.\n\n"
        + md_table(header, rows)
        + (INSPECT_NOTE if inspect else "")
    )


INSPECT_NOTE = (
    "\n\\* Imported from inspect logs: a sample's working time, which includes the wait for "
    "inspect's own connection limit (`--max-connections`), so it measures the client's "
    "concurrency as much as the model's speed.\n"
)


def _interval(low: float | None, high: float | None) -> str:
    if _number(low) is None:
        return DASH
    return Markup(f"[{_pct(low)}, {_pct(high)}]")


def clustered_markdown(runs: Sequence[Any]) -> str:
    """Wilson vs cluster-robust 95% intervals of the overall and headline accuracies."""
    rows = []
    for r in runs:
        overall = r.metrics.overall
        for scope, g in (("overall", overall), ("headline", r.metrics.headline)):
            if _number(g.se_cluster) is None:
                continue
            if scope == "headline" and g == overall:
                continue  # the same items: one row says it
            rows.append(
                [
                    r.label,
                    scope,
                    _pct(g.accuracy_mean),
                    _interval(g.ci_low, g.ci_high),
                    _interval(g.ci_cluster_low, g.ci_cluster_high)
                    + (" (Wilson: clustered SE 0)" if g.ci_cluster_fallback else ""),
                    _int(g.n_clusters),
                    str(g.cluster_by or DASH),
                ]
            )
    if not rows:
        return ""
    header = ["Model", "Items", "Accuracy", "Wilson 95% CI", "Clustered 95% CI"]
    header += ["Clusters", "Cluster by"]
    return (
        "\n## Correlated items: clustered intervals\n\nThe views of one consistency group and "
        "the questions of one slice are not independent; the clustered interval (CR1 "
        "cluster-robust standard error, normal 95%, all runs pooled) allows for that, the "
        "Wilson interval does not. Every group in `metrics.json` carries both where items "
        "are clustered (`ci_cluster_low`, `ci_cluster_high`, `se_cluster`). Where the clustered "
        "standard error is 0 (every cluster as right as the whole) it is the Wilson interval, "
        "marked, and `ci_cluster_fallback` says why.\n\n" + md_table(header, rows)
    )
