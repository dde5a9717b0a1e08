"""Binary metrics with confidence intervals, and paired comparisons (``eval/scoring.py``
reads the answers they count).

Pure functions of expected answers and parsed answers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class BinaryMetrics:
    """Scores of yes/no answers; invalid (None) answers count as wrong everywhere."""

    n: int
    n_valid: int
    correct: int
    accuracy: float  # correct / n
    f1: float  # F1 of "yes"; None is scored as the opposite of expected (MIRP's convention)
    invalid_rate: float  # fraction of answers parsed as None
    yes_rate: float  # fraction of valid answers that are 1 (answer bias); nan if none valid
    ci_low: float  # Wilson interval on accuracy
    ci_high: float

    def to_json(self) -> dict[str, Any]:
        """Plain dict; nan becomes None so the result is strict JSON."""
        return {
            k: None if isinstance(v, float) and math.isnan(v) else v
            for k, v in asdict(self).items()
        }


def binary_metrics(
    expected: Sequence[int], parsed: Sequence[int | None], *, z: float = 1.959964
) -> BinaryMetrics:
    """Accuracy, F1, invalid rate, yes rate and a Wilson interval.

    F1 is for the "yes" class with an invalid answer replaced by the opposite of the expected
    one, so it is always a miss (a false negative when 1 was expected, a false positive when 0
    was). F1 is 0.0 when there are no true positives (also when undefined, as sklearn does).

    Example:
        >>> binary_metrics([1, 0], [1, None]).accuracy
        0.5
    """
    if len(expected) != len(parsed):
        raise ValueError(f"{len(expected)} expected answers but {len(parsed)} parsed answers")
    if any(e not in (0, 1) for e in expected):
        raise ValueError("expected answers must be 0 or 1")
    if any(p not in (0, 1, None) for p in parsed):
        raise ValueError("parsed answers must be 0, 1 or None")
    n = len(expected)
    valid = [p for p in parsed if p is not None]
    correct = sum(p == e for e, p in zip(expected, parsed, strict=True))
    scored = [1 - e if p is None else p for e, p in zip(expected, parsed, strict=True)]
    tp = sum(e == 1 and p == 1 for e, p in zip(expected, scored, strict=True))
    wrong = sum(e != p for e, p in zip(expected, scored, strict=True))  # fp + fn
    low, high = wilson_interval(correct, n, z)
    nan = float("nan")
    return BinaryMetrics(
        n=n,
        n_valid=len(valid),
        correct=correct,
        accuracy=correct / n if n else nan,
        f1=2 * tp / (2 * tp + wrong) if tp else 0.0,
        invalid_rate=(n - len(valid)) / n if n else nan,
        yes_rate=sum(valid) / len(valid) if valid else nan,
        ci_low=low,
        ci_high=high,
    )


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
