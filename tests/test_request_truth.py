"""Ground truth never rides in a request (issue 23): a backend registered from outside gets
what a model may see; the oracles get the truth through ``Request.truth`` because they say
they read it (``reads_truth``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from synth import write_case

from radspatial.bench.dataset import build_dataset
from radspatial.bench.generate import GenerateConfig
from radspatial.eval.runner import EvalConfig, run_eval
from radspatial.imaging.volumes import Case
from radspatial.models.base import BACKENDS, Reply, register_backend

# what a model must never be told: answers, the label image, the CT, the standard-view
# centres, the shown rotation/flip, the slice it came from
HIDDEN = (
    "answer",
    "expected",
    "expected_standard",
    "expected_anatomical",
    "mask",
    "ct",
    "center1_canonical",
    "center2_canonical",
    "transform",
    "slice_index",
)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("truth")
    ct, seg = write_case(tmp / "in")
    config = GenerateConfig(
        seed=5, size=128, setups=("rq1", "rq2"), markers=("numbers",), export_masks=True
    )
    build_dataset([Case("synth", ct, seg)], config, tmp / "ds")
    return tmp / "ds"


class _Spy:
    spec = "spy"

    def __init__(self, seen: list) -> None:
        self.seen = seen

    def describe(self):
        return {"spec": self.spec}

    def generate(self, requests, on_reply):
        for req in requests:
            self.seen.append(req)
            on_reply(req, Reply("1"))


def test_a_plugin_backend_sees_no_truth(tmp_path, dataset):
    seen: list = []
    register_backend("spy")(lambda rest, **_: _Spy(seen))
    try:
        run_eval(dataset, tmp_path / "run", EvalConfig(model="spy", runs=1), progress=False)
    finally:
        BACKENDS.remove("spy")
    manifest = [json.loads(line) for line in (dataset / "manifest.jsonl").open()]
    masks = {row["mask"] for row in manifest if row.get("mask")}
    assert seen and len(seen) == len(manifest) and masks  # every item asked, masks exported
    for req in seen:
        assert not set(req.meta) & set(HIDDEN), sorted(set(req.meta) & set(HIDDEN))
        assert req.truth == {}
        told = json.dumps(req.meta)
        assert not any(Path(m).name in told for m in masks)
        assert "nii" not in told  # no CT path


def test_the_mask_oracle_gets_the_truth_through_its_channel(tmp_path, dataset):
    """``agent:mask`` reads the label image from ``Request.truth`` and so answers the image
    frame exactly; without the channel it would find nothing and abstain."""
    run_eval(dataset, tmp_path / "m", EvalConfig(model="agent:mask", runs=1), progress=False)
    rows = [json.loads(line) for line in (tmp_path / "m" / "results.jsonl").open()]
    assert rows and all(r["correct"] for r in rows)
