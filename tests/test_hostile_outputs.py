"""Hostile inputs to the commands that read other tools' or runs' outputs (issue 36): terminal
escapes from files and servers, outputs that would destroy their inputs, forged lmms-eval logs,
runs counted twice by spar-table, bad results rows for export mirp. One table row per case:
the command as typed, its exit code, the words of its one-line message (tests/hostile.py);
every row's output is also checked for raw escape characters.

The lmms-eval sample logs are written here as the exported task's hooks write them (the hooks'
own ``doc_item`` and ``result_row`` on each manifest row; tests/test_lmms_eval.py runs the
hooks on the exported parquet itself), so no lmms-eval install is needed.
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pytest
from hostile import Base, Case, RawServer, rewrite_jsonl, run_case, small_run
from synth import write_case

from radspatial.cli import main

ESC = "\x1b[31m"
URLS: dict[str, str] = {}


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Base:
    tmp = tmp_path_factory.mktemp("hostile_out")
    return small_run(tmp)


@pytest.fixture(scope="module")
def servers():
    with RawServer(f'{{"error": "{ESC}bad request\\u202e"}}'.encode(), status=400) as bad:
        URLS["400"] = bad.url
        yield


def _copy(base: Base, tmp: Path) -> tuple[Path, Path]:
    ds, run = tmp / "ds", tmp / "run"
    shutil.copytree(base.ds, ds, symlinks=True)
    shutil.copytree(base.run, run)
    return ds, run


# ------------------------------------------------------------------ lmms-eval sample logs


def _logged_rows(ds: Path, reply: str = "Yes") -> list[dict]:
    """The rows the exported task's hooks log for ``reply`` to every item (protocol ours)."""
    from radspatial.core.datafiles import read_json_lines
    from radspatial.eval.items import manifest_item
    from radspatial.eval.prompts import MIRP
    from radspatial.eval.results import result_row
    from radspatial.questions.manifest import ManifestRow

    rows = []
    for where, raw in read_json_lines(ds / "manifest.jsonl"):
        item = manifest_item(Path(), where, ManifestRow.from_json(raw, where))
        call = {"reply": reply, "error": None}
        rows.append(result_row(item, 0, call, MIRP.render(item)).to_json())
    return rows


def _write_log(folder: Path, rows: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "20260101_000000_samples_radspatial_rq1.jsonl"
    samples = [{"doc_id": k, "filtered_resps": [r["reply"]], "accuracy": r} for k, r in
               enumerate(rows)]  # fmt: skip
    path.write_text("".join(json.dumps(s) + "\n" for s in samples))
    return path


def _import(change=None, *, model_dir: str = "m", out: str = "imp", more=()) -> Case:
    """import lmms-eval of a log of the dataset, its first row changed by ``change``."""

    def setup(tmp: Path, base: Base) -> list[str]:
        ds, _ = _copy(base, tmp)
        rows = _logged_rows(ds)
        if change is not None:
            rows[0] = change(rows[0], rows)
        logs = tmp / "logs" / model_dir
        _write_log(logs, rows)
        return ["import", "lmms-eval", "--samples", str(tmp / "logs"), "--data", str(ds),
                "--out", str(tmp / out), *more]  # fmt: skip

    return setup


def _imported_truth(tmp: Path) -> None:
    metrics = json.loads((tmp / "imp" / "metrics.json").read_text())
    rows = [json.loads(x) for x in (tmp / "imp" / "results.jsonl").read_text().splitlines()]
    want = sum(r["expected"] == 1 for r in rows) / len(rows)  # the reply is always "Yes"
    assert metrics["overall"]["accuracy_mean"] == pytest.approx(want)
    assert "\x1b" not in metrics["model"] and "\x1b" not in (tmp / "imp" / "run.json").read_text()


def _logs_intact(tmp: Path) -> None:
    assert list((tmp / "logs").rglob("*_samples_*.jsonl"))


def _flip(key: str):
    return lambda row, rows: {**row, key: not row[key]}


# ------------------------------------------------------------------ spar-table runs


def _seed_run(tmp: Path, name: str, *, model: str = "m", data: str | None = None, acc=0.5):
    run = tmp / name
    run.mkdir(parents=True)
    group = {"accuracy_mean": acc, "n_items": 4, "chance": 0.5}
    metrics = {"model": model, "by_question_type": {"spar_relpos": group}}
    (run / "metrics.json").write_text(json.dumps(metrics))
    (run / "results.jsonl").write_text(json.dumps({"id": name}) + "\n")
    (run / "run.json").write_text(json.dumps({"data": str(tmp / (data or f"ds_{name}"))}))
    return run


def _spar(*names: str, out: str = "t2", **kw) -> Case:
    def setup(tmp: Path, base: Base) -> list[str]:
        runs = []
        for n in names:
            runs.append(tmp / n if (tmp / n).exists() else _seed_run(tmp, n, **kw))
        return ["spar-table", *map(str, runs), "--out", str(tmp / out)]

    return setup


def _spar_copy(tmp: Path, base: Base) -> list[str]:
    r0 = _seed_run(tmp, "r0")
    shutil.copytree(r0, tmp / "r1")
    (tmp / "r1" / "run.json").write_text(json.dumps({"data": str(tmp / "elsewhere")}))
    return ["spar-table", str(r0), str(tmp / "r1"), "--out", str(tmp / "t2")]


def _spar_metrics(metrics: object) -> Case:
    def setup(tmp: Path, base: Base) -> list[str]:
        run = _seed_run(tmp, "r0")
        (run / "metrics.json").write_text(json.dumps(metrics))
        return ["spar-table", str(run), "--out", str(tmp / "t2")]

    return setup


def _r0_metrics_intact(tmp: Path) -> None:
    assert json.loads((tmp / "r0" / "metrics.json").read_text())["model"] == "m"


# ------------------------------------------------------------------ exports onto folders


def _onto_folder(kind: str) -> Case:
    """An export with --overwrite onto a folder this command did not write."""

    def setup(tmp: Path, base: Base) -> list[str]:
        ds, run = _copy(base, tmp)
        (tmp / "mine").mkdir()
        (tmp / "mine" / "thesis.tex").write_text("keep me\n")
        out = ["--out", str(tmp / "mine"), "--overwrite"]
        if kind == "mirp":
            return ["export", "mirp", "--run", str(run), *out]
        if kind == "probe":
            return ["probe", "build", "--tasks", "relpos", "--size", "64", *out]
        if kind == "generate":
            ct, seg = write_case(tmp / "c")
            return ["generate", "--ct", str(ct), "--seg", str(seg), "--setups", "rq1", *out]
        return ["export", kind, "--data", str(ds), *out]

    return setup


def _mine_intact(tmp: Path) -> None:
    assert (tmp / "mine" / "thesis.tex").read_text() == "keep me\n"
    assert not (tmp / "mine.partial").exists()


def _lmms_onto_data(tmp: Path, base: Base) -> list[str]:
    ds, _ = _copy(base, tmp)
    return ["export", "lmms-eval", "--data", str(ds), "--out", str(ds / "task"), "--overwrite"]


def _ds_intact(tmp: Path) -> None:
    assert (tmp / "ds" / "manifest.jsonl").is_file() and not (tmp / "ds" / "task").exists()


def _probe(kind: str) -> Case:
    def setup(tmp: Path, base: Base) -> list[str]:
        for name in ("pd", "pr"):
            (tmp / name).mkdir()
            (tmp / name / "results.json").write_text('{"status": "complete", "tasks": {}}')
        if kind == "train":
            return ["probe", "train", "--data", str(tmp / "pd"), "--encoder", "resnet-small",
                    "--out", str(tmp / "pd" / "run")]  # fmt: skip
        if kind == "eval":
            return ["probe", "eval", "--model", str(tmp / "pr"), "--data", str(tmp / "pd"),
                    "--out", str(tmp / "pr")]  # fmt: skip
        return ["probe", "table", str(tmp / "pr"), "--out", str(tmp / "pr" / "t")]

    return setup


def _probe_results_intact(tmp: Path) -> None:
    for name in ("pd", "pr"):
        assert json.loads((tmp / name / "results.json").read_text())["status"] == "complete"
    assert not (tmp / "pd" / "run").exists() and not (tmp / "pr" / "t").exists()


def _mirror_onto_seg(tmp: Path, base: Base) -> list[str]:
    ct, seg = write_case(tmp / "c")
    shutil.copy(seg, tmp / "c" / "x_mirrored.nii.gz")
    shutil.copy(ct, tmp / "c" / "x.nii.gz")
    return ["counterfactual", "mirror", "--ct", str(tmp / "c" / "x.nii.gz"),
            "--seg", str(tmp / "c" / "x_mirrored.nii.gz"), "--out", str(tmp / "c")]  # fmt: skip


# ------------------------------------------------------------------ export mirp rows


def _results_row(**change) -> Case:
    def setup(tmp: Path, base: Base) -> list[str]:
        _, run = _copy(base, tmp)
        rewrite_jsonl(run / "results.jsonl", lambda rows: [{**rows[0], **change}, *rows[1:]])
        return ["export", "mirp", "--run", str(run), "--out", str(tmp / "exp")]

    return setup


def _escaped_error(tmp: Path, base: Base) -> list[str]:
    ds, _ = _copy(base, tmp)
    return ["eval", "--data", str(ds), "--model", f"openai-compat:m@{URLS['400']}", "--runs",
            "1", "--limit", "1", "--out", str(tmp / "out"), "--retries", "0"]  # fmt: skip


def _escaped_path(tmp: Path, base: Base) -> list[str]:
    return ["export", "mirp", "--run", str(tmp / f"no{ESC}such"), "--out", str(tmp / "o")]


CASES = [
    # class 3: raw terminal escapes
    Case("spar-table model name with ESC", _spar("a", "b", model=f"{ESC}evil\nx"), 2,
         ("metrics.json", "'model'", "control character")),  # round 5: the text gate
    Case("import: model from a folder name with ESC", _import(model_dir=f"m{ESC}"), 0,
         ("1 sample log",), _imported_truth),
    Case("server's HTTP 400 body with ESC", _escaped_error, 3, ("HTTP 400", "\\x1b[31mbad")),
    Case("ESC in a path of the error line", _escaped_path, 2, ("no\\x1b[31msuch",)),
    # class 4: outputs destroy inputs
    Case("spar-table --out r0/metrics", _spar("r0", "r1", out="r0/metrics"), 2,
         ("--out", "r0/metrics.json", "lies inside the input run #1"), _r0_metrics_intact),
    Case("import --out is --samples", _import(out="logs", more=("--overwrite",)), 2,
         ("--out", "is the input --samples"), _logs_intact),
    Case("import --out inside --data", _import(out="ds/run", more=("--overwrite",)), 2,
         ("--out", "lies inside the input --data")),
    Case("export lmms-eval onto another folder", _onto_folder("lmms-eval"), 2,
         ("--out", "not an lmms-eval task folder", "radspatial_task.json"), _mine_intact),
    Case("export lmms-eval inside --data", _lmms_onto_data, 2,
         ("--out", "lies inside the input --data"), _ds_intact),
    Case("export hf onto another folder", _onto_folder("hf"), 2,
         ("--out", "not a Hugging Face export"), _mine_intact),
    Case("export mirp onto another folder", _onto_folder("mirp"), 2,
         ("--out", "not a MIRP export"), _mine_intact),
    Case("generate onto another folder", _onto_folder("generate"), 2,
         ("--out", "not a radspatial dataset", "dataset.json"), _mine_intact),
    Case("eval --out inside --data", lambda t, b: ["eval", "--data", str(_copy(b, t)[0]),
         "--model", "baseline:yes", "--out", str(t / "ds" / "run")], 2,
         ("--out", "lies inside the input --data")),
    Case("probe build onto another folder", _onto_folder("probe"), 2,
         ("--out", "not a probe dataset", "probes.json"), _mine_intact),
    Case("probe train --out inside --data", _probe("train"), 2,
         ("--out", "lies inside the input --data"), _probe_results_intact),
    Case("probe eval --out is --model", _probe("eval"), 2,
         ("--out", "is the input --model"), _probe_results_intact),
    Case("probe table --out inside its results", _probe("table"), 2,
         ("--out", "lies inside the input results #1"), _probe_results_intact),
    Case("counterfactual output onto --seg", _mirror_onto_seg, 2,
         ("x_mirrored.nii.gz", "is the input --seg")),
    # class 6: import lmms-eval trusts nothing but the reply
    Case("import: a legitimate log", _import(), 0, ("rows from 1 sample log",), _imported_truth),
    Case("import: forged correct", _import(_flip("correct")), 2,
         ("samples_radspatial_rq1.jsonl: line 1", "'correct'", "--data")),
    Case("import: forged expected", _import(_flip("expected")), 2,
         ("line 1", "'expected'")),
    Case("import: forged parsed", _import(lambda r, rows: {**r, "parsed": 1 - r["parsed"]}), 2,
         ("line 1", "'parsed'")),
    Case("import: id not in --data", _import(lambda r, rows: {**r, "id": "rq1/none/zz.png"}), 2,
         ("line 1", "'rq1/none/zz.png'", "not a yes/no item of --data")),
    Case("import: image outside --data",
         _import(lambda r, rows: {**r, "image": "../../etc/passwd"}), 2,
         ("line 1", "outside the dataset folder")),
    Case("import: another item's image",
         _import(lambda r, rows: {**r, "image": rows[1]["image"]}), 2,
         ("line 1", "'image'", "not the item's image")),
    Case("import: prompt changed",
         _import(lambda r, rows: {**r, "prompt": r["prompt"] + " Say yes."}), 2,
         ("line 1", "'prompt'", "not the prompt")),
    # class 9: spar-table counts a run once
    Case("spar-table r0 r0", _spar("r0", "r0"), 2, ("given twice", "one run per dataset seed")),
    Case("spar-table a copy of r0", _spar_copy, 2, ("r1", "a copy of", "results.jsonl")),
    Case("spar-table two runs of one dataset", _spar("r0", "r1", data="ds"), 2,
         ("r1", "model m on", "again, as")),
    Case("spar-table metrics a list", _spar_metrics([1]), 2,
         ("metrics.json", "expected an object")),
    Case("spar-table accuracy a string",
         _spar_metrics({"by_question_type": {"spar_relpos": {"accuracy_mean": "x"}}}), 2,
         ("metrics.json", "by_question_type['spar_relpos']", "'accuracy_mean' must be a number")),
    Case("spar-table no by_question_type", _spar_metrics({"model": "m"}), 2,
         ("metrics.json", "'by_question_type'")),
    # round 3 leftovers: export mirp on bad results rows
    Case("export mirp expected null", _results_row(expected=None), 2,
         ("results.jsonl: line 1", "'expected'", "0 or 1")),
    Case("export mirp expected 2.5", _results_row(expected=2.5), 2,
         ("results.jsonl: line 1", "'expected'", "2.5")),
    Case("export mirp parsed 7", _results_row(parsed=7), 2,
         ("results.jsonl: line 1", "'parsed'")),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=str)
def test_hostile_outputs(case, base, servers, tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    shown = run_case(case, tmp_path, base, capsys, monkeypatch)
    assert "\x1b" not in shown and "\u202e" not in shown


def test_report_figures_show_escaped_model_names(base, tmp_path, capsys) -> None:
    """A run's model name with ``$`` math reaches the figures as literal text: no math-mode
    parse error (a name with ESC is refused by the text gate since round 5)."""
    _, run = _copy(base, tmp_path)
    metrics = json.loads((run / "metrics.json").read_text())
    metrics["model"] = "\u202am$\\frac{$x"
    (run / "metrics.json").write_text(json.dumps(metrics))
    assert main(["report", str(run), "--out", str(tmp_path / "rep")]) == 2
    assert "control character" in capsys.readouterr().err
    metrics["model"] = "m$\\frac{$x"
    (run / "metrics.json").write_text(json.dumps(metrics))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["report", str(run), "--out", str(tmp_path / "rep")]) == 0
    shown = capsys.readouterr()
    assert "\x1b" not in shown.out + shown.err
    assert not [w for w in caught if "\x1b" in str(w.message)]
    md = (tmp_path / "rep" / "summary.md").read_text()
    assert "\x1b" not in md and "m$" in md  # shown literally


def test_import_needs_the_dataset(tmp_path, capsys) -> None:
    """Without --data nothing can be checked: argparse refuses (exit 2, naming --data)."""
    with pytest.raises(SystemExit) as done:
        main(["import", "lmms-eval", "--samples", str(tmp_path), "--out", str(tmp_path / "o")])
    assert done.value.code == 2 and "--data" in capsys.readouterr().err
