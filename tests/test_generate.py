"""Generator: geometry through the whole pipeline, variants, balance, determinism, schema."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from synth import STRUCTURES, window_gray, write_case

from radspatial.bench.dataset import build_dataset
from radspatial.bench.generate import GenerateConfig
from radspatial.core.rules import QuestionRules
from radspatial.imaging.slices import VARIANTS, Variant
from radspatial.imaging.volumes import Case

SIZE = 256
CONFIG = GenerateConfig(seed=7, size=SIZE, as_count=10)


def _rows(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "manifest.jsonl").read_text().splitlines()]


def _build(tmp: Path, codes=("R", "A", "S"), config=CONFIG, name="synth", **kw) -> Path:
    ct, seg = write_case(tmp / "in" / "".join(codes), codes, name=name)
    out = tmp / f"out_{''.join(codes)}"
    build_dataset([Case(name, ct, seg)], config, out, log=lambda _: None, **kw)
    return out


def _tree_hashes(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def ras_out(tmp_path_factory) -> Path:
    return _build(tmp_path_factory.mktemp("ras"))


def test_standard_view_puts_patient_right_on_image_left_and_anterior_on_top(ras_out):
    rows = [r for r in _rows(ras_out) if r["setup"] == "rq1"]
    centres = {}
    for r in rows:
        for o in (r["object1"], r["object2"]):
            centres.setdefault(o["name"], []).append(o["center_xy_canonical"])
    mean = {k: np.mean(v, axis=0) for k, v in centres.items()}
    assert set(mean) >= {"liver", "spleen"}
    # liver: patient's right + anterior -> image left + top; spleen: left + posterior.
    assert mean["liver"][0] < SIZE / 2 < mean["spleen"][0]
    assert mean["liver"][1] < SIZE / 2 < mean["spleen"][1]


def test_every_variant_shows_each_structure_where_the_manifest_says(ras_out):
    gray_of = {name: window_gray(hu) for name, _, _, hu in STRUCTURES.values()}
    seen = set()
    for r in _rows(ras_out):
        if r["setup"] != "rq1":
            continue
        seen.add(r["transform"])
        img = np.asarray(Image.open(ras_out / r["image"]).convert("L"))
        for o in (r["object1"], r["object2"]):
            x, y = (round(c) for c in o["center_xy"])
            assert abs(int(img[y, x]) - gray_of[o["name"]]) <= 2, (r["transform"], o["name"])
            v = Variant(r["transform"])
            back = v.invert_point(tuple(o["center_xy"]), SIZE)
            assert np.allclose(back, o["center_xy_canonical"], atol=1e-2)
    assert seen == set(VARIANTS)


@pytest.mark.parametrize("codes", [("L", "P", "S"), ("L", "A", "S"), ("A", "S", "R")])
def test_stored_orientation_does_not_change_the_benchmark(ras_out, tmp_path, codes):
    other = _build(tmp_path, codes)

    def strip(rows):
        for r in rows:
            r.pop("source")
        return rows

    assert strip(_rows(other)) == strip(_rows(ras_out))
    for rel in ("RQ1/images", "RQ2/image_letters"):
        for png in (ras_out / rel).iterdir():
            assert png.read_bytes() == (other / rel / png.name).read_bytes()


def test_answers_balanced_per_setup_marker_and_variant(ras_out):
    rows = _rows(ras_out)
    by_key = Counter((r["setup"], r["marker"], r["answer"]) for r in rows)
    for setup, marker, _ in by_key:
        assert by_key[(setup, marker, 1)] == by_key[(setup, marker, 0)] > 0
    rq1 = [r for r in rows if r["setup"] == "rq1"]
    per_variant = Counter((r["transform"], r["answer"]) for r in rq1)
    for code in VARIANTS:
        assert per_variant[(code, 1)] == per_variant[(code, 0)]


def test_answers_follow_centres_and_margins(ras_out):
    for r in _rows(ras_out):
        a, b = r["object1"]["center_xy"], r["object2"]["center_xy"]
        axis = 0 if r["relation"] in ("left_of", "right_of") else 1
        smaller = a[axis] < b[axis]
        expected = smaller if r["relation"] in ("left_of", "above") else not smaller
        assert r["answer"] == int(expected)
        assert abs(a[axis] - b[axis]) >= 10
        assert np.hypot(a[0] - b[0], a[1] - b[1]) >= 50
        if r["setup"] != "as":
            ca, cb = r["object1"]["center_xy_canonical"], r["object2"]["center_xy_canonical"]
            c_smaller = ca[axis] < cb[axis]
            c_expected = c_smaller if r["relation"] in ("left_of", "above") else not c_smaller
            assert r["answer_standard"] == int(c_expected)
            if r["transform"] == "B1":
                assert r["answer_standard"] == r["answer"]
            # patient frame (MIRP): "left of" = on the patient's left = larger x in standard
            # view; above/below (anterior/posterior) reads as the standard view
            if axis == 0:
                patient_left_first = ca[0] > cb[0]
                a_expected = (
                    patient_left_first if r["relation"] == "left_of" else not (patient_left_first)
                )
                assert r["answer_anatomical"] == int(a_expected) == 1 - r["answer_standard"]
            else:
                assert r["answer_anatomical"] == r["answer_standard"]
            # the drawn markers say the same as the centres, with the margin, in both frames
            for key, ans in (("marker_xy", "answer"), ("marker_xy_canonical", "answer_standard")):
                ma, mb = r["object1"][key], r["object2"][key]
                assert abs(ma[axis] - mb[axis]) >= 10
                m_smaller = ma[axis] < mb[axis]
                m_expected = m_smaller if r["relation"] in ("left_of", "above") else not m_smaller
                assert r[ans] == int(m_expected)


def test_same_seed_is_byte_identical_and_adding_a_case_changes_nothing(tmp_path, ras_out):
    ct, seg = write_case(tmp_path / "in")
    one, two = tmp_path / "one", tmp_path / "two"
    for out in (one, two):
        build_dataset([Case("synth", ct, seg)], CONFIG, out)
    assert _tree_hashes(one) == _tree_hashes(two)

    ct, seg = write_case(tmp_path / "in2", name="second")
    ct1, seg1 = write_case(tmp_path / "in1", name="synth")
    both = tmp_path / "both"
    build_dataset([Case("synth", ct1, seg1), Case("second", ct, seg)], CONFIG, both)
    first_rows = [
        {k: v for k, v in r.items() if k != "source"}
        for r in _rows(both)
        if r["setup"] != "as" and r["source"]["case_id"] == "synth"
    ]
    alone = [{k: v for k, v in r.items() if k != "source"} for r in _rows(ras_out)]
    assert first_rows == [r for r in alone if r["setup"] != "as"]


def test_other_seed_changes_the_questions(tmp_path, ras_out):
    other = _build(tmp_path, config=GenerateConfig(seed=8, size=SIZE, as_count=10))
    assert [r["question"] for r in _rows(other)] != [r["question"] for r in _rows(ras_out)]


def test_mirp_layout_and_schema(ras_out):
    for rel in [
        "RQ1/qa.json",
        *(f"{s}/qa_{m}.json" for s in ("RQ2", "RQ3", "AS") for m in ("dots", "letters", "numbers")),
    ]:
        entries = json.loads((ras_out / rel).read_text())
        assert entries, rel
        for e in entries:
            folder = (ras_out / rel).parent / (
                "images" if rel.startswith("RQ1") else "image_" + rel.split("_")[1][:-5]
            )
            assert (folder / e["filename"]).is_file()
            (qa,) = e["question_answer"]
            # MIRP's quirk: RQ letter files say "label", AS letter files "gray" like the rest
            key = "label" if "letters" in rel and not rel.startswith("AS") else "gray"
            assert f"object1_{key}" in qa and f"object2_{key}" in qa
            assert qa["answer"] in (0, 1) and qa["question"].endswith("?")
            if not rel.startswith("AS"):
                assert e["rotate_flip_short"] in VARIANTS
                assert e["rotate_flip_long"].endswith("degree rotation")
                assert {"base_name", "slice_index", "classes_count"} <= set(e)
                assert isinstance(e["multiple_components_same_label"], bool)
    rq3 = json.loads((ras_out / "RQ3/qa_letters.json").read_text())
    assert rq3[0]["question_answer"][0]["question"].startswith("Are the letters ")
    rq2 = json.loads((ras_out / "RQ2/qa_numbers.json").read_text())
    qa = rq2[0]["question_answer"][0]
    assert f"({qa['object1_gray']})" in qa["question"]


def test_manifest_fields(ras_out):
    meta = json.loads((ras_out / "dataset.json").read_text())
    assert meta["format"] == "radspatial-dataset" and meta["seed"] == 7
    rows = _rows(ras_out)
    assert meta["n_questions"] == len(rows)
    ids = [r["id"] for r in rows]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    for r in rows:
        assert (ras_out / r["image"]).is_file()
        assert r["setup"] in ("rq1", "rq2", "rq3", "as")
        assert r["answer"] in (0, 1)
        for o in (r["object1"], r["object2"]):
            assert {"name", "label_id", "center_xy", "center_xy_canonical", "marker_xy"} <= set(o)
        if r["setup"] != "as":
            src = r["source"]
            assert len(src["ct_sha256"]) == 64 and isinstance(src["slice_index"], int)
            assert r["answer_standard"] in (0, 1) and r["answer_anatomical"] in (0, 1)


def test_dots_start_with_either_colour(ras_out):
    rq3 = [r for r in _rows(ras_out) if r["setup"] == "rq3" and r["marker"] == "dots"]
    first = Counter(r["question"].split()[2] for r in rq3)
    assert first["red"] > 0 and first["blue"] > 0


def test_markers_drawn_at_marker_points(ras_out):
    for r in _rows(ras_out):
        if r["setup"] != "rq2" or r["marker"] != "dots":
            continue
        img = np.asarray(Image.open(ras_out / r["image"]).convert("RGB")).astype(int)
        for o in (r["object1"], r["object2"]):
            x, y = (round(c) for c in o["marker_xy"])
            want = (255, 0, 0) if o["marker_text"] == "red" else (0, 0, 255)
            assert tuple(img[y, x]) == want


def test_refuses_non_empty_out_and_leaves_nothing_on_failure(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    ct, seg = write_case(tmp_path / "in")
    with pytest.raises(FileExistsError):
        build_dataset([Case("c", ct, seg)], CONFIG, out)
    assert (out / "keep.txt").exists()
    bad = tmp_path / "bad.nii.gz"
    bad.write_bytes(b"\x1f\x8b\x08\x00broken")
    target = tmp_path / "never"
    with pytest.raises(ValueError):
        build_dataset([Case("ok", ct, seg), Case("bad", bad, seg)], CONFIG, target)
    # the finished case stays as a shard for the rerun; nothing looks like a dataset
    stage = tmp_path / "never.partial"
    assert not target.exists()
    assert sorted(p.name for p in (stage / "shards").iterdir()) == ["ok"]
    assert not list(stage.rglob("dataset.json")) and not (stage / "dataset").exists()


def test_export_masks_match_shown_frame(tmp_path):
    cfg = GenerateConfig(seed=1, size=SIZE, setups=("rq1",), export_masks=True)
    out = _build(tmp_path, config=cfg)
    for r in _rows(out):
        lab = np.asarray(Image.open(out / r["mask"]))
        for o in (r["object1"], r["object2"]):
            x, y = (round(c) for c in o["center_xy"])
            assert lab[y, x] == o["label_id"]


def test_mirp_reader_reads_our_output_like_the_manifest(ras_out, tmp_path):
    import shutil

    from radspatial.eval.items import load_items

    mirp_only = tmp_path / "mirp_only"
    shutil.copytree(ras_out, mirp_only)
    (mirp_only / "manifest.jsonl").unlink()
    (mirp_only / "dataset.json").unlink()  # a MIRP download has neither
    ours = {(i.setup, i.marker, i.image.name): i for i in load_items(ras_out)}
    theirs = load_items(mirp_only)
    assert len(theirs) == len(ours)
    for t in theirs:
        o = ours[(t.setup, t.marker, t.image.name)]
        assert (t.question, t.expected, t.relation) == (o.question, o.expected, o.relation)
        assert t.transform == o.transform
        if t.setup in ("rq1", "rq2"):
            assert (t.object1, t.object2) == (o.object1, o.object2)


def test_process_pool_gives_the_same_dataset(tmp_path):
    cases = []
    for name in ("one", "two"):
        ct, seg = write_case(tmp_path / "in" / name, name=name)
        cases.append(Case(name, ct, seg))
    serial, pooled = tmp_path / "serial", tmp_path / "pooled"
    build_dataset(cases, CONFIG, serial, workers=1)
    build_dataset(cases, CONFIG, pooled, workers=2)
    assert _tree_hashes(serial) == _tree_hashes(pooled)


@pytest.mark.parametrize(("profile", "min_distance"), [("strict", 50.0), ("mirp", 64.0)])
def test_ablation_on_a_too_small_image_is_a_clear_error(tmp_path, profile, min_distance):
    # strict keeps markers ~36 px (at 512) from the border, mirp lets them come to 5 px: a
    # 64 px page holds mirp's 50 px along an axis (not 64), not strict's 50 px
    ct, seg = write_case(tmp_path / "in")
    rules = QuestionRules(profile=profile, min_distance_px=min_distance)
    cfg = GenerateConfig(size=64, as_count=2, setups=("as",), rules=rules)
    with pytest.raises(ValueError, match="cannot hold two markers"):
        build_dataset([Case("c", ct, seg)], cfg, tmp_path / "out")
    assert not (tmp_path / "out").exists()
