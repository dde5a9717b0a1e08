"""Researcher experience, round 5 (issue 50): what results say on screen, honest intervals, the
hints of failed calls, and the slow paths. One test per class of problem; each fails on the code
before the fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_server import FakeChatServer

from radspatial.bench.dataset import build_dataset
from radspatial.bench.generate import GenerateConfig
from radspatial.cli import bundled_example, main
from radspatial.imaging.volumes import Case


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    """A small mixed dataset: relative position and size, every setup, a few AS items."""
    out = tmp_path_factory.mktemp("r5") / "ds"
    ct, seg = bundled_example()
    config = GenerateConfig(size=96, as_count=2, question_types=("relative_position", "size"))
    build_dataset([Case("ex", ct, seg)], config, out, log=lambda _: None)
    return out


@pytest.fixture(scope="module")
def abstainer(data, tmp_path_factory) -> Path:
    """A run of a model every answer of which is unreadable (invalid: scored as abstained)."""
    out = tmp_path_factory.mktemp("r5run") / "banana"
    with FakeChatServer(answer=lambda body: "banana") as server:
        argv = ["eval", "--data", str(data), "--model", f"openai-compat:fake@{server.base_url}"]
        assert main([*argv, "--runs", "1", "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def yes_run(data, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("r5yes") / "yes"
    assert main(["eval", "--data", str(data), "--model", "baseline:yes", "--out", str(out)]) == 0
    return out


def _drawn_texts(monkeypatch) -> list:
    """The figures saved from now on (their texts are read after drawing)."""
    from matplotlib.figure import Figure

    drawn: list[Figure] = []
    save = Figure.savefig

    def keep(fig, *args, **kwargs):
        drawn.append(fig)
        return save(fig, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", keep)
    return drawn


def _texts(drawn: list) -> list[str]:
    return [t.get_text() for fig in drawn for ax in fig.axes for t in ax.texts]


# 1: every figure that can show an abstaining model says so, never a 0 bar
def test_every_figure_says_abst_for_a_model_that_abstains(abstainer, yes_run, monkeypatch):
    from radspatial.reports.build import load_runs, summarize
    from radspatial.reports.figures import FIGURES

    s = summarize(load_runs([abstainer, yes_run]))
    drawn = _drawn_texts(monkeypatch)
    checked = []
    for name, draw in FIGURES.items():
        drawn.clear()
        if not isinstance(draw(s), bytes):
            continue
        assert any("abst" in t for t in _texts(drawn)), (name, _texts(drawn))
        checked.append(name)
    assert {"frames.png", "accuracy_by_setup.png", "question_types.png"} <= set(checked)


@pytest.fixture(scope="module")
def groups_data(tmp_path_factory) -> Path:
    """A ``--consistency`` dataset: every pair seen in the 8 rotation/flip variants."""
    out = tmp_path_factory.mktemp("r5groups") / "ds"
    ct, seg = bundled_example()
    config = GenerateConfig(
        size=96, setups=("rq2",), markers=("numbers",), as_count=0, consistency=True
    )
    build_dataset([Case("ex", ct, seg)], config, out, log=lambda _: None)
    return out


def test_the_consistency_figure_says_abst_for_a_model_that_abstains(
    groups_data, tmp_path, monkeypatch
):
    from radspatial.reports.build import load_runs, summarize
    from radspatial.reports.figures import draw_consistency

    out = tmp_path / "banana"
    with FakeChatServer(answer=lambda body: "banana") as server:
        argv = ["eval", "--data", str(groups_data), "--model", f"openai-compat:b@{server.base_url}"]
        assert main([*argv, "--runs", "1", "--out", str(out)]) == 0
    drawn = _drawn_texts(monkeypatch)
    assert isinstance(draw_consistency(summarize(load_runs([out]))), bytes)
    assert "abst." in _texts(drawn)


# 2: a clustered interval of zero width falls back to Wilson, marked, and the report says so
def test_a_zero_width_clustered_interval_falls_back_to_wilson(groups_data, tmp_path):
    out = tmp_path / "prior"
    argv = ["eval", "--data", str(groups_data), "--model", "baseline:anatomy-prior"]
    assert main([*argv, "--runs", "1", "--out", str(out)]) == 0
    overall = json.loads((out / "metrics.json").read_text())["overall"]
    # the prior recites anatomy: each group of 8 views gets the same share right
    assert overall["se_cluster"] == 0.0
    assert "CR1 standard error 0" in overall["ci_cluster_fallback"]
    assert (overall["ci_cluster_low"], overall["ci_cluster_high"]) == (
        overall["ci_low"],
        overall["ci_high"],
    )
    assert overall["ci_cluster_low"] < overall["ci_cluster_high"]
    assert main(["report", str(out), "--out", str(tmp_path / "rep")]) == 0
    assert "Wilson: clustered SE 0" in (tmp_path / "rep" / "summary.md").read_text()


# 3: a failed call's hint fits its status; a rerun is offered only where it can succeed
@pytest.mark.parametrize(
    ("status", "key", "hint", "rerun"),
    [
        (401, False, "the server requires a key: pass --api-key-env NAME", False),
        (403, True, "the server refused the key", False),
        (404, False, "the server knows no such model or path", False),
        (503, False, "to resume, rerun the same command", True),
    ],
)
def test_failed_calls_get_a_hint_that_fits_the_status(
    groups_data, tmp_path, capsys, monkeypatch, status, key, hint, rerun
):
    monkeypatch.setenv("R5_KEY", "k")
    with FakeChatServer(answer=lambda body: "yes") as server:
        server.always_status = status
        argv = ["eval", "--data", str(groups_data), "--model", f"openai-compat:m@{server.base_url}"]
        argv += ["--retries", "0", "--limit", "2", "--out", str(tmp_path / "r")]
        assert main(argv + (["--api-key-env", "R5_KEY"] if key else [])) == 3
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert hint in last, last
    assert ("rerun the same command" in last) == rerun, last


# 4: the modality section's setup tables are Table 1's type, and say so
def test_modality_setup_tables_hold_mirp_s_type_as_table_1_does(data, tmp_path):
    run = tmp_path / "prior"
    argv = ["eval", "--data", str(data), "--model", "baseline:standard-view", "--runs", "1"]
    assert main([*argv, "--out", str(run)]) == 0
    assert main(["report", str(run), "--out", str(tmp_path / "rep")]) == 0
    summary = json.loads((tmp_path / "rep" / "summary.json").read_text())
    metrics = json.loads((run / "metrics.json").read_text())
    (by_modality,) = summary["by_modality"].values()
    typed = metrics["by_question_type_setup_marker"]
    for key, group in by_modality["CT"].items():
        if key != "all":  # 1 run: the pooled accuracy is the run's
            expected = typed[f"relative_position|{key}"]["accuracy_mean"]
            assert group["accuracy"] == pytest.approx(expected, abs=1e-6), key
    assert len(by_modality["CT"]) > 2
    md = (tmp_path / "rep" / "summary.md").read_text()
    assert "relative-position questions only, as Table 1 does" in md


# 7: the cost on the summary line; tokens nobody reported are unknown, not 0
def test_cost_on_the_summary_line_and_unreported_tokens_are_a_dash(groups_data, tmp_path, capsys):
    price = ["--price", "input=2.5,output=10", "--runs", "1", "--limit", "4"]
    served = tmp_path / "served"
    with FakeChatServer(answer=lambda body: "yes") as server:
        argv = ["eval", "--data", str(groups_data), "--model", f"openai-compat:m@{server.base_url}"]
        assert main([*argv, *price, "--out", str(served)]) == 0
    cost = json.loads((served / "metrics.json").read_text())["usage"]["cost_usd"]
    assert f"  cost: {cost:.4f} USD" in capsys.readouterr().out
    base = tmp_path / "yes"
    argv = ["eval", "--data", str(groups_data), "--model", "baseline:yes", *price]
    assert main([*argv, "--out", str(base)]) == 0
    assert "cost: unknown (no call reported token counts)" in capsys.readouterr().out
    assert main(["report", str(served), str(base), "--out", str(tmp_path / "rep")]) == 0
    md = (tmp_path / "rep" / "summary.md").read_text()
    row = next(x for x in md.splitlines() if x.startswith("| baseline:yes | 4 (0) |"))
    assert row.split("|")[3:6] == [" – ", " – ", " – "], row


# 9: the small ones
MR = Path(__file__).resolve().parents[2] / "shared" / "data" / "totalseg_mr"


def test_the_mr_refusal_names_the_file_once(tmp_path, capsys):
    ct, seg = MR / "example_mr_sm.nii.gz", MR / "example_seg_mr.nii.gz"
    argv = ["generate", "--ct", str(ct), "--seg", str(seg), "--out", str(tmp_path / "o")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "--modality mr" in err and err.count(str(ct)) == 1, err


def test_inspect_task_on_missing_data_is_one_line_not_a_traceback(tmp_path):
    """inspect prints a ``PrerequisiteError`` as its message alone; anything else with its
    whole traceback."""
    pytest.importorskip("inspect_ai")
    from inspect_ai._util.error import PrerequisiteError

    from radspatial.eval.inspect_tasks import bench

    with pytest.raises(PrerequisiteError) as exc:
        bench(data=str(tmp_path / "missing"))
    assert "missing: not a dataset" in str(exc.value.message)


def test_eval_help_does_not_import_scipy_signal():
    """``eval --help`` lists the localizers, which loads their modules: the marker templates'
    scipy.signal (~1 s, ~3 s on a busy machine) is imported only when a template is matched."""
    import subprocess
    import sys

    code = (
        "import sys\nfrom radspatial.cli import main\ntry:\n    main(['eval', '--help'])\n"
        "except SystemExit:\n    pass\nprint('scipy.signal' in sys.modules, file=sys.stderr)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "--localizer" in done.stdout or "localizer" in done.stdout
    assert done.stderr.strip().splitlines()[-1] == "False", done.stderr[-500:]


def test_a_mirrored_cases_csv_survives_moving_its_folder(tmp_path):
    """The original case, two folders up (here through a symlinked folder), is named by an
    absolute path, the mirrored one relative to the CSV: move the folder and every path still
    reads (a case beside OUT stays relative: test_researcher_ux)."""
    import os
    import shutil

    from radspatial.bench.job import MirrorJob, run_mirror
    from radspatial.imaging.volumes import read_cases_csv

    ct, seg = bundled_example()
    os.symlink(Path(ct).parent, tmp_path / "linked")
    linked = tmp_path / "linked"
    run_mirror(MirrorJob(ct=linked / Path(ct).name, seg=linked / Path(seg).name,
                         out=tmp_path / "a" / "mirror"))  # fmt: skip
    moved = tmp_path / "b" / "c" / "mirror"
    moved.parent.mkdir(parents=True)
    shutil.move(tmp_path / "a" / "mirror", moved)
    cases = read_cases_csv(moved / "cases.csv")
    assert len(cases) == 2
    for case in cases:
        assert Path(case.ct).is_file() and Path(case.seg).is_file(), case
    assert Path(cases[1].ct).parent == moved


def test_the_probe_table_marks_a_majority_rate_in_its_chance_row():
    from radspatial.probes.table import table_rows

    task = {"chance": {"accuracy": 0.4}, "test": {"accuracy": 0.5, "n": 10}}
    uniform = {"chance": {"accuracy": 0.125}, "test": {"accuracy": 0.5, "n": 10}}
    result = {"kind": "train", "encoder": "e", "head": "mlp", "mode": "frozen",
              "tasks": {"count": task, "orient": uniform}}  # fmt: skip
    header, *rows = table_rows([result])
    chance = next(r for r in rows if r[0] == "Chance")
    by_task = dict(zip(header, chance, strict=True))
    count = next(h for h in header if h.lower().startswith("count"))
    orient = next(h for h in header if h.lower().startswith("orient"))
    assert by_task[count] == "40.0 (maj.)" and by_task[orient] == "12.5"


def test_probe_vlm_help_has_a_description(capsys):
    with pytest.raises(SystemExit):
        main(["probe", "vlm", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "forward pass" in out and "McNemar" in out


def test_docs_cli_md_is_every_command_s_help_as_the_parsers_give_it():
    """docs/cli.md is generated from the parsers; regenerate it when an option changes:
    ``python -m radspatial.cli.reference > docs/cli.md``."""
    from radspatial.cli.reference import cli_reference

    text = cli_reference()
    doc = (Path(__file__).resolve().parents[1] / "docs" / "cli.md").read_text()
    assert doc == text, "docs/cli.md is stale: python -m radspatial.cli.reference > docs/cli.md"
    wanted = ["`--per-slice PER_SLICE`", "contour", "`--temperature TEMPERATURE`"]
    wanted += ["totalsegmentator", "## radspatial probe vlm", "## radspatial import inspect"]
    for option in wanted:
        assert option in text, option


def _min_width_px(rows: list[list[str]], css: str) -> float:
    """A table's narrowest layout under the report's CSS, estimated: each column as wide as
    its widest unbreakable run (a whole cell where its kind of cell may not wrap, else its
    longest word; a first-column cell that may break anywhere, its capped width), at 0.6 em a
    character of the table's font, plus the cells' padding and borders."""
    import re

    font = float(re.search(r"table\{[^}]*font-size:(\d+)px", css)[1])
    pad = float(re.search(r"th,td\{[^}]*padding:\d+px (\d+)px", css)[1])
    wraps = {kind: not re.search(rf"(^|\}}|,){kind}\{{[^}}]*nowrap", css.replace("\n", ""))
             for kind in ("th", "td")}  # fmt: skip
    cap = re.search(r"td:first-child\{[^}]*max-width:(\d+)em", css)
    widths = []
    for c in range(len(rows[0])):
        runs = []
        for r, row in enumerate(rows):
            text = row[c].replace("\\", "")
            kind = "th" if r == 0 else "td"
            chars = max(map(len, text.split())) if wraps[kind] or (c == 0 and cap) else len(text)
            runs.append(min(chars * 0.6, float(cap[1])) if c == 0 and cap else chars * 0.6)
        widths.append(max(runs) * font + 2 * pad + 1)
    return sum(widths)


def test_the_report_s_first_two_tables_fit_a_1400_px_screen(abstainer, yes_run, tmp_path):
    from radspatial.reports.html import _CSS

    assert main(["report", str(abstainer), str(yes_run), "--out", str(tmp_path / "rep")]) == 0
    md = (tmp_path / "rep" / "summary.md").read_text()
    tables = [b for b in md.split("\n\n") if b.startswith("| Model |")][:2]
    assert len(tables) == 2
    for block in tables:
        lines = [x for x in block.splitlines() if x.startswith("|") and not x.startswith("|---")]
        rows = [[c.strip() for c in x.strip().strip("|").split(" | ")] for x in lines]
        width = _min_width_px(rows, _CSS)
        assert width <= 1400 - 2 * 16, (width, rows[0])  # body padding 16 px a side
