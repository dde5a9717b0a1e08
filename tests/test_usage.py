"""Token usage, latency and cost (issue 37, item 2): against a real HTTP server on 127.0.0.1
that reports usage (reasoning tokens included), ``metrics.json`` and ``run.json`` carry a
``usage`` block whose totals are the sums over ``calls.jsonl``; ``--price`` adds the cost; a
resumed run keeps its calls' original usage; the report shows it per model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fake_server import FakeChatServer, prompt_text

from radspatial.bench.dataset import build_dataset
from radspatial.bench.generate import GenerateConfig
from radspatial.cli import bundled_example, main
from radspatial.core.io import read_jsonl
from radspatial.eval.usage import call_usage, parse_price, percentile, usage_block
from radspatial.imaging.volumes import Case


class UsageServer(FakeChatServer):
    """The fake server, with ``reasoning`` tokens per reply reported as OpenAI does (inside
    ``completion_tokens`` and under ``completion_tokens_details``)."""

    reasoning = 7

    def _respond(self, index: int, body: dict[str, Any]):
        status, payload, headers = super()._respond(index, body)
        if status == 200:
            usage = payload["usage"]
            usage["completion_tokens"] += self.reasoning
            usage["total_tokens"] += self.reasoning
            usage["completion_tokens_details"] = {"reasoning_tokens": self.reasoning}
        return status, payload, headers


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("usage") / "ds"
    ct, seg = bundled_example()
    config = GenerateConfig(size=96, as_count=2, setups=("rq1", "rq2"), markers=("numbers",))
    build_dataset([Case("ex", ct, seg)], config, out, log=lambda _: None)
    return out


def _answer(body: dict) -> str:
    return "Yes" if len(prompt_text(body)) % 2 else "No"


def _eval(data: Path, out: Path, url: str, *extra: str) -> dict:
    argv = ["eval", "--data", str(data), "--model", f"openai-compat:fake@{url}", "--runs", "2"]
    assert main([*argv, "--out", str(out), *extra]) == 0
    return json.loads((out / "metrics.json").read_text())


def test_usage_totals_are_the_sums_over_calls_and_resume_keeps_them(data, tmp_path):
    run = tmp_path / "run"
    price = ("--price", "input=2.5,output=10")
    with UsageServer(answer=_answer) as server:
        usage = _eval(data, run, server.base_url, *price)["usage"]
        n_calls = server.calls
        # the same command again: every call is in the log, none is made, the usage is the same
        server.reasoning = 1000  # would change the totals if any call were made again
        again = _eval(data, run, server.base_url, *price)["usage"]
        assert server.calls == n_calls
    assert again == usage
    calls = list(read_jsonl(run / "calls.jsonl"))
    assert usage["calls"] == usage["calls_with_usage"] == len(calls) == n_calls > 0
    for key in ("prompt_tokens", "completion_tokens"):
        assert usage[key] == sum(c["meta"]["usage"][key] for c in calls) > 0
    assert usage["reasoning_tokens"] == 7 * len(calls)
    latencies = sorted(c["latency_s"] for c in calls)
    assert usage["latency_s_p50"] == pytest.approx(percentile(latencies, 0.5), abs=1e-4)
    assert min(latencies) <= usage["latency_s_p50"] <= usage["latency_s_p95"] <= max(latencies)
    cost = (usage["prompt_tokens"] * 2.5 + usage["completion_tokens"] * 10) / 1e6
    assert usage["cost_usd"] == pytest.approx(cost, abs=1e-6)
    assert json.loads((run / "run.json").read_text())["usage"] == usage

    assert main(["report", str(run), "--out", str(tmp_path / "rep")]) == 0
    summary = (tmp_path / "rep" / "summary.md").read_text()
    assert "## Usage, latency and cost" in summary
    assert f"{usage['prompt_tokens']:,}" in summary and f"{usage['cost_usd']:.4f}" in summary


def test_a_backend_without_usage_counts_calls_not_tokens(data, tmp_path):
    argv = ["eval", "--data", str(data), "--model", "baseline:yes", "--runs", "1"]
    assert main([*argv, "--out", str(tmp_path / "b")]) == 0
    usage = json.loads((tmp_path / "b" / "metrics.json").read_text())["usage"]
    assert usage["calls"] > 0 and usage["calls_with_usage"] == 0
    assert usage["prompt_tokens"] == usage["completion_tokens"] == 0 and "cost_usd" not in usage


def test_call_usage_reads_openai_and_hf_and_refuses_nonsense():
    openai = {"usage": {"prompt_tokens": 10, "completion_tokens": 5}}
    assert call_usage(openai) == {
        "prompt_tokens": 10,
        "completion_tokens": 5,
        "reasoning_tokens": 0,
    }
    details = {**openai["usage"], "completion_tokens_details": {"reasoning_tokens": 3}}
    assert call_usage({"usage": details})["reasoning_tokens"] == 3
    assert call_usage({"prompt_tokens": 40, "new_tokens": 2}) == {
        "prompt_tokens": 40,
        "completion_tokens": 2,
        "reasoning_tokens": 0,
    }
    assert call_usage({"usage": {"prompt_tokens": "many", "completion_tokens": -1}}) is None
    assert call_usage({"batch_size": 1}) is None and call_usage(None) is None
    block = usage_block([{"latency_s": 1.0, "meta": openai}, {"error": "x", "meta": openai}])
    assert block["calls"] == 1 and block["prompt_tokens"] == 10


@pytest.mark.parametrize(
    "bad", ["input=1", "input=a,output=2", "in=1,output=2", "input=-1,output=1"]
)
def test_bad_price_is_a_one_line_usage_error(bad, data, tmp_path, capsys):
    with pytest.raises(ValueError):
        parse_price(bad)
    with pytest.raises(SystemExit) as exc:
        main(["eval", "--data", str(data), "--model", "baseline:yes", "--price", bad])
    assert exc.value.code == 2 and "--price" in capsys.readouterr().err


def test_format_doc_lists_exactly_the_usage_and_cluster_fields():
    import re

    from radspatial.eval.clusters import clustered_fields

    doc = Path(__file__).resolve().parents[1] / "docs" / "format.md"
    section = doc.read_text().split("## metrics.json: usage and clustered intervals", 1)[1]
    tables = re.split(r"\n\n(?=[^|])", section)
    documented = [
        {
            n
            for line in t.splitlines()
            if line.startswith("| `")
            for n in re.findall(r"`([a-z_0-9]+)`", line.split("|")[1])
        }
        for t in tables
        if "| field |" in t
    ]
    from radspatial.core.records import ResultRow

    def row(slice_: str, parsed: int) -> ResultRow:
        item = f"rq1/none/ex_slice{slice_}/q0"
        return ResultRow(item, 0, "rq1", "none", "Q?", 1, parsed == 1, parsed=parsed)

    rows = [row("001", 1)] * 2 + [row("002", 0)] * 2
    degenerate = [row("001", 1), row("001", 0), row("002", 1), row("002", 0)]  # SE 0
    fields = set(clustered_fields(rows, "expected"))
    assert documented[0] == fields | set(clustered_fields(degenerate, "expected"))
    assert "ci_cluster_fallback" not in fields
    block = usage_block([{"latency_s": 1.0, "meta": {}}], parse_price("input=1,output=1"))
    assert documented[1] == set(block)
