"""kill -9 / SIGTERM of a real ``radspatial generate --workers 2``: no worker survives its parent,
and the rerun of the same command gives the dataset an uninterrupted run gives."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from synth import write_case

ARGS = ("--size", "512", "--as-count", "0", "--workers", "2")


def _tree(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _cases(tmp: Path, n: int) -> Path:
    rows = ["ct,seg,case_id"]
    for i in range(n):
        ct, seg = write_case(tmp / "in" / f"c{i}", name=f"c{i}")
        rows.append(f"{ct},{seg},c{i}")
    path = tmp / "cases.csv"
    path.write_text("\n".join(rows) + "\n")
    return path


def _cmd(cases: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "radspatial.cli", "generate", "--cases", str(cases),
            "--out", str(out), *ARGS]  # fmt: skip


def _start_and_kill(cmd: list[str], stage: Path, sig: int) -> list[int]:
    """Start ``cmd``, wait until it has written images and has workers, send ``sig``."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 600  # generous: a busy machine starts a CLI slowly
    workers: list[int] = []
    while time.time() < deadline:
        workers = _children(proc.pid)
        if len(workers) >= 2 and stage.is_dir() and any(stage.rglob("*.png")):
            break
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.05)
    else:
        pytest.fail("generate never started its workers")
    os.kill(proc.pid, sig)
    proc.wait(timeout=120)
    return workers


@pytest.fixture(scope="module")
def cases(tmp_path_factory) -> Path:
    return _cases(tmp_path_factory.mktemp("kill"), 6)


@pytest.fixture(scope="module")
def reference(cases: Path) -> Path:
    """What an uninterrupted run of the command writes (shared by both signals)."""
    out = cases.parent / "reference"
    assert subprocess.run(_cmd(cases, out), capture_output=True).returncode == 0
    return out


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["kill-9", "sigterm"])
def test_killed_generate_leaves_no_workers_and_reruns_identically(cases, reference, tmp_path, sig):
    out = tmp_path / "out"
    workers = _start_and_kill(_cmd(cases, out), tmp_path / "out.partial", sig)
    deadline = time.time() + 120  # generous: a loaded machine reaps slowly
    while any(_alive(w) for w in workers) and time.time() < deadline:
        time.sleep(0.05)
    assert not [w for w in workers if _alive(w)], "workers outlived their parent"
    assert not out.exists()
    shards = tmp_path / "out.partial" / "shards"
    left = list(shards.iterdir()) if shards.is_dir() else []  # SIGTERM keeps finished cases only
    finished = [p for p in left if (p / "done.json").is_file()]
    assert sig == signal.SIGKILL or not [p for p in left if p.name.startswith(".tmp")]
    res = subprocess.run(_cmd(cases, out), capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    if finished:  # finished cases are reused, the rest recomputed
        assert f"resuming: {len(finished)} of 6 case(s)" in res.stderr
    assert _tree(out) == _tree(reference)
    assert not (tmp_path / "out.partial").exists()
