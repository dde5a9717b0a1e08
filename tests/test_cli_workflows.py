"""Workflows as a new user types them (issue 25, round 3; issue 23's two bugs): each fix tested as
the user types the command, the output checked. Serve's streaming: test_serve_stream.py; the
docs' code blocks: test_docs_blocks.py."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from fake_server import FakeChatServer

from radspatial.cli import bundled_example

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def run(*args: str, timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "radspatial.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "RADSPATIAL_PROGRESS_SECONDS": "0", **env},
    )


def rows(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def bench(tmp_path_factory) -> Path:
    """``radspatial generate --questions all`` on the bundled CT, small."""
    out = tmp_path_factory.mktemp("ux25") / "bench"
    res = run("generate", "--questions", "all", "--size", "128", "--as-count", "8",
              "--export-masks", "--out", str(out))  # fmt: skip
    assert res.returncode == 0, res.stderr
    return out


@pytest.fixture(scope="module")
def random_run(bench) -> Path:
    out = bench.parent / "runs_random"
    res = run("eval", "--data", str(bench), "--model", "baseline:random", "--runs", "1",
              "--out", str(out))  # fmt: skip
    assert res.returncode == 0, res.stderr
    return out


# 1 + #23: eval --limit on open types ends and spreads over every type
def test_eval_limit_ends_on_open_types_and_covers_them(bench, tmp_path):
    res = run("eval", "--data", str(bench), "--model", "baseline:random", "--limit", "20",
              "--out", str(tmp_path / "r20"), "--runs", "1", timeout=600)  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert len(rows(tmp_path / "r20" / "results.jsonl")) == 20
    res = run("eval", "--data", str(bench), "--model", "baseline:random", "--limit", "200",
              "--out", str(tmp_path / "r200"), "--runs", "1", timeout=600)  # fmt: skip
    assert res.returncode == 0, res.stderr
    types = Counter(r["question_type"] for r in rows(tmp_path / "r200" / "results.jsonl"))
    assert {"laterality", "direction", "identification", "counting"} <= set(types), types
    # the console says what its numbers cover
    assert "(all question types and setups), invalid" in res.stdout


# #23: the agent CLI on an open question
def test_agent_cli_answers_an_open_question(bench):
    image = next((bench / "RQ1" / "images").glob("*.png"))
    q = "On which side of the image is the liver: left or right?"
    res = run("agent", "--image", str(image), "--question", q, "--localizer", "organs")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("answer: ") and "KeyError" not in res.stderr
    assert res.stdout.split()[1] in ("left", "right", "abstain")


# 2: export hf on a dataset with open answers
def test_export_hf_takes_open_answers(bench, tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    res = run("export", "hf", "--data", str(bench), "--out", str(tmp_path / "hf"))
    assert res.returncode == 0, res.stderr
    table = pq.read_table(next((tmp_path / "hf" / "data").glob("*.parquet")))
    answers = set(table.column("answer").to_pylist())
    assert {"0", "1", "left", "right"} <= answers
    assert "answer columns are text" in (tmp_path / "hf" / "README.md").read_text()


# 3, 4, 6: report figures, oracles, gallery
def test_report_marks_oracles_and_gallery_shows_words(bench, random_run, tmp_path):
    oracle = tmp_path / "std"
    res = run("eval", "--data", str(bench), "--model", "baseline:standard-view", "--runs", "1",
              "--out", str(oracle))  # fmt: skip
    assert res.returncode == 0, res.stderr
    rep = tmp_path / "report"
    res = run("report", str(random_run), str(oracle), "--out", str(rep))
    assert res.returncode == 0, res.stderr
    md = (rep / "summary.md").read_text()
    assert "baseline:standard-view (oracle)" in md and "*(oracle)*: reads the truth" in md
    page = (rep / "index.html").read_text()
    assert 'data-model="baseline:standard-view (oracle)"' in page
    # the model's words and the grade apart: a laterality reply reads left/right, not yes/no
    lat = next(r for r in rows(random_run / "results.jsonl") if r["question_type"] == "laterality")
    card = page[page.index(lat["id"]) :].split('<div class="item"', 1)[0]
    assert f'{lat["parsed"]}<span class="mk">{"✓" if lat["correct"] else "✗"}' in card
    # portable: images inside the report folder; the View filter offers the rotation codes
    assert "../" not in page and (rep / "images").is_dir()
    srcs = [s.split('"')[0] for s in page.split('<img loading="lazy" src="')[1:]]
    assert srcs and all((rep / s).is_file() for s in srcs)
    assert '<select name="transform">' in page and '<option value="B1">' in page
    assert '<div class="scroll"><table>' in page


def test_figures_scope_and_chance_per_type(random_run):
    from radspatial.reports.build import load_runs, summarize
    from radspatial.reports.common import type_groups
    from radspatial.reports.figures import _setup_scope, _type_chances

    s = summarize(load_runs([random_run]))
    cols, by, scope = _setup_scope(s)
    assert scope.startswith("relative-position questions only")
    n = sum(by["baseline:random"][c].n_items for c in cols)
    assert 0 < n < s["models"][0]["n_items"]  # relative position only, not every type pooled
    types = s["question_types"]
    levels = _type_chances(type_groups(s["by_question_type"]), types)
    chances = dict(zip(types, levels, strict=True))
    assert round(chances["direction"]) == 25 and round(chances["counting"]) == 33
    assert chances["relative_position"] == 50


# 5: direction questions whatever the case id
def test_direction_does_not_vanish_by_case_id(tmp_path):
    ct, seg = bundled_example()
    cases = tmp_path / "cases.csv"
    with cases.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["ct", "seg", "case_id"])
        w.writerows([ct, seg, c] for c in "abcdefgh")
    res = run("generate", "--cases", str(cases), "--questions", "direction", "--setups", "rq1",
              "--size", "128", "--out", str(tmp_path / "bench"))  # fmt: skip
    assert res.returncode == 0, res.stderr
    per_case = Counter(r["source"]["case_id"] for r in rows(tmp_path / "bench" / "manifest.jsonl"))
    assert set(per_case) == set("abcdefgh") and min(per_case.values()) >= 4, per_case
    # a type no slice can ask is said on stderr, not only missing from the counts
    res = run("generate", "--questions", "direction", "--setups", "rq1", "--size", "128",
              "--min-distance", "500", "--out", str(tmp_path / "none"))  # fmt: skip
    assert res.returncode == 0 and "warning: no direction question" in res.stderr


# 6: the demo runs the agent the README describes
def test_demo_runs_the_plain_agent():
    res = run("demo", "--help")
    assert "baseline:standard-view, agent, agent:mask" in " ".join(res.stdout.split())


# 8: train unet: progress lines when piped, a short summary
def test_agent_train_progress_and_summary(bench, tmp_path):
    """``train unet`` on a dataset with every question type (open, size, count rows among
    the relative-position ones), then the trained model answers through ``--localizer unet``."""
    pytest.importorskip("monai")
    types = {json.loads(x)["question_type"] for x in (bench / "manifest.jsonl").open()}
    assert {"distance", "size", "count", "laterality"} <= types
    model = tmp_path / "unet"
    res = run("train", "unet", "--data", str(bench), "--out", str(model),
              "--epochs", "2", "--size", "32", "--threads", "1", timeout=600)  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "agent train: 2/2 epoch(s)" in res.stderr and "\r" not in res.stderr
    assert "mean Dice" in res.stdout and len(res.stdout) < 600 and "{" not in res.stdout
    assert (model / "model.safetensors").is_file() and "model:" in res.stdout
    image = next((bench / "RQ1" / "images").glob("*.png"))
    res = run("agent", "--image", str(image), "--question", "Is the liver above the spleen?",
              "--localizer", "unet", "--model", str(model))  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("answer: ")


# 9: the README's MIRP step as written (scripts copied from MIRP into the group folder)
def test_readme_mirp_step(random_run, tmp_path):
    pytest.importorskip("openpyxl")
    pytest.importorskip("sklearn")
    out = tmp_path / "mirp_out"
    res = run("export", "mirp", "--run", str(random_run), "--out", str(out))
    assert res.returncode == 0, res.stderr
    script = "RQ3-1_calculate_results_anatomy.py"
    shutil.copy(SHARED / "mirp_eval" / script, out / "RQ1_qa" / script)  # README: cp ...
    done = subprocess.run([sys.executable, script], cwd=out / "RQ1_qa", capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert list((out / "RQ1_qa").glob("*.xlsx"))


# 10: wrong results that used to show only in files
def test_wrong_label_table_is_exit_2(tmp_path):
    ct, seg = bundled_example()
    res = run("generate", "--ct", str(ct), "--seg", str(seg), "--labels", "btcv",
              "--out", str(tmp_path / "b"))  # fmt: skip
    assert res.returncode == 2
    line = res.stderr.strip().splitlines()[-1]
    assert str(seg) in line and "table btcv" in line and "--labels totalsegmentator" in line


def test_failed_calls_and_judge_show_on_the_console(bench, tmp_path):
    with FakeChatServer(always_status=401, error_message="missing or wrong API key") as server:
        spec = f"openai-compat:m@{server.base_url}"
        res = run("eval", "--data", str(bench), "--model", spec, "--limit", "4", "--runs", "1",
                  "--retries", "0", "--out", str(tmp_path / "m"))  # fmt: skip
    assert res.returncode == 3
    assert "error in 4 call(s)" in res.stderr and "401" in res.stderr
    with FakeChatServer(always_status=400) as judge:
        res = run("eval", "--data", str(bench), "--model", "baseline:random", "--questions",
                  "laterality", "--limit", "4", "--runs", "1", "--out", str(tmp_path / "j"),
                  "--judge", f"openai-compat:j@{judge.base_url}", "--judge-all")  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "4 open answer(s) judged, 4 call(s) failed" in res.stderr


# 11: smaller ones
def test_counterfactual_cases_csv_is_relative(tmp_path):
    ct, seg = bundled_example()
    local = tmp_path / "in"
    local.mkdir()
    shutil.copy(ct, local / "ct.nii.gz")
    shutil.copy(seg, local / "seg.nii.gz")
    res = run("counterfactual", "mirror", "--ct", str(local / "ct.nii.gz"), "--seg",
              str(local / "seg.nii.gz"), "--out", str(tmp_path / "mirrored"))  # fmt: skip
    assert res.returncode == 0, res.stderr
    text = (tmp_path / "mirrored" / "cases.csv").read_text()
    assert str(tmp_path) not in text and "../in/ct.nii.gz" in text


def test_agent_says_when_a_marker_was_located_by_name(bench):
    image = next((bench / "RQ1" / "images").glob("*.png"))  # a plain slice: no markers at all
    q = "Is the liver (BZ) to the left of the spleen (AA)?"
    res = run("agent", "--image", str(image), "--question", q)
    assert res.returncode == 0, res.stderr
    assert "marker BZ not found: located by name" in res.stdout, res.stdout
