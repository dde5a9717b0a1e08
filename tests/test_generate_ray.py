"""Ray as the executor (the Ray files' shared local Ray: tests/conftest.py): the same
bytes as the local executor, retries of a failing task and of a dead worker, resume of a killed
run, and ``--on-error skip``; plus the local pool's retries."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from synth import write_case

from radspatial.bench.dataset import build_dataset
from radspatial.bench.generate import GenerateConfig
from radspatial.core.executor import TaskFailed, run_ordered
from radspatial.imaging.volumes import Case, InputError

if importlib.util.find_spec("ray") is None:  # imported by the module fixture, not here
    pytest.skip("ray is not installed", allow_module_level=True)

CONFIG = GenerateConfig(seed=3, size=256, as_count=4)


@pytest.fixture(scope="module", autouse=True)
def _ray(ray_session):
    """The Ray files' shared local Ray (tests/conftest.py), up before any test here."""


def _tree(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _cases(tmp: Path, n: int) -> list[Case]:
    out = []
    for i in range(n):
        ct, seg = write_case(tmp / "in" / f"c{i}", name=f"c{i}")
        out.append(Case(f"c{i}", ct, seg))
    return out


def flaky(item: tuple[str, int, str]) -> int:
    """Fails on its first attempt per item (raises, or kills its own worker), then works."""
    folder, i, how = item
    marker = Path(folder) / f"{i}.attempts"
    attempts = int(marker.read_text()) + 1 if marker.exists() else 1
    marker.write_text(str(attempts))
    if attempts == 1 and how == "raise":
        raise OSError(f"transient failure of item {i}")
    if attempts == 1 and how == "die":
        os._exit(1)
    if how == "always":
        raise RuntimeError(f"item {i} is broken")
    return i * 10


@pytest.mark.parametrize("executor", ["ray", "local"])
@pytest.mark.parametrize("how", ["raise", "die"])
def test_a_task_that_fails_once_is_retried(tmp_path, executor, how):
    items = [(str(tmp_path), i, how) for i in range(3)]
    results = list(run_ordered(flaky, items, workers=2, executor=executor))
    assert results == [(0, 0), (1, 10), (2, 20)]
    attempts = {p.name: int(p.read_text()) for p in tmp_path.glob("*.attempts")}
    assert attempts["0.attempts"] >= 2  # every item failed once, then ran again
    assert all(n >= 2 for n in attempts.values()) and len(attempts) == 3


def test_a_task_that_always_fails_is_reported_not_raised(tmp_path):
    items = [(str(tmp_path), 0, "ok"), (str(tmp_path), 1, "always")]
    results = list(run_ordered(flaky, items, workers=2, executor="ray", retries=1))
    assert results[0] == (0, 0)
    assert isinstance(results[1][1], TaskFailed) and "item 1 is broken" in results[1][1].message
    assert int((tmp_path / "1.attempts").read_text()) == 2


def test_ray_output_is_byte_identical_to_local(tmp_path):
    cases = _cases(tmp_path, 3)
    local, on_ray = tmp_path / "local", tmp_path / "ray"
    build_dataset(cases, CONFIG, local, workers=2, log=lambda _: None)
    build_dataset(cases, CONFIG, on_ray, workers=2, executor="ray", log=lambda _: None)
    assert _tree(local) == _tree(on_ray)
    assert len(json.loads((on_ray / "dataset.json").read_text())["cases"]) == 3


def test_on_error_skip_records_the_corrupt_case_and_goes_on(tmp_path):
    cases = _cases(tmp_path, 3)
    corrupt = tmp_path / "in" / "corrupt_ct.nii.gz"
    corrupt.write_bytes(b"\x1f\x8b\x08\x00 not a gzip stream")
    cases[1] = Case("c1", corrupt, cases[1].seg)
    with pytest.raises(InputError, match="corrupt_ct.nii.gz"):
        build_dataset(cases, CONFIG, tmp_path / "stop", executor="ray", log=lambda _: None)
    assert not (tmp_path / "stop").exists()
    lines: list[str] = []
    out = tmp_path / "skip"
    summary = build_dataset(cases, CONFIG, out, executor="ray", on_error="skip", log=lines.append)
    failures = [json.loads(x) for x in (out / "failures.jsonl").read_text().splitlines()]
    assert [f["case_id"] for f in failures] == ["c1"] and "corrupt_ct.nii.gz" in failures[0][
        "reason"
    ]
    meta = json.loads((out / "dataset.json").read_text())
    assert meta["failures"] == failures == summary.failures
    assert [c["case_id"] for c in meta["cases"]] == ["c0", "c2"]
    rows = [json.loads(x) for x in (out / "manifest.jsonl").read_text().splitlines()]
    assert {r["source"]["case_id"] for r in rows if r["source"]} == {"c0", "c2"}
    assert any("skipped case c1" in line for line in lines)


def test_resume_on_ray_after_a_killed_local_run(tmp_path):
    """kill -9 a CLI run mid-way, rerun on Ray: finished cases are reused, not recomputed."""
    cases_csv = tmp_path / "cases.csv"
    cases = _cases(tmp_path, 6)
    cases_csv.write_text(
        "ct,seg,case_id\n" + "".join(f"{c.ct},{c.seg},{c.case_id}\n" for c in cases)
    )
    config = GenerateConfig(size=512, as_count=0)
    reference = tmp_path / "reference"
    build_dataset(cases, config, reference, log=lambda _: None)
    out = tmp_path / "out"
    shards = tmp_path / "out.partial" / "shards"
    cmd = [sys.executable, "-m", "radspatial.cli", "generate", "--cases", str(cases_csv),
           "--out", str(out), "--size", "512", "--as-count", "0", "--workers", "2"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 600  # generous: a busy machine starts a CLI slowly
    while time.time() < deadline and proc.poll() is None:
        if (
            shards.is_dir()
            and len([p for p in shards.iterdir() if not p.name.startswith(".")]) >= 2
        ):
            break
        time.sleep(0.02)
    proc.kill()
    proc.wait()
    finished = sorted(p.name for p in shards.iterdir() if (p / "done.json").is_file())
    if len(finished) == 6:
        pytest.skip("the run finished before it could be killed")
    inodes = {c: (shards / c / "RQ1").rglob("*.png").__next__().stat().st_ino for c in finished}
    lines: list[str] = []
    build_dataset(cases, config, out, workers=2, executor="ray", log=lines.append)
    assert f"resuming: {len(finished)} of 6 case(s)" in " ".join(lines)
    assert _tree(out) == _tree(reference)
    for case_id, inode in inodes.items():  # the finished case's files are the ones moved in
        assert inode in {p.stat().st_ino for p in (out / "RQ1" / "images").glob(f"{case_id}_*")}
