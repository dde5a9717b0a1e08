"""radspatial.phantoms: anatomy sides and positions (checked against the real TotalSegmentator
example's convention), HU per organ, determinism, counterfactual variants, files on disk and
the generator running over them. Small grids keep the whole file to a few seconds.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

from radspatial.bench.dataset import build_dataset
from radspatial.bench.generate import GenerateConfig
from radspatial.cli import bundled_example
from radspatial.core.io import read_jsonl
from radspatial.core.labels import load_table
from radspatial.imaging.volumes import read_cases_csv
from radspatial.phantoms import make_phantom, write_phantoms
from radspatial.phantoms.tissues import EXPECTED_HU

SHAPE = (96, 96, 40)  # 4.3 x 4.3 x 12.5 mm over the default field of view
IDS = {n: i for i, n in load_table("totalsegmentator", group=False).names.items()}
VERTEBRAE = [i for n, i in IDS.items() if n.startswith("vertebrae_")]


def centroid(seg: np.ndarray, affine: np.ndarray, labels) -> np.ndarray:
    """World (RAS mm) centre of the voxels carrying any of ``labels``."""
    idx = np.argwhere(np.isin(seg, np.atleast_1d(labels)))
    assert len(idx), f"no voxel with label(s) {labels}"
    return nib.affines.apply_affine(affine, idx.mean(axis=0))


def relations(seg: np.ndarray, affine: np.ndarray) -> dict[str, bool]:
    """Left/right/anterior facts, relative to the spine (the patient's midline)."""
    c = {name: centroid(seg, affine, IDS[name]) for name in ("liver", "kidney_left", "aorta")}
    c.update(spine=centroid(seg, affine, VERTEBRAE))
    for name in ("spleen", "kidney_right", "inferior_vena_cava", "stomach"):
        c[name] = centroid(seg, affine, IDS[name])
    mid = c["spine"][0]
    return {
        "liver_right": c["liver"][0] > mid,  # RAS+: +x is the patient's right
        "spleen_left": c["spleen"][0] < mid,
        "kidney_left_left": c["kidney_left"][0] < mid,
        "kidney_right_right": c["kidney_right"][0] > mid,
        "aorta_left_of_ivc": c["aorta"][0] < c["inferior_vena_cava"][0],
        "stomach_left": c["stomach"][0] < mid,
        "stomach_anterior": c["stomach"][1] > c["spine"][1] + 30,
        "spine_posterior": c["spine"][1] < min(c["liver"][1], c["aorta"][1], c["stomach"][1]),
    }


@pytest.fixture(scope="module")
def phantoms() -> dict[str, object]:
    return {
        v: make_phantom("test_case", seed=7, shape=SHAPE, variant=v)
        for v in ("normal", "situs_inversus", "displaced")
    }


def test_grid_types_and_ras_affine(phantoms):
    ph = phantoms["normal"]
    assert ph.ct.shape == ph.seg.shape == SHAPE
    assert ph.ct.dtype == np.int16 and ph.seg.dtype == np.uint8
    assert nib.aff2axcodes(ph.affine) == ("R", "A", "S")
    assert ph.variant == "normal" and ph.meta["variant"] == "normal"
    present = set(ph.meta["label_voxels"])
    wanted = {"liver", "spleen", "stomach", "pancreas", "gallbladder", "kidney_left",
              "kidney_right", "aorta", "inferior_vena_cava", "portal_vein_and_splenic_vein",
              "esophagus", "duodenum", "small_bowel", "colon", "vertebrae_l1", "rib_left_10",
              "rib_right_10", "autochthon_left", "iliopsoas_right", "urinary_bladder",
              "lung_lower_lobe_left", "lung_lower_lobe_right"}  # fmt: skip
    assert {IDS[n] for n in wanted} <= present
    assert len(present) >= 25


def test_sides_match_the_real_totalsegmentator_example(phantoms):
    """The real mask fixes the convention: same side facts must hold in the phantom."""
    _, seg_path = bundled_example()
    real = nib.load(seg_path)
    facts_real = relations(np.asarray(real.dataobj), real.affine)
    assert facts_real["liver_right"] and facts_real["kidney_left_left"]  # sanity of the helper
    ph = phantoms["normal"]
    facts = relations(ph.seg, ph.affine)
    assert facts == dict.fromkeys(facts, True)
    for key in ("liver_right", "kidney_left_left", "spleen_left", "aorta_left_of_ivc"):
        assert facts[key] == facts_real[key]


@pytest.mark.parametrize(
    "name, ids",
    [
        ("liver", [5]),
        ("spleen", [1]),
        ("kidney", [2, 3]),
        ("aorta", [52]),
        ("inferior_vena_cava", [63]),
        ("muscle", [86, 87, 88, 89]),
        ("vertebrae", VERTEBRAE),
        ("lung", [11, 14]),
        ("stomach", [6]),
        ("colon", [20]),
        ("urinary_bladder", [21]),
    ],
)
def test_mean_hu_per_structure_in_documented_range(phantoms, name, ids):
    ph = phantoms["normal"]
    lo, hi = EXPECTED_HU[name]
    mean = float(ph.ct[np.isin(ph.seg, ids)].mean())
    assert lo <= mean <= hi, f"{name}: mean {mean:.1f} HU outside [{lo}, {hi}]"


def test_fat_air_and_bone_values(phantoms):
    ct = phantoms["normal"].ct
    assert ct.min() >= -1024 and (ct < -950).mean() > 0.2  # air around the body
    assert np.percentile(ct[np.isin(phantoms["normal"].seg, VERTEBRAE)], 95) > 300


def test_same_seed_same_arrays_other_seed_differs():
    a = make_phantom("det", seed=1, shape=(48, 48, 20))
    b = make_phantom("det", seed=1, shape=(48, 48, 20))
    c = make_phantom("det", seed=2, shape=(48, 48, 20))
    assert a.ct.tobytes() == b.ct.tobytes() and a.seg.tobytes() == b.seg.tobytes()
    assert np.array_equal(a.affine, b.affine) and a.meta == b.meta
    assert a.ct.tobytes() != c.ct.tobytes() and a.seg.tobytes() != c.seg.tobytes()


def test_situs_inversus_mirrors_viscera_and_keeps_names_true(phantoms):
    normal, si = phantoms["normal"], phantoms["situs_inversus"]
    facts = relations(si.seg, si.affine)
    assert not facts["liver_right"] and not facts["spleen_left"] and not facts["stomach_left"]
    assert not facts["aorta_left_of_ivc"]
    # paired structures are named by the side they end up on
    assert facts["kidney_left_left"] and facts["kidney_right_right"]
    mid = centroid(si.seg, si.affine, VERTEBRAE)[0]
    for name in ("adrenal_gland_left", "lung_lower_lobe_left", "iliac_artery_left"):
        assert centroid(si.seg, si.affine, IDS[name])[0] < mid, name
    # same patient, mirrored: the liver moves across by about its distance from the midline
    x_n = centroid(normal.seg, normal.affine, IDS["liver"])[0] - mid
    x_s = centroid(si.seg, si.affine, IDS["liver"])[0] - mid
    assert x_s == pytest.approx(-x_n, abs=15.0)
    # skeleton and muscles are not mirrored
    assert centroid(si.seg, si.affine, IDS["autochthon_left"])[0] < mid
    assert si.meta["habitus"] == normal.meta["habitus"]


def test_displaced_variant_has_a_mass_and_a_moved_organ(phantoms):
    normal, dx = phantoms["normal"], phantoms["displaced"]
    details = dx.meta["variant_details"]
    assert details["mass_label"] == 200 and 200 in dx.meta["label_voxels"]
    assert 200 not in normal.meta["label_voxels"]
    organ = IDS[details["organ"]]
    moved = centroid(dx.seg, dx.affine, organ) - centroid(normal.seg, normal.affine, organ)
    assert np.linalg.norm(moved) > 10.0
    mass_hu = float(dx.ct[dx.seg == 200].mean())
    assert EXPECTED_HU["mass"][0] <= mass_hu <= EXPECTED_HU["mass"][1]


def test_bad_arguments():
    with pytest.raises(ValueError, match="variant"):
        make_phantom("x", seed=0, shape=(32, 32, 16), variant="mirrored")
    with pytest.raises(ValueError, match="shape"):
        make_phantom("x", seed=0, shape=(32, 32))
    with pytest.raises(ValueError, match="variant"):
        write_phantoms(Path("unused"), n=1, seed=0, variant="bogus")


def test_write_phantoms_then_generate_the_benchmark(tmp_path):
    out = tmp_path / "phantoms"
    csv_path = write_phantoms(
        out, n=3, seed=5, shape=(80, 80, 24), variant="mixed", workers=1, progress=False
    )
    assert csv_path == out / "cases.csv"
    with csv_path.open() as f:
        rows = list(csv.DictReader(f))
    assert [r["variant"] for r in rows] == ["normal", "situs_inversus", "displaced"]
    assert [r["case_id"] for r in rows] == [
        "phantom_000", "phantom_001_situs_inversus", "phantom_002_displaced"
    ]  # fmt: skip
    assert [r["labels"] for r in rows] == ["totalsegmentator"] * 2 + ["labels.json"]
    table = json.loads((out / "labels.json").read_text())
    assert table["200"] == "mass" and table["extends"] == "totalsegmentator"
    loaded = load_table(out / "labels.json")  # MIRP grouping still applies
    assert loaded.names[5] == "liver" and loaded.names[200] == "mass" and loaded.grouping == "mirp"
    for r in rows:
        img = nib.load(out / r["ct"])
        assert img.get_data_dtype() == np.int16 and nib.aff2axcodes(img.affine) == ("R", "A", "S")
        assert nib.load(out / r["seg"]).get_data_dtype() == np.uint8
    assert not list(out.glob("*.tmp"))

    cases = read_cases_csv(csv_path)
    assert [c.variant for c in cases] == ["normal", "situs_inversus", "displaced"]
    config = GenerateConfig(size=128, as_count=0, setups=("rq1",))
    summary = build_dataset(cases, config, tmp_path / "ds", log=lambda _: None)
    assert summary.n_questions > 0
    manifest = read_jsonl(tmp_path / "ds" / "manifest.jsonl")
    expected = {r["case_id"]: r["variant"] for r in rows}
    assert all(r["variant"] == expected[r["source"]["case_id"]] for r in manifest)
    assert len({r["variant"] for r in manifest}) >= 2  # coarse grids may leave a case empty
    names = {r["object1"]["name"] for r in manifest} | {r["object2"]["name"] for r in manifest}
    known = set(load_table("totalsegmentator").names.values()) | set(IDS) | {"mass"}
    assert names and names <= known


def test_written_files_are_reproducible(tmp_path):
    a = write_phantoms(tmp_path / "a", n=1, seed=3, shape=(32, 32, 12), progress=False)
    b = write_phantoms(tmp_path / "b", n=1, seed=3, shape=(32, 32, 12), progress=False)
    for name in ("phantom_000_ct.nii.gz", "phantom_000_seg.nii.gz", "cases.csv", "labels.json"):
        assert (a.parent / name).read_bytes() == (b.parent / name).read_bytes(), name


def test_paired_structures_differ_both_ways_across_a_set():
    """Per-seed left/right size factors: a set has left-larger and right-larger kidneys (and
    paired muscles), so the symmetry probe is not answered by "equal"."""
    ratios = {"kidney": [], "autochthon": [], "iliopsoas": []}
    for i in range(6):
        v = make_phantom(f"phantom_{i:03d}", seed=3, shape=(64, 64, 32)).meta["label_voxels"]
        for name in ratios:
            ratios[name].append(v[IDS[f"{name}_left"]] / v[IDS[f"{name}_right"]])
    for name, r in ratios.items():
        assert max(r) > 1.15 and min(r) < 1 / 1.15, (name, r)


def test_phantom_label_ids_are_totalsegmentators():
    """The skeleton's, muscles' and vertebrae's ids name the same structures as the table."""
    from radspatial.phantoms.habitus import VERTEBRAE
    from radspatial.phantoms.skeleton import IDS as SKELETON
    from radspatial.phantoms.skeleton import RIB_ID

    for key, label in SKELETON.items():
        assert IDS[key if isinstance(key, str) else "_".join(key)] == label, key
    assert all(IDS[name] == label for label, name, *_ in VERTEBRAE)
    assert all(IDS[f"rib_{side}_{n}"] == base + n for side, base in RIB_ID.items() for n in (1, 12))
