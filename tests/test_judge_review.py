"""Judge-human agreement (issue 37, item 4): where review marks exist for answers the LLM judge
graded, ``review.json`` and the report give Cohen's kappa and the confusion between the judge and
the reviewers per question type, with n; the judge's model, prompt and seed are in judge.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from radspatial.cli import main
from radspatial.grading.review import fold_review, read_marks
from radspatial.reports.open_answers import open_markdown

# (question type, the judge's verdict, the reviewer's mark) of 10 reviewed answers
CASES = [
    ("laterality", "correct", "correct"),
    ("laterality", "correct", "correct"),
    ("laterality", "correct", "incorrect"),
    ("laterality", "incorrect", "incorrect"),
    ("laterality", "invalid", "incorrect"),
    ("laterality", "incorrect", "correct"),
    ("counting", "correct", "correct"),
    ("counting", "incorrect", "incorrect"),
    ("counting", "incorrect", "incorrect"),
    ("counting", "correct", "incorrect"),
]


def _rows() -> list[dict]:
    return [
        {
            "id": f"rq1/none/ex_slice0{k}/q0",
            "run": 0,
            "question_type": qtype,
            "correct": verdict == "correct",
            "judge": {"verdict": verdict, "key": f"k{k}"},
            "grade": {"status": "undecided", "reason": "", "source": "judge"},
        }
        for k, (qtype, verdict, _) in enumerate(CASES)
    ]


def _records(rows: list[dict]) -> list:
    """``rows`` as the result rows a judged run writes (open rows the judge decided)."""
    from radspatial.core.answers import Grade
    from radspatial.core.records import ResultRow

    return [
        ResultRow(
            id=r["id"],
            run=0,
            setup="rq1",
            marker="none",
            question="Which side is the liver on?",
            question_type=r["question_type"],
            expected="left",
            correct=r["correct"],
            reply="left",
            parsed=None,  # the rules read nothing: the judge decided
            kind="choice",
            reading=Grade(None, "undecided", "", r["correct"], "judge", {"judge": r["judge"]}),
        )
        for r in rows
    ]


def _marks(tmp_path: Path) -> Path:
    path = tmp_path / "marks.jsonl"
    lines = [
        {"id": f"rq1/none/ex_slice0{k}/q0", "mark": mark, "reviewer": "jd"}
        for k, (_, _, mark) in enumerate(CASES)
    ]
    lines.append({"id": "rq1/none/ex_slice099/q0", "mark": "ambiguous"})  # matches nothing
    path.write_text("".join(json.dumps(m) + "\n" for m in lines))
    return path


def test_kappa_per_type_equals_the_hand_computed_value(tmp_path):
    review = fold_review([("m", "spec", _records(_rows()))], read_marks(_marks(tmp_path)))
    agreement = review["models"]["m"]["judge_vs_review"]
    # laterality, judge invalid read as incorrect: judge C C C I I I, reviewer C C I I I C
    # observed 4/6; judge 3 C / 3 I, reviewer 3 C / 3 I -> chance 0.5; kappa (2/3-1/2)/(1/2)
    lat = agreement["laterality"]
    assert lat["n"] == 6 and lat["kappa"] == pytest.approx(1 / 3, abs=1e-6)
    assert lat["agreement"] == pytest.approx(4 / 6, abs=1e-6)
    assert lat["confusion"] == {
        "correct": {"correct": 2, "incorrect": 1},
        "incorrect": {"incorrect": 1, "correct": 1},
        "invalid": {"incorrect": 1},
    }
    # counting: judge C I I C, reviewer C I I I: observed 3/4; judge 2C 2I, reviewer 1C 3I ->
    # chance 0.5*0.25 + 0.5*0.75 = 0.5; kappa (0.75 - 0.5) / 0.5 = 0.5
    assert agreement["counting"]["kappa"] == pytest.approx(0.5, abs=1e-6)
    # all 10: observed 7/10; judge 5 C / 5 not, reviewer 4 C / 6 not -> chance 0.5; kappa 0.4
    assert agreement["all"]["n"] == 10
    assert agreement["all"]["kappa"] == pytest.approx(0.4, abs=1e-6)
    markdown = open_markdown([], {"marks": "marks.jsonl", **review})
    assert "## LLM judge vs human review" in markdown
    assert "invalid → incorrect: 1" in markdown


def test_no_judged_rows_no_judge_section(tmp_path):
    rows = [{**r, "judge": None} for r in _rows()]
    review = fold_review([("m", "spec", _records(rows))], read_marks(_marks(tmp_path)))
    assert "judge_vs_review" not in review["models"]["m"]
    assert "LLM judge vs human review" not in open_markdown([], {"marks": "m", **review})


def test_judge_json_records_model_prompt_and_seed(tmp_path):
    from radspatial.grading.judge import JUDGE_PROMPT, apply_judge
    from radspatial.models.base import Reply

    class Judge:  # answers every calibration case; the spec below is what is recorded
        def generate(self, requests, on_reply):
            for req in requests:
                on_reply(req, Reply(text="CORRECT"))

    summary = apply_judge([], tmp_path, "baseline:yes", backend=Judge())[1]
    saved = json.loads((tmp_path / "judge.json").read_text())
    assert saved == summary
    assert saved["judge"] == "baseline:yes" and saved["prompt"] == JUDGE_PROMPT
    assert saved["seed"] == saved["decoding"]["seed"] == 0


def test_report_review_flag_shows_the_table(tmp_path):
    """``radspatial report --review`` on a run folder whose open rows the judge graded."""
    from radspatial.eval.aggregate import compute_metrics

    run = tmp_path / "run"
    run.mkdir()
    rows = [r.to_json() for r in _records(_rows())]
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    metrics = compute_metrics(rows, model="m", runs=1).to_json()
    (run / "metrics.json").write_text(json.dumps(metrics))
    (run / "run.json").write_text(json.dumps({"model": "m", "status": "complete"}))
    out = tmp_path / "rep"
    assert main(["report", str(run), "--out", str(out), "--review", str(_marks(tmp_path))]) == 0
    summary = (out / "summary.md").read_text()
    assert "## LLM judge vs human review" in summary
    # kappa beside percentages: two decimals (issue 50, 9), not 0.333333
    assert "| 0.33 |" in summary and "0.3333" not in summary
    kappa = json.loads((out / "review.json").read_text())["models"]["m"]["judge_vs_review"]
    assert kappa["all"]["kappa"] == pytest.approx(0.4, abs=1e-6)
