"""inspect_ai (issue 37, item 1): ``inspect eval radspatial/bench`` (the real inspect-ai package,
its OpenAI-compatible provider) against ``radspatial serve`` on 127.0.0.1, then ``radspatial
import inspect`` of its log, give the same replies and per-setup accuracy as ``radspatial eval``
of the same server; the log carries the frames' scores, the metadata and the cluster, and a
log whose samples are not the dataset's items is refused."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_server import FakeChatServer, prompt_text
from served import serve_cli

from radspatial.bench.dataset import build_dataset
from radspatial.bench.generate import GenerateConfig
from radspatial.cli import bundled_example, main
from radspatial.core.io import read_jsonl
from radspatial.imaging.volumes import Case

if importlib.util.find_spec("inspect_ai") is None:  # imported where used: collecting stays quick
    pytest.skip("inspect-ai not installed (radspatial[inspect])", allow_module_level=True)

# items spread over setups (eval --limit); RQ2/RQ3 only: the agent reads their markers in well
# under a second, where RQ1 (structures by name: the organs U-Net on CPU) takes several seconds
LIMIT = "6"


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("insp") / "ds"
    ct, seg = bundled_example()
    config = GenerateConfig(size=96, setups=("rq2", "rq3"), markers=("numbers",))
    build_dataset([Case("ex", ct, seg)], config, out, log=lambda _: None)
    return out


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    """``radspatial serve --port 0`` (the agent) in a subprocess; yields its base URL."""
    with serve_cli(env={"RADSPATIAL_API_KEY": None}) as (base_url, _):
        yield base_url


@pytest.fixture(scope="module")
def ours(data, url, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("rs") / "run"
    argv = ["eval", "--data", str(data), "--model", f"openai-compat:agent@{url}", "--runs", "1"]
    assert main([*argv, "--limit", LIMIT, "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def logs(data, url, tmp_path_factory) -> Path:
    """The real ``inspect eval`` CLI, through inspect's OpenAI-compatible provider."""
    out = tmp_path_factory.mktemp("inspect_logs")
    env = {**os.environ, "LOCAL_BASE_URL": url, "LOCAL_API_KEY": "unused"}
    env |= {"INSPECT_LOG_DIR": str(out), "INSPECT_DISPLAY": "plain", "NO_COLOR": "1"}
    inspect = Path(sys.executable).parent / "inspect"
    cmd = [str(inspect), "eval", "radspatial/bench", "-T", f"data={data}", "-T", f"limit={LIMIT}"]
    cmd += ["--model", "openai-api/local/agent", "--log-dir", str(out), "--max-connections", LIMIT]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, cwd=out)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


@pytest.mark.slow
def test_inspect_run_imports_to_the_numbers_of_radspatial_eval(data, ours, logs, tmp_path, capsys):
    imported = tmp_path / "imported"
    argv = ["import", "inspect", "--log", str(logs), "--data", str(data)]
    assert main([*argv, "--out", str(imported), "--price", "input=1,output=2"]) == 0
    assert "  cost: " in capsys.readouterr().out  # priced from the log's token counts
    mine = {r["id"]: r for r in read_jsonl(ours / "results.jsonl")}
    theirs = {r["id"]: r for r in read_jsonl(imported / "results.jsonl")}
    assert theirs.keys() == mine.keys() and len(mine) == int(LIMIT)
    for k, row in mine.items():
        got = theirs[k]
        assert (got["prompt"], got["reply"], got["parsed"]) == (
            row["prompt"],
            row["reply"],
            row["parsed"],
        )
        assert got["image"] == row["image"]
    want = json.loads((ours / "metrics.json").read_text())
    got = json.loads((imported / "metrics.json").read_text())
    assert got["by_setup"].keys() == want["by_setup"].keys() == {"rq2", "rq3"}
    for setup, g in want["by_setup"].items():
        assert got["by_setup"][setup]["accuracy_mean"] == g["accuracy_mean"]
    assert got["overall"]["accuracy_mean"] == want["overall"]["accuracy_mean"]
    # the server reports usage: inspect's per-sample counts are the same calls' counts
    assert got["usage"]["calls"] == want["usage"]["calls"] == int(LIMIT)
    assert got["usage"]["prompt_tokens"] == want["usage"]["prompt_tokens"] > 0
    assert got["usage"]["cost_usd"] > 0
    run = json.loads((imported / "run.json").read_text())
    assert run["source"] == "inspect" and run["status"] == "complete"
    assert main(["report", str(imported), str(ours), "--out", str(tmp_path / "rep")]) == 0
    assert "client's concurrency" in (tmp_path / "rep" / "summary.md").read_text()
    assert main(["export", "mirp", "--run", str(imported), "--out", str(tmp_path / "mirp")]) == 0


def _log(logs: Path):
    from inspect_ai.log import read_eval_log

    (path,) = sorted(logs.glob("*.eval"))
    return path, read_eval_log(str(path))


@pytest.mark.slow
def test_the_log_holds_frames_metadata_and_the_clustered_stderr(ours, logs):
    _, log = _log(logs)
    assert log.eval.task == "radspatial/bench" and log.status == "success"
    sample = log.samples[0]
    meta = sample.metadata
    assert {"setup", "marker", "question_type", "view", "pair", "cluster"} <= meta.keys()
    assert isinstance(meta["decidable"], bool) and meta["decidable_reason"]  # issue 46
    assert set(meta["targets"]) == {"image", "standard", "anatomical"}
    assert meta["cluster"].startswith("slice:")
    metrics = {(s.name, k): m.value for s in log.results.scores for k, m in s.metrics.items()}
    want = json.loads((ours / "metrics.json").read_text())["overall"]
    assert metrics[("image", "accuracy")] == pytest.approx(want["accuracy_mean"], abs=1e-6)
    assert metrics[("invalid", "mean")] == pytest.approx(want["invalid_rate"], abs=1e-6)
    if "se_cluster" in want:  # inspect's stderr(cluster=) is the same CR1 formula as ours
        assert metrics[("image", "stderr")] == pytest.approx(want["se_cluster"], abs=1e-6)


@pytest.mark.slow
def test_a_log_that_is_not_the_datasets_is_refused(data, logs, tmp_path, capsys):
    from inspect_ai.log import write_eval_log

    _, log = _log(logs)
    argv = ["import", "inspect", "--data", str(data), "--out", str(tmp_path / "r")]
    log.samples[0].id = "rq1/none/not_an_item/q0"
    write_eval_log(log, str(tmp_path / "bad_id.eval"))
    assert main([*argv, "--log", str(tmp_path / "bad_id.eval")]) == 2
    assert "is not an item of" in capsys.readouterr().err
    _, log = _log(logs)
    log.samples[0].input[0].content[0].text = "Is it yes? Answer 1."
    write_eval_log(log, str(tmp_path / "bad_prompt.eval"))
    assert main([*argv, "--log", str(tmp_path / "bad_prompt.eval")]) == 2
    assert "its prompt is not the one" in capsys.readouterr().err
    (tmp_path / "junk.eval").write_bytes(b"not a zip")
    assert main([*argv, "--log", str(tmp_path / "junk.eval")]) == 2
    err = capsys.readouterr().err.strip()
    assert "junk.eval: not an inspect log" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "r").exists()


def _mirp_answer(body: dict) -> str:
    """A reply fixed by the asked question, in MIRP's words, some unreadable."""
    question = prompt_text(body).rsplit("Q:", 1)[-1]
    return ("Yes", "No.", "A: 1", "unsure")[hashlib.sha256(question.encode()).digest()[0] % 4]


def test_mirp_task_equals_eval_mirp_in_process(data, tmp_path, monkeypatch):
    """``radspatial/mirp`` found by name (the entry point) and run in-process by inspect's
    ``eval()`` against a fake OpenAI-compatible server: the imported rows (MIRP's prompts, its
    parser) and metrics are ``radspatial eval --protocol mirp``'s of the same server."""
    from inspect_ai import eval as inspect_eval

    with FakeChatServer(answer=_mirp_answer) as server:
        monkeypatch.setenv("LOCAL_BASE_URL", server.base_url)
        monkeypatch.setenv("LOCAL_API_KEY", "unused")
        (log,) = inspect_eval(
            "radspatial/mirp",
            task_args={"data": str(data), "setups": "rq3"},
            model="openai-api/local/fake",
            log_dir=str(tmp_path / "logs"),
            display="none",
        )
        ref = tmp_path / "ref"
        argv = ["eval", "--data", str(data), "--model", f"openai-compat:fake@{server.base_url}"]
        argv += ["--runs", "1", "--setups", "rq3", "--protocol", "mirp", "--out", str(ref)]
        assert main(argv) == 0
    assert log.status == "success" and {s.metadata["setup"] for s in log.samples} == {"rq3"}
    out = tmp_path / "imported"
    argv = ["import", "inspect", "--log", str(tmp_path / "logs"), "--data", str(data)]
    assert main([*argv, "--out", str(out)]) == 0
    mine = {r["id"]: r for r in read_jsonl(ref / "results.jsonl")}
    theirs = {r["id"]: r for r in read_jsonl(out / "results.jsonl")}
    assert theirs.keys() == mine.keys()
    for k, r in mine.items():
        assert (theirs[k]["prompt"], theirs[k]["reply"], theirs[k]["parsed"]) == (
            r["prompt"],
            r["reply"],
            r["parsed"],
        )
    want = json.loads((ref / "metrics.json").read_text())
    got = json.loads((out / "metrics.json").read_text())
    assert got["overall"]["accuracy_mean"] == want["overall"]["accuracy_mean"]
    assert got["overall"]["invalid_rate"] == want["overall"]["invalid_rate"] > 0
    assert got["mirp"] == want["mirp"]
    assert got["usage"]["prompt_tokens"] == want["usage"]["prompt_tokens"]
