"""Clustered errors for correlated items (issue 37, item 3): on a ``--consistency`` dataset the
metrics carry a cluster-robust interval beside the Wilson one (cluster = consistency group,
else slice), equal to the formula computed by hand from ``results.jsonl``; the lmms-eval export
names the cluster as lmms-eval's ``cluster_key`` and logs it with every score."""

from __future__ import annotations

import importlib.util
import json
import math
from collections import defaultdict
from pathlib import Path

import pytest

from radspatial.bench.dataset import build_dataset
from radspatial.bench.generate import GenerateConfig
from radspatial.cli import bundled_example, main
from radspatial.core.io import read_jsonl
from radspatial.eval.clusters import cluster_of, clustered_interval
from radspatial.imaging.volumes import Case


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("clusters") / "ds"
    ct, seg = bundled_example()
    config = GenerateConfig(
        size=96, setups=("rq2",), markers=("numbers",), as_count=0, consistency=True
    )
    build_dataset([Case("ex", ct, seg)], config, out, log=lambda _: None)
    return out


@pytest.fixture(scope="module")
def run(data, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("run") / "run"
    # not the anatomy prior: it gets each group's same share right, a clustered SE of 0
    argv = ["eval", "--data", str(data), "--model", "baseline:random", "--runs", "1"]
    assert main([*argv, "--out", str(out)]) == 0
    return out


def _by_hand(rows: list[dict]) -> tuple[float, int]:
    """CR1 standard error of the accuracy over clusters, written out from its definition."""
    y = [1.0 if r["parsed"] == r["expected"] else 0.0 for r in rows]
    mean = sum(y) / len(y)
    dev: dict[str, float] = defaultdict(float)
    for r, v in zip(rows, y, strict=True):
        dev[cluster_of(r)] += v - mean
    g = len(dev)
    return math.sqrt(g / (g - 1) * sum(d * d for d in dev.values())) / len(y), g


def test_consistency_groups_get_a_clustered_interval_equal_to_the_formula(run):
    rows = [r for r in read_jsonl(run / "results.jsonl") if not r.get("error")]
    assert sum(1 for r in rows if r.get("group")) >= 16  # at least two groups of 8 views
    overall = json.loads((run / "metrics.json").read_text())["overall"]
    se, g = _by_hand(rows)
    assert overall["se_cluster"] == pytest.approx(se, abs=1e-6)
    assert overall["n_clusters"] == g < len(rows)
    assert overall["cluster_by"].startswith("group")
    mean = overall["accuracy_mean"]
    assert overall["ci_cluster_low"] == pytest.approx(max(0.0, mean - 1.959964 * se), abs=1e-6)
    assert overall["ci_cluster_high"] == pytest.approx(min(1.0, mean + 1.959964 * se), abs=1e-6)
    assert {"ci_low", "ci_high"} <= overall.keys()  # the Wilson interval stays beside it


def test_report_shows_both_intervals(run, tmp_path):
    assert main(["report", str(run), "--out", str(tmp_path / "rep")]) == 0
    summary = (tmp_path / "rep" / "summary.md").read_text()
    assert "## Correlated items: clustered intervals" in summary


def test_clustered_interval_by_hand_and_in_the_independent_case():
    # clusters {1, 1} and {0, 0}: mean 0.5, deviations sum to +1 and -1, G = 2
    ci = clustered_interval([1, 1, 0, 0], ["a", "a", "b", "b"])
    assert ci.se == pytest.approx(math.sqrt(2 / 1 * (1 + 1)) / 4)
    # every item its own cluster: the usual sd(ddof=1) / sqrt(n)
    y = [1, 0, 1, 1, 0, 1, 1, 1]
    one = clustered_interval(y, list(range(len(y))))
    mean = sum(y) / len(y)
    sd = math.sqrt(sum((v - mean) ** 2 for v in y) / (len(y) - 1))
    assert one.se == pytest.approx(sd / math.sqrt(len(y)))
    assert clustered_interval([1, 0], ["a", "a"]) is None  # one cluster: no interval
    assert cluster_of({"id": "rq1/none/ex_slice040_size/q0"}) == "slice:ex_slice040"
    assert cluster_of({"id": "rq1/none/x/q0", "group": "g7"}) == "group:g7"


def test_lmms_export_names_the_cluster_key_and_logs_cluster_and_score(data, run, tmp_path):
    pytest.importorskip("pyarrow")
    datasets = pytest.importorskip("datasets")
    task = tmp_path / "task"
    assert main(["export", "lmms-eval", "--data", str(data), "--out", str(task)]) == 0
    yaml = (task / "radspatial_rq2.yaml").read_text()
    assert "cluster_key: cluster\n" in yaml and "score_key: score\n" in yaml
    spec = importlib.util.spec_from_file_location("utils_clusters", task / "utils.py")
    utils = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(utils)
    shards = str(task / "hf" / "data" / "test-*.parquet")
    ds = datasets.load_dataset("parquet", data_files={"test": shards}, split="test")
    ours = {r["id"]: r for r in read_jsonl(run / "results.jsonl")}
    seen_groups = set()
    for doc in utils.process_docs_rq2(ds):
        logged = utils.process_results_rq2(doc, [ours[doc["id"]]["reply"]])
        mine = ours[doc["id"]]
        assert logged["accuracy"]["cluster"] == cluster_of(mine)
        assert logged["accuracy"]["score"] == float(mine["correct"])
        assert logged["invalid_rate"]["score"] == float(mine["parsed"] is None)
        assert "score" not in logged["f1"]  # F1 is not a mean of 0/1 scores
        seen_groups.add(logged["accuracy_standard"]["cluster"])
    assert any(c.startswith("group:") for c in seen_groups)
