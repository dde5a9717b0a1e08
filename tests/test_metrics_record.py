"""``core/metrics_record.Metrics``: metrics.json as a typed record (issue 35, point 3).

A real tiny run (bundled CT at 96 px: RQ1 + RQ2, axial + coronal, consistency groups, one open
type, AS images, two runs) is read back and written again byte for byte; files as older
versions wrote them (without the newer blocks, ``errors`` for ``n_errors``) read with those
blocks None or empty and still make a report; a malformed file is one line naming the file
and the field, in the API and on the command line.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from radspatial.bench.dataset import build_dataset
from radspatial.bench.generate import GenerateConfig
from radspatial.cli import main
from radspatial.core.datafiles import DataFileError
from radspatial.core.io import dumps
from radspatial.core.metrics_blocks import Consistency, GroupMetrics, Share, TypeGroup, Usage
from radspatial.core.metrics_record import Metrics, read_metrics
from radspatial.core.runtime import bundled_example
from radspatial.imaging.volumes import Case


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("metrics_record")
    ct, seg = bundled_example()
    config = GenerateConfig(
        size=96,
        setups=("rq1", "rq2"),
        markers=("numbers",),
        as_count=2,
        planes=("axial", "coronal"),
        consistency=True,
        question_types=("relative_position", "laterality"),
    )
    build_dataset([Case("ex", ct, seg)], config, root / "ds", log=lambda _: None)
    argv = ["eval", "--data", str(root / "ds"), "--model", "baseline:anatomy-prior"]
    assert main([*argv, "--runs", "2", "--out", str(root / "run")]) == 0
    return root / "run"


def test_a_real_run_reads_back_and_writes_byte_identical(run):
    raw = (run / "metrics.json").read_text()
    m = read_metrics(run)
    assert dumps(m.to_json()) == raw
    # every block typed, none left as a dict by string key
    assert isinstance(m.overall, GroupMetrics) and m.overall.n_items > 0
    assert len(m.overall.per_run) == 2 and m.overall.per_run[0].n == m.overall.n_items
    assert isinstance(m.by_question_type["laterality"], TypeGroup)
    assert m.by_question_type["relative_position"].chance == 0.5
    assert isinstance(m.usage, Usage) and m.usage.calls and m.usage.cost_usd is None
    assert m.rq1_plain is not None and m.rq1_plain.n > 0
    assert set(m.by_plane or {}) == {"axial", "coronal"}
    assert all(isinstance(p, Metrics) for p in (m.by_plane or {}).values())
    assert isinstance((m.consistency or {})["all"], Consistency)
    assert m.consistency["all"].n_groups > 0  # type: ignore[index]
    assert isinstance(m.subgroups["setup"]["rq1"], Share)
    assert m.open and "laterality" in m.open
    assert set(m.run_agreement) == {"0_vs_1"}
    assert m.frames["rq1"]["left_right"]["anatomical"].n_items > 0
    assert m.overall.se_cluster is not None and m.overall.cluster_by  # items share slices
    assert m.extra == {} and not m.legacy_errors


def _old(metrics: dict) -> dict:
    """metrics.json as the first versions wrote it: no plain RQ1, usage, planes, groups,
    subgroups, open block or clustered intervals, and ``errors`` for the failed calls."""
    newer = ("rq1_plain", "usage", "by_plane", "consistency", "subgroups", "open", "mirp")
    old = {k: v for k, v in metrics.items() if k not in (*newer, "n_errors", "run_agreement")}
    cluster = ("se_cluster", "ci_cluster_low", "ci_cluster_high", "n_clusters", "cluster_by")
    old["overall"] = {k: v for k, v in old["overall"].items() if k not in cluster}
    return {**old, "errors": 3}


def test_older_files_read_with_the_newer_blocks_none_or_empty(run, tmp_path):
    old = tmp_path / "old"
    old.mkdir()
    metrics = _old(json.loads((run / "metrics.json").read_text()))
    (old / "metrics.json").write_text(json.dumps(metrics))
    m = read_metrics(old / "metrics.json")
    assert (m.rq1_plain, m.usage, m.by_plane, m.consistency, m.open) == (None,) * 5
    assert (m.subgroups, m.mirp, m.run_agreement) == ({}, {}, {})
    assert m.n_errors == 3 and m.legacy_errors and m.overall.se_cluster is None
    assert m.to_json()["errors"] == 3 and "n_errors" not in m.to_json()
    # a group written before the open types and clusters: only n_items and the yes/no numbers
    assert Metrics.from_json({"overall": {"n_items": 0}}, "x").overall.empty
    out = tmp_path / "report"
    assert main(["report", str(old), str(run), "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert [m["n_errors"] for m in summary["models"]] == [3, 0]


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda m: m.update(overall=3), "'overall' must be an object"),
        (lambda m: m["by_setup"].update(rq1=[1]), "by_setup['rq1']: must be an object"),
        (lambda m: m["overall"].update(n_items=True), "overall: 'n_items' must be an integer"),
        (lambda m: m["overall"]["per_run"].__setitem__(0, "x"), "overall: per_run[0]"),
        (lambda m: m["usage"].update(calls="9"), "usage: 'calls' must be an integer"),
        (lambda m: m["consistency"]["all"].pop("n_groups"), "consistency['all']: missing"),
        (lambda m: m["frames"]["rq1"].update(left_right=1), "frames['rq1']['left_right']"),
        (lambda m: m["by_plane"]["axial"].update(runs="2"), "by_plane['axial']: 'runs'"),
        (lambda m: m.update(model=7), "'model' must be a string"),
    ],
)
def test_a_malformed_file_is_one_line_naming_file_and_field(run, tmp_path, change, words):
    metrics = json.loads((run / "metrics.json").read_text())
    change(metrics)
    path = tmp_path / "metrics.json"
    path.write_text(json.dumps(metrics))
    with pytest.raises(DataFileError) as err:
        read_metrics(path)
    message = str(err.value)
    assert "\n" not in message and message.startswith(str(path)) and words in message


def test_the_report_refuses_a_malformed_file_with_exit_2(run, tmp_path, capsys):
    bad = tmp_path / "bad"
    bad.mkdir()
    metrics = json.loads((run / "metrics.json").read_text())
    metrics["by_question_type"]["laterality"]["chance"] = "half"
    (bad / "metrics.json").write_text(json.dumps(metrics))
    assert main(["report", str(bad), "--out", str(tmp_path / "rep")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "metrics.json" in err and "by_question_type['laterality']: 'chance'" in err
