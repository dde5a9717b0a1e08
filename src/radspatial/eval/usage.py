"""Token usage, latency and cost of a run: ``metrics.json``'s and ``run.json``'s ``usage`` block.

Each call in ``calls.jsonl`` keeps what its backend reported in ``meta`` (written when the call
returned, so a resumed run keeps every earlier call's original usage):

- an OpenAI-compatible reply: ``meta.usage`` as the server sent it (``prompt_tokens``,
  ``completion_tokens``, ``completion_tokens_details.reasoning_tokens``);
- ``hf``: ``meta.prompt_tokens`` and ``meta.new_tokens`` (counted from the model's tensors);
- vLLM: ``meta.new_tokens`` (and ``prompt_tokens`` where it reports them).

``usage_block`` sums them over the run's successful calls (a call shared by items asking alike
counts once), with latency percentiles over the same calls. ``calls_with_usage`` says how many
reported any counts: a backend that reports none (the baselines, the in-process agent) gives
zero tokens, not a guess. The cost (``--price input=...,output=...``, USD per million tokens)
prices prompt tokens at ``input`` and completion tokens (reasoning tokens included, as the
OpenAI API counts and bills them) at ``output``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

TOKENS = ("prompt_tokens", "completion_tokens", "reasoning_tokens")
_MAX_TOKENS = 10**12  # a count beyond this in a reply is nonsense, not usage
MAX_USD_PER_MTOK = 10_000.0  # 10x the dearest model's price: beyond it, a typo


@dataclass(frozen=True)
class Price:
    """USD per million tokens: ``input`` (prompt) and ``output`` (completion)."""

    input: float
    output: float

    def __post_init__(self) -> None:
        for name in ("input", "output"):
            value = getattr(self, name)
            if not _in(value, MAX_USD_PER_MTOK):
                raise ValueError(
                    f"--price {name} must be a number in 0..{MAX_USD_PER_MTOK:g} "
                    f"(USD per million tokens), got {value}"
                )

    def to_json(self) -> dict[str, float]:
        return {"input_usd_per_mtok": self.input, "output_usd_per_mtok": self.output}


def parse_price(text: str) -> Price:
    """``"input=2.5,output=10"`` -> ``Price(2.5, 10.0)``; ValueError naming the problem.

    Example:
        >>> parse_price("input=2.5,output=10")
        Price(input=2.5, output=10.0)
    """
    values: dict[str, float] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or key not in ("input", "output") or key in values:
            raise ValueError(
                f"--price must be input=USD,output=USD (per million tokens), got {text!r}"
            )
        try:
            values[key] = float(value)
        except ValueError:
            raise ValueError(
                f"--price {key}: not a number: {value.strip()!r} (USD per million tokens, "
                "no unit: input=2.5,output=10)"
            ) from None
    if set(values) != {"input", "output"}:
        raise ValueError(f"--price needs both input= and output=, got {text!r}")
    return Price(values["input"], values["output"])


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not (math.isfinite(value) and 0 <= value <= _MAX_TOKENS):
        return None
    return int(value)


MAX_LATENCY_S = 7 * 86400.0  # a week: any call's latency beyond it is not a measurement


def forged_numbers(row: Mapping[str, Any]) -> str | None:
    """Why a ``calls.jsonl`` row's numbers cannot be what a call measured (None: they can):
    the number gate on ``latency_s`` (0..a week) and on every token count its ``meta``
    reports (0..10^12). A live reply's bad counts are only left out (:func:`call_usage`); a
    logged one was written by us, so a bad number there is an edit that would reach the cost."""
    lat = row.get("latency_s")
    if lat is not None and not _in(lat, MAX_LATENCY_S):
        return f"latency_s {lat!r} is not a finite number in 0..{MAX_LATENCY_S:g}"
    meta = row.get("meta")
    if not isinstance(meta, Mapping):
        return None
    raw = meta.get("usage")
    usage: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    details = usage.get("completion_tokens_details")
    found = [(f"usage.{k}", usage.get(k)) for k in ("prompt_tokens", "completion_tokens")]
    if isinstance(details, Mapping):
        found.append(
            ("usage.completion_tokens_details.reasoning_tokens", details.get("reasoning_tokens"))
        )
    found += [(k, meta.get(k)) for k in ("prompt_tokens", "new_tokens")]
    for name, value in found:
        if value is not None and _count(value) is None:
            return f"meta.{name} {str(value)[:30]!r} is not a token count (0..{_MAX_TOKENS:g})"
    return None


def _in(value: Any, high: float) -> TypeGuard[int | float]:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    return ok and math.isfinite(value) and 0 <= value <= high


def call_usage(meta: Mapping[str, Any] | None) -> dict[str, int] | None:
    """The token counts one call reported (``TOKENS``), or None when it reported none."""
    if not isinstance(meta, Mapping):
        return None
    usage = meta.get("usage")
    if isinstance(usage, Mapping):  # an OpenAI-compatible reply
        details = usage.get("completion_tokens_details")
        reasoning = details.get("reasoning_tokens") if isinstance(details, Mapping) else None
        got = (usage.get("prompt_tokens"), usage.get("completion_tokens"), reasoning)
    else:  # hf, vLLM
        got = (meta.get("prompt_tokens"), meta.get("new_tokens"), None)
    counts = [_count(v) for v in got]
    if counts[0] is None and counts[1] is None:
        return None
    return {k: c or 0 for k, c in zip(TOKENS, counts, strict=True)}


def percentile(values: list[float], q: float) -> float | None:
    """The ``q`` quantile (0-1) by linear interpolation (numpy's default); None if empty.

    Example:
        >>> percentile([1.0, 2.0, 3.0, 4.0], 0.5)
        2.5
    """
    if not values:
        return None
    xs = sorted(values)
    pos = (len(xs) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def usage_block(calls: Iterable[Mapping[str, Any]], price: Price | None = None) -> dict[str, Any]:
    """Totals and latency percentiles over ``calls`` (``calls.jsonl`` rows: ``latency_s``,
    ``meta``); failed calls are left out. With ``price``, the estimated cost in USD."""
    totals = dict.fromkeys(TOKENS, 0)
    n = n_usage = 0
    latencies: list[float] = []
    for call in calls:
        if call.get("error"):
            continue
        n += 1
        lat = call.get("latency_s")
        if _in(lat, MAX_LATENCY_S):
            latencies.append(float(lat))
        counts = call_usage(call.get("meta"))
        if counts is not None:
            n_usage += 1
            for k in TOKENS:
                totals[k] += counts[k]
    out: dict[str, Any] = {**totals, "calls": n, "calls_with_usage": n_usage}
    for name, q in (("latency_s_p50", 0.5), ("latency_s_p95", 0.95)):
        value = percentile(latencies, q)
        out[name] = None if value is None else round(value, 4)
    if price is not None:
        cost = totals["prompt_tokens"] * price.input + totals["completion_tokens"] * price.output
        out["price"] = price.to_json()
        # no call reported tokens (a baseline, an lmms-eval log): the cost is unknown, not 0
        out["cost_usd"] = round(cost / 1e6, 6) if n_usage else None
    return out
