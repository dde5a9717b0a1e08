"""A marker style has one home: a new one is registered from this test module alone.

"codes" (a capital and a digit: label id 52 -> "F2", "the code F2") is defined here and
nowhere else; the generator, the wording of every question type, the in-context examples, the
parser, the mask and markers localizers, the MIRP json, the scorer and the report all take it
from the registry. The test generates the bundled CT with it, evaluates the mask oracle, the
glyph-reading agent and a baseline, and checks wording and parsing.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from string import ascii_uppercase, digits

import numpy as np
import pytest

from radspatial.imaging.markers import (
    MARKER_STYLES,
    MARKER_TYPES,
    MarkerStyle,
    marker_names,
    register_marker_style,
)

SRC = Path(__file__).resolve().parents[1] / "src" / "radspatial"


def _code(label_id: int) -> str:
    return ascii_uppercase[label_id // 10] + str(label_id % 10)


def _label(text: str) -> int | None:
    text = text.strip().upper()
    if not re.fullmatch(r"[A-Z]\d", text):
        return None
    label_id = 10 * ascii_uppercase.index(text[0]) + int(text[1])
    return label_id or None


def _blank(rng: np.random.Generator) -> tuple[str, str]:
    a, b = rng.choice(np.arange(1, 118), size=2, replace=False)
    return _code(int(a)), _code(int(b))


def _classify(text: str, strict: bool) -> str | None:
    return text.upper() if re.fullmatch(r"[A-Z]\d" if strict else r"[A-Za-z]\d", text) else None


CODES = MarkerStyle(
    name="codes",
    phrase="the code {}",
    examples=("F2", "A1", "A7"),
    texts=lambda label_ids, colours: tuple(_code(i) for i in label_ids),
    blank_texts=_blank,
    reference=r"code\s+([a-z]\d)",
    token=r"[a-z]\d",
    classify=_classify,
    nouns=("code",),
    label_of=_label,
    how="marker-code",
    glyphs=(ascii_uppercase, digits, (2,)),
)


@pytest.fixture(scope="module")
def codes():
    register_marker_style(CODES)
    yield CODES
    MARKER_STYLES.remove(CODES.name)  # leave the registry as the other tests expect it


def test_wording_examples_and_parsing_come_from_the_style(codes):
    from radspatial.agent.pipeline.parse import parse_question
    from radspatial.agent.pipeline.types import ParseError, Ref
    from radspatial.eval.prompts import example_question, open_example
    from radspatial.questions import QuestionSpec, Wording, get_question_type
    from radspatial.questions.relative_position import marker_question

    # MIRP's three, then the others by name (box, contour, point: imaging/marker_prompts.py)
    assert marker_names() == (*MARKER_TYPES, "box", "codes", "contour", "point")
    question = marker_question("codes", "F2", "above", "A1")
    assert question == "Is the code F2 above the code A1?"
    assert example_question("rq3", "codes") == "Is the code F2 above the code A1?"
    assert example_question("rq2", "codes", answer=0) == "Is the aorta (F2) below the spleen (A1)?"
    text, _ = open_example("x", "rq3", "codes", "identification")
    assert text == "Which structure does the code A1 mark?"
    wording = Wording("rq3", "codes", ("aorta", "spleen", "liver"), ("F2", "A1", "A7"))
    distance = get_question_type("distance").text(
        QuestionSpec("distance", (), "closer_to", 1, 1), wording
    )
    assert distance == "Is the code F2 closer to the code A1 than to the code A7?"
    size = get_question_type("size").text(QuestionSpec("size", (), "larger_than", 1, 1), wording)
    assert size.startswith("Is the structure marked by the code F2 larger than the structure")
    direction = get_question_type("direction").text(
        QuestionSpec("direction", (), "direction", "left", "left"), wording
    )
    assert direction.startswith("Where is the code F2 relative to the code A1")

    refs = parse_question(question).refs
    assert refs == (
        Ref(name=None, marker="codes", text="F2", phrase="the code F2"),
        Ref(name=None, marker="codes", text="A1", phrase="the code A1"),
    )
    named = parse_question("Is the aorta (F2) to the left of the spleen (A1)?").refs
    assert [(r.name, r.marker, r.text) for r in named] == [
        ("aorta", "codes", "F2"),
        ("spleen", "codes", "A1"),
    ]
    with pytest.raises(ParseError, match="unknown structure 'spleen a1'"):  # strict: capitals
        parse_question("Is the aorta (F2) to the left of the spleen (a1)?")
    assert parse_question("Is marker b7 below the code C3?").refs[0].text == "B7"
    for text, kind in ((distance, "distance"), (size, "size")):
        parsed = parse_question(text)
        assert parsed.kind == kind
        assert [r.text for r in parsed.refs] == ["F2", "A1", "A7"][: len(parsed.refs)]
        assert {r.marker for r in parsed.refs} == {"codes"}


def test_scoring_and_report_order_ask_the_registry(codes):
    from radspatial.questions.yesno_reading import _value_at
    from radspatial.reports.build import _rank

    # a digit after a style's noun is a label ("code 1"), not an answer ("cake 1" is)
    assert _value_at([("code", 0), ("1", 5)], 1) is None
    assert _value_at([("cake", 0), ("1", 5)], 1) == 1
    assert _rank("rq3/codes") < _rank("rq3/dots")  # registered styles by name, after "none"


def test_generate_options_take_the_registered_styles(codes):
    import inspect

    from radspatial import api
    from radspatial.bench.generate import GenerateConfig
    from radspatial.cli import build_parser

    assert GenerateConfig(markers=("codes",)).markers == ("codes",)
    with pytest.raises(ValueError, match="subset of .*'codes'"):
        GenerateConfig(markers=("runes",))
    generate = build_parser()._subparsers._group_actions[0].choices["generate"]
    assert "codes" in generate.format_help()
    assert inspect.signature(api.generate).parameters["markers"].default == MARKER_TYPES


def test_generate_and_evaluate_a_new_style(codes, tmp_path):
    from radspatial.bench.dataset import build_dataset
    from radspatial.bench.generate import GenerateConfig
    from radspatial.core.runtime import bundled_example
    from radspatial.eval.runner import EvalConfig, run_eval
    from radspatial.imaging.volumes import Case

    ct, seg = bundled_example()
    out = tmp_path / "ds"
    types = ("relative_position", "identification", "size", "distance", "direction")
    config = GenerateConfig(
        seed=3, size=512, markers=("codes",), as_count=6, question_types=types, export_masks=True
    )
    build_dataset([Case("example_ct_sm", ct, seg)], config, out, log=lambda _: None)
    rows = [json.loads(x) for x in (out / "manifest.jsonl").read_text().splitlines()]
    marked = [r for r in rows if r["setup"] in ("rq2", "rq3", "as")]
    assert {r["marker"] for r in marked} == {"codes"}
    assert {r["setup"] for r in marked} == {"rq2", "rq3", "as"}
    assert {r["question_type"] for r in marked} == set(types)
    for r in marked:
        assert r["image"].split("/")[1] == "image_codes"
        objects = [r[k] for k in ("object1", "object2", "object3") if r.get(k)]
        texts = [o["marker_text"] for o in objects]
        if r["setup"] != "as":
            assert texts == [_code(o["label_id"]) for o in objects]
        if r["setup"] in ("rq3", "as") and r["question_type"] == "relative_position":
            relation = _RELATION[r["relation"]]
            assert r["question"] == f"Is the code {texts[0]} {relation} the code {texts[1]}?"
        elif r["setup"] == "rq3":
            assert all(f"the code {t}" in r["question"] for t in texts), r["question"]
        else:
            assert all(f"({t})" in r["question"] for t in texts), r["question"]
    mirp = json.loads((out / "RQ3" / "qa_codes.json").read_text())
    first = mirp[0]["question_answer"][0]
    assert re.fullmatch(r"[A-Z]\d", first["object1_gray"])

    mask = run_eval(out, tmp_path / "mask", EvalConfig(model="agent:mask", runs=1,
                    setups=("rq2", "rq3")), progress=False)  # fmt: skip
    assert mask and all(r["error"] is None for r in mask)
    assert [r["id"] for r in mask if not r["correct"]] == []  # the oracle: every answer right
    reader = run_eval(out, tmp_path / "markers", EvalConfig(model="agent:markers", runs=1,
                      setups=("rq3", "as")), progress=False)  # fmt: skip
    # the glyph reader reads the new style with no change: every position question right (size
    # and identification need areas or labels, which this localizer has not: it abstains)
    placed = [r for r in reader if r["question_type"] in ("relative_position", "distance",
              "direction")]  # fmt: skip
    assert {r["setup"] for r in placed} == {"rq3", "as"}
    assert [r["id"] for r in placed if not r["correct"]] == []
    prior = run_eval(out, tmp_path / "prior", EvalConfig(model="baseline:anatomy-prior", runs=1),
                     progress=False)  # fmt: skip
    assert len(prior) == len(rows) and all(r["error"] is None for r in prior)
    # RQ2 names its structures around the code ("the aorta (F2)"): the prior reads the names
    # through it exactly as in RQ1, item for item (size: no atlas areas, a seeded coin per item)
    by = {
        (r["setup"], r["id"].split("/")[2]): r["parsed"]
        for r in prior
        if r["setup"] != "as" and r["question_type"] in ("relative_position", "distance")
    }
    rq1 = {k[1]: v for k, v in by.items() if k[0] == "rq1"}
    assert rq1 and rq1 == {k[1]: v for k, v in by.items() if k[0] == "rq2"}
    rq3 = [r for r in prior if r["setup"] == "rq3" and r["question_type"] == "relative_position"]
    assert rq3 and all("Q: Is the code F2 " in r["prompt"] for r in rq3)  # the style's example


_RELATION = {
    "above": "above",
    "below": "below",
    "left_of": "to the left of",
    "right_of": "to the right of",
}


def test_no_module_branches_on_a_builtin_style_name():
    """Style-specific behaviour lives in the styles: no comparison with a style's name left."""
    names = "|".join(MARKER_TYPES)
    compare = re.compile(rf"""(?:==|!=)\s*["'](?:{names})["']|["'](?:{names})["']\s*(?:==|!=)""")
    hits = [
        f"{path.relative_to(SRC)}:{n}"
        for path in sorted(SRC.rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), start=1)
        if compare.search(line)
    ]
    assert hits == []
