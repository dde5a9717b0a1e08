"""What the image decides (questions/decidability.py, issue 46): the rule on asymmetric
synthetic slices where a wrong side or a wrong landmark reading would be caught, on real slices
(patient A's full scan, the chest slab through its RTSTRUCT), through generate, eval and a
landmark table from outside the package."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from radspatial.core.rules import QuestionRules
from radspatial.questions import QuestionSpec, SliceFacts, get_question_type
from radspatial.questions.decidability import (
    MARKED,
    NAMED,
    Body,
    SliceEvidence,
    decide,
    load_landmarks,
    parse_landmarks,
    partner_name,
)
from radspatial.questions.manifest import ManifestRow
from radspatial.questions.records import Candidate

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
FULL_CT = DATA / "totalseg_example" / "example_ct.nii.gz"
FULL_SEG = DATA / "totalseg_example" / "example_seg_fast_force_split.nii.gz"
CHEST = DATA / "gstt_thorax"
VOCAB = frozenset(
    [
        "femur_left",
        "femur_right",
        "kidney_left",
        "kidney_right",
        "liver",
        "spleen",
        "urinary_bladder",
    ]
    + ["appendix", "rib_left_10", "rib_right_10", "vertebrae_L5", "vertebrae_T12", "colon"]
)
BODY = Body(midline_x=256.0, radius=200.0)


def cand(label_id: int, name: str, x: float, y: float, area: float = 2000.0) -> Candidate:
    """A structure in standard view (variant B1: shown = standard)."""
    return Candidate(label_id, name, (x, y), (x, y), (x, y), area, (x, y))


def mirrored(c: Candidate, size: int = 512) -> Candidate:
    """The same structure in a mirrored view (A1): x reflected in the shown frame only."""
    x, y = c.center_xy
    return replace(c, center_xy=(size - 1 - x, y), marker_xy=(size - 1 - x, y))


def evidence(present, *, plane="axial", landmarks=None, variant="B1") -> SliceEvidence:
    facts = SliceFacts(variant, 512, tuple(present), tuple(present), None, plane)
    return SliceEvidence(facts, VOCAB, BODY, landmarks or load_landmarks(), QuestionRules())


def relpos(a: Candidate, b: Candidate, relation: str) -> QuestionSpec:
    from radspatial.questions.frames import relation_holds

    answer = int(relation_holds(relation, a.center_xy, b.center_xy))
    return QuestionSpec("relative_position", (a, b), relation, answer, answer)


RELPOS = get_question_type("relative_position")
# pelvis: the femurs far apart left/right, the right one a little higher than the left
FEM_R, FEM_L = cand(1, "femur_right", 100, 300), cand(2, "femur_left", 412, 320)
BLADDER = cand(3, "urinary_bladder", 256, 250)


def test_a_side_dependent_pair_without_a_landmark_is_a_coin():
    spec = relpos(FEM_R, BLADDER, "left_of")  # right femur (image left) left of the bladder: yes
    got = decide(RELPOS, spec, evidence([FEM_R, FEM_L, BLADDER]))
    assert (got.decidable, got.reason) == (False, "side-dependent, no landmark in slice")


def test_the_same_answer_under_the_mirror_reading_is_decided_without_landmarks():
    # "Is the right femur below the bladder?": both femurs lie below it, read either way
    spec = relpos(FEM_R, BLADDER, "below")
    got = decide(RELPOS, spec, evidence([FEM_R, FEM_L, BLADDER]))
    assert (got.decidable, got.reason) == (True, "mirror-invariant")
    # but "above the left femur" hangs on which femur is which (300 vs 320 px)
    spec = relpos(FEM_R, FEM_L, "above")
    assert decide(RELPOS, spec, evidence([FEM_R, FEM_L, BLADDER])).decidable is False


def test_a_landmark_on_its_side_decides_and_one_on_the_wrong_side_does_not():
    spec = relpos(FEM_R, BLADDER, "left_of")
    liver = cand(4, "liver", 120, 200)  # patient's right = image left in standard view
    got = decide(RELPOS, spec, evidence([FEM_R, FEM_L, BLADDER, liver]))
    assert (got.decidable, got.reason) == (True, "landmark: liver")
    situs = cand(4, "liver", 392, 200)  # a liver on the patient's left misleads: no landmark
    assert decide(RELPOS, spec, evidence([FEM_R, FEM_L, BLADDER, situs])).decidable is False
    near = cand(4, "liver", 240, 200)  # 0.08 body radii off the midline (< 0.2): not enough
    assert decide(RELPOS, spec, evidence([FEM_R, FEM_L, BLADDER, near])).decidable is False
    speck = cand(4, "liver", 120, 200, area=100)  # below the smallest visible area
    assert decide(RELPOS, spec, evidence([FEM_R, FEM_L, BLADDER, speck])).decidable is False


def test_a_structure_labelled_across_both_sides_is_no_landmark():
    spec = relpos(FEM_R, BLADDER, "left_of")
    colon = cand(5, "colon", 60, 200)  # far to the patient's right: still says nothing
    assert decide(RELPOS, spec, evidence([FEM_R, FEM_L, BLADDER, colon])).decidable is False


def test_the_landmark_reads_the_standard_view_whatever_the_shown_view():
    liver = cand(4, "liver", 120, 200)
    shown = [mirrored(c) for c in (FEM_R, FEM_L, BLADDER, liver)]
    spec = relpos(shown[0], shown[2], "right_of")  # mirrored: the right femur is image right
    got = decide(RELPOS, spec, evidence(shown, variant="A1"))
    assert (got.decidable, got.reason) == (True, "landmark: liver")


def test_a_landmark_outside_its_levels_does_not_count():
    spec = relpos(FEM_R, BLADDER, "left_of")
    liver = cand(4, "liver", 120, 200)
    low = cand(6, "vertebrae_l5", 256, 330)  # the default table's liver: T8-L3 (names as
    # the label tables give them: lower case)
    assert decide(RELPOS, spec, evidence([FEM_R, FEM_L, BLADDER, liver, low])).decidable is False
    high = cand(6, "vertebrae_t12", 256, 330)
    assert decide(RELPOS, spec, evidence([FEM_R, FEM_L, BLADDER, liver, high])).decidable


def test_markers_pin_the_regions_but_not_the_names():
    spec = relpos(FEM_R, BLADDER, "left_of")
    assert decide(RELPOS, spec, evidence([FEM_R, FEM_L, BLADDER]), MARKED).decidable is True
    ident = get_question_type("identification")
    named = QuestionSpec("identification", (FEM_R,), "identification", "right femur", None)
    got = decide(ident, named, evidence([FEM_R, FEM_L, BLADDER]), MARKED)
    assert got.decidable is False  # the marked femur could be either, without a landmark


def test_a_lone_sided_structure_is_the_one_the_question_names():
    spec = relpos(FEM_R, BLADDER, "left_of")  # no left femur in this slice
    got = decide(RELPOS, spec, evidence([FEM_R, BLADDER]), NAMED)
    assert (got.decidable, got.reason) == (True, "mirror-invariant")


def test_the_views_handedness_needs_a_landmark_except_on_sagittal_views():
    orient = get_question_type("orientation")
    spec = QuestionSpec("orientation", (), "mirrored", 1, 0)
    assert decide(orient, spec, evidence([FEM_R, FEM_L, BLADDER])).decidable is False
    liver = cand(4, "liver", 120, 200)
    assert decide(orient, spec, evidence([FEM_R, FEM_L, BLADDER, liver])).decidable is True
    sagittal = decide(orient, spec, evidence([BLADDER], plane="sagittal"))
    assert sagittal.decidable is True and "sagittal" in sagittal.reason


def test_every_side_dependent_type_rereads_its_answer():
    kid_r, kid_l = cand(7, "kidney_right", 150, 300, 900), cand(8, "kidney_left", 362, 300, 1500)
    symmetry = get_question_type("symmetry")
    spec = QuestionSpec("symmetry", (kid_l, kid_r), "larger_than", 1, 1)
    assert decide(symmetry, spec, evidence([kid_r, kid_l])).decidable is False
    lat = get_question_type("laterality")
    spec = QuestionSpec("laterality", (kid_r,), "laterality", "left", "left")
    assert decide(lat, spec, evidence([kid_r, kid_l])).decidable is False
    spec = QuestionSpec("laterality", (BLADDER,), "laterality", "left", "left")  # unsided
    assert decide(lat, spec, evidence([kid_r, kid_l, BLADDER])).reason == "no sided structure"


def test_a_type_that_cannot_reread_leaves_the_item_unknown():
    class Opaque(type(RELPOS)):
        name = "opaque_test_type"

        def mirrored_answer(self, spec, seen):
            return None

    got = decide(Opaque(), relpos(FEM_R, BLADDER, "left_of"), evidence([FEM_R, FEM_L, BLADDER]))
    assert got.decidable is None and "cannot re-read" in got.reason


def test_side_words_anywhere_in_a_name_have_partners():
    assert partner_name("rib_left_10", VOCAB) == "rib_right_10"
    assert partner_name("kidney_left", VOCAB) == "kidney_right"
    assert partner_name("lung_middle_lobe_right", VOCAB) is None  # no left twin in the table
    assert partner_name("liver", VOCAB) is None


def test_a_landmark_table_from_outside_the_package(tmp_path):
    table = tmp_path / "my_landmarks.json"
    entry = {"structure": "appendix", "side": "right", "offset": 0.2, "area": 100}
    table.write_text(json.dumps({"name": "mine", "landmarks": [entry | {"source": "own"}]}))
    spec = relpos(FEM_R, BLADDER, "left_of")
    appendix = cand(9, "appendix", 150, 260)
    assert decide(RELPOS, spec, evidence([FEM_R, FEM_L, BLADDER, appendix])).decidable is False
    mine = load_landmarks(table)
    got = decide(RELPOS, spec, evidence([FEM_R, FEM_L, BLADDER, appendix], landmarks=mine))
    assert (got.decidable, got.reason) == (True, "landmark: appendix")


_OK = {"structure": "liver", "side": "right", "offset": 0.2, "area": 1, "source": "x"}


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"side": "up"}, "'side'"),
        ({"offset": "far"}, "'offset'"),
        ({"offset": float("nan")}, "'offset'"),
        ({"area": -1}, "'area'"),
        ({"structure": "li ver"}, "'structure'"),
        ({"source": ""}, "'source'"),
        ({"levels": ["L3", "T8"]}, "'levels'"),
    ],
)
def test_a_bad_landmark_entry_is_named(change, words):
    with pytest.raises(ValueError, match=f"t.json: landmarks\\[0\\]: {words}"):
        parse_landmarks({"landmarks": [_OK | change]}, "t.json")
    assert parse_landmarks({"landmarks": [_OK]}, "t.json").of("liver") is not None


def test_old_manifest_rows_read_as_unknown_not_decidable():
    row = {"id": "rq1/none/a/q0", "setup": "rq1", "marker": "none", "image": "a.png"}
    old = ManifestRow.from_json(row | {"question": "Is the liver above the spleen?", "answer": 1})
    assert old.decidable is None and "decidable" not in old.to_json()


# --- real slices ---------------------------------------------------------------------------------


def _generate(out: Path, *args: str) -> dict:
    cmd = [sys.executable, "-m", "radspatial.cli", "generate", "--out", str(out), "--setups", "rq1"]
    cmd += ["--markers", "numbers", "--as-count", "0", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(x) for x in (out / "manifest.jsonl").read_text().splitlines()]
    meta = json.loads((out / "dataset.json").read_text())
    return {"rows": rows, "stdout": done.stdout, "meta": meta, "out": out}


def _centres(out: Path) -> dict[str, dict[str, tuple[float, float]]]:
    from radspatial.bench.mirp import MIRP_CENTRES

    entries = json.loads((out / MIRP_CENTRES).read_text())
    return {
        e["filename"]: {i["class_name"]: (i["center_x"], i["center_y"]) for i in e["label_info"]}
        for e in entries
    }


@pytest.fixture(scope="module")
def full_scan(tmp_path_factory):
    out = tmp_path_factory.mktemp("full") / "ds"
    return _generate(out, "--ct", str(FULL_CT), "--seg", str(FULL_SEG), "--seed", "3")


def _flips(row: dict, centres: dict[str, tuple[float, float]]) -> bool:
    """Independent of the rule's code: the answer with each sided structure moved to where its
    partner lies in this slice (MIRP's centres file, standard view -> the shown view)."""
    from radspatial.bench.mirp import class_name
    from radspatial.imaging.slices import Variant

    points = []
    for obj in (row["object1"], row["object2"]):
        name = obj["name"]
        twin = (
            name.replace("_left", "_RIGHT").replace("_right", "_left").replace("_RIGHT", "_right")
        )
        key = class_name(twin.replace("_", " ")) if twin != name else None
        if key in centres:
            points.append(Variant(row["transform"]).apply_point(centres[key], 512))
        else:
            points.append(tuple(obj["center_xy"]))
    axis = 0 if row["relation"] in ("left_of", "right_of") else 1
    smaller = points[0][axis] < points[1][axis]
    holds = smaller if row["relation"] in ("left_of", "above") else not smaller
    return int(holds) != row["answer"]


def test_patient_as_full_scan_undecidable_items_flip_and_decided_ones_do_not(full_scan):
    rows = full_scan["rows"]
    assert len(rows) == 112
    undecided = [r for r in rows if r["decidable"] is False]
    assert len(undecided) == 36  # the count: slices with no liver, spleen, ... or IVC
    assert full_scan["meta"]["decidability"]["by_setup"]["rq1/none"]["undecidable"] == 36
    assert "decidable from the image: rq1 76 of 112" in full_scan["stdout"]
    centres = _centres(full_scan["out"])
    landmarks = {m.structure for m in load_landmarks().landmarks}
    for r in rows:
        shown = centres[Path(r["image"]).name]
        flips = _flips(r, shown)
        if r["decidable"] is False:
            assert flips, r["id"]  # a coin: the mirror reading gives the other answer
            assert not landmarks & set(shown), r["id"]  # and no landmark is in the slice
        elif r["decidable_reason"] in ("mirror-invariant", "no sided structure"):
            assert not flips, r["id"]
        else:  # decided by a landmark the slice shows
            assert r["decidable_reason"].startswith("landmark: ")
            named = r["decidable_reason"].removeprefix("landmark: ").split(", ")
            assert set(named) <= landmarks & set(shown), r["id"]


def test_the_chest_slab_fixes_its_sides_from_the_heart(tmp_path):
    rtstruct = CHEST / "rtstruct" / "rt-struct-test-data-81-100.dcm"
    got = _generate(tmp_path / "chest", "--ct", str(CHEST / "ct_dicom"), "--seg", str(rtstruct),
                    "--labels", "totalsegmentator", "--seed", "3")  # fmt: skip
    rows = got["rows"]
    assert rows and all(r["decidable"] for r in rows)
    by_landmark = [r for r in rows if r["decidable_reason"].startswith("landmark")]
    assert by_landmark and all("heart_" in r["decidable_reason"] for r in by_landmark)


def test_generate_only_keeps_decidable_items_balanced(tmp_path):
    got = _generate(tmp_path / "only", "--ct", str(FULL_CT), "--seg", str(FULL_SEG), "--seed", "3",
                    "--decidable", "only")  # fmt: skip
    rows = got["rows"]
    assert rows and all(r["decidable"] for r in rows)
    assert sum(r["answer"] for r in rows) * 2 == len(rows)
    assert got["meta"]["config"]["decidable"] == "only"
    assert got["meta"]["decidability"]["by_setup"]["rq1/none"]["decidable_balanced"] is True
