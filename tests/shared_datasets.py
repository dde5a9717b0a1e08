"""Benchmark folders built once per pytest session and shared by every test file that asks for
the same one, across pytest-xdist workers too.

Each xdist worker is its own process with its own session fixtures; a fixture that returns
``shared(tmp_path_factory, name, build)`` builds ``name`` only in the first worker that needs it
(the others wait on a file lock) in a folder beside the workers' temp folders, and then reuses
it. Shared folders are inputs: a test that changes files in one must copy it first
(:func:`private_copy`).

    @pytest.fixture(scope="module")
    def data(tmp_path_factory):
        return shared(tmp_path_factory, "example-512", build_example_512)
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from radspatial.bench.dataset import build_dataset
from radspatial.bench.generate import GenerateConfig
from radspatial.core.rules import QuestionRules
from radspatial.core.runtime import bundled_example
from radspatial.imaging.volumes import Case


def _root(factory: pytest.TempPathFactory) -> Path:
    """One folder per session: the parent of the workers' temp folders under xdist."""
    base = factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder = root / "shared-datasets"
    folder.mkdir(exist_ok=True)
    return folder


def shared(factory: pytest.TempPathFactory, name: str, build: Callable[[Path], object]) -> Path:
    """``build(out)`` once per session for ``name``; the folder it wrote."""
    folder = _root(factory)
    out, done = folder / name, folder / f"{name}.done"
    with (folder / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not done.exists():
            if out.exists():  # a worker died while building it
                shutil.rmtree(out)
            build(out)
            done.touch()
    return out


def private_copy(source: Path, dest: Path) -> Path:
    """A copy of a shared folder that a test may change."""
    shutil.copytree(source, dest)
    return dest


def example_512(factory: pytest.TempPathFactory) -> Path:
    """The bundled real CT at 512 px, every setup, AS 10, label images exported (seed 1)."""

    def build(out: Path) -> None:
        ct, seg = bundled_example()
        config = GenerateConfig(seed=1, size=512, as_count=10, export_masks=True)
        build_dataset([Case("example_ct_sm", ct, seg)], config, out, log=lambda _: None)

    return shared(factory, "example-512", build)


def example_512_markers(factory: pytest.TempPathFactory, profile: str) -> Path:
    """The bundled real CT at 512 px in marker profile ``profile`` (``strict``: outlined boxes
    and ringed dots; ``mirp``: the default), the setups with markers only, AS 8 (seed 11)."""

    def build(out: Path) -> None:
        ct, seg = bundled_example()
        rules = QuestionRules(profile=profile)
        config = GenerateConfig(
            seed=11, size=512, as_count=8, setups=("rq2", "rq3", "as"), rules=rules
        )
        build_dataset([Case("ex", ct, seg)], config, out, log=lambda _: None)

    return shared(factory, f"example-512-markers-{profile}", build)


def synth_128(factory: pytest.TempPathFactory) -> Path:
    """The synthetic case (tests/synth.py) at 128 px, AS 2: a small dataset for model runs."""
    from synth import write_case

    def build(out: Path) -> None:
        ct, seg = write_case(out.parent / "synth-128-input")
        config = GenerateConfig(size=128, as_count=2)
        build_dataset([Case("synth", ct, seg)], config, out, log=lambda _: None)

    return shared(factory, "synth-128", build)


def tiny_vlm(factory: pytest.TempPathFactory, family: str) -> Path:
    """The tiny random VLM of ``family`` (tests/tiny_vlm.py ``build_tiny_<family>``), built
    once per session; an input, like the datasets (do not save into it)."""
    import tiny_vlm as builders

    return shared(factory, f"tiny-{family}", getattr(builders, f"build_tiny_{family}"))
