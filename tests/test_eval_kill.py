"""A real kill -9 of `radspatial eval` talking to a real HTTP server, then resume."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from fake_server import FakeChatServer, prompt_text
from synth import write_case

from radspatial.bench.dataset import build_dataset
from radspatial.bench.generate import GenerateConfig
from radspatial.imaging.volumes import Case


def _answer(body: dict) -> str:
    # deterministic and varied: depends on the prompt only
    return "1" if hashlib.sha256(prompt_text(body).encode()).digest()[0] & 1 else "No."


def _fingerprint(body: dict) -> str:
    return hashlib.sha256(json.dumps(body["messages"], sort_keys=True).encode()).hexdigest()


def _eval(data: Path, out: Path, url: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "radspatial.cli", "eval", "--data", str(data), "--model",
           f"openai-compat:fake-vlm@{url}", "--out", str(out), "--runs", "1",
           "--concurrency", "2"]  # fmt: skip
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_sigkill_then_resume_repeats_no_finished_call(tmp_path):
    ct, seg = write_case(tmp_path / "in")
    data = tmp_path / "ds"
    build_dataset([Case("synth", ct, seg)], GenerateConfig(seed=5, size=128, as_count=4), data)
    n_items = len((data / "manifest.jsonl").read_text().splitlines())

    with FakeChatServer(latency_s=0.03, answer=_answer) as server:
        ref = tmp_path / "ref"
        proc = _eval(data, ref, server.base_url)
        assert proc.wait(timeout=300) == 0, proc.stderr.read()

        out = tmp_path / "run"
        n_before = server.calls
        proc = _eval(data, out, server.base_url)
        calls = out / "calls.jsonl"
        deadline = time.time() + 120
        while time.time() < deadline:
            if calls.exists() and len(calls.read_text().splitlines()) >= n_items // 3:
                break
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=120)
        assert not (out / "results.jsonl").exists()  # it really died mid-run
        done = {json.loads(x)["id"] for x in calls.read_text().splitlines() if x.endswith("}")}
        assert 0 < len(done) < n_items
        sent_before = server.bodies[n_before:]
        finished = {_fingerprint(b) for b in sent_before}

        n_mid = server.calls
        proc = _eval(data, out, server.base_url)
        assert proc.wait(timeout=300) == 0, proc.stderr.read()
        resent = [_fingerprint(b) for b in server.bodies[n_mid:]]
        # only calls that were in flight at the kill (at most --concurrency) are sent again
        assert len(set(resent) & finished) <= 2
        assert len(resent) == n_items - len(done)
        assert len(set(resent)) == len(resent)

    strip = lambda rows: [{k: v for k, v in r.items() if k != "latency_s"} for r in rows]  # noqa: E731
    read = lambda p: [json.loads(x) for x in p.read_text().splitlines()]  # noqa: E731
    assert strip(read(out / "results.jsonl")) == strip(read(ref / "results.jsonl"))
    # latency is measured, not derived (as latency_s above): the usage block's percentiles differ
    timeless = lambda p: _without_latency(json.loads(p.read_text()))  # noqa: E731
    assert timeless(out / "metrics.json") == timeless(ref / "metrics.json")


def _without_latency(metrics: dict) -> dict:
    """metrics.json less the usage block's latency percentiles (timings of this machine)."""
    usage = {k: v for k, v in metrics.get("usage", {}).items() if not k.startswith("latency_s")}
    return {**metrics, "usage": usage}
