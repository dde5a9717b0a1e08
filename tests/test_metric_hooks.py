"""A question type's own metric, added from outside the package (``eval/metric_hooks``).

The type below lives only in this test: an open "tally" type whose rows add ``off_by`` (the
mean distance between the count asked and the count read) to every group that holds them,
through a hook it registers and names in ``metric_hooks``; nothing in eval/ names it. The
built-in yes/no hook keeps F1 and the yes rate to the yes/no rows of the same group.
"""

from __future__ import annotations

import re

import pytest

import radspatial.questions as q
from radspatial.core.answers import Answer, Grade
from radspatial.core.metrics_record import Metrics
from radspatial.core.records import ResultRow
from radspatial.eval.aggregate import compute_metrics
from radspatial.eval.metric_hooks import METRIC_HOOKS, HookMetrics, per_run, rounded
from radspatial.questions.open_common import OpenType


class Tally(OpenType):
    """How many of something a slice shows (read as a plain number)."""

    name = "tally"
    answer_kind = "tally"
    n_objects = 1
    setups = ("rq1",)
    group = ""
    classes = ("1", "2", "3")
    pattern = re.compile(r"^how many (?P<a>.+?) are there\s*\??$", re.I)

    def read_text(self, text: str) -> Grade:
        found = re.findall(r"\d+", text)
        if len(found) != 1:
            return Grade(None, "invalid", "no single number")
        return Grade(Answer(self.answer_kind, found[0]), "answer", "a number")

    def metric_hooks(self) -> tuple[str, ...]:
        return ("off_by",)


def off_by(rows, runs: int, target: str) -> HookMetrics:
    """Mean |asked - read| of the answered rows, per run and over runs."""
    if target != "expected":
        return HookMetrics()
    by_run: dict[int, list[int]] = {}
    for r in rows:
        if r.parsed is not None:
            by_run.setdefault(r.run, []).append(abs(int(r.expected) - int(r.parsed)))
    means = {run: sum(v) / len(v) for run, v in by_run.items()}
    group = {"off_by_mean": rounded(sum(means.values()) / len(means)) if means else None}
    return HookMetrics(group, {k: {"off_by": rounded(v)} for k, v in means.items()}, ("off_by",))


@pytest.fixture
def tally():
    q.list_question_types()  # the built-in types first
    q.register_question_type(Tally())
    METRIC_HOOKS.add("off_by", off_by)
    yield
    q.QUESTION_TYPES.remove("tally")
    METRIC_HOOKS.remove("off_by")


def _row(i: int, run: int, expected, parsed, qtype: str = "tally") -> ResultRow:
    row = {"id": f"rq1/none/ex_slice00{i}/q{i}", "run": run, "setup": "rq1", "marker": "none"}
    row["variant"] = "normal"
    row |= {"question": "Q?", "question_type": qtype, "expected": expected, "parsed": parsed}
    row["correct"] = parsed == expected
    if qtype == "tally":
        status = "answer" if parsed is not None else "invalid"
        row["grade"] = {"status": status, "reason": "", "source": "rules"}
    return ResultRow.from_json(row)


def test_a_plugin_type_adds_its_own_metric_without_editing_eval(tally):
    counts = [("3", "1"), ("2", "2"), ("1", None)]  # off by 2 and 0; one unread
    rows = [_row(i, run, e, p) for run in (0, 1) for i, (e, p) in enumerate(counts)]
    yes_no = [(1, 1), (0, 1)]  # F1 and the yes rate: the yes/no rows alone
    rows += [_row(5 + i, 0, e, p, "relative_position") for i, (e, p) in enumerate(yes_no)]
    m = compute_metrics(rows, model="m", runs=2)
    mine = m.by_question_type["tally"]
    assert mine.extra == {"off_by_mean": 1.0} and mine.answers == "open"
    assert [r.extra for r in mine.per_run] == [{"off_by": 1.0}, {"off_by": 1.0}]
    assert mine.f1_mean is None and mine.yes_rate is None  # no yes/no answers in it
    assert m.overall.extra == {"off_by_mean": 1.0} and m.overall.answers == "mixed"
    assert m.overall.f1_mean == pytest.approx(2 / 3) and m.overall.yes_rate == 1.0
    assert m.overall.per_run[1].f1 is None  # run 1 has no yes/no rows
    assert "off_by_mean" not in m.by_question_type["relative_position"].to_json()
    # written and read back with the other metrics (metrics.json keeps what it does not know)
    written = m.to_json()
    assert written["overall"]["off_by_mean"] == 1.0
    assert written["overall"]["per_run"][0]["off_by"] == 1.0
    assert Metrics.from_json(written, "metrics.json").to_json() == written


def test_yes_no_hook_is_the_default_of_a_yes_no_type():
    assert q.get_question_type("relative_position").metric_hooks() == ("yes_no",)
    assert q.get_question_type("counting").metric_hooks() == ()
    rows = [_row(i, 0, e, p, "size") for i, (e, p) in enumerate([(1, 1), (0, 0), (1, None)])]
    assert per_run(rows, 1, "expected")[0].n == 3
    g = compute_metrics(rows, model="m", runs=1).overall
    assert g.f1_mean == pytest.approx(2 / 3) and g.yes_rate == 0.5 and not g.extra
