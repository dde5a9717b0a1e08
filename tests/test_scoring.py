"""parse_answer over a corpus of realistic replies, and metrics against hand-computed values."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import radspatial
from radspatial.core.stats import mcnemar, mean_std, wilson_interval
from radspatial.eval.metrics import BinaryMetrics, binary_metrics
from radspatial.eval.scoring import parse_answer

CORPUS_PATH = Path(__file__).parent / "data" / "replies.jsonl"
CORPUS = [json.loads(line) for line in CORPUS_PATH.read_text().splitlines() if line.strip()]


def test_corpus_is_large_and_covers_every_outcome():
    assert len(CORPUS) >= 100
    assert {row["expected"] for row in CORPUS} == {0, 1, None}
    for row in CORPUS:
        assert set(row) == {"reply", "question", "expected", "note"}, row


@pytest.mark.parametrize(
    "row", CORPUS, ids=[f"{i:03d}-{row['note'][:40]}" for i, row in enumerate(CORPUS)]
)
def test_parse_answer_corpus(row):
    assert parse_answer(row["reply"], row["question"]) == row["expected"], row["note"]


def test_parse_answer_is_reexported_and_tolerates_failed_calls():
    assert radspatial.parse_answer is parse_answer
    assert parse_answer(None) is None  # Reply.text is None when the backend call failed


def test_question_does_not_change_explicit_answers():
    # The question only unlocks relation restatements; explicit forms never need it.
    for reply in ("1", "No.", "Answer: 1", '{"answer": 0}', "\\boxed{1}"):
        assert parse_answer(reply) == parse_answer(reply, "Is the liver above the spleen?")


# ---------------------------------------------------------------- metrics


def test_binary_metrics_hand_computed():
    # expected [1, 1, 0, 0, 1], parsed [1, 0, 0, None, 1]
    # correct: items 0, 2, 4 -> 3; accuracy = 3/5 = 0.6
    # F1 ("yes"), None scored as the opposite of expected (item 3: expected 0 -> counts as 1):
    #   scored [1, 0, 0, 1, 1]; TP = items 0, 4 = 2; FP = item 3 = 1; FN = item 1 = 1
    #   F1 = 2*TP / (2*TP + FP + FN) = 4 / 6 = 0.6667
    # n_valid = 4; invalid_rate = 1/5 = 0.2; yes_rate = valid [1, 0, 0, 1] -> 2/4 = 0.5
    # Wilson 3/5 (z = 1.959964, z^2 = 3.841459):
    #   centre = (0.6 + 3.841459/10) / (1 + 3.841459/5) = 0.984146 / 1.768292 = 0.556552
    #   half = 1.959964 * sqrt(0.24/5 + 3.841459/100) / 1.768292 = 0.576158 / 1.768292 = 0.325828
    #   -> (0.230724, 0.882380)
    m = binary_metrics([1, 1, 0, 0, 1], [1, 0, 0, None, 1])
    assert (m.n, m.n_valid, m.correct) == (5, 4, 3)
    assert m.accuracy == pytest.approx(0.6)
    assert m.f1 == pytest.approx(4 / 6)
    assert m.invalid_rate == pytest.approx(0.2)
    assert m.yes_rate == pytest.approx(0.5)
    assert (m.ci_low, m.ci_high) == pytest.approx((0.230724, 0.882380), abs=1e-5)


def test_invalid_on_a_yes_item_is_a_false_negative():
    # expected [1, 1], parsed [None, 1] -> scored [0, 1]: TP 1, FN 1, FP 0 -> F1 = 2/3
    m = binary_metrics([1, 1], [None, 1])
    assert m.f1 == pytest.approx(2 / 3)
    assert m.accuracy == 0.5
    assert m.yes_rate == 1.0


def test_all_invalid_and_empty():
    # Nothing valid: accuracy 0/2, no true positive -> F1 0.0, yes_rate undefined.
    m = binary_metrics([1, 0], [None, None])
    assert (m.accuracy, m.f1, m.invalid_rate) == (0.0, 0.0, 1.0)
    assert math.isnan(m.yes_rate)
    empty = binary_metrics([], [])
    assert empty.n == 0 and math.isnan(empty.accuracy) and math.isnan(empty.ci_low)
    as_json = empty.to_json()
    assert as_json["accuracy"] is None and as_json["n"] == 0
    json.dumps(as_json, allow_nan=False)


def test_to_json_round_trips():
    m = binary_metrics([1, 0, 1], [1, 0, 0])
    assert BinaryMetrics(**m.to_json()) == m


def test_binary_metrics_rejects_bad_input():
    with pytest.raises(ValueError, match="2 expected answers but 1 parsed"):
        binary_metrics([1, 0], [1])
    with pytest.raises(ValueError, match="expected"):
        binary_metrics([2], [1])
    with pytest.raises(ValueError, match="parsed"):
        binary_metrics([1], [2])


def test_wilson_interval():
    # 8/10: p = 0.8; centre = (0.8 + 0.192073) / 1.384146 = 0.716740
    #   half = 1.959964 * sqrt(0.016 + 0.009604) / 1.384146 = 0.313623 / 1.384146 = 0.226582
    assert wilson_interval(8, 10) == pytest.approx((0.4902, 0.9433), abs=1e-4)
    # 0/10: centre = half = 0.192073 / 1.384146 = 0.138766 -> (0, 0.277533)
    assert wilson_interval(0, 10) == pytest.approx((0.0, 0.277533), abs=1e-6)
    # 10/10 mirrors 0/10
    assert wilson_interval(10, 10) == pytest.approx((0.722467, 1.0), abs=1e-6)
    assert wilson_interval(0, 10)[0] == 0.0 and wilson_interval(10, 10)[1] == 1.0
    assert all(math.isnan(v) for v in wilson_interval(0, 0))
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


def test_mean_std():
    # [1, 2, 3, 4]: mean 2.5; squared deviations 2.25 + 0.25 + 0.25 + 2.25 = 5; 5/3 -> 1.290994
    assert mean_std([1.0, 2.0, 3.0, 4.0]) == pytest.approx((2.5, 1.290994), abs=1e-6)
    assert mean_std([0.7]) == (0.7, 0.0)
    assert all(math.isnan(v) for v in mean_std([]))


def _pairs(b: int, c: int, both: int = 3, neither: int = 2) -> tuple[list[bool], list[bool]]:
    a = [True] * b + [False] * c + [True] * both + [False] * neither
    z = [False] * b + [True] * c + [True] * both + [False] * neither
    return a, z


def test_mcnemar_exact():
    # b = 1, c = 6, n = 7: P(X <= 1) = (C(7,0) + C(7,1)) / 2^7 = 8/128; two-sided 0.125
    r = mcnemar(*_pairs(1, 6))
    assert (r.b, r.c, r.method, r.statistic) == (1, 6, "exact", 1.0)
    assert r.p_value == pytest.approx(0.125)
    swapped = mcnemar(*reversed(_pairs(1, 6)))
    assert (swapped.b, swapped.c, swapped.p_value) == (6, 1, r.p_value)
    # b = c = 12 (n = 24 < 25): the tail is past one half, so p caps at 1.
    assert mcnemar(*_pairs(12, 12)).p_value == 1.0
    assert mcnemar([True], [True]).p_value == 1.0  # no discordant pairs


def test_mcnemar_chi_square():
    # b = 10, c = 30: stat = (|10 - 30| - 1)^2 / 40 = 361 / 40 = 9.025
    # p = P(chi2_1 > 9.025) = erfc(sqrt(9.025 / 2)) = 0.0026631
    r = mcnemar(*_pairs(10, 30))
    assert r.method == "chi2_cc"
    assert r.statistic == pytest.approx(9.025)
    assert r.p_value == pytest.approx(0.0026631, abs=1e-6)
    assert mcnemar(*_pairs(12, 13)).method == "chi2_cc"  # b + c = 25 switches to chi-square


def test_mcnemar_rejects_unpaired():
    with pytest.raises(ValueError, match="3 != 2"):
        mcnemar([True, False, True], [True, False])


def _wilson_closed_form(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """The hand-written interval radspatial used before scipy (kept here as the reference)."""
    p, z2 = k / n, z * z
    center = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return (0.0 if k == 0 else center - half), (1.0 if k == n else center + half)


def _mcnemar_closed_form(b: int, c: int) -> float:
    n = b + c
    if n < 25:
        tail = math.fsum(math.comb(n, i) for i in range(min(b, c) + 1)) / 2**n
        return min(1.0, 2 * tail)
    return math.erfc(math.sqrt(max(abs(b - c) - 1, 0) ** 2 / n / 2))


def test_scipy_statistics_equal_the_former_closed_forms():
    # every k of every n up to 60, and the ends exactly
    for n in range(1, 61):
        for k in range(n + 1):
            got, want = wilson_interval(k, n), _wilson_closed_form(k, n)
            assert got == pytest.approx(want, abs=1e-12), (k, n)
    assert wilson_interval(0, 37)[0] == 0.0 and wilson_interval(37, 37)[1] == 1.0
    assert wilson_interval(5, 20, z=2.575829) == pytest.approx(
        _wilson_closed_form(5, 20, z=2.575829), abs=1e-12
    )
    # McNemar: exact (b + c < 25) and chi-square, both orders
    for b in range(0, 31, 3):
        for c in range(0, 31):
            r = mcnemar(*_pairs(b, c))
            assert r.p_value == pytest.approx(_mcnemar_closed_form(b, c), rel=1e-9, abs=1e-15)
            assert r.method == ("exact" if b + c < 25 else "chi2_cc")
