"""Coronal and sagittal slices: display conventions, physical spacing, the 8 variants and the
three answer frames on an asymmetric synthetic volume (a wrong flip of any axis fails), the
generator's plane and consistency-group records, and the mask oracle on such items."""

from __future__ import annotations

import json
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

from radspatial.bench.dataset import build_dataset
from radspatial.bench.generate import GenerateConfig
from radspatial.imaging.planes import PLANE, reformat, slice_position_mm
from radspatial.imaging.slices import (
    VARIANTS,
    Geometry,
    Variant,
    render_labels,
    structure_stats,
    to_display,
)
from radspatial.imaging.volumes import Case, Volume

SHAPE = (48, 40, 20)  # canonical RAS: i -> patient right, j -> anterior, k -> superior
SPACING = (2.0, 3.0, 5.0)  # anisotropic: in-plane resampling must keep millimetres
# rods, so each pair shows in every slice of one plane: label -> (i, j, k) ranges
RODS = {
    5: ((34, 44), (16, 20), (14, 18)),  # liver: right, superior; along j (coronal slices)
    1: ((2, 10), (16, 20), (2, 6)),  # spleen: left, inferior; along j
    3: ((17, 21), (30, 38), (2, 6)),  # kidney_left: anterior, inferior; along i (sagittal)
    52: ((17, 21), (2, 8), (14, 18)),  # aorta: posterior, superior; along i
}


def _arrays() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    ct = np.full(SHAPE, -1000.0, np.float32)
    ct[4:44, 2:38, :] = 0.0
    seg = np.zeros(SHAPE, np.uint16)
    for label, ((i0, i1), (j0, j1), (k0, k1)) in RODS.items():
        seg[i0:i1, j0:j1, k0:k1] = label
        ct[i0:i1, j0:j1, k0:k1] = 40.0 + label
    affine = np.diag([*SPACING, 1.0])
    affine[:3, 3] = (-40.0, -60.0, 100.0)
    return ct, seg, affine


def _volume() -> Volume:
    ct, seg, affine = _arrays()
    return Volume("synth", ct, seg, affine, SPACING, None, "normal", {})  # type: ignore[arg-type]


def _centres(vol: Volume, plane: str, k: int, size: int = 256):
    v = reformat(vol, plane)
    geom = Geometry.for_slice(v.seg.shape[:2], v.spacing[:2], size)
    return {i: s.center_xy for i, s in structure_stats(to_display(v.seg[:, :, k]), geom).items()}


def test_standard_view_of_each_plane_follows_the_documented_convention():
    vol = _volume()
    liver, spleen = _centres(vol, "coronal", 17)[5], _centres(vol, "coronal", 17)[1]
    assert liver[0] < spleen[0]  # coronal: patient's right on the image left
    assert liver[1] < spleen[1]  # superior at the top
    sag = _centres(vol, "sagittal", 19)
    assert sag[3][0] < sag[52][0]  # sagittal: anterior on the image left
    assert sag[52][1] < sag[3][1]  # superior at the top
    ax = _centres(vol, "axial", 16)
    assert ax[5][0] < ax[52][0] and ax[5][1] < ax[52][1]  # axial unchanged: right left, ant. up
    sag, cor = PLANE["sagittal"], PLANE["coronal"]  # the records say what the rods show
    assert (sag.image_left, sag.image_top, sag.normal) == ("anterior", "superior", "x")
    assert (cor.image_left, cor.image_top) == ("patient right", "superior")
    assert not sag.sided and PLANE["axial"].sided and cor.sided


def test_reformatted_affine_and_positions_keep_world_millimetres():
    vol = _volume()
    for plane, world_axis in (("axial", 2), ("coronal", 1), ("sagittal", 0)):
        v = reformat(vol, plane)
        idx = np.array([3, 5, 7, 1.0])
        a, b, c = idx[:3].astype(int)
        # the voxel value and its world position agree with the original grid
        original = {"axial": (a, b, c), "coronal": (a, c, b), "sagittal": (c, a, b)}[plane]
        assert v.seg[a, b, c] == vol.seg[original]
        assert np.allclose(v.affine @ idx, vol.affine @ np.array([*original, 1.0]))
        pos = slice_position_mm(v, plane)
        assert pos[7] == pytest.approx(vol.affine[world_axis, 3] + 7 * SPACING[world_axis])


def test_in_plane_resampling_is_isotropic_in_millimetres():
    v = reformat(_volume(), "coronal")  # 48 x 2 mm wide, 20 x 5 mm tall
    geom = Geometry.for_slice(v.seg.shape[:2], v.spacing[:2], 200)
    assert (geom.content_w, geom.content_h) == (192, 200)  # 96 mm : 100 mm
    lab = render_labels(to_display(v.seg[:, :, 17]), geom)
    assert set(np.unique(lab)) <= {0, 1, 5}  # nearest neighbour: no mixed label values


@pytest.mark.parametrize("plane,k", [("axial", 16), ("coronal", 18), ("sagittal", 19)])
def test_every_variant_moves_image_and_points_together(plane, k):
    v = reformat(_volume(), plane)
    geom = Geometry.for_slice(v.seg.shape[:2], v.spacing[:2], 128)
    lab = render_labels(to_display(v.seg[:, :, k]), geom)
    canon = {i: s.center_xy for i, s in structure_stats(lab.astype(np.int32), _unit(128)).items()}
    for code in VARIANTS:
        variant = Variant(code)
        shown = variant.apply_image(lab)
        for label, xy in canon.items():
            ys, xs = np.nonzero(shown == label)
            expected = variant.apply_point(xy, 128)
            assert (xs.mean(), ys.mean()) == pytest.approx(expected, abs=1e-6), (code, label)


def _unit(size: int) -> Geometry:
    return Geometry(size, size, size, 0, 0, size, size)


# ---------------------------------------------------------------- the generator, end to end

# anatomical truth of each pair, from the rods: (a, b) -> relation -> answer
_TRUTH = {
    "coronal": {("liver", "spleen"): {"left_of": 0, "above": 1}},  # a is right, superior
    "sagittal": {("kidney_left", "aorta"): {"left_of": 1, "above": 0}},  # anterior, inferior
    "axial": {
        ("liver", "aorta"): {"left_of": 0, "above": 1},  # right, anterior
        ("spleen", "kidney_left"): {"left_of": 1, "above": 0},  # left, posterior
    },
}
_OPP = {"right_of": "left_of", "below": "above"}


def _truth(plane: str, a: str, b: str, relation: str) -> int:
    base = _OPP.get(relation, relation)
    flip = int(base != relation)
    table = _TRUTH[plane]
    if (a, b) in table:
        return table[(a, b)][base] ^ flip
    return 1 - table[(b, a)][base] ^ flip


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("planes")
    ct, seg, affine = _arrays()
    nib.save(nib.Nifti1Image(ct.astype(np.int16), affine), root / "ct.nii.gz")
    nib.save(nib.Nifti1Image(seg.astype(np.uint8), affine), root / "seg.nii.gz")
    case = Case("synth", root / "ct.nii.gz", root / "seg.nii.gz", "totalsegmentator")
    config = GenerateConfig(
        size=160,
        setups=("rq1",),
        as_count=0,
        planes=("axial", "coronal", "sagittal"),
        consistency=True,
        export_masks=True,
    )
    build_dataset([case], config, root / "data", log=lambda _: None)
    return root / "data"


def _rows(data: Path) -> list[dict]:
    return [json.loads(line) for line in (data / "manifest.jsonl").read_text().splitlines()]


def test_generated_planes_answer_in_all_three_frames(dataset):
    rows = [r for r in _rows(dataset) if r["setup"] == "rq1"]
    planes = {r.get("plane", "axial") for r in rows}
    assert planes == {"axial", "coronal", "sagittal"}
    assert not any(
        "plane" in r for r in rows if "_coronal_" not in r["id"] and "_sag" not in r["id"]
    )
    for r in rows:
        plane = r.get("plane", "axial")
        a, b = r["object1"]["name"], r["object2"]["name"]
        assert r["answer_anatomical"] == _truth(plane, a, b, r["relation"]), r["id"]
        s1, s2 = r["object1"]["center_xy_canonical"], r["object2"]["center_xy_canonical"]
        axis = 0 if r["relation"] in ("left_of", "right_of") else 1
        smaller = s1[axis] < s2[axis]
        assert r["answer_standard"] == int(smaller == (r["relation"] in ("left_of", "above")))
        assert r["source"]["slice_index"] < {"axial": 20, "coronal": 40, "sagittal": 48}[plane]


def test_consistency_groups_hold_8_variants_balanced_with_opposite_twins(dataset):
    groups: dict[tuple, list[dict]] = {}
    for r in _rows(dataset):
        if r.get("group"):
            groups.setdefault((r["setup"], r["marker"], r["group"]), []).append(r)
    assert groups
    for (setup, marker, _), members in groups.items():
        assert sorted(m["transform"] for m in members) == sorted(VARIANTS)
        assert sum(m["answer"] for m in members) == 4  # 4 yes, 4 no
        assert len({m["question"] for m in members}) == 1  # the same words
        assert len({m["answer_anatomical"] for m in members}) == 1
        twin = groups[(setup, marker, members[0]["group_twin"])]
        assert twin[0]["answer_anatomical"] == 1 - members[0]["answer_anatomical"]
        by_variant = {t["transform"]: t["answer"] for t in twin}
        assert all(by_variant[m["transform"]] == 1 - m["answer"] for m in members)
    qa = json.loads((dataset / "RQ1" / "qa.json").read_text())  # the MIRP layout's extra
    assert {e.get("plane", "axial") for e in qa} == {"axial", "coronal", "sagittal"}
    meta = json.loads((dataset / "dataset.json").read_text())
    assert set(meta["planes"]) == {"axial", "coronal", "sagittal"}
    assert meta["config"]["planes"] == ["axial", "coronal", "sagittal"]


def test_mask_oracle_and_baselines_on_consistency_groups(dataset, tmp_path):
    from radspatial.eval.runner import EvalConfig, run_eval

    out = {}
    for model in ("agent:mask", "baseline:yes", "baseline:anatomy-prior@" + str(dataset)):
        run = tmp_path / model.split("@")[0].replace(":", "_")
        run_eval(dataset, run, EvalConfig(model=model, runs=1), progress=False)
        out[model.split("@")[0]] = json.loads((run / "metrics.json").read_text())
    oracle = out["agent:mask"]
    assert oracle["overall"]["accuracy_mean"] == 1.0
    for plane, m in oracle["by_plane"].items():
        assert m["overall"]["accuracy_mean"] == 1.0, plane
    assert oracle["consistency"]["all"]["all_right"]["share"] == 1.0
    assert out["baseline:yes"]["consistency"]["all"]["constant"]["share"] == 1.0
    prior = out["baseline:anatomy-prior"]["consistency"]["rq1/none"]
    assert prior["anatomy"]["share"] == 1.0  # atlas of this very volume: recites its anatomy
    from radspatial.reports.build import load_runs, summarize
    from radspatial.reports.planes import groups_markdown

    runs = [tmp_path / m for m in ("agent_mask", "baseline_yes", "baseline_anatomy-prior")]
    table = groups_markdown(summarize(load_runs(runs)))  # the report's consistency table
    for plane in ("all", "axial", "coronal", "sagittal"):  # every plane's groups apart too
        assert f"| agent:mask (oracle) | {plane} | all |" in table, plane


def test_organs_localizer_refuses_other_planes_with_the_reason_in_the_trace():
    from radspatial.agent.pipeline.agent import Agent
    from radspatial.agent.pipeline.types import Context

    image = np.zeros((64, 64, 3), np.uint8)
    result = Agent("organs").answer(
        image, "Is the liver above the spleen?", context=Context(extra={"plane": "coronal"})
    )
    assert result.answer is None
    assert "not trained on coronal slices" in result.trace["decision"]["reason"]


def test_generate_cli_planes_and_per_slice(dataset, tmp_path):
    from radspatial.cli import main

    src = dataset.parent
    out = tmp_path / "cli"
    argv = ["generate", "--ct", str(src / "ct.nii.gz"), "--seg", str(src / "seg.nii.gz")]
    argv += ["--labels", "totalsegmentator", "--planes", "coronal,sagittal", "--per-slice", "2"]
    argv += ["--setups", "rq1", "--size", "128", "--as-count", "0", "--out", str(out)]
    assert main(argv) == 0
    rows = _rows(out)
    assert {r["plane"] for r in rows} == {"coronal", "sagittal"}
    assert any(r["id"].endswith("_1/q0") for r in rows)  # a second question on a slice
    assert len({(r["image"]) for r in rows}) == len(rows)
    assert main([*argv[:-1], str(tmp_path / "bad"), "--planes", "oblique"]) == 2
    groups = [*argv[:-1], str(tmp_path / "groups"), "--planes", "sagittal", "--consistency"]
    assert main(groups) == 0
    assert all(r["group"] for r in _rows(tmp_path / "groups"))


def test_frame_check_reads_all_three_frames_its_own_way(dataset, monkeypatch):
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "check_plane_frames.py"
    spec = importlib.util.spec_from_file_location("check_plane_frames", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    tally = mod.check(dataset)
    assert {p for p, _ in tally} == {"axial", "coronal", "sagittal"}
    assert all(right == n > 0 for n, right in tally.values()), tally
    # a sagittal convention with image left = posterior would fail the anatomical frame
    monkeypatch.setitem(mod._LEFT, "sagittal", (1, -1))
    n, right = mod.check(dataset)[("sagittal", "anatomical")]
    assert right < n
