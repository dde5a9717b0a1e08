"""SPAR-VQA as SPAR-Bench's Table 2 (``--questions spar``): class sets, chance levels,
multiple-choice grading, paraphrases per seed, the agent on the binary types, and the
three-seed table. The earlier all-yes/no group is ``spar-binary`` (its bytes are checked with
benchmarks/output_fingerprint.py)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from radspatial.bench.dataset import build_dataset
from radspatial.bench.generate import GenerateConfig
from radspatial.grading.normalize import normalize
from radspatial.imaging.slices import VARIANTS, Variant
from radspatial.imaging.volumes import Case
from radspatial.questions import SPAR_TABLE2, SPAR_VQA
from radspatial.questions.spar_choice import (
    SIZE_EDGES,
    orientation_class,
    size_class,
    symmetry_class,
)

TABLE2 = ("spar_relpos", "spar_symm", "spar_orient", "spar_size", "spar_dist")
CHANCE = {"spar_relpos": 0.5, "spar_orient": 0.2, "spar_symm": 1 / 3, "spar_size": 0.25}


def test_groups():
    from radspatial.cli.common import question_types

    assert set(SPAR_TABLE2) == set(TABLE2)  # no count: Table 2 omits it
    order = ("spar_relpos", "spar_orient", "spar_symm", "spar_size", "spar_dist")
    assert question_types("spar") == order  # Table 2's column order
    assert question_types("spar-binary") == SPAR_VQA
    assert SPAR_VQA == ("orientation", "symmetry", "size", "distance", "count")


def test_orientation_classes_on_an_asymmetric_image():
    img = np.arange(12).reshape(3, 4)  # no symmetry: every transform gives another array
    want = {
        "B1": ("standard", img),
        "B2": ("rotated_90_ccw", np.rot90(img, 1)),  # counter-clockwise as displayed
        "B3": ("rotated_180", np.rot90(img, 2)),
        "B4": ("rotated_90_cw", np.rot90(img, -1)),
    }
    for code in VARIANTS:
        shown = Variant(code).apply_image(img)
        if code.startswith("A"):
            assert orientation_class(code) == "mirrored"
            assert not any(np.array_equal(shown, w) for _, w in want.values())
        else:
            cls, expected = want[code]
            assert orientation_class(code) == cls and np.array_equal(shown, expected)
    assert img[0, 0] == np.rot90(img, -1)[0, -1]  # clockwise: top-left goes to top-right


def test_symmetry_and_size_bins_leave_the_borders_out():
    assert symmetry_class(100, 95, 0.1) == "equal"
    assert symmetry_class(100, 88, 0.1) is None  # between 10% and 15%: not asked
    assert symmetry_class(100, 80, 0.1) == "left" and symmetry_class(70, 100, 0.1) == "right"
    assert size_class(0.001) == "under_0.25" and size_class(0.02) == "1_to_2.5"
    assert size_class(0.2) == "over_2.5" and size_class(SIZE_EDGES[1] * 1.05) is None


@pytest.mark.parametrize(
    ("qtype", "reply", "value"),
    [
        ("spar_orient", "E", "mirrored"),
        ("spar_orient", "(C) rotated 180 degrees", "rotated_180"),
        ("spar_orient", "The image is rotated 90 degrees counter-clockwise.", "rotated_90_ccw"),
        ("spar_orient", "Answer: D", "rotated_90_cw"),
        ("spar_orient", "It is not mirrored; it is rotated 180 degrees.", "rotated_180"),
        ("spar_symm", "The left kidney is larger.", "left"),
        ("spar_symm", "They are about the same.", "equal"),
        ("spar_size", "B", "0.25_to_1"),
        ("spar_size", "1.5%", "1_to_2.5"),
        ("spar_size", '{"answer": "over 2.5%"}', "over_2.5"),
        ("spar_size", "1_to_2.5", "1_to_2.5"),  # the class name itself (baselines answer so)
        ("spar_orient", "rotated_90_ccw", "rotated_90_ccw"),
    ],
)
def test_choice_replies_are_read(qtype, reply, value):
    norm = normalize(reply, qtype)
    assert (norm.status, norm.value) == ("answer", value)


@pytest.mark.parametrize(
    ("qtype", "reply", "status"),
    [
        ("spar_orient", "A or E", "invalid"),
        ("spar_symm", "probably the left one", "invalid"),
        ("spar_size", "approximately 2%", "invalid"),
        ("spar_orient", "I see an axial slice.", "undecided"),
    ],
)
def test_choice_replies_that_commit_to_nothing(qtype, reply, status):
    assert normalize(reply, qtype).status == status


@pytest.fixture(scope="module")
def seeds(tmp_path_factory) -> dict[int, Path]:
    from radspatial.cli import bundled_example

    ct, seg = bundled_example()
    root = tmp_path_factory.mktemp("table2")
    out = {}
    for seed in (0, 1):
        cfg = GenerateConfig(
            seed=seed, size=256, setups=("rq1",), question_types=TABLE2, export_masks=True
        )
        build_dataset([Case("example_ct_sm", ct, seg)], cfg, root / f"ds{seed}")
        out[seed] = root / f"ds{seed}"
    return out


def _rows(ds: Path) -> list[dict]:
    return [json.loads(x) for x in (ds / "manifest.jsonl").read_text().splitlines()]


def test_dataset_records_chance_and_balances_the_classes(seeds):
    meta = json.loads((seeds[0] / "dataset.json").read_text())["question_types"]
    assert set(meta) == set(TABLE2)
    for qtype, chance in CHANCE.items():
        assert meta[qtype]["chance"] == pytest.approx(chance)
    for qtype in ("spar_orient", "spar_symm", "spar_size"):
        counts = meta[qtype]["classes"]
        assert len(counts) == round(1 / CHANCE[qtype]) and len(set(counts.values())) == 1
    rows = _rows(seeds[0])
    for r in rows:
        if r["question_type"] == "spar_orient":
            assert r["answer"] == orientation_class(r["transform"])
            assert "Options: (A)" in r["question"] and "(E) mirrored" in r["question"]
        if r["question_type"] == "spar_symm":
            left, right = r["object1"]["area_px"], r["object2"]["area_px"]
            assert r["answer"] == symmetry_class(left, right, 0.1)
            assert r["object1"]["name"].endswith("left")
        if r["question_type"] == "spar_size":
            assert r["answer"] == size_class(r["object1"]["area_px"] / 256**2)


def test_phrasing_is_resampled_per_seed(seeds):
    stems = {}
    for seed, ds in seeds.items():
        for r in _rows(ds):
            stems.setdefault((seed, r["question_type"]), Counter())[r["params"]["phrasing"]] += 1
    for qtype in TABLE2:
        assert len(stems[(0, qtype)]) >= 2  # several paraphrases within one dataset
        assert stems[(0, qtype)] != stems[(1, qtype)]  # and another draw with another seed


def test_agent_answers_the_binary_types_and_three_seed_table(seeds, tmp_path, capsys):
    from radspatial.cli import main

    runs = []
    for seed, ds in seeds.items():
        for model in ("agent:mask", "baseline:random"):
            run = tmp_path / f"{model}-{seed}"
            argv = ["eval", "--data", str(ds), "--model", model, "--out", str(run), "--runs", "1"]
            assert main(argv) == 0
            runs.append(run)
    # every paraphrase parses and the oracle never disagrees with the generated answer (it
    # abstains on a rare distance pair whose mask centres at 256 px sit at the margin)
    rows = [json.loads(x) for x in (tmp_path / "agent:mask-0" / "results.jsonl").open()]
    binary = [r for r in rows if r["question_type"] in ("spar_relpos", "spar_dist")]
    assert binary and all(r["correct"] for r in binary if r["parsed"] is not None)
    assert sum(r["parsed"] is not None for r in binary) >= 0.95 * len(binary)
    out = tmp_path / "table2"
    assert main(["spar-table", *map(str, runs), "--out", str(out)]) == 0
    table = json.loads(out.with_suffix(".json").read_text())
    row = table["models"]["agent:mask"]
    assert row["seeds"] == 2 and row["spar_relpos"]["mean"] > 0.95
    assert row["spar_orient"]["mean"] == 0.0  # no orientation rule for the 5 classes: abstains
    macro = [np.mean([r["by_question_type"][t]["accuracy_mean"] for t in table["types"]])
             for r in (json.loads((tmp_path / f"agent:mask-{s}" / "metrics.json").read_text())
                       for s in seeds)]  # fmt: skip
    assert row["macro"]["mean"] == pytest.approx(np.mean(macro))
    assert row["macro"]["std"] == pytest.approx(np.std(macro, ddof=1))
    text = out.with_suffix(".md").read_text()
    assert "| Chance | | 35.7 |" in text and "baseline:random" in capsys.readouterr().out
