"""Open question types (issue 16): normalizer table, judge through a real local server, review
marks round trip, mask oracle on both real volumes, baselines at chance."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from radspatial.core.datafiles import DataFileError
from radspatial.core.records import ResultRow, read_results
from radspatial.eval.aggregate import group_metrics
from radspatial.eval.runner import EvalConfig, run_eval
from radspatial.grading.judge import apply_judge, cohen_kappa, load_calibration, parse_verdict
from radspatial.grading.normalize import normalize, rule_grade
from radspatial.grading.review import read_marks
from tests.fake_server import FakeChatServer, prompt_text

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "totalseg_example"
if not SHARED.is_dir():
    SHARED = Path("/work/shared/data/totalseg_example")

L, D, ID, C = "laterality", "direction", "identification", "counting"
# (question type, reply, status, value); value None for invalid/undecided
TABLE = [
    (L, "left", "answer", "left"), (L, "Left.", "answer", "left"), (L, "RIGHT", "answer", "right"),
    (L, "L", "answer", "left"), (L, "R", "answer", "right"), (L, "right side", "answer", "right"),
    (L, "It is on the left side of the image.", "answer", "left"),
    (L, "The spleen is on the right.", "answer", "right"),
    (L, "On the image's right-hand side", "answer", "right"),
    (L, "**Left**", "answer", "left"), (L, "`right`", "answer", "right"),
    (L, '{"answer": "left"}', "answer", "left"), (L, "{'answer': 'right'}", "answer", "right"),
    (L, "\\boxed{left}", "answer", "left"), (L, "<answer>right</answer>", "answer", "right"),
    (L, "<think>maybe left? no</think>right", "answer", "right"),
    (L, "Final answer: left", "answer", "left"),
    (L, "Looking at it, first I thought right. Final answer: left", "answer", "left"),
    (L, "The answer is right.", "answer", "right"),
    (L, "The spleen is on the right, not the left.", "answer", "right"),
    (L, "Not on the left but on the right", "answer", "right"),
    (L, "It isn't on the right; it is on the left.", "answer", "left"),
    (L, "right next to the liver, on the left", "answer", "left"),
    (L, "No, it is on the left.", "answer", "left"),
    (L, "A: left", "answer", "left"),
    (L, "On which side of the image is the spleen: left or right? Right.", "answer", "right"),
    (L, "left or right", "invalid", None), (L, "left and right", "invalid", None),
    (L, "probably left", "invalid", None), (L, "Maybe right", "invalid", None),
    (L, "It is likely on the left", "invalid", None),
    (L, "I cannot determine that.", "invalid", None),
    (L, "I'm not sure", "invalid", None), (L, "unclear", "invalid", None),
    (L, "Not on the left", "invalid", None), (L, "It is not on the right.", "invalid", None),
    (L, "", "invalid", None), (L, "   ", "invalid", None),
    (L, "Sorry, I can't see the image.", "invalid", None),
    (L, "either side", "invalid", None),
    (L, "the patient's left", "undecided", None), (L, "patient's right side", "undecided", None),
    (L, "sinister", "undecided", None), (L, "in the middle", "undecided", None),
    (L, "medially", "undecided", None),
    (D, "left", "answer", "left"), (D, "Above", "answer", "above"), (D, "below", "answer", "below"),
    (D, "right", "answer", "right"), (D, "up", "answer", "above"), (D, "down", "answer", "below"),
    (D, "higher", "answer", "above"), (D, "lower", "answer", "below"),
    (D, "underneath", "answer", "below"), (D, "beneath it", "answer", "below"),
    (D, "It lies above the aorta.", "answer", "above"),
    (D, "to the left of it", "answer", "left"), (D, "It is to the right.", "answer", "right"),
    (D, "superior", "answer", "above"), (D, "inferior", "answer", "below"),
    (D, "toward the top of the image", "answer", "above"),
    (D, "at the bottom", "answer", "below"), (D, "leftward", "answer", "left"),
    (D, "not above but below", "answer", "below"),
    (D, "Where is the liver relative to the aorta in this image: left, right, above or below? "
        "Below.", "answer", "below"),
    (D, "upper left", "invalid", None), (D, "above and to the left", "invalid", None),
    (D, "left or above", "invalid", None), (D, "probably below", "invalid", None),
    (D, "not above", "invalid", None), (D, "cannot tell", "invalid", None),
    (D, "anterior", "undecided", None), (D, "posteriorly", "undecided", None),
    (D, "lateral to it", "undecided", None), (D, "north", "undecided", None),
    (D, "same level", "undecided", None),
    (ID, "spleen", "answer", "spleen"), (ID, "The spleen.", "answer", "spleen"),
    (ID, "left kidney", "answer", "kidney_left"), (ID, "kidney (left)", "answer", "kidney_left"),
    (ID, "kidney_left", "answer", "kidney_left"), (ID, "Left Kidney", "answer", "kidney_left"),
    (ID, "L kidney", "answer", "kidney_left"), (ID, "the right kidney", "answer", "kidney_right"),
    (ID, "IVC", "answer", "inferior_vena_cava"),
    (ID, "inferior vena cava", "answer", "inferior_vena_cava"),
    (ID, "gall bladder", "answer", "gallbladder"), (ID, "large bowel", "answer", "colon"),
    (ID, "The number 2 marks the right kidney.", "answer", "kidney_right"),
    (ID, "It marks the aorta", "answer", "aorta"), (ID, "liver", "answer", "liver"),
    (ID, "psoas muscle (left)", "answer", "iliopsoas_left"),
    (ID, "Not the liver but the spleen", "answer", "spleen"),
    (ID, "stomach", "answer", "stomach"), (ID, "**Pancreas**", "answer", "pancreas"),
    (ID, "stomach or duodenum", "invalid", None), (ID, "liver and spleen", "invalid", None),
    (ID, "probably the spleen", "invalid", None), (ID, "not the liver", "invalid", None),
    (ID, "kidney", "undecided", None), (ID, "a vessel", "undecided", None),
    (ID, "hepatic parenchyma", "undecided", None),
    (C, "2", "answer", 2), (C, "two", "answer", 2), (C, "Two.", "answer", 2),
    (C, "3 regions", "answer", 3), (C, "There are three separate regions.", "answer", 3),
    (C, "one", "answer", 1), (C, "a single region", "answer", 1), (C, "1", "answer", 1),
    (C, "\\boxed{4}", "answer", 4), (C, '{"answer": 2}', "answer", 2),
    (C, "It appears as one continuous region", "answer", 1),
    (C, "no regions", "answer", 0), (C, "zero", "answer", 0), (C, "five", "answer", 5),
    (C, "an isolated region", "answer", 1),
    (C, "How many separate regions of the colon are visible in this image? 2", "answer", 2),
    (C, "2 or 3", "invalid", None), (C, "two or three", "invalid", None),
    (C, "at least 2", "invalid", None), (C, "more than one", "invalid", None),
    (C, "about 3", "invalid", None), (C, "several", "invalid", None),
    (C, "I can't count them", "invalid", None),
    (C, "a pair", "undecided", None), (C, "III", "undecided", None),
    (C, "a trio of loops", "undecided", None),
]  # fmt: skip


def test_table_is_large_and_covers_every_type():
    assert len(TABLE) >= 100
    assert {t for t, *_ in TABLE} == {L, D, ID, C}


@pytest.mark.parametrize(("qtype", "reply", "status", "value"), TABLE)
def test_normalizer_table(qtype, reply, status, value):
    question = {
        L: "On which side of the image is the spleen: left or right?",
        D: "Where is the liver relative to the aorta in this image: left, right, above or below?",
        ID: "Which structure does the number 2 mark?",
        C: "How many separate regions of the colon are visible in this image?",
    }[qtype]
    got = normalize(reply, qtype, question)
    assert (got.status, got.value) == (status, value), got.reason


def test_rule_grade_uses_synonyms_of_the_expected_name():
    norm = normalize("kidney (left)", ID)
    assert rule_grade(norm, "left kidney", ID) == 1
    assert rule_grade(norm, "right kidney", ID) == 0
    assert rule_grade(normalize("two", C), 2, C) == 1
    assert rule_grade(normalize("left or right", L), "left", L) is None


def test_kappa_and_verdicts():
    assert cohen_kappa(["a", "b", "a", "b"], ["a", "b", "a", "b"]) == 1.0
    assert cohen_kappa(["a", "a", "b", "b"], ["a", "b", "a", "b"]) == 0.0
    assert cohen_kappa([], []) is None
    assert parse_verdict("INCORRECT.") == (True, 0)
    assert parse_verdict("Verdict: correct") == (True, 1)
    assert parse_verdict("invalid") == (True, None)
    assert parse_verdict("I think so") == (False, None)


# ------------------------------------------------------------------ datasets on real volumes


def _generate(out: Path, ct: Path, seg: Path) -> Path:
    from radspatial.cli import main

    rc = main(
        ["generate", "--ct", str(ct), "--seg", str(seg), "--questions", "open", "--out", str(out)]
        + ["--export-masks", "--as-count", "0", "--markers", "numbers,dots"]
    )
    assert rc == 0
    return out


@pytest.fixture(scope="module")
def bundled(tmp_path_factory) -> Path:
    from radspatial.cli import bundled_example

    ct, seg = bundled_example()
    return _generate(tmp_path_factory.mktemp("open") / "bundled", ct, seg)


@pytest.fixture(scope="module")
def dicom(tmp_path_factory) -> Path:
    if not (SHARED / "ct_dicom").is_dir():
        pytest.skip("shared DICOM example missing")
    out = tmp_path_factory.mktemp("open") / "dicom"
    return _generate(out, SHARED / "ct_dicom", SHARED / "example_seg_dicom.nii.gz")


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in (path / "manifest.jsonl").read_text().splitlines()]


def test_open_answers_are_balanced_and_typed(bundled):
    rows = _rows(bundled)
    by_type: dict[str, list] = {}
    for r in rows:
        by_type.setdefault(r["question_type"], []).append(r["answer"])
    assert set(by_type) == {L, D, ID, C}
    lat = by_type[L]
    assert lat.count("left") == lat.count("right") > 0
    dirs = by_type[D]
    assert len({dirs.count(d) for d in ("left", "right", "above", "below")}) == 1
    counts = by_type[C]
    assert all(isinstance(n, int) for n in counts)
    assert counts.count(1) == counts.count(2) == counts.count(3) > 0
    assert all(isinstance(n, str) and n for n in by_type[ID])
    meta = json.loads((bundled / "dataset.json").read_text())
    assert meta["question_types"][D]["chance"] == 0.25
    assert 0 < meta["question_types"][ID]["chance"] < 0.5
    assert all(c["modality"] == "CT" for c in meta["cases"])


def test_bad_open_answer_refused(bundled, tmp_path):
    from radspatial.eval.items import load_items

    copy = tmp_path / "d"
    shutil.copytree(bundled, copy)
    lines = (copy / "manifest.jsonl").read_text().splitlines()
    k = next(i for i, line in enumerate(lines) if '"laterality"' in line)
    row = json.loads(lines[k])
    row["answer"] = "up"
    lines[k] = json.dumps(row)
    (copy / "manifest.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(DataFileError, match=rf"line {k + 1}: 'answer' must be one of left/right"):
        load_items(copy)


@pytest.mark.parametrize("volume", ["bundled", "dicom"])
def test_mask_oracle_answers_every_open_type(volume, request, tmp_path):
    data = request.getfixturevalue(volume)
    run_eval(data, tmp_path / "run", EvalConfig("agent:mask", runs=1), progress=False)
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    for qtype in (L, D, ID, C):
        g = metrics["open"][qtype]
        assert g["image"]["n"] > 0
        assert g["image"]["accuracy"] == 1.0, (volume, qtype)


def test_baselines_at_chance_and_in_their_frames(bundled, tmp_path):
    def open_metrics(model: str, runs: int = 3) -> dict:
        out = tmp_path / model.replace(":", "_")
        run_eval(bundled, out, EvalConfig(model, runs=runs), progress=False)
        return json.loads((out / "metrics.json").read_text())["open"]

    rnd = open_metrics("baseline:random")
    for qtype in (L, D, C, ID):
        g = rnd[qtype]
        assert g["invalid_rate"] == 0.0
        # the coin is keyed by the call: about chance, within 3.3 standard errors (99.9%)
        p, n, acc = g["chance"], g["image"]["n"], g["image"]["accuracy"]
        assert n and abs(acc - p) <= 3.3 * (p * (1 - p) / n) ** 0.5, (qtype, acc, p, n)
    const = open_metrics("baseline:yes", runs=1)
    for qtype in (L, D, C):  # balanced classes: a constant answer scores exactly chance
        assert const[qtype]["image"]["accuracy"] == pytest.approx(const[qtype]["chance"])
    std = open_metrics("baseline:standard-view", runs=1)
    assert std[L]["standard"]["accuracy"] == std[D]["standard"]["accuracy"] == 1.0
    assert std[L]["anatomical"]["accuracy"] == 0.0  # image side in standard view = other side
    prior = open_metrics("baseline:anatomy-prior", runs=1)
    assert prior[L]["anatomical"]["accuracy"] > prior[L]["image"]["accuracy"]


def test_f1_and_yes_rate_come_from_yes_no_items_only():
    """An open item holds its answers ("left" asked, "right" read); metrics count it as right or
    wrong (``ResultRow.scored``): in accuracy, its CI and the invalid rate, never in F1 or the
    yes rate (a grade is not a "yes": the yes/no types' metric hook gives those)."""

    def row(i: int, expected, parsed, **kw) -> ResultRow:
        item = {"id": f"q{i}", "run": 0, "setup": "rq1", "marker": "none", "question": "Q?"}
        item |= {"expected": expected, "parsed": parsed, "correct": parsed == expected, **kw}
        return ResultRow.from_json(item)

    yes_no = [row(i, e, p) for i, (e, p) in enumerate(((1, 1), (0, 1), (1, 1), (0, 0)))]
    grade = {"status": "answer", "reason": "one side", "source": "rules"}
    graded = [
        row(9 + k, "left", p, grade=grade, question_type="laterality")
        for k, p in enumerate(("left", "right"))
    ]
    assert [g.scored() for g in graded] == [(1, 1), (1, 0)]
    assert graded[0].scored("expected_standard") is None
    plain = group_metrics(yes_no, 1)
    assert plain.f1_mean == pytest.approx(0.8) and plain.yes_rate == 0.75
    assert plain.answers is None and plain.per_run[0].f1 is not None
    mixed = group_metrics(yes_no + graded, 1)
    assert mixed.accuracy_mean == pytest.approx(4 / 6) and mixed.n_items == 6
    assert mixed.f1_mean == pytest.approx(0.8) and mixed.yes_rate == 0.75
    assert mixed.answers == "mixed" and mixed.per_run[0].f1 == pytest.approx(0.8)
    only_open = group_metrics(graded, 1)
    assert only_open.accuracy_mean == 0.5 and only_open.answers == "open"
    assert only_open.f1_mean is None and only_open.yes_rate is None
    assert only_open.per_run[0].f1 is None and only_open.per_run[0].yes_rate is None


# ------------------------------------------------------------------ judge and review


def _judge_answer(body: dict) -> str:
    """A deterministic judge: reads the reference and the reply out of our fixed prompt."""
    text = prompt_text(body)
    ref = re.search(r"Reference answer: (.*)", text)[1].strip().lower()
    reply = re.search(r"Reply to grade: (.*)", text)[1].strip().lower()
    if any(w in reply for w in ("probably", "or ", "patient")):
        return "INVALID"
    words = {"north": "above", "east": "right", "a pair": "2", "iii": "3", "trio": "3"}
    reply = next((v for k, v in words.items() if k in reply), reply)
    return "CORRECT" if ref in reply else "INCORRECT"


def test_judge_through_local_server_cache_resume_kappa(bundled, tmp_path):
    from radspatial.models.base import Reply

    run = tmp_path / "run"
    run_eval(bundled, run, EvalConfig("baseline:random", runs=1), progress=False)
    rows = read_results(run / "results.jsonl")
    # replace a few replies by ones the rules cannot read, then judge through a real server
    odd = [k for k, r in enumerate(rows) if r.question_type == D][:4]
    for k, reply in zip(odd, ["north", "east", "to the north", "patient's left"], strict=True):
        read = normalize(reply, D, rows[k].question)
        grade = replace(rows[k].grade, status=read.status, reason=read.reason)
        rows[k] = replace(rows[k], reply=reply, reading=grade)
    with FakeChatServer(answer=_judge_answer) as server:
        spec = f"openai-compat:judge@{server.base_url}"
        judged, summary = apply_judge(rows, run, spec)
        first_calls = server.calls
        assert first_calls == 4 + len(load_calibration())
        assert summary["n_judged"] == 4
        assert summary["rules_vs_judge"]["kappa"] is not None
        assert 0.5 < summary["calibration"]["judge_accuracy"] <= 1.0
        north_east = [r for r in judged if r.reply in ("north", "east")]
        assert all(r.grade.source == "judge" for r in north_east)
        # cache: the same call again asks nothing
        apply_judge(rows, run, spec)
        assert server.calls == first_calls
        # resume: a torn last record and a lost one are asked again, nothing else
        log = run / "judge_calls.jsonl"
        lines = log.read_text().splitlines()
        log.write_text("\n".join(lines[:-2]) + "\n" + lines[-2][:10])
        apply_judge(rows, run, spec)
        assert server.calls == first_calls + 2
        # --judge-all: every open answer goes to the judge; kappa over the rules' decisions
        _, every = apply_judge(rows, run, spec, judge_all=True)
        assert every["n_judged"] == every["n_open_rows"]
        assert every["rules_vs_judge"]["n"] > 100
        assert every["rules_vs_judge"]["kappa"] > 0.9
    assert json.loads((run / "judge.json").read_text())["version"] == "radspatial-judge-1"
    assert Reply  # the backend is the real openai-compat client


def test_eval_cli_with_judge(bundled, tmp_path):
    from radspatial.cli import main

    with FakeChatServer(answer=_judge_answer) as server:
        args = ["eval", "--data", str(bundled), "--model", "baseline:random", "--runs", "1"]
        args += ["--questions", "laterality", "--out", str(tmp_path / "r")]
        args += ["--judge", f"openai-compat:judge@{server.base_url}", "--judge-all"]
        assert main(args) == 0
    metrics = json.loads((tmp_path / "r" / "metrics.json").read_text())
    assert metrics["judge"]["judge_needed_rate"] == 1.0
    assert metrics["open"][L]["graded_by"] == {"judge": metrics["open"][L]["image"]["n"]}


def test_review_marks_round_trip(bundled, tmp_path):
    from radspatial.cli import main

    run = tmp_path / "run"
    run_eval(bundled, run, EvalConfig("baseline:random", runs=1), progress=False)
    before = (run / "results.jsonl").read_bytes()
    rows = [json.loads(x) for x in before.decode().splitlines()]
    lat = [r for r in rows if r["question_type"] == L][:6]
    marks = []
    for k, r in enumerate(lat):
        auto = "correct" if r["correct"] else "incorrect"
        flip = {"correct": "incorrect", "incorrect": "correct"}[auto]
        marks.append({"id": r["id"], "run": 0, "mark": flip if k == 0 else auto, "reviewer": "a"})
    marks.append({"id": lat[1]["id"], "mark": "ambiguous", "reviewer": "b"})
    marks.append({"id": "no/such/item", "mark": "correct"})
    path = tmp_path / "marks.jsonl"
    path.write_text("".join(json.dumps(m) + "\n" for m in marks))
    assert len(read_marks(path)) == 8
    assert main(["report", str(run), "--out", str(tmp_path / "rep"), "--review", str(path)]) == 0
    review = json.loads((tmp_path / "rep" / "review.json").read_text())
    model = review["models"]["baseline:random"]
    assert model["n_reviewed"] == 7 and model["n_ambiguous"] == 1
    assert model["agreement"] == pytest.approx(5 / 6)
    assert [d["id"] for d in model["disagreements"]] == [lat[0]["id"]]
    assert review["unmatched"] == 1
    assert (run / "results.jsonl").read_bytes() == before  # never overwritten
    assert "Human review" in (tmp_path / "rep" / "summary.md").read_text()
    path.write_text('{"id": "x", "mark": "maybe"}\n')
    with pytest.raises(DataFileError, match=r"line 1: 'mark' must be one of"):
        read_marks(path)
    rc = main(["report", str(run), "--out", str(tmp_path / "rep2"), "--review", str(path)])
    assert rc == 2
