"""The LLM judge's verdicts (issue 36): read as the answer parser reads answers (negation, the
last explicit verdict, a contradiction is no verdict), re-read from the reply when a cached
verdict is reused, unknown cache fields refused, and no password from the judge's URL in
judge.json. The judge is a real HTTP server on 127.0.0.1 (tests/fake_server.py)."""

from __future__ import annotations

import json

import pytest
from fake_server import FakeChatServer

from radspatial.core.datafiles import DataFileError
from radspatial.core.records import ResultRow
from radspatial.grading.judge import JUDGE_CALLS, apply_judge, parse_verdict

# (judge reply, understood, grade): 1 correct, 0 incorrect, None invalid
VERDICTS = [
    ("CORRECT", True, 1),
    ("**Incorrect.**", True, 0),
    ("invalid", True, None),
    ("The reply is not CORRECT. Verdict: INCORRECT", True, 0),
    ("The reply is not INCORRECT. Verdict: CORRECT", True, 1),
    ("Verdict: CORRECT\nOn reflection, Verdict: INCORRECT", True, 0),
    ("Reasoning: it names the right side.\nINVALID", True, None),
    ("<think>CORRECT? no.</think>INCORRECT", True, 0),
    ("The reply isn't correct; it is incorrect.", True, 0),
    ("The correct answer is left, so the reply is INCORRECT.", True, 0),
    ("It hedges between sides, so it is invalid, not incorrect.", True, None),
    ("Final answer: incorrect", True, 0),
    ("It is correct. No wait, it is incorrect.", False, None),  # a contradiction
    ("CORRECT or INCORRECT", False, None),
    ("Verdict: not CORRECT", False, None),  # says what it is not
    ("Is the reply correct?", False, None),  # a question asserts nothing
    ("I think so", False, None),
    ("", False, None),
    (None, False, None),
]


@pytest.mark.parametrize(
    ("text", "understood", "grade"), VERDICTS, ids=[str(v[0]) for v in VERDICTS]
)
def test_verdicts(text, understood, grade):
    assert parse_verdict(text) == (understood, grade)


def _rows() -> list[ResultRow]:
    """Two open rows the rules left undecided (answers in the patient's frame)."""
    base = {"question": "Which side of the image is the liver on?", "question_type": "laterality",
            "expected": "left", "parsed": None, "run": 0, "setup": "rq1", "marker": "none",
            "correct": False, "grade": {"status": "undecided", "reason": "", "source": "none"},
            "error": None}  # fmt: skip
    return [ResultRow.from_json({**base, "id": "a", "reply": "the patient's right"}),
            ResultRow.from_json({**base, "id": "b", "reply": "the patient's left"})]  # fmt: skip


def _negated(body: dict) -> str:
    return "The reply is not CORRECT.\nVerdict: INCORRECT"


def test_judge_negation_cache_and_password(tmp_path):
    secret = "S3CRETpw"
    with FakeChatServer(answer=_negated) as server:
        url = server.base_url.replace("http://", f"http://judge:{secret}@")
        rows, summary = apply_judge(_rows(), tmp_path, f"openai-compat:j@{url}")
    assert [r.outcome for r in rows] == [0, 0] and not any(r.correct for r in rows)
    assert all(r.parsed is None and r.grade.source == "judge" for r in rows)
    assert summary["n_judge_failed"] == 0
    written = (tmp_path / "judge.json").read_text()
    assert secret not in written and "***@" in written
    # a forged (or older parser's) grade in the cache is read again from the reply
    log = tmp_path / JUDGE_CALLS
    records = [json.loads(x) for x in log.read_text().splitlines()]
    log.write_text("".join(json.dumps({**r, "grade": 1}) + "\n" for r in records))

    class NoCalls:
        def generate(self, requests, on_reply):
            raise AssertionError("every verdict is cached")

    rows, _ = apply_judge(_rows(), tmp_path, f"openai-compat:j@{url}", backend=NoCalls())
    assert [r.outcome for r in rows] == [0, 0]
    # a field the judge never writes is refused, naming the file
    log.write_text("".join(json.dumps({**r, "grade_override": 1}) + "\n" for r in records))
    with pytest.raises(DataFileError, match=r"judge_calls\.jsonl: .*unknown 'grade_override'"):
        apply_judge(_rows(), tmp_path, f"openai-compat:j@{url}", backend=NoCalls())
