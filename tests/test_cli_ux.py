"""The command line as a new user meets it: options that apply or are refused, progress when
piped, short agent output, clean exits on a closed pipe, complete --help (issue 15)."""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
from PIL import Image

from radspatial.cli import build_parser, bundled_example
from radspatial.core.labels import load_table

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "totalseg_example"


def run(*args: str, env: dict | None = None, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "radspatial.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        **kw,
    )


def _rows(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "manifest.jsonl").read_text().splitlines()]


def _names(out: Path) -> set[str]:
    return {o["name"] for r in _rows(out) for o in (r["object1"], r["object2"])}


@pytest.fixture(scope="module")
def btcv_case(tmp_path_factory) -> Path:
    """The bundled CT with its mask relabelled to BTCV ids (a real BTCV-labelled case)."""
    tmp = tmp_path_factory.mktemp("btcv")
    ct, seg = bundled_example()
    img = nib.load(seg)
    ts = np.asarray(img.dataobj)
    by_name = {n: i for i, n in load_table("btcv").names.items()}
    out = np.zeros(ts.shape, np.uint8)
    for ts_id, name in load_table("totalsegmentator", group=False).names.items():
        if name in by_name:
            out[ts == ts_id] = by_name[name]
    assert {6, 1, 7} <= set(np.unique(out).tolist())  # liver, spleen, stomach in BTCV ids
    nib.save(nib.Nifti1Image(out, img.affine), tmp / "seg_btcv.nii.gz")
    (tmp / "cases.csv").write_text(f"ct,seg\n{ct},seg_btcv.nii.gz\n")
    return tmp


SMALL = ("--setups", "rq1", "--size", "128")


def test_cases_labels_applies_to_rows_without_a_labels_column(btcv_case, tmp_path):
    out = tmp_path / "bench"
    res = run("generate", "--cases", str(btcv_case / "cases.csv"), "--labels", "btcv",
              "--out", str(out), *SMALL)  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert json.loads((out / "dataset.json").read_text())["cases"][0]["labels"] == "btcv"
    names = _names(out)
    assert "liver" in names and names <= set(load_table("btcv").names.values())
    # the same file read as TotalSegmentator ids names the liver (BTCV 6) "stomach" (TS 6):
    # the option is what makes the names right
    wrong = tmp_path / "wrong"
    res = run("generate", "--cases", str(btcv_case / "cases.csv"), "--out", str(wrong), *SMALL)
    assert res.returncode == 0, res.stderr
    assert "liver" not in _names(wrong)


def test_a_row_naming_another_table_than_labels_is_refused(btcv_case, tmp_path):
    ct, _ = bundled_example()
    cases = tmp_path / "cases.csv"
    seg = btcv_case / "seg_btcv.nii.gz"
    cases.write_text(f"ct,seg,labels\n{ct},{seg},btcv\n{ct},{seg},amos\n")
    res = run("generate", "--cases", str(cases), "--labels", "btcv", "--out", str(tmp_path / "o"))
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1, res.stderr
    assert "cases.csv: line 3" in lines[0] and "amos" in lines[0] and "--labels" in lines[0]
    assert not (tmp_path / "o").exists()
    res = run("generate", "--labels", "btcv", "--out", str(tmp_path / "o"))  # bundled: TS
    assert res.returncode == 2 and "bundled example" in res.stderr


def test_ct_without_seg_and_misplaced_options_exit_2_with_one_line(tmp_path):
    ct, seg = bundled_example()
    for args in (
        ("--ct", str(ct)),
        ("--cases", str(tmp_path / "x.csv"), "--variant", "mirrored"),
        ("--ct", str(ct), "--seg-dir", str(tmp_path), "--labels", "btcv"),
    ):
        res = run("generate", *args, "--out", str(tmp_path / "o"))
        lines = res.stderr.strip().splitlines()
        assert res.returncode == 2 and len(lines) == 1, (args, res.stderr)
        assert lines[0].startswith("radspatial generate: error: ")


def test_progress_within_a_single_case_when_piped(tmp_path):
    out = tmp_path / "bench"
    res = run("generate", "--out", str(out), *SMALL, env={"RADSPATIAL_PROGRESS_SECONDS": "0"})
    assert res.returncode == 0, res.stderr
    lines = res.stderr.splitlines()
    rendering = [x for x in lines if "example_ct_sm: rendering" in x]
    assert len(rendering) >= 10, res.stderr[:2000]  # slice by slice, not 0/1 then 1/1
    assert any(x.startswith("generate: 0/1 case(s)") for x in rendering)
    assert lines[-1].startswith("generate: 1/1 case(s)")
    assert "questions:" in res.stdout  # results on stdout, progress on stderr


def test_demo_and_report_show_progress_when_piped(tmp_path):
    out = tmp_path / "demo"
    env = {"RADSPATIAL_PROGRESS_SECONDS": "0"}
    res = run("demo", "--out", str(out), "--runs", "1", "--questions", "relative_position",
              "--model", "baseline:yes", "--model", "agent:mask", env=env)  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    err = res.stderr
    for stage in ("demo: [1/4] generating", "demo: [2/4] evaluating baseline:yes",
                  "demo: [3/4] evaluating agent:mask", "demo: [4/4] writing the report",
                  "generate: ", "eval agent:mask: calls: ", "demo: done in"):  # fmt: skip
        assert stage in err, (stage, err[-2000:])
    assert "report: " in res.stdout
    # where index.html is (issue 50, 6), and the items the mask oracle skips and why (8)
    assert f"report (HTML, open in a browser): {out / 'report' / 'index.html'}" in res.stdout
    n = int(res.stdout.split("dataset: ")[1].split("(")[1].split(" questions")[0])
    oracle = next(x for x in res.stdout.splitlines() if x.startswith("agent:mask: accuracy"))
    assert f" of {n} items: " in oracle and "AS blank images skipped, no anatomy to read" in oracle
    rep = run("report", str(out / "eval" / "agent_mask"), "--out", str(tmp_path / "r"),
              env=env)  # fmt: skip
    assert rep.returncode == 0, rep.stderr
    beats = [x for x in rep.stderr.splitlines() if x.startswith("report: ")]
    assert beats and all(x.endswith(" s]") for x in beats), rep.stderr


@pytest.fixture(scope="module")
def rq2_image(tmp_path_factory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("agent") / "bench"
    res = run("generate", "--out", str(out), "--setups", "rq2", "--markers", "numbers")
    assert res.returncode == 0, res.stderr
    row = _rows(out)[0]
    return out / row["image"], row["question"]


def test_agent_prints_a_short_answer_and_the_trace_only_when_asked(rq2_image, tmp_path):
    image, question = rq2_image
    base = ("agent", "--image", str(image), "--question", question, "--localizer", "markers")
    res = run(*base)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("answer: ") and len(res.stdout.splitlines()) == 1
    trace = tmp_path / "t.json"
    res = run(*base, "--trace", str(trace))
    assert res.returncode == 0 and "{" not in res.stdout
    assert json.loads(trace.read_text())["decision"]["answer"] in (0, 1, None)
    res = run(*base, "--json")
    assert json.loads(res.stdout)["decision"] == json.loads(trace.read_text())["decision"]


def test_a_closed_stdout_ends_quietly(rq2_image):
    image, question = rq2_image
    for args in (
        ("agent", "--image", str(image), "--question", question, "--localizer", "markers",
         "--json"),
        ("generate", "--help"),
    ):  # fmt: skip
        r, w = os.pipe()
        os.close(r)  # nobody reads: every write fails with EPIPE, as after `| head` exits
        try:
            res = subprocess.run([sys.executable, "-m", "radspatial.cli", *args], stdout=w,
                                 stderr=subprocess.PIPE, text=True)  # fmt: skip
        finally:
            os.close(w)
        assert "Traceback" not in res.stderr and "BrokenPipe" not in res.stderr, res.stderr
        assert res.returncode in (0, 141), res.returncode


def _subparsers(parser: argparse.ArgumentParser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield name, sub
                for inner, subsub in _subparsers(sub):
                    yield f"{name} {inner}", subsub


def test_help_of_every_command_has_text_and_default_for_every_option():
    commands = dict(_subparsers(build_parser()))
    for name in ("generate", "demo", "agent", "phantom", "counterfactual", "eval", "report"):
        parser = commands[name]
        formatter = parser._get_formatter()
        for action in parser._actions:
            if not action.option_strings or action.dest == "help":
                continue
            assert action.help, (name, action.option_strings)
            default = action.default
            if default not in (None, False, argparse.SUPPRESS):
                text = formatter._get_help_string(action)
                assert "default" in text, (name, action.option_strings, text)
        parser.format_help()  # renders (e.g. %-signs in help are escaped)
    variant = next(a for a in commands["phantom"]._actions if a.dest == "variant")
    assert "normal,situs_inversus" in variant.help and "mod" in variant.help
    assert "organs" in commands["agent"].format_help()  # the localizers are listed


def test_phantom_variants_cycle_as_the_help_says(tmp_path):
    res = run("phantom", "--out", str(tmp_path / "ph"), "--n", "3", "--shape", "64,64,24",
              "--variant", "normal,situs_inversus")  # fmt: skip
    assert res.returncode == 0, res.stderr
    with (tmp_path / "ph" / "cases.csv").open() as f:
        variants = [row["variant"] for row in csv.DictReader(f)]
    assert variants == ["normal", "situs_inversus", "normal"]


def _liver_x(rows: list[dict], case_id: str) -> float:
    xs = [o["center_xy_canonical"][0] for r in rows if r["source"]["case_id"] == case_id
          for o in (r["object1"], r["object2"]) if o["name"] == "liver"]  # fmt: skip
    assert xs, case_id
    return float(np.mean(xs))


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data not present")
def test_mirror_a_dicom_series_and_generate_both_variants(tmp_path):
    mirror = tmp_path / "mirror"
    res = run("counterfactual", "mirror", "--ct", str(SHARED / "ct_dicom"),
              "--seg", str(SHARED / "example_seg_dicom.nii.gz"), "--out", str(mirror))  # fmt: skip
    assert res.returncode == 0, res.stderr
    with (mirror / "cases.csv").open() as f:
        cases = list(csv.DictReader(f))
    assert [(c["case_id"], c["variant"]) for c in cases] == [
        ("ct_dicom", "normal"),
        ("ct_dicom_mirrored", "mirrored"),
    ]
    assert nib.load(mirror / "ct_dicom_mirrored.nii.gz").get_fdata().min() < -500  # HU kept
    out = tmp_path / "bench"
    res = run(
        "generate", "--cases", str(mirror / "cases.csv"), "--out", str(out), "--setups", "rq1"
    )
    assert res.returncode == 0, res.stderr
    rows = _rows(out)
    assert {r["variant"] for r in rows} == {"normal", "mirrored"}
    # standard (radiological) view, 512 px: the liver is on the image left in the real case
    # and on the image right in its mirror
    assert _liver_x(rows, "ct_dicom") < 256 < _liver_x(rows, "ct_dicom_mirrored")
    # one case through --ct: --variant says what it is
    one = tmp_path / "one"
    res = run("generate", "--ct", str(mirror / "ct_dicom_mirrored.nii.gz"), "--seg",
              str(mirror / "example_seg_dicom_mirrored.nii.gz"), "--variant", "mirrored",
              "--out", str(one), "--setups", "rq1")  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert {r["variant"] for r in _rows(one)} == {"mirrored"}


def test_probe_table_figure_has_a_title_and_no_empty_margins():
    from radspatial.probes.table import draw_table

    rows = [
        ["Encoder", "Head", "Features", "Orient", "RelPos"],
        ["**Whole slice**", "", "", "", ""],
        ["Chance", "", "", "50.0", "50.0"],
        ["resnet-small", "mlp", "finetuned", "88.1", "71.2"],
    ]

    img = np.asarray(Image.open(io.BytesIO(draw_table(rows, "Probe results"))).convert("L"))
    ink_rows = np.flatnonzero((img < 200).any(axis=1))
    ink_cols = np.flatnonzero((img < 200).any(axis=0))
    h, w = img.shape
    margins = (ink_rows[0], h - 1 - ink_rows[-1], ink_cols[0], w - 1 - ink_cols[-1])
    assert max(margins) <= 15, margins  # a few px of padding, not the empty axes around it
    no_title = np.asarray(Image.open(io.BytesIO(draw_table(rows, ""))).convert("L"))
    assert no_title.shape[0] < h - 10  # the title takes its own band above the table


def test_python_api_generate_applies_labels_to_a_cases_csv(btcv_case, tmp_path):
    from radspatial import generate

    summary = generate(tmp_path / "b", cases=btcv_case / "cases.csv", labels="btcv", size=128,
                       setups=("rq1",))  # fmt: skip
    assert summary.cases[0]["labels"] == "btcv" and "liver" in _names(summary.out)


def test_every_command_is_declared_once_as_data():
    """Each command group module declares its subcommands as `Command` records (in help order),
    registered by one loop; a record with both or neither of a handler and subcommands fails."""
    from radspatial.cli import agent, demo, eval, export, generate, lmms, phantom, probe, train
    from radspatial.cli.common import Command

    groups = (generate, eval, demo, agent, train, phantom, probe, export, lmms)
    parsers = dict(_subparsers(build_parser()))
    assert [c.name for g in groups for c in g.COMMANDS] == [n for n in parsers if " " not in n]
    records = [c for g in groups for top in g.COMMANDS for c in (top, *top.subcommands)]
    handlers = [c.run for c in records if c.run is not None]
    # 9 commands (counterfactual's handler is its mirror's); agent train (deprecated), train 3
    # (unet, organs, atlas), probe 5, export 3, import 2 (lmms-eval, inspect)
    assert len(handlers) == len(set(handlers)) == 23
    assert {p.get_default("func") for p in parsers.values()} - {None} == set(handlers)
    with pytest.raises(ValueError, match="give run or subcommands"):
        Command("x", "neither")
    # both: the subcommand is optional (``agent`` answers, ``agent train`` trains)
    Command("x", "both", run=lambda a: 0, subcommands=(Command("y", "y", run=lambda a: 0),))
