"""Statistics below every layer: the Wilson interval of a share, mean and sample spread,
McNemar's paired test. The evaluator, grading, the probes and the report all count with
these (pure functions; scipy imported on first use).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


def wilson_interval(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson score interval for ``k`` successes in ``n`` trials; (nan, nan) when n == 0.

    scipy's ``binomtest(k, n).proportion_ci(method="wilson")`` at the confidence level whose
    normal quantile is ``z`` (equal to the closed form to 1e-15; exact 0 and 1 at the ends).

    Example:
        >>> [round(v, 4) for v in wilson_interval(8, 10)]
        [0.4902, 0.9433]
    """
    if not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return float("nan"), float("nan")
    from scipy.stats import binomtest, norm

    ci = binomtest(k, n).proportion_ci(2 * float(norm.cdf(z)) - 1, method="wilson")
    return float(ci.low), float(ci.high)


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (ddof=1); std is 0.0 for one value, nan for none."""
    n = len(values)
    if n == 0:
        return float("nan"), float("nan")
    mean = math.fsum(values) / n
    if n == 1:
        return mean, 0.0
    return mean, math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))


@dataclass(frozen=True)
class McNemar:
    """Paired comparison of two models on the same items."""

    b: int  # A right, B wrong
    c: int  # A wrong, B right
    statistic: float  # min(b, c) for the exact test, chi-square otherwise
    p_value: float
    method: str  # "exact" or "chi2_cc"


def mcnemar(correct_a: Sequence[bool], correct_b: Sequence[bool]) -> McNemar:
    """McNemar's test: exact two-sided binomial if b + c < 25, else chi-square (continuity).

    scipy's ``binomtest(min(b, c), b + c, 0.5)`` for the exact test, ``chi2.sf(stat, 1)`` else.

    The continuity-corrected statistic is ``max(|b - c| - 1, 0)**2 / (b + c)``.

    Example:
        >>> mcnemar([1, 1, 1, 0], [0, 0, 0, 0]).p_value
        0.25
    """
    if len(correct_a) != len(correct_b):
        raise ValueError(f"paired results differ in length: {len(correct_a)} != {len(correct_b)}")
    b = sum(bool(x) and not bool(y) for x, y in zip(correct_a, correct_b, strict=True))
    c = sum(bool(y) and not bool(x) for x, y in zip(correct_a, correct_b, strict=True))
    n = b + c
    if n == 0:
        return McNemar(0, 0, 0.0, 1.0, "exact")
    from scipy.stats import binomtest, chi2

    if n < 25:
        k = min(b, c)
        return McNemar(b, c, float(k), float(binomtest(k, n, 0.5).pvalue), "exact")
    stat = max(abs(b - c) - 1, 0) ** 2 / n
    return McNemar(b, c, stat, float(chi2.sf(stat, 1)), "chi2_cc")
