"""SPAR-VQA: Level 3 probe types as generator question types, posed by the evaluator, answered
by the agent. Geometry is checked on asymmetric inputs in all eight rotation/flip variants."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from radspatial.agent.pipeline.agent import Agent
from radspatial.agent.pipeline.parse import parse_question
from radspatial.agent.pipeline.types import Context, Found
from radspatial.bench.dataset import build_dataset
from radspatial.bench.generate import GenerateConfig
from radspatial.eval.items import load_items
from radspatial.eval.prompts import MIRP, example_question
from radspatial.eval.runner import EvalConfig, run_eval
from radspatial.imaging.markers import Mark, draw_marks
from radspatial.imaging.slices import VARIANTS, Variant
from radspatial.imaging.volumes import Case
from radspatial.models.base import Request
from radspatial.models.baselines import Baseline, builtin_atlas, builtin_atlases
from radspatial.questions import (
    SPAR_VQA,
    Candidate,
    QuestionRules,
    SliceFacts,
    Wording,
    chance_levels,
    get_question_type,
    list_question_types,
)
from radspatial.questions.count import count_regions, verify_count
from radspatial.questions.distance import verify_distance
from radspatial.questions.size import verify_size

RULES = QuestionRules()


def cand(label_id, name, xy, area, marker_xy=None):
    return Candidate(label_id, name, xy, xy, marker_xy or xy, area)


def test_every_type_registered_with_chance():
    from radspatial.questions import OPEN, SPAR_TABLE2

    everything = set(SPAR_VQA) | set(OPEN) | set(SPAR_TABLE2) | {"relative_position"}
    assert everything == set(list_question_types())
    binary = [n for n in list_question_types() if n not in OPEN and n not in SPAR_TABLE2]
    assert {n: chance_levels()[n] for n in binary} == {name: 0.5 for name in binary}


# ------------------------------------------------------------------ question types (pure)


def test_size_and_symmetry_answers_follow_areas():
    cands = (
        cand(2, "kidney_right", (100.0, 300.0), 900.0),
        cand(3, "kidney_left", (400.0, 300.0), 1400.0),
        cand(5, "liver", (120.0, 200.0), 9000.0),
    )
    facts = SliceFacts("B1", 512, cands)
    for name, paired in (("symmetry", True), ("size", False)):
        qt = get_question_type(name)
        for seed in range(20):
            for target in (0, 1):
                spec = qt.propose(facts, target, np.random.default_rng(seed), RULES)
                a, b = spec.objects
                assert ({a.name, b.name} == {"kidney_left", "kidney_right"}) == paired
                bigger = a.area_px > b.area_px
                truth = bigger if spec.relation == "larger_than" else not bigger
                assert spec.answer == target == int(truth) == spec.answer_standard
                assert spec.answer_anatomical == spec.answer


def test_size_skips_near_equal_areas():
    cands = (
        cand(2, "kidney_right", (100.0, 300.0), 1000.0),
        cand(3, "kidney_left", (400.0, 300.0), 1050.0),
    )
    facts = SliceFacts("B1", 512, cands)
    assert get_question_type("symmetry").propose(facts, 1, np.random.default_rng(0), RULES) is None


def test_distance_needs_agreeing_centres_and_markers():
    a = cand(1, "spleen", (100.0, 100.0), 500.0)
    near = cand(2, "kidney_left", (100.0, 200.0), 500.0)
    far = cand(3, "liver", (400.0, 100.0), 500.0)
    facts = SliceFacts("B1", 512, (a, near, far))
    qt = get_question_type("distance")
    for seed in range(20):
        for target in (0, 1):
            spec = qt.propose(facts, target, np.random.default_rng(seed), RULES)
            anchor, first, second = spec.objects
            d1 = math.dist(anchor.center_xy, first.center_xy)
            d2 = math.dist(anchor.center_xy, second.center_xy)
            truth = d1 < d2 if spec.relation == "closer_to" else d1 > d2
            assert spec.answer == target == int(truth)
    # a concave structure whose marker point reverses the comparison is never asked about
    odd = cand(3, "liver", (400.0, 100.0), 500.0, marker_xy=(100.0, 150.0))
    facts = SliceFacts("B1", 512, (a, near, odd))
    assert qt.propose(facts, 1, np.random.default_rng(0), RULES) is None


def test_count_regions_and_specks():
    assert count_regions([500.0, 300.0, 41.0], 40.0) == 3
    assert count_regions([500.0, 5.0], 40.0) == 1  # a speck far below the threshold
    assert count_regions([500.0, 30.0], 40.0) is None  # near the threshold: not asked
    colon = cand(9, "colon", (200.0, 200.0), 2000.0)
    facts = SliceFacts("B1", 512, (), (colon,), lambda i: [900.0, 700.0, 400.0])
    qt = get_question_type("count")
    asked = Counter()
    for seed in range(40):
        for target in (0, 1):
            spec = qt.propose(facts, target, np.random.default_rng(seed), RULES)
            assert spec.answer == target == int(spec.params["n"] == 3)
            asked[spec.params["n"]] += 1
    assert set(asked) == {2, 3, 4}


def test_orientation_variant_follows_target():
    qt = get_question_type("orientation")
    rng = np.random.default_rng(0)
    seen = set()
    for _ in range(64):
        for target in (0, 1):
            code = qt.choose_variant(target, "B1", rng)
            assert Variant(code).flip == bool(target)
            spec = qt.propose(SliceFacts(code, 512, ()), target, rng, RULES)
            assert (spec.answer, spec.answer_standard, spec.answer_anatomical) == (target, 0, None)
            seen.add(code)
    assert seen == set(VARIANTS)


# ------------------------------------------------------------------ wording and parsing

WORDINGS = [
    ("rq1", "none", ()),
    ("rq2", "numbers", ("12", "3", "86")),
    ("rq2", "letters", ("AB", "DH", "AE")),
    ("rq2", "dots", ("red", "green", "blue")),
    ("rq3", "numbers", ("12", "3", "86")),
    ("rq3", "letters", ("AB", "DH", "AE")),
    ("rq3", "dots", ("blue", "red", "green")),
]
NAMES = ("left kidney", "liver", "right autochthon")
SNAKE = ("kidney_left", "liver", "autochthon_right")


ASKED = [
    ("size", "larger_than", {}),
    ("size", "smaller_than", {}),
    ("symmetry", "larger_than", {}),
    ("distance", "closer_to", {}),
    ("distance", "farther_from", {}),
    ("count", "count", {"n": 3}),
    ("orientation", "mirrored", {}),
]


@pytest.mark.parametrize(
    ("qtype", "relation", "params", "setup", "marker", "marks"),
    [
        (*asked, *wording)
        for asked in ASKED
        for wording in WORDINGS
        if wording[0] in get_question_type(asked[0]).setups
    ],
)
def test_generated_wording_parses_back(qtype, relation, params, setup, marker, marks):
    from radspatial.questions import QuestionSpec

    qt = get_question_type(qtype)
    k = qt.n_objects
    wording = Wording(setup, marker, NAMES[:k], marks[:k])
    text = qt.text(QuestionSpec(qtype, (), relation, 1, 1, params), wording)
    parsed = parse_question(text)
    kind = "size" if qtype == "symmetry" else qtype
    assert (parsed.kind, parsed.relation, parsed.params) == (kind, relation, params), text
    assert len(parsed.refs) == k
    for i, ref in enumerate(parsed.refs):
        assert ref.name == (None if setup == "rq3" else SNAKE[i]), text
        assert ref.text == (marks[i] if setup != "rq1" else None), text


def test_paraphrases_parse():
    cases = {
        "Is the liver bigger than the spleen?": ("size", "larger_than", 2),
        "Does the colon appear as exactly two separate regions?": ("count", "count", 1),
        "Are there exactly 3 separate regions of the small bowel in this image?": (
            "count",
            "count",
            1,
        ),
        "Is the spleen nearer to the aorta than to the liver?": ("distance", "closer_to", 3),
        "Is the spleen further away from the aorta than from the liver?": (
            "distance",
            "farther_from",
            3,
        ),
        "Is this slice a mirror image?": ("orientation", "mirrored", 0),
        "Is the liver further up than the spleen?": ("relative_position", "above", 2),
    }
    for q, (kind, relation, n) in cases.items():
        p = parse_question(q)
        assert (p.kind, p.relation, len(p.refs)) == (kind, relation, n), q


def test_prompt_examples_match_the_type_and_keep_mirp_verbatim():
    assert example_question("rq1", "none") == "Is the aorta above the spleen?"
    assert example_question("rq3", "letters") == "Are the letters BZ above the letters AA?"
    assert example_question("as", "numbers") == "Is the number 52 above the number 1?"
    for qtype in set(SPAR_VQA) - {"orientation"}:
        ex = example_question("rq1", "none", qtype)
        assert parse_question(ex).kind in ("size", "distance", "count", "relative_position")
    assert "closer to" in example_question("rq3", "dots", "distance")


# ------------------------------------------------------------------ verifiers


def F(x, y, **details):
    return Found((x, y), 1.0, "test", details)


def test_verifiers_and_their_abstentions():
    assert verify_size("larger_than", F(0, 0, area_px=200), F(9, 9, area_px=100)).answer == 1
    assert verify_size("smaller_than", F(0, 0, area_px=200), F(9, 9, area_px=100)).answer == 0
    assert verify_size("larger_than", F(0, 0, area_px=100), F(9, 9, area_px=103)).answer is None
    assert "no areas" in verify_size("larger_than", F(0, 0), F(9, 9)).reason
    assert verify_distance("closer_to", F(0, 0), F(0, 50), F(0, 200)).answer == 1
    assert verify_distance("farther_from", F(0, 0), F(0, 50), F(0, 200)).answer == 0
    assert verify_distance("closer_to", F(0, 0), F(0, 50), F(0, 55)).answer is None
    assert verify_distance("closer_to", F(0, 0), None, F(0, 55)).reason == "first not found"
    assert verify_count(2, F(0, 0, component_areas=[500, 300, 3])).answer == 1
    assert verify_count(3, F(0, 0, component_areas=[500, 300, 3])).answer == 0
    assert verify_count(2, F(0, 0, component_areas=[500, 30])).answer is None


def _ids():
    from radspatial.core.labels import load_table

    names = load_table("totalsegmentator", group=False).names
    ids = {n: i for i, n in names.items()}
    return names, ids["kidney_right"], ids["kidney_left"], ids["vertebrae_l1"], ids["colon"]


def _with_back_muscles_only(lab):
    """The slice without its spine but with the autochthon pair beside where it was."""
    names, *_, spine, _ = _ids()
    ids = {n: i for i, n in names.items()}
    out = lab.copy()
    out[out == spine] = 0
    yy, xx = np.mgrid[: lab.shape[0], : lab.shape[1]]
    out[(xx - 146) ** 2 + (yy - 185) ** 2 <= 9**2] = ids["autochthon_left"]
    out[(xx - 110) ** 2 + (yy - 185) ** 2 <= 9**2] = ids["autochthon_right"]
    return out


def _canonical_slice(size=256):
    """Standard-view label image + grey image: right kidney on the image left, left kidney on
    the image right (smaller), spine at the bottom centre, colon in two pieces."""
    _, kr, kl, spine, colon = _ids()
    yy, xx = np.mgrid[:size, :size]
    lab = np.zeros((size, size), np.uint16)
    body = ((xx - 128) / 110.0) ** 2 + ((yy - 120) / 90.0) ** 2 <= 1
    lab[(xx - 70) ** 2 + (yy - 150) ** 2 <= 18**2] = kr
    lab[(xx - 190) ** 2 + (yy - 150) ** 2 <= 14**2] = kl
    lab[(xx - 128) ** 2 + (yy - 175) ** 2 <= 12**2] = spine
    lab[(xx - 100) ** 2 + (yy - 70) ** 2 <= 8**2] = colon  # piece 1
    lab[(xx - 160) ** 2 + (yy - 70) ** 2 <= 8**2] = colon  # piece 2
    grey = np.where(body, 120, 0).astype(np.uint8)
    grey[lab > 0] = 180
    return lab, np.repeat(grey[:, :, None], 3, axis=2)


@pytest.mark.parametrize("code", VARIANTS)
def test_agent_answers_orientation_symmetry_count_in_every_variant(code):
    lab, rgb = _canonical_slice()
    v = Variant(code)
    shown_lab, shown = v.apply_image(lab), v.apply_image(rgb)
    names = _ids()[0]
    ctx = Context(mask=np.ascontiguousarray(shown_lab), labels=names)
    agent = Agent("mask")
    q = get_question_type("orientation").text(None, None)
    res = agent.answer(shown, q, context=ctx)
    assert res.answer == int(v.flip), res.trace["decision"]
    assert (
        agent.answer(shown, "Is the left kidney larger than the right kidney?", context=ctx).answer
        == 0
    )
    count = "Is the number of separate regions of the colon in this image exactly 2?"
    assert agent.answer(shown, count, context=ctx).answer == 1


@pytest.mark.parametrize("code", VARIANTS)
def test_orientation_from_back_muscles_where_no_spine_is_labelled(code):
    lab, rgb = _canonical_slice()
    v = Variant(code)
    shown_lab = np.ascontiguousarray(v.apply_image(_with_back_muscles_only(lab)))
    ctx = Context(mask=shown_lab, labels=_ids()[0])
    res = Agent("mask").answer(v.apply_image(rgb), "Is this image mirrored?", context=ctx)
    assert res.answer == int(v.flip), res.trace["decision"]
    assert res.trace["decision"]["measured"]["posterior_from"] == "autochthon midpoint"


def test_orientation_abstains_without_a_spine():
    lab, rgb = _canonical_slice()
    names, *_, spine, _ = _ids()
    lab[lab == spine] = 0
    ctx = Context(mask=lab, labels=names)
    res = Agent("mask").answer(rgb, "Is this image mirrored?", context=ctx)
    assert res.answer is None and "spine" in res.text


def test_markers_agent_reads_three_dots_for_distance():
    img = np.full((512, 512, 3), 60, np.uint8)
    marks = [
        Mark("dots", "red", (100, 100)),
        Mark("dots", "green", (120, 300)),
        Mark("dots", "blue", (400, 120)),
    ]
    shown = draw_marks(img, marks)
    agent = Agent("markers")
    assert (
        agent.answer(shown, "Is the red dot closer to the blue dot than to the green dot?").answer
        == 0
    )
    assert (
        agent.answer(
            shown, "Is the red dot farther from the blue dot than from the green dot?"
        ).answer
        == 1
    )
    # markers alone give no areas: the agent abstains rather than guess
    size = agent.answer(
        shown,
        "Is the structure marked by the red dot larger than the structure marked by the blue dot?",
    )
    assert size.answer is None and "no areas" in size.text


def test_anatomy_prior_on_spar_types():
    prior = Baseline("baseline:anatomy-prior", "anatomy-prior", builtin_atlases(), "built-in")
    req = Request("k", "p", b"", {"question_type": "orientation", "relation": "mirrored"})
    assert prior.answer(req) == "0"
    meta = {
        "question_type": "distance",
        "relation": "closer_to",
        "object1": "spleen",
        "object2": "kidney_left",
        "object3": "liver",
    }
    atlas = builtin_atlas()
    d1 = math.dist(atlas["spleen"], atlas["kidney_left"])
    d2 = math.dist(atlas["spleen"], atlas["liver"])
    assert prior.answer(Request("k", "p", b"", meta)) == str(int(d1 < d2))
    size = {
        "question_type": "size",
        "relation": "larger_than",
        "object1": "liver",
        "object2": "spleen",
    }
    assert prior.answer(Request("k", "p", b"", size)) in ("0", "1")  # a coin: no areas in the atlas


# ------------------------------------------------------------------ end to end on the real CT


@pytest.fixture(scope="module")
def spar_dataset(tmp_path_factory) -> Path:
    from radspatial.cli import bundled_example

    ct, seg = bundled_example()
    out = tmp_path_factory.mktemp("spar") / "ds"
    cfg = GenerateConfig(
        seed=3,
        size=256,
        setups=("rq1", "rq2", "rq3"),
        markers=("numbers", "dots"),
        question_types=("relative_position", *SPAR_VQA),
        export_masks=True,
        # the SPAR-VQA types' marker checks assume interior markers (strict); under mirp a
        # concave structure's marker is its centre of mass, outside it
        rules=QuestionRules(profile="strict"),
    )
    build_dataset([Case("example_ct_sm", ct, seg)], cfg, out)
    return out


def test_generated_spar_dataset_is_balanced_and_recorded(spar_dataset):
    rows = [json.loads(x) for x in (spar_dataset / "manifest.jsonl").read_text().splitlines()]
    meta = json.loads((spar_dataset / "dataset.json").read_text())
    by = Counter((r["question_type"], r["setup"], r["marker"], r["answer"]) for r in rows)
    for qtype in ("relative_position", *SPAR_VQA):
        setups = get_question_type(qtype).setups
        for setup, marker in (("rq1", "none"), ("rq2", "numbers"), ("rq3", "dots")):
            yes, no = by[(qtype, setup, marker, 1)], by[(qtype, setup, marker, 0)]
            if setup in setups:
                assert yes == no > 0, (qtype, setup)
            else:
                assert yes == no == 0, (qtype, setup)
        assert meta["question_types"][qtype]["chance"] == 0.5
    assert meta["config"]["question_types"][0] == "relative_position"
    orient = [r for r in rows if r["question_type"] == "orientation"]
    assert {r["answer"] for r in orient if r["transform"].startswith("A")} == {1}
    assert {r["answer"] for r in orient if r["transform"].startswith("B")} == {0}
    dist = next(r for r in rows if r["question_type"] == "distance" and r["marker"] == "dots")
    assert {dist[f"object{k}"]["marker_text"] for k in (1, 2, 3)} == {"red", "blue", "green"}
    mirp = json.loads((spar_dataset / "RQ1" / "qa.json").read_text())
    kinds = Counter(
        q.get("question_type", "relative_position") for e in mirp for q in e["question_answer"]
    )
    assert set(kinds) == {"relative_position", *SPAR_VQA}


def test_relative_position_rows_unchanged_by_other_types(spar_dataset, tmp_path):
    from radspatial.cli import bundled_example

    ct, seg = bundled_example()
    rules = QuestionRules(profile="strict")
    cfg = GenerateConfig(seed=3, size=256, setups=("rq1",), export_masks=True, rules=rules)
    alone = tmp_path / "alone"
    build_dataset([Case("example_ct_sm", ct, seg)], cfg, alone)
    rows = (alone / "manifest.jsonl").read_text().splitlines()
    mixed = [
        x
        for x in (spar_dataset / "manifest.jsonl").read_text().splitlines()
        if '"relative_position"' in x and '"rq1"' in x
    ]
    assert rows == mixed


def test_mask_oracle_and_markers_agent_through_the_evaluator(spar_dataset, tmp_path):
    rows = run_eval(
        spar_dataset, tmp_path / "mask", EvalConfig(model="agent:mask", runs=1), progress=False
    )
    wrong = [(r["id"], r["reply"]) for r in rows if not r["correct"]]
    assert rows and wrong == []  # every type, setup and marker
    metrics = json.loads((tmp_path / "mask" / "metrics.json").read_text())
    by = metrics["by_question_type"]
    assert set(by) == {"relative_position", *SPAR_VQA}
    assert all(g["accuracy_mean"] == 1.0 and g["chance"] == 0.5 for g in by.values())
    # the prompt the model sees carries a same-type example
    count_item = next(i for i in load_items(spar_dataset) if i.question_type == "count")
    assert "separate regions" in MIRP.render(count_item).split("Now answer")[0]


def test_report_has_question_type_table_and_figure(spar_dataset, tmp_path):
    from radspatial.reports.build import build_report

    runs = []
    for model in ("agent:mask", "baseline:anatomy-prior"):
        run_dir = tmp_path / model.replace(":", "_")
        run_eval(spar_dataset, run_dir, EvalConfig(model=model, runs=2), progress=False)
        runs.append(run_dir)
    rep = build_report(runs, tmp_path / "report")
    md = rep.summary_md.read_text()
    assert "## Question types" in md and "| chance | 50.0 |" in md
    assert "agent:mask (oracle): question type by setup and marker" in md
    assert (tmp_path / "report" / "question_types.png").stat().st_size > 10_000


def test_cli_question_type_selection(tmp_path, capsys):
    from radspatial.cli import main
    from radspatial.cli.common import question_types as _question_types

    assert _question_types("spar-binary") == SPAR_VQA  # the earlier SPAR-VQA group
    assert _question_types("relative_position,all")[0] == "relative_position"
    # 6 yes/no types + 4 open types (issue 16) + the 5 Table 2 types (issue 21)
    assert len(_question_types("all")) == 15
    assert _question_types("open") == ("laterality", "direction", "identification", "counting")
    with pytest.raises(SystemExit) as exc:
        main(["generate", "--out", str(tmp_path / "x"), "--questions", "sizes"])
    assert exc.value.code == 2
    assert "unknown question type 'sizes'" in capsys.readouterr().err


def test_mirp_layout_copy_keeps_question_types(spar_dataset, tmp_path):
    import shutil

    copy = tmp_path / "mirp_layout"
    shutil.copytree(
        spar_dataset, copy, ignore=shutil.ignore_patterns("manifest.jsonl", "dataset.json")
    )
    from_mirp = Counter(i.question_type for i in load_items(copy))
    from_manifest = Counter(i.question_type for i in load_items(spar_dataset))
    assert from_mirp == from_manifest and set(from_mirp) == {"relative_position", *SPAR_VQA}


def test_eval_filters_question_types(spar_dataset, tmp_path):
    config = EvalConfig(model="baseline:yes", runs=1, question_types=("count", "orientation"))
    rows = run_eval(spar_dataset, tmp_path / "run", config, progress=False)
    assert {r["question_type"] for r in rows} == {"count", "orientation"}
    info = json.loads((tmp_path / "run" / "run.json").read_text())
    assert info["question_types"] == ["count", "orientation"]


def test_dataset_label_names_are_known_to_the_parser():
    from radspatial.agent.pipeline.types import ParseError

    with pytest.raises(ParseError, match="unknown structure 'mass'"):
        parse_question("Is the mass larger than the liver?")
    parsed = parse_question("Is the mass larger than the liver?", names=["mass", "liver"])
    assert [r.name for r in parsed.refs] == ["mass", "liver"]
    lab = np.zeros((64, 64), np.uint16)
    lab[5:25, 5:25], lab[40:50, 40:50] = 200, 5
    ctx = Context(mask=lab, labels={200: "mass", 5: "liver"})
    grey = np.full((64, 64, 3), 100, np.uint8)
    assert Agent("mask").answer(grey, "Is the mass larger than the liver?", context=ctx).answer == 1
