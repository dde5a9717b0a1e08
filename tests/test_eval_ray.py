"""``eval --executor ray`` on the Ray files' shared local Ray (3 CPUs, tests/conftest.py) with the
tiny random LLaVA: 2 replicas write the results of 1 local replica, a replica killed while it
holds calls loses none and comes back, a run with no replica left becomes errors that a resume
retries, and kill -9 of a CLI driver leaves no process behind and resumes without repeating a
finished call.

A replica start imports torch and loads the model (seconds quiet, far more on a busy machine),
so the tests share one 2-replica backend (``replicas``) where a fresh one proves nothing more;
the kill -9 test runs first and the check that every process of the killed driver ended runs
last, so Ray's agents' own wait (up to a minute after their raylet died) overlaps the others."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import pytest

from radspatial.models import Decoding, Request, create_backend

if importlib.util.find_spec("ray") is None:  # imported by the module fixture, not here
    pytest.skip("ray is not installed", allow_module_level=True)
if importlib.util.find_spec("transformers") is None:  # not imported here: collecting stays quick
    pytest.skip("transformers is not installed", allow_module_level=True)

DECODING = Decoding(max_tokens=6)
LIMIT = 16


@pytest.fixture(scope="module", autouse=True)
def _ray(ray_session):
    """The Ray files' shared local Ray (tests/conftest.py), up before any test here."""


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    from tiny_vlm import build_tiny_llava

    return build_tiny_llava(tmp_path_factory.mktemp("tiny-llava"))


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    from synth import write_case

    from radspatial.bench.dataset import build_dataset
    from radspatial.bench.generate import GenerateConfig
    from radspatial.imaging.volumes import Case

    tmp = tmp_path_factory.mktemp("eval-ray")
    ct, seg = write_case(tmp / "in")
    build_dataset([Case("synth", ct, seg)], GenerateConfig(size=128, as_count=2), tmp / "ds")
    return tmp / "ds"


def _config(tiny: Path, **options):
    from radspatial.eval.runner import EvalConfig

    return EvalConfig(
        model=f"hf:{tiny}", runs=1, limit=LIMIT, decoding=DECODING, backend_options=options
    )


@pytest.fixture(scope="module")
def reference(tiny, data, tmp_path_factory) -> Path:
    """One local replica, in-process: the results every Ray run must reproduce."""
    from radspatial.eval.runner import run_eval

    out = tmp_path_factory.mktemp("ref") / "run"
    run_eval(data, out, _config(tiny, batch_size=2), progress=False)
    return out


@pytest.fixture(scope="module")
def replicas(tiny):
    """Two Ray replicas (batch 2), shared: every test leaves both answering."""
    backend = create_backend(
        f"hf:{tiny}", decoding=DECODING, executor="ray", replicas=2, batch_size=2
    )
    yield backend
    backend.close()


def _rows(path: Path) -> list[dict]:
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    return [{k: v for k, v in r.items() if k != "latency_s"} for r in rows]


def _metrics(run: Path) -> dict:
    """metrics.json less the usage block's latency percentiles (measured, as ``latency_s``)."""
    metrics = json.loads((run / "metrics.json").read_text())
    metrics["usage"] = {k: v for k, v in metrics["usage"].items() if "latency" not in k}
    return metrics


def _calls(run: Path) -> list[dict]:
    return [json.loads(x) for x in (run / "calls.jsonl").read_text().splitlines()]


def _session_procs(sid: int) -> list[str]:
    """Live (not zombie) processes of session ``sid``: ``pid name`` each."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        name = text[text.index("(") + 1 : text.rindex(")")]
        fields = text[text.rindex(")") + 2 :].split()
        if int(fields[3]) == sid and fields[0] != "Z":
            out.append(f"{stat.parent.name} {name}")
    return out


class KilledDriver(NamedTuple):
    sid: int  # the session id of the driver and of everything it started
    out: Path  # its run folder
    killed: float  # time.time() of the kill -9


@pytest.fixture(scope="module")
def killed_driver(tiny, data, tmp_path_factory) -> KilledDriver:
    """A CLI ``eval --executor ray`` (its own local Ray) killed -9 after its first call."""
    out = tmp_path_factory.mktemp("killed") / "run"
    cmd = [sys.executable, "-m", "radspatial.cli", "eval", "--data", str(data), "--model",
           f"hf:{tiny}", "--out", str(out), "--runs", "1", "--limit", str(LIMIT),
           "--max-tokens", "6", "--executor", "ray", "--replicas", "1",
           "--model-args", "batch_size=2"]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # the driver and everything it starts share one session id
        env=env,
    )
    calls = out / "calls.jsonl"
    deadline = time.time() + 600  # a hang guard: a busy machine starts Ray and torch slowly
    while time.time() < deadline and proc.poll() is None:
        if calls.exists() and len(calls.read_bytes().splitlines()) >= 1:
            os.kill(proc.pid, signal.SIGSTOP)  # frozen at once: it writes no further call
            break
        time.sleep(0.01)
    assert proc.poll() is None, "the run ended before it could be killed"
    assert len(_session_procs(proc.pid)) > 3  # gcs, raylet, a replica ... really started
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    return KilledDriver(proc.pid, out, time.time())


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_kill_9_of_the_driver_resumes_without_repeating_a_call(
    killed_driver, data, tiny, reference, replicas
):
    from radspatial.eval.runner import run_eval

    sid, out, killed = killed_driver
    done = {c["key"] for c in _calls(out) if c["error"] is None}
    assert 0 < len(done) < LIMIT and not (out / "results.jsonl").exists()
    deadline = killed + 600  # the model holders go before the resume starts; a hang guard
    while (holders := [p for p in _session_procs(sid) if "Replica" in p]) and (
        time.time() < deadline
    ):
        time.sleep(0.2)
    assert holders == []
    # the resume runs while Ray's agents notice the dead raylet (up to a minute): it must not
    # need them. On the shared replicas: the backend a rerun opens is the same code.
    config = _config(tiny, executor="ray", replicas=2, batch_size=2)
    run_eval(data, out, config, backend=replicas, progress=False)
    keys = [c["key"] for c in _calls(out) if c["error"] is None]
    assert len(keys) == len(set(keys)) == LIMIT  # no finished call was made twice
    assert done <= set(keys)
    assert _rows(out / "results.jsonl") == _rows(reference / "results.jsonl")


def test_two_ray_replicas_write_what_one_local_replica_writes(
    tiny, data, reference, replicas, tmp_path
):
    from radspatial.eval.runner import run_eval

    out = tmp_path / "run"
    config = _config(tiny, batch_size=2, executor="ray", replicas=2)
    run_eval(data, out, config, backend=replicas, progress=False)
    assert _rows(out / "results.jsonl") == _rows(reference / "results.jsonl")
    assert _metrics(out) == _metrics(reference)
    calls = _calls(out)
    assert len(calls) == LIMIT and {c["meta"]["replica"] for c in calls} == {0, 1}
    assert {c["key"] for c in calls} == {c["key"] for c in _calls(reference)}  # same call keys
    backend = json.loads((out / "run.json").read_text())["backend"]
    assert backend["executor"] == "ray" and backend["replicas"] == 2
    assert backend["backend"] == "hf" and backend["resources_per_replica"] == {"cpus": 1}


def _requests(n: int) -> list[Request]:
    import io

    import numpy as np
    from PIL import Image

    out = []
    for i in range(n):
        pixels = (np.random.default_rng(i).random((40, 36, 3)) * 255).astype(np.uint8)
        buf = io.BytesIO()
        Image.fromarray(pixels).save(buf, format="PNG")
        out.append(Request(f"k{i}", f"Is the liver left of the spleen? {i}", buf.getvalue()))
    return out


def test_a_replica_killed_mid_run_loses_no_call(tiny, replicas):
    requests = _requests(10)  # 5 batches: replica 0 is handed 2 of the first 4
    local = create_backend(f"hf:{tiny}", decoding=DECODING, batch_size=2)
    expected: dict[str, str | None] = {}
    local.generate(requests, lambda req, rep: expected.__setitem__(req.key, rep.text))
    before = dict(replicas.stats)
    victim = replicas.replica_pids()[0]
    os.kill(victim, signal.SIGSTOP)  # it takes its batches but answers none ...
    got: list[tuple[str, object]] = []

    def on_reply(req, rep) -> None:
        got.append((req.key, rep))
        if len(got) == 1:  # ... and dies holding them (an event, not a timing)
            os.kill(victim, signal.SIGKILL)

    replicas.generate(requests, on_reply)
    assert sorted(k for k, _ in got) == sorted(expected)  # every call answered once
    assert all(rep.error is None for _, rep in got)
    assert {k: rep.text for k, rep in got} == expected
    assert replicas.stats["replica_deaths"] == before["replica_deaths"] + 1
    assert replicas.stats["retried_batches"] >= before["retried_batches"] + 2
    # Ray restarts the replica; once it answers a probe it takes work again.
    deadline = time.time() + 600  # a restart imports torch and loads the model: slow when busy
    again: list = []
    while 0 not in {r.meta["replica"] for r in again} and time.time() < deadline:
        time.sleep(0.5)
        replicas.generate(requests[:4], lambda req, rep: again.append(rep))
    assert 0 in {r.meta["replica"] for r in again}
    assert victim not in replicas.replica_pids()


def test_no_replica_left_gives_errors_that_a_resume_retries(
    tiny, data, reference, replicas, tmp_path
):
    from radspatial.eval.runner import run_eval

    out = tmp_path / "run"
    config = _config(tiny, batch_size=2, executor="ray", replicas=1)
    backend = create_backend(
        f"hf:{tiny}", decoding=DECODING, executor="ray", replicas=1, batch_size=2, max_restarts=0
    )
    try:
        os.kill(backend.replica_pids()[0], signal.SIGKILL)
        rows = run_eval(data, out, config, backend=backend, progress=False)
    finally:
        backend.close()
    assert len(rows) == LIMIT and all(r["error"] for r in rows)
    assert backend.stats["dropped_replicas"] == 1
    assert json.loads((out / "run.json").read_text())["status"] == "incomplete"

    run_eval(data, out, config, backend=replicas, progress=False)  # again, replicas alive
    assert _rows(out / "results.jsonl") == _rows(reference / "results.jsonl")
    assert json.loads((out / "run.json").read_text())["status"] == "complete"


def test_a_replica_that_cannot_load_the_model_is_a_one_line_error(tmp_path):
    (tmp_path / "not-a-model").mkdir()
    with pytest.raises(ValueError, match=r"a replica failed to start: .*cannot load the model"):
        create_backend(f"hf:{tmp_path / 'not-a-model'}", executor="ray", replicas=1)
    with pytest.raises(ValueError, match="the Ray cluster has 3 CPU"):
        create_backend(f"hf:{tmp_path}", executor="ray", replicas=4)


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_kill_9_of_the_driver_leaves_no_process(killed_driver):
    """Last in the file: Ray's agents outlive their raylet by up to a minute (they try to tell
    the dead GCS first), time the tests above use."""
    sid, _, killed = killed_driver
    deadline = killed + 600  # hang guard: a busy machine reaps slowly
    while _session_procs(sid) and time.time() < deadline:
        time.sleep(0.5)
    assert _session_procs(sid) == []
    print(f"every process of the killed driver gone after {time.time() - killed:.1f} s")
