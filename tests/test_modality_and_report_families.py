"""Issue 39's researcher-experience fixes, each on the real code path: MR inferred from its
label table (and a CT without air refused), ``import lmms-eval`` storing absolute paths, the
auto localizer not falling back onto the CT network on MR, subcommands with their own help,
AS items only with relative position, deterministic backends run once by the demo, the report's
families with their chance levels, "abstains" instead of 0.0, rotation per family, lmms-eval's
group metrics, and a progress line while a backend warms up."""

from __future__ import annotations

import argparse
import io
import json
import os
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from radspatial.bench.dataset import build_dataset, writes_ablation
from radspatial.bench.generate import GenerateConfig
from radspatial.cli import build_parser, bundled_example, main
from radspatial.core.io import read_jsonl
from radspatial.core.modality import check_hounsfield, infer_modality
from radspatial.imaging.volumes import Case

MR = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "totalseg_mr"
MR_CT, MR_SEG = MR / "example_mr_sm.nii.gz", MR / "example_seg_mr.nii.gz"
needs_mr = pytest.mark.skipif(not MR_CT.is_file(), reason="../shared/data/totalseg_mr not present")


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    """A small dataset of the bundled CT: relative position, a SPAR multiple-choice type and a
    yes/no SPAR type, with label images (the mask oracle) and a few AS items."""
    out = tmp_path_factory.mktemp("ux39") / "ds"
    ct, seg = bundled_example()
    config = GenerateConfig(
        size=128, as_count=4, setups=("rq1", "rq2", "as"), markers=("numbers",),
        question_types=("relative_position", "spar_orient", "size"), export_masks=True,
    )  # fmt: skip
    build_dataset([Case("ex", ct, seg)], config, out, log=lambda _: None)
    return out


def _eval(data: Path, out: Path, model: str, runs: int = 1) -> Path:
    argv = ["eval", "--data", str(data), "--model", model, "--runs", str(runs), "--out", str(out)]
    assert main([*argv, "--setups", "rq1,rq2"]) == 0
    return out


# ---------------------------------------------------------------- MR


def test_modality_rules_are_what_the_docs_say():
    assert infer_modality(["totalsegmentator_mr"]) == "MR"
    assert infer_modality(["totalsegmentator", None, "L.json"]) == "CT"
    with pytest.raises(ValueError, match="--modality"):
        infer_modality(["totalsegmentator_mr", "totalsegmentator"])
    check_hounsfield(np.array([-1000.0, 40.0]), "ct.nii")  # air: a CT
    with pytest.raises(ValueError, match=r"x\.nii: no voxel below -200 HU.*--modality mr"):
        check_hounsfield(np.array([0.0, 350.0, 1200.0]), "x.nii")


@pytest.fixture(scope="module")
def mr_data(tmp_path_factory) -> tuple[Path, str]:
    """``generate`` on the real MR with its MR label table and no ``--modality``."""
    if not MR_CT.is_file():
        pytest.skip("../shared/data/totalseg_mr not present")
    out = tmp_path_factory.mktemp("mr") / "mr"
    argv = ["generate", "--ct", str(MR_CT), "--seg", str(MR_SEG), "--out", str(out)]
    argv += ["--labels", "totalsegmentator_mr", "--setups", "rq1,rq2", "--markers", "numbers"]
    code, err = _main_err([*argv, "--size", "256"])  # numbers readable by the marker reader
    assert code == 0, err
    return out, err


def _main_err(argv: list[str]) -> tuple[int, str]:
    import contextlib

    buf = io.StringIO()
    with contextlib.redirect_stderr(buf):
        code = main(argv)
    return code, buf.getvalue()


def test_mr_labels_without_modality_make_an_mr_dataset_not_white_images(mr_data):
    out, err = mr_data
    assert "modality: MR (the label table is totalsegmentator_mr" in err
    info = json.loads((out / "dataset.json").read_text())
    assert info["config"]["modality"] == "MR" and "percentiles" in info["config"]["display"]
    rows = list(read_jsonl(out / "manifest.jsonl"))
    assert rows and {r["modality"] for r in rows} == {"MR"}
    grey = np.asarray(Image.open(out / rows[0]["image"]).convert("L"), np.float32)
    assert grey.mean() < 200 and grey.std() > 20  # a picture, not the CT window's white


@needs_mr
def test_an_mr_volume_in_the_ct_window_is_refused_naming_modality(tmp_path, capsys):
    argv = ["generate", "--ct", str(MR_CT), "--seg", str(MR_SEG), "--out", str(tmp_path / "o")]
    argv += ["--labels", "totalsegmentator_mr", "--modality", "ct", "--setups", "rq1"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "example_mr_sm.nii.gz: no voxel below -200 HU" in err[0]
    assert "--modality mr" in err[0] and not (tmp_path / "o").exists()


@needs_mr
def test_python_api_infers_mr_from_the_label_table_too(tmp_path):
    import radspatial

    out = radspatial.generate(tmp_path / "mr", ct=MR_CT, seg=MR_SEG, labels="totalsegmentator_mr",
                              setups=("rq1",), size=128).out  # fmt: skip
    assert json.loads((out / "dataset.json").read_text())["config"]["modality"] == "MR"
    with pytest.raises(ValueError, match="no voxel below -200 HU"):
        radspatial.generate(tmp_path / "ct", ct=MR_CT, seg=MR_SEG, modality="ct",
                            labels="totalsegmentator_mr", setups=("rq1",), size=128)  # fmt: skip


def test_agent_eval_on_mr_never_loads_the_ct_network(mr_data, tmp_path):
    """A whole MR run through the plain agent: plain slices abstain with the reason, marker
    slices are read; PyTorch (and so the network) is never imported."""
    import subprocess
    import sys

    code = (
        "import sys, json; from pathlib import Path; from radspatial.eval.runner import "
        "EvalConfig, run_eval; rows = run_eval(Path(sys.argv[1]), Path(sys.argv[2]), "
        "EvalConfig(model='agent', runs=1), progress=False); print(json.dumps({'torch': "
        "'torch' in sys.modules, 'replies': sorted({r['setup'] + ':' + str(r['reply'])[:40] "
        "for r in rows})}))"
    )
    done = subprocess.run([sys.executable, "-c", code, str(mr_data[0]), str(tmp_path / "run")],
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["torch"] is False
    assert "rq1:abstain: localizer trained on CT, not MR" in got["replies"]
    assert any(r.startswith("rq2:") and r[4:] in ("0", "1") for r in got["replies"])


def test_auto_localizer_does_not_fall_back_to_the_ct_network_on_mr(monkeypatch):
    from radspatial.agent.localizers.organs.organs import AutoLocalizer, OrgansLocalizer
    from radspatial.agent.pipeline.types import Context, Ref

    def no_network(*_args, **_kwargs):
        raise AssertionError("the CT network was asked about an MR image")

    monkeypatch.setattr(OrgansLocalizer, "locate", no_network)
    monkeypatch.setattr(OrgansLocalizer, "model", property(no_network))
    auto = AutoLocalizer()
    image = np.zeros((64, 64, 3), np.uint8)  # no marker to read: the name fallback is next
    ref = Ref(name="liver", marker="numbers", text="1")
    assert auto.locate(image, [ref], Context(extra={"modality": "MR"})) == [None]


# ---------------------------------------------------------------- lmms-eval import


@pytest.fixture(scope="module")
def task(data, tmp_path_factory) -> Path:
    """``export lmms-eval`` of the small dataset (parquet: needs pyarrow and datasets)."""
    pytest.importorskip("pyarrow")
    pytest.importorskip("datasets")
    out = tmp_path_factory.mktemp("task") / "t"
    assert main(["export", "lmms-eval", "--data", str(data), "--out", str(out)]) == 0
    return out


def _hook_rows(task: Path, setup: str) -> list[dict]:
    """The rows the task's hooks log for ``setup`` (answer "1" to everything), as lmms-eval
    would run them: the parquet's docs, ``process_results``' logged row."""
    import importlib.util

    import datasets

    spec = importlib.util.spec_from_file_location(f"utils_ux39_{setup}", task / "utils.py")
    utils = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(utils)
    shards = str(task / "hf" / "data" / "test-*.parquet")
    ds = datasets.load_dataset("parquet", data_files={"test": shards}, split="test")
    docs = getattr(utils, f"process_docs_{setup}")(ds)
    process = getattr(utils, f"process_results_{setup}")
    return [process(doc, ["1"])["accuracy"] for doc in docs]


def test_import_lmms_eval_stores_absolute_paths_for_report_and_export(
    data, task, tmp_path, monkeypatch, capsys
):
    rows = _hook_rows(task, "rq1")[:6]
    logs = tmp_path / "logs" / "fake"
    logs.mkdir(parents=True)
    samples = [{"doc_id": k, "filtered_resps": [r["reply"]], "accuracy": r}
               for k, r in enumerate(rows)]  # fmt: skip
    path = logs / "20260101_000000_samples_radspatial_rq1.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in samples))
    monkeypatch.chdir(data.parent)  # relative --data and --samples, as a user types them
    rel = os.path.relpath(path, data.parent)
    argv = ["import", "lmms-eval", "--samples", rel, "--data", data.name]
    assert main([*argv, "--out", str(tmp_path / "imported")]) == 0
    info = json.loads((tmp_path / "imported" / "run.json").read_text())
    assert info["data"] == str(data.resolve()) and Path(info["samples"][0]).is_absolute()
    for row in read_jsonl(tmp_path / "imported" / "results.jsonl"):
        assert Path(row["image"]).is_absolute() and Path(row["image"]).is_file()
    monkeypatch.chdir(tmp_path)  # another folder: the paths still lead to the dataset
    assert main(["export", "mirp", "--run", "imported", "--out", "mirp"]) == 0
    assert any(p.name.startswith("center_of") for p in (tmp_path / "mirp").iterdir())
    capsys.readouterr()
    assert main(["report", "imported", "--out", "rep"]) == 0
    assert "warning" not in capsys.readouterr().err
    assert 'class="missing"' not in (tmp_path / "rep" / "index.html").read_text()
    info["data"] = str(tmp_path / "moved")  # a dataset moved away: the report says so
    (tmp_path / "imported" / "run.json").write_text(json.dumps(info))
    assert main(["report", "imported", "--out", "rep"]) == 0
    assert "warning: 6 gallery item(s) show no image" in capsys.readouterr().err


# ---------------------------------------------------------------- help and AS


def _sub(*path: str) -> argparse.ArgumentParser:
    parser = build_parser()
    for name in path:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[name]
    return parser


def test_subcommands_have_their_own_help_and_serve_shows_defaults():
    train = " ".join(_sub("agent", "train").format_help().split())
    assert "--epochs" in train and "--data DATA" in train and "--image" not in train
    agent = _sub("agent").format_help()
    assert "--image" in agent and "--epochs" not in agent and "train" in agent
    mirror = _sub("counterfactual", "mirror").format_help()
    assert "--ct CT" in mirror and "mirrored left-right" in mirror
    serve = " ".join(_sub("serve").format_help().split())
    assert "(default: 127.0.0.1)" in serve and "(default: 8000)" in serve


def test_agent_train_parses_to_the_trainer_and_plain_agent_still_answers():
    args = build_parser().parse_args(["agent", "train", "--data", "d", "--out", "m"])
    assert args.func.__name__ == "cmd_agent_train" and args.epochs is None  # the old name
    args = build_parser().parse_args(["train", "unet", "--data", "d", "--out", "m"])
    assert args.func.__name__ == "cmd_train_unet" and args.epochs is None
    args = build_parser().parse_args(["agent", "--image", "a.png", "--question", "Is x?"])
    assert args.func.__name__ == "cmd_agent" and args.action is None


def test_as_items_only_when_relative_position_is_asked(tmp_path):
    asked = GenerateConfig(question_types=("laterality",), as_count=4)
    assert not writes_ablation(asked)
    assert writes_ablation(GenerateConfig(question_types=("laterality", "relative_position")))
    ct, seg = bundled_example()
    out = tmp_path / "lat"
    build_dataset([Case("ex", ct, seg)], GenerateConfig(size=96, as_count=4,
                  question_types=("size",)), out, log=lambda _: None)  # fmt: skip
    assert {r["setup"] for r in read_jsonl(out / "manifest.jsonl")} <= {"rq1", "rq2", "rq3"}


# ---------------------------------------------------------------- demo


def test_demo_runs_a_deterministic_backend_once(data, tmp_path):
    from radspatial.cli.demo import _evaluate
    from radspatial.models.base import create_backend, is_deterministic

    assert is_deterministic(create_backend("baseline:yes"))
    assert is_deterministic(create_backend("agent:markers"))
    assert not is_deterministic(create_backend("baseline:random"))
    args = argparse.Namespace(out=tmp_path, runs=3)
    for spec, runs in (("baseline:yes", 1), ("baseline:random", 3)):
        run_dir = _evaluate(spec, data, args, "[x/y]", time.monotonic())
        assert json.loads((run_dir / "run.json").read_text())["runs"] == runs, spec


# ---------------------------------------------------------------- report


@pytest.fixture(scope="module")
def runs(data, tmp_path_factory) -> list[Path]:
    root = tmp_path_factory.mktemp("ux39runs")
    return [
        _eval(data, root / "yes", "baseline:yes"),
        _eval(data, root / "mask", "agent:mask"),
        _eval(data, root / "random", "baseline:random", runs=2),
    ]


@pytest.mark.parametrize("n_models", [1, 2, 3])
def test_report_splits_families_with_chance_and_shows_abstentions(runs, tmp_path, n_models):
    from radspatial.reports.build import build_report

    report = build_report(runs[:n_models], tmp_path / "rep")
    md = report.summary_md.read_text()
    table1 = md.split("## Accuracy by setup and marker", 1)[1].split("\n## ", 1)[0]
    assert "spar_orient" not in table1 and "| chance | 50.0 |" in table1
    families = md.split("## Question types by family", 1)[1]
    assert "### SPAR-VQA (SPAR-Bench Table 2" in families and "| Type | Answer | Chance |" in md
    assert "| spar_orient | 1 of 5 | 20.0 |" in families
    assert "| size | yes/no | 50.0 |" in families
    assert "every type is a balanced yes/no" not in md
    rotation = md.split("## Rotation and flip", 1)[1].split("\n## ", 1)[0]
    assert "### MIRP relative position, RQ1" in rotation and "### SPAR-VQA" in rotation
    if n_models >= 2:  # the mask oracle cannot choose an orientation: it abstains, not 0.0
        orient = next(line for line in families.splitlines() if line.startswith("| spar_orient"))
        assert orient.split(" | ")[4].strip(" |") == "abstains"  # type, answer, chance, yes, mask
    for name in ("rotation_heatmap.png", "question_types.png", "accuracy_by_setup.png"):
        assert (tmp_path / "rep" / name).is_file() or n_models == 1, name
    assert "white-space:nowrap" in report.index_html.read_text()


# ---------------------------------------------------------------- lmms-eval and progress


def test_lmms_as_task_reports_no_frames_so_the_group_row_is_not_nan(task):
    """lmms-eval 0.7.3 pools into the group row every subtask metric whose name holds
    "accuracy", over the subtasks that report it: AS, which has no standard view, must not
    report accuracy_standard/accuracy_anatomical (its NaN made the group's NaN)."""
    from radspatial.formats.lmms_tasks import metric_names

    yaml = pytest.importorskip("yaml")

    assert "accuracy_standard" not in metric_names(("numbers",), "as")
    assert {"accuracy_standard", "accuracy_anatomical"} <= set(metric_names(("numbers",), "rq1"))

    def listed(setup: str) -> set[str]:
        text = (task / f"radspatial_{setup}.yaml").read_text().split("metadata:")[0]
        return {line.split("metric: ")[1] for line in text.splitlines() if "- metric: " in line}

    assert "accuracy_standard" not in listed("as") and "accuracy" in listed("as")
    assert {"accuracy_standard", "accuracy_anatomical"} <= listed("rq1")
    group = yaml.safe_load((task / "radspatial.yaml").read_text())
    assert group["aggregate_metric_list"][0] == {
        "metric": "accuracy",
        "aggregation": "mean",
        "weight_by_size": True,
    }


def test_progress_keeps_saying_it_waits_while_nothing_is_counted(monkeypatch):
    from radspatial.core.progress import Progress

    monkeypatch.setenv("RADSPATIAL_PROGRESS_SECONDS", "0.05")
    stream = io.StringIO()
    bar = Progress(3, "eval agent: calls", "call", stream=stream)
    bar.set_note("waiting for the first reply")
    with bar.keepalive():
        deadline = time.monotonic() + 60
        while "waiting for the first reply" not in stream.getvalue():
            assert time.monotonic() < deadline, "no line while waiting"
            time.sleep(0.02)
    assert "eval agent: calls: 0/3 call(s), waiting for the first reply" in stream.getvalue()


def test_serve_warms_each_network_up_before_it_listens(capsys):
    """``serve`` loads what a localizer's first call would load (``warm_up``) and says so on
    stderr; localizers without a network are left alone."""
    from types import SimpleNamespace

    from radspatial.agent.server.server import _warm_up

    calls = []
    warm = SimpleNamespace(localizer=SimpleNamespace(warm_up=lambda: calls.append("organs")))
    plain = SimpleNamespace(localizer=SimpleNamespace())
    _warm_up({"agent": warm, "agent:markers": plain})  # type: ignore[dict-item]
    out = capsys.readouterr()
    assert calls == ["organs"] and out.out == ""
    assert "radspatial: agent: loading its network" in out.err and "loaded in" in out.err
    assert "agent:markers" not in out.err
