"""``radspatial export lmms-eval`` / ``import lmms-eval`` (issue 28): an exported task scored by
radspatial's own prompt, parser and metrics, checked against ``radspatial eval`` of the same
real HTTP server on 127.0.0.1.

The hooks run in-process always (``datasets`` loads the exported parquet as lmms-eval does). The
end-to-end test runs the real ``lmms-eval`` CLI and its OpenAI-compatible model class where
lmms-eval is installed (``radspatial[lmms]``, docs/lmms_eval.md: too heavy for CI's
``.[all,dev]``), and is skipped elsewhere.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fake_server import FakeChatServer, prompt_text

from radspatial.bench.dataset import build_dataset
from radspatial.bench.generate import GenerateConfig
from radspatial.cli import bundled_example, main
from radspatial.core.io import read_jsonl
from radspatial.imaging.volumes import Case

if not all(importlib.util.find_spec(m) for m in ("pyarrow", "datasets")):  # imported where used
    pytest.skip("pyarrow and datasets are not installed", allow_module_level=True)

SETUPS = ("rq1", "rq2", "rq3", "as")
REPLIES = ("1", "0", "Yes.", "No", "maybe")  # "maybe": invalid


def answer(body: dict) -> str:
    """A reply fixed by the asked question (the prompt's last "Q: "), whoever sends it."""
    question = prompt_text(body).rsplit("Q: ", 1)[-1]
    return REPLIES[hashlib.sha256(question.encode()).digest()[0] % len(REPLIES)]


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("lmms") / "ds"
    ct, seg = bundled_example()
    config = GenerateConfig(size=96, as_count=4, question_types=("relative_position", "size"))
    build_dataset([Case("ex", ct, seg)], config, out, log=lambda _: None)
    return out


@pytest.fixture(scope="module")
def server():
    with FakeChatServer(answer=answer) as s:
        yield s


def _eval(data: Path, out: Path, server, protocol: str = "radspatial") -> Path:
    spec = f"openai-compat:fake@{server.base_url}"
    argv = ["eval", "--data", str(data), "--model", spec, "--runs", "1", "--out", str(out)]
    assert main([*argv, "--protocol", protocol]) == 0
    return out


@pytest.fixture(scope="module")
def radspatial_run(data, server, tmp_path_factory) -> Path:
    return _eval(data, tmp_path_factory.mktemp("rs") / "run", server)


def _export(data: Path, out: Path, *extra: str) -> Path:
    assert main(["export", "lmms-eval", "--data", str(data), "--out", str(out), *extra]) == 0
    return out


@pytest.fixture(scope="module")
def task(data, tmp_path_factory) -> Path:
    return _export(data, tmp_path_factory.mktemp("task") / "task")


def _hooks(task: Path):
    """The task's utils.py, imported from its file as lmms-eval's ``!function`` does."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"utils_{task.name}", task / "utils.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _docs(task: Path, utils, setup: str):
    import datasets

    shards = str(task / "hf" / "data" / "test-*.parquet")
    ds = datasets.load_dataset("parquet", data_files={"test": shards}, split="test")
    return getattr(utils, f"process_docs_{setup}")(ds)


def _simulate(task: Path, setup: str) -> tuple[list[dict], dict[str, float]]:
    """lmms-eval's loop over one setup's task, in-process: the docs, the prompt, the reply the
    server would give it, process_results, then every metric's aggregation."""
    utils = _hooks(task)
    per_metric: dict[str, list] = {}
    rows = []
    for doc in _docs(task, utils, setup):
        messages = utils.doc_to_messages(doc)
        assert messages[0]["content"][1]["text"] == utils.doc_to_text(doc)
        reply = answer({"messages": [{"content": utils.doc_to_text(doc)}]})
        scores = getattr(utils, f"process_results_{setup}")(doc, [reply])
        for name, value in scores.items():
            per_metric.setdefault(name, []).append(value)
        rows.append(scores["accuracy"])
    agg = {m: getattr(utils, f"aggregate_{m}")(v) for m, v in per_metric.items()}
    return rows, agg


def test_hooks_give_radspatial_eval_numbers_prompts_and_rows(task, radspatial_run):
    assert sorted(p.name for p in task.glob("*.yaml")) == sorted(
        ["radspatial.yaml", *(f"radspatial_{s}.yaml" for s in SETUPS)]
    )
    assert (task / "requirements.txt").read_text().startswith("radspatial==")
    metrics = json.loads((radspatial_run / "metrics.json").read_text())
    ours = {r["id"]: r for r in read_jsonl(radspatial_run / "results.jsonl")}
    seen = 0
    for setup in SETUPS:
        rows, agg = _simulate(task, setup)
        want = metrics["by_setup"][setup]
        assert agg["accuracy"] == pytest.approx(want["accuracy_mean"], abs=1e-6)
        assert agg["f1"] == pytest.approx(want["f1_mean"], abs=1e-6)
        assert agg["invalid_rate"] == pytest.approx(want["invalid_rate"], abs=1e-6)
        for marker in {r["marker"] for r in rows} if setup != "rq1" else ():
            key = metrics["by_setup_marker"][f"{setup}/{marker}"]["accuracy_mean"]
            assert agg[f"accuracy_{marker}"] == pytest.approx(key, abs=1e-6)
        for row in rows:
            mine = ours[row["id"]]
            assert (row["prompt"], row["reply"], row["parsed"]) == (
                mine["prompt"],
                mine["reply"],
                mine["parsed"],
            )
            seen += 1
    assert seen == len(ours)


def test_frame_accuracies_are_eval_rows_scored_in_that_frame(task, radspatial_run):
    from radspatial.core.records import ResultRow
    from radspatial.eval.aggregate import group_metrics

    ours = list(read_jsonl(radspatial_run / "results.jsonl"))
    for setup in ("rq1", "rq3"):
        _, agg = _simulate(task, setup)
        rows = [r for r in ours if r["setup"] == setup]
        for frame in ("standard", "anatomical"):
            typed = [ResultRow.from_json(r) for r in rows]
            want = group_metrics(typed, 1, target=f"expected_{frame}").accuracy_mean
            assert agg[f"accuracy_{frame}"] == pytest.approx(want, abs=1e-6)


def test_mirp_protocol_prompts_are_eval_mirp_prompts_text_first(data, server, tmp_path):
    run = _eval(data, tmp_path / "mirp_run", server, protocol="mirp")
    task = _export(data, tmp_path / "task_mirp", "--protocol", "mirp", "--name", "rsm")
    ours = {r["id"]: r for r in read_jsonl(run / "results.jsonl")}
    utils = _hooks(task)
    for setup in ("rq2", "as"):
        for doc in _docs(task, utils, setup):
            text = utils.doc_to_text(doc)
            assert text == ours[doc["id"]]["prompt"]
            assert utils.doc_to_messages(doc)[0]["content"][0] == {"type": "text", "text": text}
            row = getattr(utils, f"process_results_{setup}")(doc, [ours[doc["id"]]["reply"]])
            assert row["accuracy"]["parsed"] == ours[doc["id"]]["parsed"]


def test_bad_name_version_pin_and_foreign_logs_are_one_line_errors(data, tmp_path, capsys):
    out = tmp_path / "t"
    assert (
        main(["export", "lmms-eval", "--data", str(data), "--out", str(out), "--name", "a b"]) == 2
    )
    assert "--name" in capsys.readouterr().err and not out.exists()
    from radspatial.formats.lmms_tasks import task_hooks

    with pytest.raises(RuntimeError, match="exported for radspatial 0.0.1"):
        task_hooks(tmp_path, needs="0.0.1")
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "x_samples_other.jsonl").write_text(json.dumps({"doc_id": 0, "acc": 1}) + "\n")
    argv = ["import", "lmms-eval", "--data", str(data), "--samples"]
    code = main([*argv, str(logs), "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "x_samples_other.jsonl: line 1" in err and "no radspatial result row" in err
    assert main([*argv, str(tmp_path / "nope"), "--out", str(tmp_path / "r")]) == 2


def test_import_checks_the_reply_and_keeps_images_inside_the_dataset(task, data, tmp_path, capsys):
    rows, _ = _simulate(task, "rq1")
    sample = {"doc_id": 0, "filtered_resps": [rows[0]["reply"]], "accuracy": rows[0]}
    logs = tmp_path / "fake"
    logs.mkdir()
    path = logs / "20260101_000000_samples_radspatial_rq1.jsonl"
    path.write_text(json.dumps(sample) + "\n")
    argv = ["import", "lmms-eval", "--samples", str(path), "--data", str(data)]
    assert main([*argv, "--out", str(tmp_path / "run")]) == 0
    (row,) = read_jsonl(tmp_path / "run" / "results.jsonl")
    assert row["image"] == str(data / rows[0]["image"]) and (data / rows[0]["image"]).is_file()
    assert json.loads((tmp_path / "run" / "run.json").read_text())["model"] == "fake"
    path.write_text(json.dumps({**sample, "filtered_resps": ["no way"]}) + "\n")
    assert main([*argv, "--out", str(tmp_path / "run2")]) == 2
    assert "differs from the sample's filtered_resps" in capsys.readouterr().err
    escaping = {**sample, "accuracy": {**rows[0], "image": "../../etc/passwd"}}
    path.write_text(json.dumps(escaping) + "\n")
    assert main([*argv, "--out", str(tmp_path / "run3")]) == 2
    assert "outside the dataset folder" in capsys.readouterr().err


@pytest.mark.parametrize("protocol", ["radspatial", "mirp"])
def test_import_accepts_every_row_the_hooks_log(data, task, radspatial_run, tmp_path, protocol):
    """Every setup's rows as the hooks log them from the parquet (both protocols) are scored
    again against --data and imported unchanged but for the image path: the run's numbers are
    ``eval``'s (issue 36: the import trusts only the reply, so this is its fidelity check)."""
    if protocol == "mirp":
        task = _export(data, tmp_path / "task_mirp", "--protocol", "mirp", "--name", "rsm")
    logs = tmp_path / "logs" / "fake"
    logs.mkdir(parents=True)
    utils = _hooks(task)
    for setup in SETUPS:
        process = getattr(utils, f"process_results_{setup}")
        rows = [process(doc, [answer({"messages": [{"content": utils.doc_to_text(doc)}]})])
                ["accuracy"] for doc in _docs(task, utils, setup)]  # fmt: skip
        samples = [{"doc_id": k, "filtered_resps": [r["reply"]], "accuracy": r}
                   for k, r in enumerate(rows)]  # fmt: skip
        path = logs / f"20260101_000000_samples_radspatial_{setup}.jsonl"
        path.write_text("".join(json.dumps(s) + "\n" for s in samples))
    out = tmp_path / "run"
    argv = ["import", "lmms-eval", "--samples", str(tmp_path / "logs"), "--data", str(data)]
    assert main([*argv, "--out", str(out), "--price", "input=1,output=1"]) == 0
    info = json.loads((out / "run.json").read_text())
    assert info["protocol"] == protocol and info["model"] == "fake"
    # a usage block (the report's usage table lists the run); the logs hold no token counts
    usage = json.loads((out / "metrics.json").read_text())["usage"]
    assert usage["calls"] == info["n_items"] and usage["calls_with_usage"] == 0
    assert "cost_usd" not in usage and info["usage"]["cost_usd"] is None
    if protocol == "radspatial":
        got = json.loads((out / "metrics.json").read_text())["overall"]
        want = json.loads((radspatial_run / "metrics.json").read_text())["overall"]
        assert got["accuracy_mean"] == want["accuracy_mean"] and got["n_items"] == want["n_items"]
        mine = {r["id"]: r for r in read_jsonl(radspatial_run / "results.jsonl")}
        for row in read_jsonl(out / "results.jsonl"):
            assert {k: v for k, v in row.items() if k != "latency_s"} == {
                k: v for k, v in mine[row["id"]].items() if k != "latency_s"
            }


def _lmms_eval(task: Path, server, out: Path) -> Path:
    env = {**os.environ, "OPENAI_API_KEY": "x", "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    args = f"model_version=fake,base_url={server.base_url}"
    cmd = [sys.executable, "-m", "lmms_eval", "--model", "openai", "--model_args", args]
    cmd += ["--include_path", str(task), "--tasks", "radspatial", "--output_path", str(out)]
    done = subprocess.run(
        [*cmd, "--log_samples", "--batch_size", "1"],
        env=env, capture_output=True, text=True, timeout=900, cwd=out.parent,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


@pytest.mark.slow
def test_real_lmms_eval_equals_radspatial_eval_and_imports(
    data, task, server, radspatial_run, tmp_path
):
    pytest.importorskip("lmms_eval", reason="lmms-eval not installed (radspatial[lmms])")
    logs = _lmms_eval(task, server, tmp_path / "lmms_out")
    (results_file,) = logs.glob("*/*_results.json")
    lm = json.loads(results_file.read_text())["results"]
    metrics = json.loads((radspatial_run / "metrics.json").read_text())
    for setup in SETUPS:
        got, want = lm[f"radspatial_{setup}"], metrics["by_setup"][setup]
        assert got["accuracy,none"] == pytest.approx(want["accuracy_mean"], abs=1e-6)
        assert got["f1,none"] == pytest.approx(want["f1_mean"], abs=1e-6)
        # cluster_key/score_key: lmms-eval's clustered stderr over the items' slices
        assert isinstance(got["accuracy_stderr_clustered,none"], float)
    imported = tmp_path / "imported"
    argv = ["import", "lmms-eval", "--samples", str(logs), "--out", str(imported)]
    assert main([*argv, "--data", str(data)]) == 0
    ours = {r["id"]: r for r in read_jsonl(radspatial_run / "results.jsonl")}
    theirs = {r["id"]: r for r in read_jsonl(imported / "results.jsonl")}
    assert theirs.keys() == ours.keys()
    for k, mine in ours.items():
        assert (theirs[k]["parsed"], theirs[k]["reply"]) == (mine["parsed"], mine["reply"])
        assert theirs[k]["image"] == mine["image"]
    got = json.loads((imported / "metrics.json").read_text())
    assert got["overall"]["accuracy_mean"] == metrics["overall"]["accuracy_mean"]
    assert main(["report", str(imported), str(radspatial_run), "--out", str(tmp_path / "rep")]) == 0
    assert main(["export", "mirp", "--run", str(imported), "--out", str(tmp_path / "mirp")]) == 0
