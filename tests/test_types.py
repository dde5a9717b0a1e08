"""mypy accepts questions/ and core/ (the type contract, the records, the bottom layer) and
grading/, eval/ and imaging/: run as pyproject's ``[tool.mypy]`` says (its ``files``), where
mypy is installed (the ``dev`` extra)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_mypy_accepts_the_checked_packages():
    pytest.importorskip("mypy")
    cache = ROOT / ".mypy_cache"  # incremental: a rerun reads only what changed
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(cache)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout + done.stderr
