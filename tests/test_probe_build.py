"""Probe dataset building (docs/probes.md) on tiny synthetic volumes and the bundled example CT."""

from __future__ import annotations

import json
import math
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
from PIL import Image
from synth import SHAPE, SPACING, write_case

from radspatial.cli import bundled_example
from radspatial.core.errors import InputError
from radspatial.imaging.slices import (
    VARIANTS,
    Geometry,
    Variant,
    render_gray,
    render_labels,
    to_display,
)
from radspatial.imaging.volumes import Case, load_case
from radspatial.probes import TASK_NAMES, build_probes, load_probe_task, probe_info
from radspatial.probes.render import COLOURS
from radspatial.probes.splits import split_counts

SYNTH_IDS = ("alpha", "bravo", "charlie", "delta")
TASKINFO_KEYS = {
    "level", "kind", "n_classes", "classes", "chance", "metric", "reference_size_px", "counts",
    "description",
}  # fmt: skip


def write_paired_case(folder: Path, name: str = "pairs") -> Case:
    """Right kidney clearly larger than the left; colon as three separate blobs; a liver."""
    ct = np.full(SHAPE, -1000.0, np.float32)
    seg = np.zeros(SHAPE, np.uint8)
    ii, jj = np.meshgrid(np.arange(SHAPE[0]), np.arange(SHAPE[1]), indexing="ij")
    body = ((ii - 24) / 22.0) ** 2 + ((jj - 20) / 18.0) ** 2 <= 1
    blobs = {
        2: [((34, 12), 6, 160.0)],  # kidney_right: patient's right (high i), posterior
        3: [((13, 12), 3, 170.0)],  # kidney_left
        5: [((33, 29), 5, 60.0)],  # liver
        20: [((16, 27), 2, 30.0), ((22, 31), 2, 30.0), ((17, 34), 2, 30.0)],  # colon
    }
    for k in range(SHAPE[2]):
        ct[:, :, k][body] = 0.0
        for label, discs in blobs.items():
            for (ci, cj), r, hu in discs:
                disk = (ii - ci) ** 2 + (jj - cj) ** 2 <= r * r
                seg[:, :, k][disk], ct[:, :, k][disk] = label, hu
    affine = np.diag([*SPACING, 1.0])
    folder.mkdir(parents=True, exist_ok=True)
    ct_path, seg_path = folder / f"{name}_ct.nii.gz", folder / f"{name}_seg.nii.gz"
    nib.save(nib.Nifti1Image(ct.astype(np.int16), affine), ct_path)
    nib.save(nib.Nifti1Image(seg, affine), seg_path)
    return Case(name, ct_path, seg_path, "totalsegmentator")


@pytest.fixture(scope="module")
def synth_cases(tmp_path_factory) -> list[Case]:
    root = tmp_path_factory.mktemp("cases")
    codes = [("R", "A", "S"), ("L", "P", "S"), ("L", "A", "S"), ("A", "S", "R")]
    cases = [
        Case(name, *write_case(root, c, name), "totalsegmentator")
        for name, c in zip(SYNTH_IDS, codes, strict=True)
    ]
    return [*cases, write_paired_case(root)]


@pytest.fixture(scope="module")
def synth(tmp_path_factory, synth_cases) -> Path:
    out = tmp_path_factory.mktemp("probes") / "synth"
    build_probes(synth_cases, out, seed=3, progress=False)
    return out


@pytest.fixture(scope="module")
def example(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("probes") / "example"
    ct, seg = bundled_example()
    build_probes([Case("example_ct_sm", ct, seg, "totalsegmentator")], out, progress=False)
    return out


def rows(folder: Path, task: str) -> list[dict]:
    return [json.loads(line) for line in (folder / "tasks" / f"{task}.jsonl").open()]


def rgb(folder: Path, row: dict) -> np.ndarray:
    img = Image.open(folder / row["image"])
    assert img.mode == "RGB"
    return np.asarray(img)


def dot_centre(img: np.ndarray, colour: str) -> tuple[float, float]:
    ys, xs = np.nonzero((img == COLOURS[colour]).all(axis=2))
    assert xs.size, f"no {colour} dot"
    return float(xs.mean()), float(ys.mean())


def test_example_schema_and_chance(example):
    info = probe_info(example)
    assert (info["format"], info["format_version"]) == ("radspatial-probes", 1)
    assert info["splits"] == {"train": [], "val": [], "test": ["example_ct_sm"]}
    assert [c["split"] for c in info["cases"]] == ["test"]
    assert sorted(info["tasks"]) == sorted(TASK_NAMES)
    for task, ti in info["tasks"].items():
        assert set(ti) >= TASKINFO_KEYS, task
        data = rows(example, task)
        assert ti["counts"] == {"train": 0, "val": 0, "test": len(data)} and len(data) >= 10, task
        assert info["cases"][0]["n_samples"][task] == len(data)
        for r in data:
            assert set(r) == {"id", "case_id", "split", "image", "target", "meta"}
            assert len(r["meta"]["names"]) == len(r["meta"]["label_ids"])
        if ti["classes"]:
            assert ti["n_classes"] == len(ti["classes"])
            assert all(r["meta"]["class"] == ti["classes"][r["target"]] for r in data)
        shape = (96, 96, 3) if task in ("localize", "permutation") else (224, 224, 3)
        assert rgb(example, data[0]).shape == shape
    chances = {t: ti["chance"] for t, ti in info["tasks"].items()}
    assert chances["relpos"] == 0.25 and chances["orient"] == 0.125
    assert chances["symmetry"] == pytest.approx(1 / 3) and chances["distance"] == 0.5
    assert chances["size"] == 0.25 and chances["permutation"] == 1 / math.factorial(16)
    assert info["tasks"]["permutation"]["chance_by_metric"]["tile_accuracy"] == 1 / 16
    assert min(info["tasks"]["size"]["class_counts"]["test"]) >= len(rows(example, "size")) // 4 - 2
    counts = np.bincount([r["target"] for r in rows(example, "count")])
    assert chances["count"] == pytest.approx(counts.max() / counts.sum())
    # No training split with one case: the mean-centre predictor comes from all samples.
    centres = np.array([r["target"] for r in rows(example, "localize")])
    med = np.linalg.norm(centres - centres.mean(axis=0), axis=1).mean() * 512
    assert info["tasks"]["localize"]["stats_from"] == "all"
    assert chances["localize"] == pytest.approx(med, abs=1e-3)
    assert info["tasks"]["localize"]["reference_size_px"] == 512
    samples = load_probe_task(example, "relpos", "test")
    assert len(samples) == len(rows(example, "relpos")) and samples[0].image.is_file()
    assert load_probe_task(example, "relpos", "train") == []
    with pytest.raises(ValueError, match="no task"):
        load_probe_task(example, "nope")


def test_splits_by_case(synth, synth_cases):
    info = probe_info(synth)
    split_of = {c["case_id"]: c["split"] for c in info["cases"]}
    assert sorted(split_of) == sorted(c.case_id for c in synth_cases)
    assert {s: len(ids) for s, ids in info["splits"].items()} == {"train": 3, "val": 1, "test": 1}
    for s, ids in info["splits"].items():
        assert all(split_of[c] == s for c in ids)
    for task in TASK_NAMES:
        slices: dict[str, set[str]] = {}
        for r in rows(synth, task):
            assert r["split"] == split_of[r["case_id"]]
            slices.setdefault(r["meta"]["slice_id"], set()).add(r["split"])
        assert all(len(s) == 1 for s in slices.values()), task
        counts = info["tasks"][task]["counts"]
        assert sum(counts.values()) == len(rows(synth, task))


def test_split_counts():
    assert split_counts(1, (0.7, 0.15, 0.15)) == {"train": 0, "val": 0, "test": 1}
    assert split_counts(2, (0.7, 0.15, 0.15)) == {"train": 1, "val": 0, "test": 1}
    assert split_counts(3, (0.7, 0.15, 0.15)) == {"train": 1, "val": 1, "test": 1}
    assert split_counts(20, (0.7, 0.15, 0.15)) == {"train": 14, "val": 3, "test": 3}
    assert split_counts(5, (0.8, 0.0, 0.2)) == {"train": 4, "val": 0, "test": 1}
    for n in range(1, 30):
        assert sum(split_counts(n, (0.6, 0.3, 0.1)).values()) == n


def test_localize_targets(synth):
    by_name: dict[str, list[list[float]]] = {}
    for r in rows(synth, "localize"):
        by_name.setdefault(r["meta"]["names"][0], []).append(r["target"])
    liver, spleen = np.array(by_name["liver"]), np.array(by_name["spleen"])
    # Radiological view: the patient's right on image left, anterior at the top.
    assert (liver < 0.5).all() and (spleen > 0.5).all()
    info = probe_info(synth)["tasks"]["localize"]
    train = [r["target"] for r in rows(synth, "localize") if r["split"] == "train"]
    assert info["mean_target"] == pytest.approx(np.mean(train, axis=0), abs=1e-6)


def test_relpos_label_matches_dots(synth):
    data = rows(synth, "relpos")
    assert len(data) > 40 and len({r["target"] for r in data}) == 4
    for r in data:
        img = rgb(synth, r)
        (rx, ry), (bx, by) = dot_centre(img, "red"), dot_centre(img, "blue")
        dx, dy = bx - rx, by - ry
        shown = (
            ("left" if dx < 0 else "right") if abs(dx) > abs(dy) else "above" if dy < 0 else "below"
        )
        assert r["meta"]["class"] == shown, r["id"]
        assert math.dist((rx, ry), r["meta"]["dots"][0]["xy"]) < 1


def test_distance_label_matches_dots(synth):
    data = rows(synth, "distance")
    assert data and {r["target"] for r in data} == {0, 1}
    for r in data:
        img = rgb(synth, r)
        pts = [dot_centre(img, c) for c in ("red", "blue", "green", "yellow")]
        farther = "red_blue" if math.dist(*pts[:2]) > math.dist(*pts[2:]) else "green_yellow"
        assert r["meta"]["class"] == farther, r["id"]


def test_orient_label_is_the_variant_shown(synth, synth_cases):
    vols = {c.case_id: load_case(c) for c in synth_cases}
    data = rows(synth, "orient")
    assert {r["target"] for r in data} == set(range(8))
    for r in data[::3]:
        vol = vols[r["case_id"]]
        geom = Geometry.for_slice(vol.ct.shape[:2], vol.spacing[:2], 224)
        z = r["meta"]["slice_index"]
        gray = render_gray(to_display(vol.ct[:, :, z]), geom, (400.0, 40.0))
        shown = rgb(synth, r)[:, :, 0]
        matches = [v for v in VARIANTS if np.array_equal(Variant(v).apply_image(gray), shown)]
        assert matches == [VARIANTS[r["target"]]], r["id"]


# kidney_right -> kidney_left is "right" in the standard view (patient's left on image right);
# where that vector points after each rotation/flip variant, worked out by hand.
ORGAN_CLASS = {
    "B1": "right", "B2": "above", "B3": "left", "B4": "below",
    "A1": "left", "A2": "below", "A3": "right", "A4": "above",
}  # fmt: skip


def test_relpos_organ_all_variants_no_dots(synth_cases, tmp_path):
    paired = synth_cases[-1]  # kidneys of different sizes, a liver on one side: asymmetric
    out = tmp_path / "organ"
    kw = {"tasks": ["relpos_organ"], "slice_samples": {"relpos_organ": 24}, "progress": False}
    meta = build_probes([paired], out, **kw)
    assert meta["tasks"]["relpos_organ"]["chance"] == 0.25
    data = rows(out, "relpos_organ")
    assert {r["meta"]["variant"] for r in data} == set(VARIANTS)
    assert len({r["meta"]["class"] for r in data}) == 4
    vol = load_case(paired)
    geom = Geometry.for_slice(vol.ct.shape[:2], vol.spacing[:2], 224)
    for r in data:
        m, z = r["meta"], r["meta"]["slice_index"]
        assert m["names"] == ["kidney_right", "kidney_left"], r["id"]
        assert m["pair"] == "kidney_right->kidney_left" and "dots" not in m
        assert m["class"] == ORGAN_CLASS[m["variant"]], r["id"]
        # The image is the plain slice in that variant: grey only, no marker of any colour.
        img = rgb(out, r)
        gray = render_gray(to_display(vol.ct[:, :, z]), geom, (400.0, 40.0))
        assert (img == img[:, :, :1]).all()
        assert np.array_equal(img[:, :, 0], Variant(m["variant"]).apply_image(gray)), r["id"]
        # The organs' centres in the shown label image agree with the class.
        shown = Variant(m["variant"]).apply_image(render_labels(to_display(vol.seg[:, :, z]), geom))
        (rx, ry), (tx, ty) = [np.nonzero(shown == i)[::-1] for i in m["label_ids"]]
        dx, dy = tx.mean() - rx.mean(), ty.mean() - ry.mean()
        cls = (
            ("left" if dx < 0 else "right") if abs(dx) > abs(dy) else "above" if dy < 0 else "below"
        )
        assert m["class"] == cls, r["id"]


def test_relpos_organ_split_by_case(synth, synth_cases):
    data = rows(synth, "relpos_organ")
    assert {r["case_id"] for r in data} == {"pairs"}  # the synth liver/spleen: no dominant axis
    split_of = {c["case_id"]: c["split"] for c in probe_info(synth)["cases"]}
    assert all(r["split"] == split_of[r["case_id"]] for r in data)
    assert len({r["meta"]["slice_id"] for r in data}) == len(data) == SHAPE[2]


def test_permutation_reassembles_the_crop(synth):
    crops = {r["id"].replace("/localize/", "/"): r for r in rows(synth, "localize")}
    data = rows(synth, "permutation")
    assert len(data) == len(crops)
    for r in data[::5]:
        shuffled, crop = rgb(synth, r), rgb(synth, crops[r["id"].replace("/permutation/", "/")])
        assert sorted(r["target"]) == list(range(16))
        back = np.zeros_like(shuffled)
        for i, src in enumerate(r["target"]):
            (sr, sc), (dr, dc) = divmod(i, 4), divmod(src, 4)
            back[dr * 24 : dr * 24 + 24, dc * 24 : dc * 24 + 24] = shuffled[
                sr * 24 : sr * 24 + 24, sc * 24 : sc * 24 + 24
            ]
        assert np.array_equal(back, crop)
        assert not np.array_equal(shuffled, crop)


def test_symmetry_larger_side(synth):
    data = [r for r in rows(synth, "symmetry") if r["case_id"] == "pairs"]
    assert len(data) == SHAPE[2]
    assert all(r["meta"]["class"] == "right" and r["meta"]["pair"] == "kidney" for r in data)
    assert all(r["meta"]["names"] == ["kidney_left", "kidney_right"] for r in data)
    assert all(r["meta"]["variant"] == "B1" for r in data)


def test_size_quartiles_from_train(synth):
    info = probe_info(synth)["tasks"]["size"]
    data = rows(synth, "size")
    train = [r["meta"]["area_fraction"] for r in data if r["split"] == "train"]
    edges = np.quantile(train, [0.25, 0.5, 0.75])
    assert info["stats_from"] == "train"
    assert info["quartile_edges"] == pytest.approx(edges, abs=1e-8)
    for r in data:
        assert r["target"] == int(np.searchsorted(edges, r["meta"]["area_fraction"], "right"))
    # Identical synthetic disks tie; the real CT's areas spread over all four quartiles.
    assert sum(info["class_counts"]["train"]) == len(train)


def test_count_three_blobs(synth):
    colon = [r for r in rows(synth, "count") if r["meta"]["names"] == ["colon"]]
    assert colon and all(r["meta"]["class"] == "3" for r in colon)
    assert all(r["meta"]["class"] == "1" for r in rows(synth, "count") if r not in colon)
    img = rgb(synth, colon[0])
    assert math.dist(dot_centre(img, "red"), colon[0]["meta"]["dots"][0]["xy"]) < 1


def tree(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }


def test_deterministic_and_pool_equals_serial(synth, synth_cases, tmp_path):
    again = tmp_path / "again"
    build_probes(synth_cases, again, seed=3, workers=2, progress=False)
    a, b = tree(synth), tree(again)
    assert a.keys() == b.keys() and all(a[k] == b[k] for k in a)


def test_overwrite_and_cap(synth_cases, tmp_path):
    out = tmp_path / "p"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    kw = {"tasks": ["orient", "localize"], "max_per_case": 3, "progress": False}
    with pytest.raises(FileExistsError, match="--overwrite"):
        build_probes(synth_cases[:2], out, **kw)
    assert (out / "keep.txt").exists() and not (tmp_path / "p.partial").exists()
    with pytest.raises(InputError, match="not a probe dataset"):  # --overwrite: only a probe set
        build_probes(synth_cases[:2], out, overwrite=True, **kw)
    assert (out / "keep.txt").exists() and not (tmp_path / "p.partial").exists()
    (out / "keep.txt").unlink()
    build_probes(synth_cases[:1], out, **kw)
    (out / "keep.txt").write_text("x")
    meta = build_probes(synth_cases[:2], out, overwrite=True, **kw)
    assert not (out / "keep.txt").exists() and not (tmp_path / "p.partial").exists()
    assert list(meta["tasks"]) == ["localize", "orient"]
    assert all(n == 3 for c in meta["cases"] for n in c["n_samples"].values())
    assert meta == probe_info(out)


def test_slice_samples_add_distinct_draws(synth, synth_cases, tmp_path):
    out = tmp_path / "draws"
    meta = build_probes(
        synth_cases, out, seed=3, tasks=["relpos", "orient"], slice_samples={"relpos": 3},
        progress=False,
    )  # fmt: skip
    assert meta["config"]["slice_samples"] == {"relpos": 3}
    one, more = rows(synth, "relpos"), rows(out, "relpos")
    ids = [r["id"] for r in more]
    assert len(set(ids)) == len(ids) and len(more) > 2 * len(one)
    assert {r["meta"].get("draw", 0) for r in more} == {0, 1, 2}
    # draw 0 is the usual build: same rows and same pixels
    first = [r for r in more if "draw" not in r["meta"]]
    assert first == one
    assert all((out / r["image"]).read_bytes() == (synth / r["image"]).read_bytes() for r in one)
    # no two samples show the same slice, variant and dots
    shown = {(r["meta"]["slice_id"], r["meta"]["variant"], str(r["meta"]["dots"])) for r in more}
    assert len(shown) == len(more)
    counts = meta["tasks"]["relpos"]["class_counts"]["train"]
    assert max(counts) - min(counts) <= 3 * len(synth_cases)  # each draw is class-balanced
    assert rows(out, "orient") == rows(synth, "orient")
    with pytest.raises(ValueError, match="slice_samples"):
        build_probes(synth_cases, tmp_path / "bad", slice_samples={"symmetry": 2}, progress=False)
