"""Hostile inputs, round 5 (issue 49): names and numbers from files (one text gate, one number
gate), silent cases made to speak, and the newest surfaces (``import inspect`` logs, ``probe vlm``
run folders, ``--price``, forged usage in ``calls.jsonl``). Each row as in tests/hostile.py: the
exit code, the words of the one-line message (file and problem), no traceback, no raw ESC byte,
nothing written outside the row's folder. The server's and the readers' own refusals are
checked below the table, on tiny inputs."""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from hostile import Base, Case, rewrite_jsonl, run_case, small_run
from synth import canonical_volumes

pytest.importorskip("nrrd")

ESC = "\x1b[31mliver\x1b[0m"
_, LABELS, _ = canonical_volumes()
RAW = LABELS.tobytes(order="F")


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Base:
    return small_run(tmp_path_factory.mktemp("round5"))


def _nrrd(name: str = "m.nrrd", data: bytes = RAW, **fields: str):
    """The synthetic mask as NRRD (LPS, raw) with ``fields`` overriding the header."""

    def setup(tmp: Path, base: Base) -> list[str]:
        head = {"type": "uint8", "dimension": "3", "space": "left-posterior-superior"}
        head |= {"sizes": "48 40 20", "space directions": "(-4,0,0) (0,-5,0) (0,0,3)"}
        head |= {"kinds": "domain domain domain", "encoding": "raw"}
        head |= {"space origin": "(90,100,-30)", **fields}
        text = "NRRD0004\n" + "".join(f"{k}: {v}\n" for k, v in head.items()) + "\n"
        (tmp / name).write_bytes(text.encode() + data)
        return _generate(tmp, base, tmp / name)

    return setup


def _generate(tmp: Path, base: Base, seg: Path, *more: str) -> list[str]:
    ct = base.ds.parent / "in" / "synth_ct.nii.gz"
    return ["generate", "--ct", str(ct), "--seg", str(seg), "--out", str(tmp / "o"),
            "--setups", "rq1", *more]  # fmt: skip


def _table(names: dict[str, str]):
    def setup(tmp: Path, base: Base) -> list[str]:
        (tmp / "t.json").write_text(json.dumps(names))
        return _generate(tmp, base, base.ds.parent / "in" / "synth_seg.nii.gz", "--labels",
                         str(tmp / "t.json"))  # fmt: skip

    return setup


def _copy(base: Base, tmp: Path) -> tuple[Path, Path]:
    ds, run = tmp / "ds", tmp / "run"
    shutil.copytree(base.ds, ds, symlinks=True)
    shutil.copytree(base.run, run)
    return ds, run


def _eval(ds: Path, out: Path, *more: str) -> list[str]:
    return ["eval", "--data", str(ds), "--model", "baseline:yes", "--runs", "1", "--out",
            str(out), "--limit", "4", *more]  # fmt: skip


def _manifest(**source) -> Case:
    def setup(tmp: Path, base: Base) -> list[str]:
        ds, _ = _copy(base, tmp)
        edit = lambda rows: [{**rows[0], "source": {**rows[0]["source"], **source}}, *rows[1:]]  # noqa: E731
        rewrite_jsonl(ds / "manifest.jsonl", edit)
        return _eval(ds, tmp / "o")

    return setup


def _calls(**fields) -> Case:
    """A resumed eval whose logged first call carries ``fields`` (forged numbers)."""

    def setup(tmp: Path, base: Base) -> list[str]:
        ds, run = _copy(base, tmp)
        rewrite_jsonl(run / "calls.jsonl", lambda rows: [{**rows[0], **fields}, *rows[1:]])
        return _eval(ds, run)

    return setup


def _calls_bytes(tmp: Path, base: Base) -> list[str]:
    ds, run = _copy(base, tmp)
    lines = (run / "calls.jsonl").read_bytes().split(b"\n")
    lines[0] = lines[0].replace(b'"reply": "', b'"reply": "\xff', 1)
    (run / "calls.jsonl").write_bytes(b"\n".join(lines))
    return _eval(ds, run)


def _price(text: str) -> Case:
    return lambda tmp, base: _eval(base.ds, tmp / "o", "--price", text)


def _results_folder(tmp: Path, base: Base) -> list[str]:
    _, run = _copy(base, tmp)
    (run / "results.jsonl").unlink()
    (run / "results.jsonl").mkdir()
    return ["report", str(run), "--out", str(tmp / "rep")]


def _model_name(command: str, name: str) -> Case:
    def setup(tmp: Path, base: Base) -> list[str]:
        _, run = _copy(base, tmp)
        metrics = json.loads((run / "metrics.json").read_text())
        (run / "metrics.json").write_text(json.dumps({**metrics, "model": name}))
        return [command, str(run), "--out", str(tmp / "rep")]

    return setup


def _inspect(make) -> Case:
    def setup(tmp: Path, base: Base) -> list[str]:
        log = make(tmp)
        return ["import", "inspect", "--log", str(log), "--data", str(base.ds), "--out",
                str(tmp / "imp")]  # fmt: skip

    return setup


def _fifo_log(tmp: Path) -> Path:
    os.mkfifo(tmp / "x.json")
    return tmp / "x.json"


def _link_log(tmp: Path) -> Path:
    (tmp / "real.json").write_text("{}")
    os.symlink(tmp / "real.json", tmp / "x.json")
    return tmp / "x.json"


def _deep_log(tmp: Path) -> Path:
    (tmp / "x.json").write_text("[" * 200_000 + "]" * 200_000)
    return tmp / "x.json"


def _huge_log(tmp: Path) -> Path:
    (tmp / "x.json").write_text(json.dumps({"samples": ["y" * 1000] * 300}))
    return tmp / "x.json"


def _probe_model(model: str) -> Case:
    def setup(tmp: Path, base: Base) -> list[str]:
        _, run = _copy(base, tmp)
        info = json.loads((run / "run.json").read_text())
        (run / "run.json").write_text(json.dumps({**info, "model": model}))
        return ["probe", "vlm", "--run", str(run), "--out", str(tmp / "p")]

    return setup


CASES = [
    # names from files: the text gate
    Case("seg.nrrd name with terminal escapes", _nrrd("m.seg.nrrd", Segment0_Name=ESC,
         Segment0_LabelValue="5"), 2, ("m.seg.nrrd", "Segment0_Name", "control character")),
    Case("seg.nrrd name of 10,000 characters", _nrrd("m.seg.nrrd", Segment0_Name="x" * 10_000,
         Segment0_LabelValue="5"), 2, ("Segment0_Name", "10000 characters long")),
    Case("label table name with escapes", _table({"5": ESC}), 2,
         ("t.json", "label 5's name", "control character")),
    Case("label table name of 10,000 characters", _table({"5": "y" * 10_000}), 2,
         ("t.json", "characters long")),
    # numbers from files: the number gate
    Case("seg.nrrd LabelValue 1e30", _nrrd("m.seg.nrrd", Segment0_Name="liver",
         Segment0_LabelValue="1e30"), 2, ("Segment0_LabelValue", "1..65535")),
    Case("seg.nrrd LabelValue 10^30", _nrrd("m.seg.nrrd", Segment0_Name="liver",
         Segment0_LabelValue="1" + "0" * 30), 2, ("Segment0_LabelValue", "1..65535")),
    Case("nrrd spacing 1e300", _nrrd(**{"space directions": "(-1e300,0,0) (0,-5,0) (0,0,3)"}),
         2, ("m.nrrd", "out of range", "1e+300")),
    Case("nrrd type block", _nrrd(type="block"), 2, ("m.nrrd", "not a number type")),
    Case("manifest slice_index 10^30", _manifest(slice_index=10**30), 2,
         ("manifest.jsonl", "slice_index", "0..1e+06")),
    Case("manifest slice_index true", _manifest(slice_index=True), 2,
         ("manifest.jsonl", "slice_index")),
    Case("calls.jsonl negative tokens", _calls(meta={"usage": {"prompt_tokens": -5}}), 2,
         ("calls.jsonl", "line 1", "prompt_tokens", "forged")),
    Case("calls.jsonl latency 1e308", _calls(latency_s=1e308), 2,
         ("calls.jsonl", "line 1", "latency_s")),
    Case("calls.jsonl latency -1", _calls(latency_s=-1.0), 2, ("calls.jsonl", "latency_s")),
    Case("calls.jsonl non-UTF-8 reply", _calls_bytes, 2, ("calls.jsonl", "line 1", "not UTF-8")),
    # silent cases
    Case("report: results.jsonl is a folder", _results_folder, 2,
         ("results.jsonl", "not a regular file")),
    Case("report: hostile model name", _model_name("report", ESC), 2,
         ("metrics.json", "'model'", "control character")),
    Case("spar-table: hostile model name", _model_name("spar-table", "m" * 5000), 2,
         ("metrics.json", "'model'", "characters long")),
    # import inspect logs
    Case("inspect log a FIFO", _inspect(_fifo_log), 2, ("x.json", "not a regular file")),
    Case("inspect log a symlink", _inspect(_link_log), 2, ("x.json", "not a regular file")),
    Case("inspect log deeply nested", _inspect(_deep_log), 2, ("x.json", "not an inspect log")),
    Case("inspect log over the cap", _inspect(_huge_log), 2, ("x.json", "over the cap"),
         env={"RADSPATIAL_MAX_JSON_MB": "0.1"}),
    # probe vlm: what run.json may name
    Case("probe vlm: run.json model a URL", _probe_model("hf:https://evil.example/m"), 2,
         ("run.json", "is a URL")),
    Case("probe vlm: run.json model /etc", _probe_model("hf:/etc"), 2,
         ("run.json", "not a model folder")),
    Case("probe vlm: run.json model ../..", _probe_model("hf:../../x"), 2,
         ("run.json", "not a model folder")),
]  # fmt: skip


PRICES = [
    Case("--price negative", _price("input=-1,output=2"), 2, ("--price", "input", "0..10000")),
    Case("--price NaN", _price("input=nan,output=2"), 2, ("--price", "input", "got nan")),
    Case("--price 1e308", _price("input=1,output=1e308"), 2, ("--price", "output", "0..10000")),
    Case("--price with a unit", _price("input=2USD,output=1"), 2, ("not a number", "2USD")),
]  # fmt: skip


@pytest.mark.parametrize("case", PRICES, ids=str)
def test_hostile_prices(case, base, tmp_path, capsys, monkeypatch) -> None:
    """argparse refuses a bad --price itself: exit 2, its usage line and one error line."""
    with pytest.raises(SystemExit) as exc:
        run_case(case, tmp_path, base, capsys, monkeypatch)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and all(w in err for w in case.words), err
    assert not (tmp_path / "o").exists()


def _nothing_outside(tmp: Path, before: set[str]) -> None:
    """The row wrote nothing in the folder around its own."""
    assert {p.name for p in tmp.parent.iterdir()} <= before | {tmp.name}


@pytest.mark.parametrize("case", CASES, ids=str)
def test_hostile_round5(case, base, tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    before = {p.name for p in tmp_path.parent.iterdir()}
    text = run_case(case, tmp_path, base, capsys, monkeypatch)
    assert "\x1b" not in text
    _nothing_outside(tmp_path, before)
