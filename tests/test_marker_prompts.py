"""The contour, box and point marker styles (``imaging/marker_prompts.py``): wording, drawing,
the mask oracle at 100%, the marker reader's abstention, and every export of such a dataset."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from PIL import Image

from radspatial.imaging.markers import MARKER_TYPES, marker_names

NEW = ("contour", "box", "point")
WORDS = {
    "contour": ("the red outline", "the liver (outlined in red)"),
    "box": ("the red box", "the liver (in the red box)"),
    "point": ("the red point marker", "the liver (at the red point)"),
}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from radspatial.bench.dataset import build_dataset
    from radspatial.bench.generate import GenerateConfig
    from radspatial.core.runtime import bundled_example
    from radspatial.imaging.volumes import Case

    ct, seg = bundled_example()
    out = tmp_path_factory.mktemp("prompts") / "ds"
    types = ("relative_position", "identification")
    config = GenerateConfig(
        seed=5, size=256, markers=NEW, as_count=4, question_types=types, export_masks=True
    )
    build_dataset([Case("example_ct_sm", ct, seg)], config, out, log=lambda _: None)
    return out


def _rows(ds: Path) -> list[dict]:
    return [json.loads(x) for x in (ds / "manifest.jsonl").read_text().splitlines()]


def test_registered_after_mirps_three_with_their_own_wording():
    from radspatial.questions import Wording
    from radspatial.questions.relative_position import marker_question, named_question

    assert marker_names()[:3] == MARKER_TYPES and set(NEW) <= set(marker_names())
    for style, (rq3, rq2) in WORDS.items():
        assert marker_question(style, "red", "above", "blue").startswith(f"Is {rq3} above")
        w = Wording("rq2", style, ("liver", "spleen"), ("red", "blue"))
        assert w.ref(0) == rq2
        assert named_question("liver", "above", "spleen", w.named(0), w.named(1)).startswith(
            f"Is {rq2} above"
        )
    # MIRP's wording is unchanged
    w = Wording("rq2", "dots", ("liver", "spleen"), ("red", "blue"))
    assert w.ref(0) == "the liver (red)"


def test_generated_items_draw_the_asked_structure(dataset: Path):
    rows = _rows(dataset)
    marked = [r for r in rows if r["setup"] != "rq1"]
    assert {r["marker"] for r in marked} == set(NEW)
    assert {r["setup"] for r in marked} == {"rq2", "rq3", "as"}
    for r in marked:
        assert r["image"].split("/")[1] == f"image_{r['marker']}"
        if r["setup"] == "rq3" and r["question_type"] == "relative_position":
            rq3 = WORDS[r["marker"]][0].replace("red", r["object1"]["marker_text"])
            assert r["question"].startswith(f"Is {rq3} "), r["question"]
    # the contour's red pixels lie on the first object's boundary in the exported mask
    r = next(
        r for r in marked if r["marker"] == "contour" and r["setup"] == "rq3"
        and r["object1"]["marker_text"] == "red"
    )  # fmt: skip
    image = np.asarray(Image.open(dataset / r["image"]).convert("RGB"))
    mask = np.asarray(Image.open(dataset / r["mask"]))
    red = (image[..., 0] > 215) & (image[..., 1] < 40) & (image[..., 2] < 40)
    assert red.sum() > 20
    assert np.bincount(mask[red]).argmax() == r["object1"]["label_id"]


def test_mask_oracle_is_right_on_every_item_and_the_marker_reader_abstains(dataset, tmp_path):
    from radspatial.eval.runner import EvalConfig, run_eval

    mask = run_eval(dataset, tmp_path / "mask", EvalConfig(model="agent:mask", runs=1,
                    setups=("rq2", "rq3")), progress=False)  # fmt: skip
    assert {r["marker"] for r in mask} == set(NEW)
    assert mask and all(r["error"] is None for r in mask)
    assert [r["id"] for r in mask if not r["correct"]] == []
    config = EvalConfig(
        model="agent:markers", runs=1, setups=("rq3",), question_types=("relative_position",)
    )
    reader = run_eval(dataset, tmp_path / "markers", config, progress=False)
    for style in ("contour", "box"):  # no reader for outlines: the agent abstains
        rows = [r for r in reader if r["marker"] == style]
        assert rows and all(r["parsed"] is None for r in rows)


def test_every_export_takes_the_new_styles(dataset, tmp_path):
    from radspatial.cli import main

    run = tmp_path / "run"
    assert main(["eval", "--data", str(dataset), "--model", "baseline:yes", "--out", str(run)]) == 0
    assert main(["export", "mirp", "--run", str(run), "--out", str(tmp_path / "mirp")]) == 0
    for style in NEW:
        assert list((tmp_path / "mirp").rglob(f"*{style}*")), style
    assert main(["export", "hf", "--data", str(dataset), "--out", str(tmp_path / "hf")]) == 0
    hf = pq.read_table(sorted((tmp_path / "hf" / "data").glob("*.parquet")))
    assert set(NEW) <= set(hf.column("marker").to_pylist())
    lmms = tmp_path / "lmms"
    assert main(["export", "lmms-eval", "--data", str(dataset), "--out", str(lmms)]) == 0
    _lmms_rq3_right(lmms)
    assert main(["report", str(run), "--out", str(tmp_path / "report")]) == 0
    summary = (tmp_path / "report" / "summary.md").read_text()
    assert all(f"rq3/{style}" in summary or style in summary for style in NEW)


def _lmms_rq3_right(task: Path) -> None:
    """The lmms-eval task's hooks word and score the new styles' RQ3 items: a right reply
    is scored right on every one."""
    import importlib.util

    import datasets

    spec = importlib.util.spec_from_file_location("utils_prompts", task / "utils.py")
    utils = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(utils)
    shards = str(task / "hf" / "data" / "test-*.parquet")
    docs = utils.process_docs_rq3(
        datasets.load_dataset("parquet", data_files=shards, split="train")
    )
    seen = set()
    for doc in docs:
        if doc["marker"] in NEW and doc["question_type"] == "relative_position":
            assert WORDS[doc["marker"]][0].split()[-1] in utils.doc_to_text(doc)
            reply = "Yes" if doc["answer"] in (1, "1") else "No"
            assert utils.process_results_rq3(doc, [reply])["accuracy"]["correct"] is True
            seen.add(doc["marker"])
    assert seen == set(NEW)
