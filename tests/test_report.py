"""Report: tables, summary.json and figures from real run folders of the baselines."""

from __future__ import annotations

import json
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest
from PIL import Image
from synth import write_case

from radspatial.bench.dataset import build_dataset
from radspatial.bench.generate import GenerateConfig
from radspatial.cli import bundled_example
from radspatial.core.io import read_jsonl
from radspatial.core.stats import mcnemar
from radspatial.eval.runner import EvalConfig, run_eval
from radspatial.imaging.volumes import Case
from radspatial.reports.build import build_report

MODELS = ("baseline:yes", "baseline:no", "baseline:anatomy-prior")
FIGURES = (
    "accuracy_by_setup.png",
    "rotation_heatmap.png",
    "frames.png",
    "frames_rq2.png",
    "frames_rq3.png",
    "decidable_by_level.png",  # the dataset's decidable share by body level (reports/decidable)
)
MIRP_SAMPLE = Path(__file__).resolve().parents[2] / "shared" / "data" / "mirp_sample"


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """A small dataset (bundled real CT + a synthetic counterfactual case), 2 runs per model."""
    tmp = tmp_path_factory.mktemp("report")
    ct, seg = bundled_example()
    synth_ct, synth_seg = write_case(tmp / "synth")
    cases = [Case("example", ct, seg), Case("cf", synth_ct, synth_seg, variant="situs_inversus")]
    data = tmp / "ds"
    build_dataset(cases, GenerateConfig(size=128, as_count=4), data, log=lambda _: None)
    out = {}
    for spec in MODELS:
        out[spec] = tmp / "ev" / spec.split(":")[1]
        run_eval(data, out[spec], EvalConfig(model=spec, runs=2), progress=False)
    return out


@pytest.fixture(scope="module")
def report(runs, tmp_path_factory):
    return build_report([runs[m] for m in MODELS], tmp_path_factory.mktemp("out") / "report")


def _row(md: str, label: str) -> list[str]:
    """Cells of the first table row for ``label`` (the accuracy-by-setup table)."""
    line = next(x for x in md.splitlines() if x.startswith(f"| {label} |"))
    return [c.strip() for c in line.strip("|").split("|")]


def _header(md: str) -> list[str]:
    line = next(x for x in md.splitlines() if x.startswith("| Model | RQ1"))
    return [c.strip() for c in line.strip("|").split("|")]


def test_writes_summary_and_readable_figures(report):
    assert report.models == list(MODELS)
    assert report.summary_md.is_file() and report.summary_json.is_file()
    assert [p.name for p in report.figures] == list(FIGURES)
    for path in report.figures:
        with Image.open(path) as im:
            im.load()
            assert im.format == "PNG"
            assert im.width >= 800 and im.height >= 400, (path.name, im.size)
    assert not list(report.out.glob(".*.tmp"))  # atomic writes left no temp files


def test_table1_has_every_model_and_the_exact_baseline_numbers(report, runs):
    md = report.summary_md.read_text()
    header = _header(md)
    assert header[:5] == ["Model", "RQ1", "RQ2 dots", "RQ2 letters", "RQ2 numbers"]
    assert {"AS dots", "RQ3 numbers", "Overall (RQ1-3)", "95% CI", "Invalid", "Yes-rate"} <= set(
        header
    )
    # the headline pools RQ1-RQ3 only: the blank-image ablation comes after it, on its own
    assert header.index("AS dots") > header.index("95% CI") > header.index("RQ3 numbers")
    yes, no = _row(md, "baseline:yes"), _row(md, "baseline:no")
    # balanced questions: always-yes and always-no are right on exactly half, in every run
    for row in (yes, no):
        assert all(c == "50.0 ± 0.0" for c in row[1 : header.index("95% CI")])
        assert row[header.index("Invalid")] == "0.0"
    assert yes[header.index("Yes-rate")] == "100.0"
    assert no[header.index("Yes-rate")] == "0.0"
    prior = json.loads((runs["baseline:anatomy-prior"] / "metrics.json").read_text())
    o = prior["headline"]
    cell = f"{100 * o['accuracy_mean']:.1f} ± {100 * o['accuracy_std']:.1f}"
    assert _row(md, "baseline:anatomy-prior")[header.index("Overall (RQ1-3)")] == cell
    ci = f"[{100 * o['ci_low']:.1f}, {100 * o['ci_high']:.1f}]"
    assert _row(md, "baseline:anatomy-prior")[header.index("95% CI")] == ci
    data = json.loads((runs["baseline:yes"] / "run.json").read_text())["data"]
    assert data in md


def test_frames_variants_and_rotation_sections(report):
    md = report.summary_md.read_text()
    assert "Left/right (MIRP's axis)" in md and "Above/below (our extension)" in md
    assert "recites anatomy scores high in the anatomical columns and low in the image" in md
    # RQ3(1) is one number per frame: only the MIRP Table 1 view prints it
    mirp_view = md.split("## MIRP Table 1 view")[1].split("\n## ")[0]
    assert md.count("RQ3(1) image") == mirp_view.count("RQ3(1) image") >= 1
    assert "Anatomical = MIRP RQ3(1)" not in md
    # the anatomy prior answers from anatomy (learned from other patients, so not always right
    # on this one): high in the patient's frame, and where the image disagrees with the patient
    # its image-frame score is the complement of its anatomical one; it never looks at the image
    prior_rq1 = [x for x in md.splitlines() if x.startswith("| baseline:anatomy-prior | RQ1 |")]
    assert len(prior_rq1) == 2  # left/right and above/below

    def pct(cell: str) -> float:
        mean, sd = cell.split(" ± ")
        assert sd == "0.0"  # the same answers in every run
        return float(mean)

    rows = [[c.strip() for c in line.strip("|").split("|")] for line in prior_rq1]
    for cells in rows:
        assert pct(cells[4]) >= 85.0  # anatomical, all items
        assert pct(cells[6]) == pytest.approx(100.0 - pct(cells[7]), abs=0.15)  # not aligned
    lr, ab = rows
    assert pct(lr[3]) == pytest.approx(100.0 - pct(lr[4]), abs=0.15)  # standard: L/R swapped
    assert pct(ab[3]) == pytest.approx(pct(ab[4]), abs=0.15)  # above/below: standard = patient
    assert "## MIRP Table 1 view (MIRP's rules)" in md
    view = md.split("## MIRP Table 1 view")[1].split("\n## ")[0].splitlines()
    header = next(x for x in view if x.startswith("| Model |"))
    cols = [c.strip() for c in header.strip("|").split("|")]
    row = next(x for x in view if x.startswith("| baseline:anatomy-prior |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[cols.index("Protocol")] == "radspatial"
    mirp = json.loads(report.summary_json.read_text())["mirp"]["baseline:anatomy-prior"]
    for col, key in (
        ("RQ3(1) image", "anatomy_image"),
        ("RQ3(1) anatomical", "anatomy_left_right"),
    ):
        g = mirp["RQ1/none"][key]
        assert cells[cols.index(col)] == f"{g['accuracy_mean']:.2f} ± {g['accuracy_std']:.2f}"
    assert "| Model | A1 | A2 | A3 | A4 | B1 | B2 | B3 | B4 |" in md
    assert "Normal vs counterfactual" in md and "situs_inversus" in md
    assert "skipped" not in md


def _no_per_run(obj):
    if isinstance(obj, dict):
        return {k: _no_per_run(v) for k, v in obj.items() if k != "per_run"}
    return obj


def test_summary_json_holds_the_metrics_json_numbers(report, runs):
    s = json.loads(report.summary_json.read_text())
    assert [m["label"] for m in s["models"]] == list(MODELS)
    for spec in MODELS:
        metrics = json.loads((runs[spec] / "metrics.json").read_text())
        model = next(m for m in s["models"] if m["label"] == spec)
        assert model["overall"] == _no_per_run(metrics["overall"])
        assert model["runs"] == 2 and model["n_items"] == metrics["overall"]["n_items"]
        for key in ("by_setup_marker", "by_transform", "by_variant"):
            for k, group in s[key][spec].items():
                assert group == _no_per_run(metrics[key][k]), (spec, key, k)
        assert s["frames"][spec] == _no_per_run(metrics["frames"])
        rq1 = s["by_transform_rq1"][spec]["B1"]
        assert rq1 == _no_per_run(metrics["by_setup_transform"]["rq1/none/B1"])
    assert set(s["setup_markers"]) == set(metrics["by_setup_marker"])
    # None: written; the question-type figure applies only to runs with several question types
    assert s["figures"] == dict.fromkeys(k for k in FIGURES if k != "question_types.png")


def test_mcnemar_yes_vs_no_matches_a_hand_count(report, runs):
    rows = [r for r in read_jsonl(runs["baseline:yes"] / "results.jsonl") if r["run"] == 0]
    b = sum(r["expected"] == 1 for r in rows)  # yes right, no wrong
    c = sum(r["expected"] == 0 for r in rows)  # yes wrong, no right
    s = json.loads(report.summary_json.read_text())
    pair = next(
        p
        for p in s["mcnemar"]["pairs"]
        if (p["model_a"], p["model_b"]) == ("baseline:yes", "baseline:no")
    )
    assert (pair["n_shared"], pair["b"], pair["c"]) == (len(rows), b, c)
    assert pair["p_value"] == mcnemar([True] * b + [False] * c, [False] * b + [True] * c).p_value
    assert b == c and pair["p_value"] == 1.0
    assert "run 0" in s["mcnemar"]["basis"]
    md = report.summary_md.read_text()
    assert f"| baseline:yes | baseline:no | {len(rows)} | {b} | {c} | 1 |" in md
    assert "run 0" in md


def test_missing_metrics_json_is_a_clear_error(runs, tmp_path):
    unfinished = tmp_path / "unfinished"
    unfinished.mkdir()
    (unfinished / "run.json").write_text('{"status": "running"}')
    with pytest.raises(ValueError, match=r"unfinished: no metrics.json \(did the eval finish\?\)"):
        build_report([runs["baseline:yes"], unfinished], tmp_path / "out")


def test_run_folders_from_before_n_errors_still_report_their_failed_calls(runs, tmp_path):
    """metrics.json carries one count of failed calls, ``n_errors``; a folder written when it
    was called ``errors`` reads the same."""
    new = json.loads((runs["baseline:yes"] / "metrics.json").read_text())
    assert "n_errors" in new and "errors" not in new
    old = tmp_path / "old_run"
    shutil.copytree(runs["baseline:yes"], old)
    legacy = {("errors" if k == "n_errors" else k): v for k, v in new.items()}
    (old / "metrics.json").write_text(json.dumps({**legacy, "errors": 4}))
    s = json.loads(build_report([old], tmp_path / "out").summary_json.read_text())
    assert s["models"][0]["n_errors"] == 4


def test_duplicate_specs_are_told_apart_by_folder(runs, tmp_path):
    again = tmp_path / "yes_again"
    shutil.copytree(runs["baseline:yes"], again)
    rep = build_report([runs["baseline:yes"], again], tmp_path / "out")
    assert rep.models == ["baseline:yes (yes)", "baseline:yes (yes_again)"]
    md = rep.summary_md.read_text()
    assert "| baseline:yes (yes) |" in md and "| baseline:yes (yes_again) |" in md


def test_as_only_runs_skip_figures_without_crashing_and_drop_stale_ones(report, runs, tmp_path):
    data = Path(json.loads((runs["baseline:yes"] / "run.json").read_text())["data"])
    as_run = tmp_path / "as_only"
    config = EvalConfig(model="baseline:random", runs=1, setups=("as",))
    run_eval(data, as_run, config, progress=False)
    out = tmp_path / "report"
    shutil.copytree(report.out, out)  # a previous full report in the same folder
    rep = build_report([as_run, runs["baseline:yes"]], out)  # mixed: the AS run shows dashes
    assert [p.name for p in rep.figures] == list(FIGURES)
    assert _row(rep.summary_md.read_text(), "baseline:random")[1] == "–"  # no RQ1 items
    rq2_run = tmp_path / "rq2_only"
    run_eval(data, rq2_run, EvalConfig(model="baseline:yes", setups=("rq2",)), progress=False)
    rep = build_report([rq2_run], tmp_path / "rq2_report")  # frames.png is RQ2's, drawn once
    assert "frames.png" in [p.name for p in rep.figures]
    assert not any(p.name.startswith("frames_") for p in rep.figures)
    rep = build_report([as_run], out)
    assert [p.name for p in rep.figures] == ["accuracy_by_setup.png"]
    assert not (out / "rotation_heatmap.png").exists() and not (out / "frames.png").exists()
    assert not (out / "frames_rq2.png").exists()  # a stale per-setup figure is removed too
    md = rep.summary_md.read_text()
    assert "`rotation_heatmap.png` skipped" in md and "`frames.png` skipped" in md
    assert "No rotation/flip codes" in md and "| Model | Protocol | AS dots |" in md
    assert "Normal vs counterfactual" not in md
    s = json.loads(rep.summary_json.read_text())
    assert s["mcnemar"]["pairs"] == [] and s["figures"]["frames.png"]


@pytest.mark.skipif(not MIRP_SAMPLE.is_dir(), reason="../shared/data not present")
def test_mirp_data_without_transforms(tmp_path):
    for spec in ("baseline:yes", "baseline:random"):
        run_eval(MIRP_SAMPLE, tmp_path / spec, EvalConfig(model=spec, runs=2), progress=False)
    rep = build_report([tmp_path / "baseline:yes", tmp_path / "baseline:random"], tmp_path / "r")
    md = rep.summary_md.read_text()
    assert "| baseline:yes |" in md and "| baseline:random |" in md
    assert "`rotation_heatmap.png` skipped" in md
    assert (tmp_path / "r" / "accuracy_by_setup.png").is_file()
    no_frames = md.count("No items with a known standard-view answer") == 2
    assert no_frames == ("`frames.png` skipped" in md)  # figure and tables agree


class _Page(HTMLParser):
    """Collects what the checks need from index.html: tables, figures, gallery cards."""

    def __init__(self) -> None:
        super().__init__()
        self.tables = 0
        self.figures: list[str] = []
        self.cards: list[dict] = []
        self.selects: dict[str, list[str]] = {}
        self._select: str | None = None
        self._in_card = 0
        self._text: list[str] = []
        self.scripts = 0
        self.review: list[dict] = []  # review buttons: one group per model reply
        self.ids: set[str] = set()  # ids of the page's buttons, e.g. "download"

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        if tag == "span" and a.get("class") == "rv":
            self.review.append({"model": a["data-model"], "id": a["data-id"], "values": []})
        elif tag == "button" and self.review and self._in_card:
            self.review[-1]["values"].append(a["value"])
        if tag == "table":
            self.tables += 1
        elif tag == "img" and a.get("class") == "fig":
            self.figures.append(a["src"])
        elif tag == "div" and a.get("class") == "item":
            self.cards.append({"data": a, "imgs": [], "replies": 0, "text": ""})
            self._in_card, self._text = 1, []
        elif tag == "div" and self._in_card:
            self._in_card += 1
            if a.get("class") == "reply":
                self.cards[-1]["replies"] += 1
        elif tag == "img" and self._in_card:
            self.cards[-1]["imgs"].append(a["src"])
        elif tag == "select":
            self._select = a["name"]
            self.selects[self._select] = []
        elif tag == "option" and self._select:
            self.selects[self._select].append(a["value"])
        elif tag == "script":
            self.scripts += 1

    def handle_endtag(self, tag):
        if tag == "div" and self._in_card:
            self._in_card -= 1
            if not self._in_card:
                self.cards[-1]["text"] = "".join(self._text)
        elif tag == "select":
            self._select = None

    def handle_data(self, data):
        if self._in_card:
            self._text.append(data)


def test_index_html_has_the_tables_figures_and_a_filterable_gallery(report, runs):
    page = _Page()
    page.feed(report.index_html.read_text())
    md = report.summary_md.read_text()
    assert page.tables == sum(1 for x in md.splitlines() if x.startswith("|---"))
    assert page.figures == [p.name for p in report.figures]
    assert page.scripts == 1
    rows = {
        spec: {r["id"]: r for r in read_jsonl(runs[spec] / "results.jsonl") if r["run"] == 0}
        for spec in MODELS
    }
    order = ("rq1", "rq2", "rq3", "as")
    ids = sorted(rows[MODELS[0]], key=lambda i: (order.index(rows[MODELS[0]][i]["setup"]), i))
    assert [c["data"]["data-setup"] for c in page.cards] == [
        rows[MODELS[0]][i]["setup"] for i in ids
    ]
    for card, item_id in zip(page.cards, ids, strict=True):
        row = rows[MODELS[0]][item_id]
        assert item_id in card["text"] and row["question"] in card["text"]
        assert card["replies"] == len(MODELS)  # every model's reply
        # the image inside the report folder (portable), and it is the item's image
        [src] = card["imgs"]
        assert src.startswith("images/") and ".." not in src
        assert (report.out / src).read_bytes() == Path(row["image"]).read_bytes()
        # expected answer in the three frames
        frames = [{1: "yes", 0: "no", None: "–"}[row[k]] for k in
                  ("expected", "expected_standard", "expected_anatomical")]  # fmt: skip
        assert (
            f"expected: image {frames[0]} · standard view {frames[1]} · anatomical {frames[2]}"
            in card["text"]
        )
        parsed = {rows[m][item_id]["parsed"] for m in MODELS}
        assert card["data"]["data-disagree"] == ("1" if len(parsed) > 1 else "0")
        assert card["data"]["data-variant"] == row["variant"]
    # filter options: exactly the values present
    assert page.selects["setup"] == ["", *sorted({r["setup"] for r in rows[MODELS[0]].values()})]
    variants = sorted({r["variant"] for r in rows[MODELS[0]].values()})
    assert page.selects["variant"] == ["", *variants] and "situs_inversus" in variants
    assert set(page.selects) == {"setup", "marker", "qtype", "variant", "transform"}
    codes = sorted({r["transform"] for r in rows[MODELS[0]].values() if r["transform"]})
    assert page.selects["transform"] == ["", *codes] and "B1" in codes


def test_gallery_agreement_flag_and_cap(runs, tmp_path):
    from radspatial.reports.html import render_html

    # two identical runs never disagree; yes vs no always do
    same = render_html("# t", ["a", "b"], [runs["baseline:yes"]] * 2, tmp_path)
    assert 'data-disagree="1"' not in same and 'data-disagree="0"' in same
    capped = _Page()
    capped.feed(render_html("# t", ["y"], [runs["baseline:yes"]], tmp_path, max_items=11))
    assert len(capped.cards) == 11
    # spread: every setup of the dataset is among 11 items
    setups = {r["setup"] for r in read_jsonl(runs["baseline:yes"] / "results.jsonl")}
    assert {c["data"]["data-setup"] for c in capped.cards} == setups


def test_legend_labels_are_shortened():
    from radspatial.reports.figures import short_label

    long = "openai-compat:Qwen/Qwen2-VL-72B-Instruct-AWQ@http://10.0.0.5:8000/v1"
    assert short_label(long) == "openai-compat:Qwen2-VL-72B-Instruct-AWQ"  # no URL, no org
    longer = short_label("hf:/m/" + "x" * 60)
    assert len(longer) == 40 and "…" in longer and longer.startswith("hf:xxx")
    assert short_label("hf:/models/llava-1.5-7b") == "hf:llava-1.5-7b"
    assert short_label("baseline:yes (run_a)") == "baseline:yes (run_a)"


def test_gallery_review_marks_round_trip_through_report_review(report, runs, tmp_path):
    """The gallery's review buttons carry what a mark needs; marks built from them (as the
    page's script builds them) fold into ``report --review``."""
    from radspatial.cli import main

    page = _Page()
    page.feed(report.index_html.read_text())
    assert {"reviewer", "download", "n-marks"} <= page.ids
    assert len(page.review) == len(page.cards) * len(MODELS)
    assert all(r["values"] == ["correct", "incorrect", "ambiguous"] for r in page.review)
    ids = {r["id"] for r in read_jsonl(runs[MODELS[0]] / "results.jsonl")}
    assert {r["id"] for r in page.review} <= ids and {r["model"] for r in page.review} == set(
        MODELS
    )
    chosen = [r for r in page.review if r["model"] == "baseline:yes"][:6]
    marks = tmp_path / "marks.jsonl"
    marks.write_text(
        "".join(
            json.dumps({"id": r["id"], "run": 0, "model": r["model"], "mark": mark}) + "\n"
            for r, mark in zip(chosen, ["correct", "incorrect"] * 3, strict=True)
        )
    )
    out = tmp_path / "rep"
    assert main(["report", *map(str, (runs[m] for m in MODELS)), "--out", str(out),
                 "--review", str(marks)]) == 0  # fmt: skip
    review = json.loads((out / "review.json").read_text())
    assert review["n_marks"] == 6 and review["unmatched"] == 0
    assert review["models"]["baseline:yes"]["n_reviewed"] == 6


def test_report_folder_is_staged_and_an_earlier_report_survives_a_failed_one(
    runs, tmp_path, monkeypatch, capsys
):
    import errno

    import radspatial.reports.figures as figures
    from radspatial.cli import main

    out = tmp_path / "report"
    run = str(runs["baseline:yes"])
    assert main(["report", run, "--out", str(out)]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    assert "summary.json" in before
    assert f'data-report="{out.resolve()}"'.encode() in before["index.html"]  # not .partial

    def full_disk(_summary, folder):  # one figure half written, then the disk is full
        (folder / "accuracy_by_setup.png").write_bytes(b"\x89PNG half")
        raise OSError(errno.ENOSPC, "No space left on device", str(folder / "frames.png"))

    monkeypatch.setattr(figures, "write_all", full_disk)
    capsys.readouterr()
    assert main(["report", run, str(runs["baseline:no"]), "--out", str(out)]) == 2
    errors = [x for x in capsys.readouterr().err.splitlines() if ": error: " in x]
    assert len(errors) == 1 and "no space left" in errors[0], errors
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report"]  # no report.partial left


def test_report_refuses_to_replace_what_is_not_a_report(runs, tmp_path, capsys):
    from radspatial.cli import main

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    run = runs["baseline:yes"]
    assert main(["report", str(run), "--out", str(mine)]) == 2
    assert "not a radspatial report" in capsys.readouterr().err
    assert (mine / "notes.txt").read_text() == "keep me"
    assert main(["report", str(run), "--out", str(run / "report")]) == 2  # inside the run
    assert "replace the input" in capsys.readouterr().err
    assert not (run / "report").exists()


def test_report_gives_every_model_its_accuracy_on_what_the_image_decides(report, runs):
    md = report.summary_md.read_text()
    assert "## What the image decides" in md
    for spec in MODELS:
        metrics = json.loads((runs[spec] / "metrics.json").read_text())
        by = metrics["by_decidable"]
        assert set(by) <= {"decidable", "undecidable"} and by
        line = next(x for x in md.splitlines() if x.startswith(f"| {spec} |") and "(n " in x)
        cells = [c.strip() for c in line.strip("|").split("|")]
        d = by["decidable"]
        assert (
            cells[2].startswith(f"{100 * d['accuracy_mean']:.1f}%")
            and f"(n {d['n_items']})" in cells[2]
        )
