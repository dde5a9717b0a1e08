"""The honest headline (issue #34): plain-slice RQ1 with coverage and accuracy on answered, each
with its Wilson CI and n, in metrics.json (``rq1_plain``), on its own line of ``radspatial eval``
and in the report; never only the pooled number that includes marker reading."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from radspatial.bench.dataset import build_dataset
from radspatial.bench.generate import GenerateConfig
from radspatial.cli import bundled_example, main
from radspatial.core.records import ResultRow
from radspatial.core.stats import wilson_interval
from radspatial.eval.rq1_plain import plain_rq1, plain_rq1_line, plain_rq1_markdown
from radspatial.imaging.volumes import Case
from radspatial.questions import QuestionRules


def _row(i: int, parsed, expected=1, **extra) -> ResultRow:
    row = {"id": f"q{i}", "run": 0, "setup": "rq1", "marker": "none", "question": "Q?"}
    row |= {"expected": expected, "parsed": parsed, "correct": parsed == expected}
    return ResultRow.from_json({**row, **extra})


def test_block_counts_abstentions_wrong_and_reports_coverage_with_cis():
    rows = [_row(i, 1) for i in range(6)] + [_row(6, 0), _row(7, None), _row(8, None)]
    rows += [_row(9, None, error="timeout")]  # no reply at all: left out
    rows += [_row(10, 0, setup="rq2"), _row(11, 0, question_type="size")]  # not plain RQ1
    rows += [_row(12, 0, plane="coronal")]  # MIRP's and the paper's slices are axial
    b = plain_rq1(rows, runs=1)
    assert (b["n"], b["answered"], b["correct"], b["n_items"]) == (9, 7, 6, 9)
    assert b["accuracy"] == pytest.approx(6 / 9) and b["coverage"] == pytest.approx(7 / 9)
    assert b["accuracy_answered"] == pytest.approx(6 / 7)
    counts = {"accuracy": (6, 9), "coverage": (7, 9), "accuracy_answered": (6, 7)}
    for key, (k, n) in counts.items():
        assert b[f"{key}_ci"] == pytest.approx(wilson_interval(k, n), abs=1e-6)
    line = plain_rq1_line(b)
    assert "accuracy 66.7%" in line and "(6/9)" in line and "coverage 77.8%" in line
    assert "accuracy on answered 85.7%" in line and "(6/7)" in line
    empty = plain_rq1([_row(0, None, setup="rq3")], runs=1)
    assert empty["n"] == 0 and empty["accuracy_answered"] is None
    assert plain_rq1_line(empty) is None and plain_rq1_markdown({"m": empty}) == ""
    # read back from a file: junk values print as dashes, never crash
    assert "-" in plain_rq1_markdown({"m": {"n": 3, "accuracy": "x", "coverage_ci": [None]}})
    assert plain_rq1_markdown({"m": "junk"}) == "" and plain_rq1_line({"n": "3"}) is None


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("rq1plain") / "ds"
    ct, seg = bundled_example()
    config = GenerateConfig(
        size=128,
        as_count=2,
        setups=("rq1", "rq2"),
        markers=("numbers",),
        rules=QuestionRules(profile="strict"),
    )
    build_dataset([Case("ex", ct, seg)], config, out, log=lambda _: None)
    return out


def test_eval_prints_plain_rq1_on_its_own_line_and_writes_the_block(data, tmp_path, capsys):
    out = tmp_path / "run"
    # the marker reader abstains on every plain slice (no marker to read) and answers RQ2
    assert main(["eval", "--data", str(data), "--model", "agent:markers", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    metrics = json.loads((out / "metrics.json").read_text())
    b = metrics["rq1_plain"]
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    rq1 = [r for r in rows if r["setup"] == "rq1"]
    assert b["n"] == len(rq1) > 0 and b["answered"] == 0 and b["coverage"] == 0.0
    assert metrics["headline"]["accuracy_mean"] > 0  # the pooled number hides it
    lines = [x for x in printed.splitlines() if x.strip().startswith("plain-slice RQ1")]
    assert len(lines) == 1, printed
    n = len(rq1)
    assert re.search(rf"accuracy 0\.0% \[0\.0, \d+\.\d\] \(0/{n}\)", lines[0]), lines[0]
    assert "coverage 0.0% [0.0, " in lines[0] and f"(0/{n})" in lines[0]
    assert "accuracy on answered - [-] (0/0)" in lines[0]
    assert b["runs"] == 1 or f"n {n} = {b['n_items']} items x {b['runs']} runs" in lines[0]
    assert main(["report", str(out), "--out", str(tmp_path / "rep")]) == 0
    md = (tmp_path / "rep" / "summary.md").read_text()
    assert "## Plain-slice RQ1 (no markers)" in md and f"| agent:markers | {n} | 0.0% " in md
