"""Evaluator: reading datasets (ours and MIRP's), prompts, resume, metrics by hand."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from synth import write_case

from radspatial.bench.dataset import build_dataset
from radspatial.bench.generate import GenerateConfig
from radspatial.core.records import ResultRow
from radspatial.eval.aggregate import compute_metrics, group_metrics
from radspatial.eval.items import load_items
from radspatial.eval.prompts import MIRP, PromptTemplate, load_template
from radspatial.eval.runner import CALLS, EvalConfig, run_eval
from radspatial.imaging.volumes import Case
from radspatial.models.base import create_backend

MIRP_SAMPLE = Path(__file__).resolve().parents[2] / "shared" / "data" / "mirp_sample"
needs_mirp = pytest.mark.skipif(not MIRP_SAMPLE.is_dir(), reason="../shared/data not present")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("ds")
    ct, seg = write_case(tmp / "in")
    out = tmp / "ds"
    build_dataset([Case("synth", ct, seg)], GenerateConfig(seed=3, size=192, as_count=6), out)
    return out


@needs_mirp
def test_reads_the_published_mirp_layout_with_its_quirks():
    items = load_items(MIRP_SAMPLE)
    assert len(items) == 30
    kinds = {(i.setup, i.marker) for i in items}
    assert kinds == {("rq1", "none")} | {
        (s, m) for s in ("rq2", "rq3", "as") for m in ("dots", "letters", "numbers")
    }
    letters = [i for i in items if i.setup == "rq2" and i.marker == "letters"]
    assert letters[0].object1 and letters[0].object2  # names read despite object1_label
    kid = [i for i in items if i.setup == "rq1" and "left kidney" in i.question][0]
    assert "kidney_left" in (kid.object1, kid.object2)
    assert all(i.transform is None for i in items)  # the sample lacks rotate_flip_*
    assert all(i.image.is_file() for i in items)
    assert {i.relation for i in items} <= {"above", "below", "left_of", "right_of"}


def test_mirp_full_release_fields_and_canonical_centres(tmp_path):
    root = tmp_path / "mirp"
    (root / "RQ1" / "images").mkdir(parents=True)
    (root / "RQ1" / "images" / "a.png").write_bytes(b"png")
    entry = {
        "filename": "a.png",
        "base_name": "amos_0002.nii",
        "slice_index": 20,
        "question_answer": [
            {
                "object1_name": "left kidney",
                "object2_name": "inferior vena cava",
                "object1_gray": 3,
                "object2_gray": 63,
                "question": "Is the left kidney to the left of the inferior vena cava?",
                "answer": 1,
            }
        ],
        "rotate_flip_short": "A1",
        "rotate_flip_long": "Horizontal flip and 0 degree rotation",
    }
    (root / "RQ1" / "qa.json").write_text(json.dumps([entry]))
    centres = [
        {
            "filename": "a.png",
            "label_info": [
                {"class_name": "kidney_left", "center_x": 340.0, "center_y": 300.0},
                {"class_name": "inferior_vena_cava", "center_x": 230.0, "center_y": 280.0},
            ],
        }
    ]
    (root / "center_of_anatomical_stuctures_in_standard_radiological_orientation.json").write_text(
        json.dumps(centres)
    )
    (item,) = load_items(root)
    assert item.transform == "A1" and item.expected == 1
    # standard view: the left kidney is on the image right, so "to the left of" reads false;
    # the patient's frame (MIRP's anatomical truth): it lies on the patient's left -> true
    assert item.expected_standard == 0
    assert item.expected_anatomical == 1


def test_reads_generated_manifest(dataset):
    items = load_items(dataset)
    rows = [json.loads(x) for x in (dataset / "manifest.jsonl").read_text().splitlines()]
    assert len(items) == len(rows)
    by_id = {i.id: i for i in items}
    for r in rows:
        i = by_id[r["id"]]
        assert i.expected == r["answer"] and i.expected_standard == r["answer_standard"]
        assert i.expected_anatomical == r["answer_anatomical"]
        assert i.transform == r["transform"]
    only = load_items(dataset, setups=["rq3"], markers=["dots"])
    assert only and all(i.setup == "rq3" and i.marker == "dots" for i in only)


def test_not_a_dataset_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="not a dataset"):
        load_items(tmp_path)


def _example(item):
    """The fixed example our protocol should show: MIRP's (answer 1) or its opposite (0)."""
    from radspatial.eval.prompts import example_answer

    rel = "above" if example_answer(item.id) else "below"
    return rel, example_answer(item.id)


def test_mirp_prompt_is_verbatim_with_matching_fixed_example(dataset):
    all_items = load_items(dataset)
    items = {(i.setup, i.marker): i for i in all_items}
    rq1 = MIRP.render(items[("rq1", "none")])
    assert rq1.startswith("The image is a 2D axial slice of an abdominal CT scan")
    assert "'1' or '0'.Ignore anatomical correctness" in rq1  # MIRP's own missing space
    rel, ans = _example(items[("rq1", "none")])
    assert f"Q: Is the aorta {rel} the spleen? A: {ans}\n" in rq1
    assert rq1.endswith("Q: " + items[("rq1", "none")].question)
    rel, ans = _example(items[("rq2", "letters")])
    assert f"Q: Is the aorta (BZ) {rel} the spleen (AA)? A: {ans}" in MIRP.render(
        items[("rq2", "letters")]
    )
    rel, ans = _example(items[("rq3", "dots")])
    assert f"Q: Is the red dot {rel} the blue dot? A: {ans}" in MIRP.render(items[("rq3", "dots")])
    blank = MIRP.render(items[("as", "numbers")])
    assert blank.startswith("Answer strictly") and "CT scan" not in blank
    rel, ans = _example(items[("as", "numbers")])
    assert f"Q: Is the number 52 {rel} the number 1? A: {ans}" in blank


def test_fixed_examples_are_balanced_and_independent_of_the_answer(dataset):
    items = load_items(dataset)
    shown = [int(MIRP.render(i).split("\nNow answer")[0][-1]) for i in items]
    assert 0.35 <= sum(shown) / len(shown) <= 0.65  # not "always 1"
    same = sum(int(s == i.expected) for s, i in zip(shown, items, strict=True))
    assert 0.25 <= same / len(items) <= 0.75  # the example does not leak the answer
    # fixed per item: rendering twice gives the same prompt
    assert [MIRP.render(i) for i in items[:5]] == [MIRP.render(i) for i in items[:5]]


def test_custom_template(tmp_path, dataset):
    f = tmp_path / "t.txt"
    f.write_text("Look at the {setup} image. {question} Reply yes or no.")
    t = load_template(f)
    item = load_items(dataset)[0]
    assert t.render(item) == f"Look at the {item.setup} image. {item.question} Reply yes or no."
    f.write_text("no placeholder")
    with pytest.raises(ValueError, match="placeholder"):
        load_template(f)
    f.write_text("{question} {unknown}")
    with pytest.raises(ValueError, match="bad placeholder"):
        load_template(f)
    assert isinstance(load_template(None), PromptTemplate)


class Crashing:
    """Wraps a backend; raises after ``n`` replies (a crash mid-run); counts calls."""

    def __init__(self, inner, n: int | None) -> None:
        self.inner, self.n, self.spec, self.calls = inner, n, inner.spec, []

    def describe(self):
        return self.inner.describe()

    def generate(self, requests, on_reply):
        def wrapped(req, reply):
            if self.n is not None and len(self.calls) >= self.n:
                raise RuntimeError("injected crash")
            self.calls.append(req.key)
            on_reply(req, reply)

        self.inner.generate(requests, wrapped)


def _strip(rows):
    return [{k: v for k, v in r.items() if k != "latency_s"} for r in rows]


def test_resume_after_crash_repeats_nothing_and_matches_uninterrupted(tmp_path, dataset):
    cfg = EvalConfig(model="baseline:random", runs=3)
    full = Crashing(create_backend(cfg.model), None)
    ref = run_eval(dataset, tmp_path / "ref", cfg, backend=full, progress=False)
    total = len(full.calls)
    assert total == len(ref) == 3 * len(load_items(dataset))

    first = Crashing(create_backend(cfg.model), 17)
    with pytest.raises(RuntimeError, match="injected"):
        run_eval(dataset, tmp_path / "run", cfg, backend=first, progress=False)
    assert len(first.calls) == 17
    logged = (tmp_path / "run" / CALLS).read_text().splitlines()
    assert len(logged) == 17
    second = Crashing(create_backend(cfg.model), None)
    rows = run_eval(dataset, tmp_path / "run", cfg, backend=second, progress=False)
    assert not set(second.calls) & set(first.calls)
    assert len(second.calls) == total - 17
    assert _strip(rows) == _strip(ref)
    m_ref = json.loads((tmp_path / "ref" / "metrics.json").read_text())
    m_run = json.loads((tmp_path / "run" / "metrics.json").read_text())
    for m in (m_ref, m_run):  # latency is measured, not derived: the percentiles may differ
        m["usage"] = {k: v for k, v in m["usage"].items() if not k.startswith("latency_s")}
    assert m_ref == m_run
    # a third run with everything done sends nothing
    third = Crashing(create_backend(cfg.model), None)
    run_eval(dataset, tmp_path / "run", cfg, backend=third, progress=False)
    assert third.calls == []


def test_torn_last_line_is_dropped_and_errors_are_retried(tmp_path, dataset):
    cfg = EvalConfig(model="baseline:yes", runs=1, limit=4)
    out = tmp_path / "run"
    run_eval(dataset, out, cfg, progress=False)
    log = out / CALLS
    lines = log.read_text().splitlines()
    bad = json.loads(lines[1])
    bad.update(reply=None, error="HTTP 500 after 6 attempts")
    log.write_text("\n".join([lines[0], json.dumps(bad)]) + "\n" + lines[2][:20])
    again = Crashing(create_backend(cfg.model), None)
    rows = run_eval(dataset, out, cfg, backend=again, progress=False)
    assert len(again.calls) == 3  # the errored call and the two lost ones
    assert all(r["error"] is None and r["parsed"] == 1 for r in rows)


def test_failed_calls_are_errors_not_wrong_answers(tmp_path, dataset):
    class Failing:
        spec = "failing"

        def describe(self):
            return {"spec": self.spec}

        def generate(self, requests, on_reply):
            from radspatial.models.base import Reply

            for r in requests:
                on_reply(r, Reply(text=None, error="HTTP 503 after 6 attempts"))

    cfg = EvalConfig(model="failing", runs=1, limit=3)
    rows = run_eval(dataset, tmp_path / "f", cfg, backend=Failing(), progress=False)
    assert all(r["error"] and r["parsed"] is None and not r["correct"] for r in rows)
    run = json.loads((tmp_path / "f" / "run.json").read_text())
    assert run["status"] == "incomplete" and run["n_errors"] == 3
    metrics = json.loads((tmp_path / "f" / "metrics.json").read_text())
    assert metrics["n_errors"] == 3 and "errors" not in metrics


def _row(i, run, expected, parsed, **kw):
    base = {
        "id": f"q{i}",
        "run": run,
        "setup": "rq1",
        "marker": "none",
        "question": "Is a left of b?",
        "relation": "left_of",
        "transform": "B1",
        "variant": "normal",
        "pair": "a / b",
        "expected": expected,
        "expected_standard": expected,
        "expected_anatomical": 1 - expected,
        "parsed": parsed,
        "correct": parsed == expected,
        "error": None,
    }
    base.update(kw)
    return base


def test_metrics_by_hand():
    # run 0: expected 1,1,0,0 parsed 1,0,0,None -> 2/4 correct; TP=1 FN=1 FP=0 and the invalid
    # answer counts as wrong (as "yes" when 0 was expected): FP=1 -> F1 = 2*1/(2*1+1+1) = 0.5
    # run 1: parsed 1,1,0,0 -> 4/4, F1 = 1.0
    rows = [
        _row(i, 0, e, p) for i, (e, p) in enumerate(zip([1, 1, 0, 0], [1, 0, 0, None], strict=True))
    ]
    rows += [
        _row(i, 1, e, p) for i, (e, p) in enumerate(zip([1, 1, 0, 0], [1, 1, 0, 0], strict=True))
    ]
    g = group_metrics([ResultRow.from_json(r) for r in rows], 2)
    assert g.n_items == 4 and g.runs == 2
    assert g.accuracy_mean == pytest.approx(0.75)
    assert g.accuracy_std == pytest.approx(0.353553, abs=1e-6)  # std of [0.5, 1.0], ddof=1
    assert g.f1_mean == pytest.approx(0.75)
    assert g.invalid_rate == pytest.approx(0.125)  # 1/4 then 0/4
    # yes-rate over valid answers: run 0 1/3, run 1 2/4 -> mean 0.416667
    assert g.yes_rate == pytest.approx((1 / 3 + 0.5) / 2, abs=1e-6)
    # Wilson 95% on 6/8 pooled: 0.4093 .. 0.9285
    assert g.ci_low == pytest.approx(0.4093, abs=1e-3)
    assert g.ci_high == pytest.approx(0.9285, abs=1e-3)
    m = compute_metrics(rows, model="m", runs=2)
    # run 0 vs run 1: items q1 and q3 right only in run 1 -> b = 0, c = 2, exact p = 0.5
    agree = m.run_agreement["0_vs_1"]
    assert (agree.b, agree.c) == (0, 2) and agree.p_value == pytest.approx(0.5)


def test_frames_separate_image_and_anatomy():
    # A model that always answers the anatomical (patient-frame) answer: where image and
    # anatomy disagree it is always wrong in the image frame and always right anatomically.
    # Left/right: the anatomical answer is the standard view's, swapped.
    rows = []
    for i, (exp, anat) in enumerate([(1, 0), (0, 1), (1, 1), (0, 0)]):
        rows.append(_row(i, 0, exp, anat, expected_standard=1 - anat, expected_anatomical=anat))
    m = compute_metrics(rows, model="prior", runs=1).to_json()
    lr = m["frames"]["rq1"]["left_right"]
    assert lr["conflict_image"]["accuracy_mean"] == 0.0
    assert lr["conflict_anatomical"]["accuracy_mean"] == 1.0
    assert lr["aligned_image"]["accuracy_mean"] == 1.0
    assert lr["image"]["accuracy_mean"] == 0.5 and lr["anatomical"]["accuracy_mean"] == 1.0
    assert lr["standard"]["accuracy_mean"] == 0.0
    assert lr["view_conflict_image"]["n_items"] == 2  # image != standard on items 2 and 3


def test_frames_of_old_runs_derive_anatomical_from_canonical():
    rows = [_row(i, 0, e, e) for i, e in enumerate([1, 0])]
    for r in rows:  # a results.jsonl written before the three frames had names
        r["expected_canonical"] = r.pop("expected_standard")
        r.pop("expected_anatomical")
    lr = compute_metrics(rows, model="old", runs=1).frames["rq1"]["left_right"].to_json()
    assert lr["standard"]["accuracy_mean"] == 1.0 and lr["anatomical"]["accuracy_mean"] == 0.0


def test_anatomy_prior_recites_anatomy(tmp_path, dataset):
    cfg = EvalConfig(model=f"baseline:anatomy-prior@{dataset}", runs=1)
    run_eval(dataset, tmp_path / "p", cfg, progress=False)
    m = json.loads((tmp_path / "p" / "metrics.json").read_text())
    for axis in m["frames"]["rq1"].values():
        assert axis["anatomical"]["accuracy_mean"] >= 0.9
        if axis["conflict_image"]["n_items"]:
            assert axis["conflict_image"]["accuracy_mean"] <= 0.1
    # the MIRP block's anatomical left/right (MIRP's RQ3(1)) agrees
    assert m["mirp"]["RQ1/none"]["anatomy_left_right"]["accuracy_mean"] >= 0.9


def test_standard_view_baseline_is_the_standard_frame_oracle(tmp_path, dataset):
    cfg = EvalConfig(model="baseline:standard-view", runs=1, setups=("rq1", "rq2", "rq3"))
    run_eval(dataset, tmp_path / "s", cfg, progress=False)
    m = json.loads((tmp_path / "s" / "metrics.json").read_text())
    for setup in ("rq1", "rq2", "rq3"):
        for axis in m["frames"][setup].values():
            assert axis["standard"]["accuracy_mean"] == 1.0
            if axis["view_conflict_image"]["n_items"]:
                assert axis["view_conflict_image"]["accuracy_mean"] == 0.0


def test_cli_eval_on_mirp_sample(tmp_path):
    if not MIRP_SAMPLE.is_dir():
        pytest.skip("../shared/data not present")
    from radspatial.cli import main

    data = tmp_path / "mirp"
    shutil.copytree(MIRP_SAMPLE, data)
    out = tmp_path / "run"
    assert main(["eval", "--data", str(data), "--model", "baseline:no", "--out", str(out)]) == 0
    m = json.loads((out / "metrics.json").read_text())
    assert m["overall"]["n_items"] == 30 and m["overall"]["yes_rate"] == 0.0
    assert main(["eval", "--data", str(tmp_path), "--model", "baseline:no", "--out", str(out)]) == 2


def test_older_dataset_with_answer_canonical_still_reads(tmp_path, dataset):
    import shutil

    old = tmp_path / "old"
    shutil.copytree(dataset, old)
    rows = [json.loads(x) for x in (old / "manifest.jsonl").read_text().splitlines()]
    for r in rows:  # the format before the three frames had names
        r["answer_canonical"] = r.pop("answer_standard")
        r.pop("answer_anatomical")
    (old / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    new = {i.id: i for i in load_items(dataset)}
    for item in load_items(old):
        assert item.expected_standard == new[item.id].expected_standard
        assert item.expected_anatomical == new[item.id].expected_anatomical
