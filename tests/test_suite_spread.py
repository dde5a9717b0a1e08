"""How the suite spreads its files over the xdist workers (tests/spread.py, tests/conftest.py):
the Ray files are one work unit handed out first, the rest go longest first; and, through a
real ``pytest`` with two workers on a small tree of test files, both Ray files run on one
worker, before anything else on it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import spread

TESTS = Path(__file__).resolve().parent


def test_the_ray_files_are_one_unit_and_go_first_then_the_longest():
    ids = [
        "tests/test_a.py::test_x[1]",
        "tests/test_eval_ray.py::test_kill",
        "tests/test_generate_ray.py::test_resume",
        "tests/test_open_questions.py::test_y",
    ]
    assert [spread.unit_of(i) for i in ids] == [
        "tests/test_a.py",
        spread.RAY_UNIT,
        spread.RAY_UNIT,
        "tests/test_open_questions.py",
    ]
    units = [
        ("tests/test_many_quick.py", 40),  # not listed: 40 x SECONDS_PER_TEST
        ("tests/test_one_quick.py", 1),
        ("tests/test_open_questions.py", 3),  # listed: its measured seconds
        (spread.RAY_UNIT, 9),
        ("tests/test_spar_vqa.py", 5),
    ]
    assert spread.FILE_SECONDS["test_open_questions.py"] > spread.FILE_SECONDS["test_spar_vqa.py"]
    assert spread.FILE_SECONDS["test_spar_vqa.py"] > 40 * spread.SECONDS_PER_TEST
    assert spread.order(units) == [
        spread.RAY_UNIT,
        "tests/test_open_questions.py",
        "tests/test_spar_vqa.py",
        "tests/test_many_quick.py",
        "tests/test_one_quick.py",
    ]


def test_every_measured_file_exists():
    """A renamed test file takes its measured seconds along (a stale key would silently drop
    the file to the per-test estimate)."""
    missing = [name for name in spread.FILE_SECONDS if not (TESTS / name).is_file()]
    assert not missing, missing
    assert all(name not in spread.FILE_SECONDS for name in spread.RAY_FILES)


RECORDER = """
import os, time

def _note(name):
    with open(os.environ["SPREAD_LOG"], "a") as f:
        f.write(f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')} {name}\\n")
"""


@pytest.mark.skipif(sys.platform == "win32", reason="the Ray lock uses fcntl")
def test_two_workers_run_both_ray_files_on_one_worker_first(tmp_path):
    pytest.importorskip("xdist")
    tree = tmp_path / "tests"
    tree.mkdir()
    for name in ("conftest.py", "spread.py"):
        shutil.copy(TESTS / name, tree / name)
    files = ["test_eval_ray.py", "test_generate_ray.py", *[f"test_f{i}.py" for i in range(6)]]
    for name in files:
        tests = "".join(
            f"\ndef test_{k}():\n    _note({name!r})\n" for k in range(3 if "ray" in name else 8)
        )
        (tree / name).write_text(RECORDER + tests)
    log = tmp_path / "order.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "RADSPATIAL_"))}
    env.update(SPREAD_LOG=str(log), RADSPATIAL_TEST_WORKERS="2")  # not this run's worker id
    res = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    rows = [line.split() for line in log.read_text().splitlines()]
    assert len(rows) == 2 * 3 + 6 * 8 and {w for w, _ in rows} == {"gw0", "gw1"}
    ray_workers = {w for w, name in rows if "ray" in name}
    assert len(ray_workers) == 1  # one worker ran both Ray files
    on_it = [name for w, name in rows if w in ray_workers]
    assert all("ray" in name for name in on_it[:6])  # and ran them before anything else
