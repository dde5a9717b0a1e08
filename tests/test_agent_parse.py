"""Question parser: MIRP sample questions, every generator wording, paraphrases, refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from radspatial.agent.pipeline.parse import (
    extract_question,
    known_names,
    lookup_name,
    parse_question,
)
from radspatial.agent.pipeline.types import ParseError, Ref
from radspatial.core.labels import (
    BUILTIN_TABLES,
    display_name,
    letter_code,
    load_table,
    normalize_name,
)
from radspatial.eval.items import EvalItem
from radspatial.eval.prompts import MIRP
from radspatial.questions.frames import worded_relation as relation_of
from radspatial.questions.relative_position import (
    RELATIONS,
    marker_question,
    named_question,
)

MIRP_SAMPLE = Path("/work/shared/data/mirp_sample")
_MARKER_OF_FILE = {"qa.json": None, "qa_numbers.json": "numbers", "qa_letters.json": "letters"}
_MARKER_OF_FILE["qa_dots.json"] = "dots"


def _sample_questions() -> list[tuple[str, str, str | None, dict]]:
    out = []
    for path in sorted(MIRP_SAMPLE.glob("*/qa*.json")):
        for item in json.loads(path.read_text()):
            for qa in item["question_answer"]:
                out.append((path.parent.name, path.name, _MARKER_OF_FILE[path.name], qa))
    return out


def _as_tuple(ref: Ref) -> tuple[str | None, str | None, str | None]:
    return ref.name, ref.marker, ref.text


# --- MIRP sample ---------------------------------------------------------------------------------


@pytest.mark.skipif(not MIRP_SAMPLE.is_dir(), reason="MIRP sample not present")
def test_mirp_sample_all_30_questions():
    questions = _sample_questions()
    assert len(questions) == 30
    for setup, _file, marker, qa in questions:
        parsed = parse_question(qa["question"])
        assert parsed.relation == relation_of(qa["question"]), qa["question"]
        for ref, i in ((parsed.subject, 1), (parsed.reference, 2)):
            mark = qa.get(f"object{i}_gray", qa.get(f"object{i}_label"))
            name = normalize_name(qa[f"object{i}_name"]) if setup in ("RQ1", "RQ2") else None
            expected_marker = None if setup == "RQ1" else marker
            expected_text = None if setup == "RQ1" else str(mark)
            assert _as_tuple(ref) == (name, expected_marker, expected_text), qa["question"]


# --- every wording our generator emits ------------------------------------------------------------


def _table_entries() -> list[tuple[int, str]]:
    entries = {(i, n) for t in BUILTIN_TABLES for i, n in load_table(t, group=False).names.items()}
    entries |= set(load_table("totalsegmentator", group=True).names.items())
    return sorted(entries)


def test_every_table_name_round_trips():
    names = known_names()
    assert {"vertebrae", "rib_left", "rib_right", "adrenal_gland", "prostate_uterus"} <= set(names)
    for name in names:
        assert lookup_name(name) == name
        assert lookup_name(display_name(name)) == name
        assert lookup_name(display_name(name).upper()) == name


@pytest.mark.parametrize("relation", RELATIONS)
def test_generator_named_questions_every_name_and_marker(relation):
    for label_id, name in _table_entries():
        shown = display_name(name)
        refs = [("", "", None), (letter_code(label_id), "ZZ", "letters")]
        refs += [(str(label_id), "999", "numbers"), ("red", "blue", "dots")]
        for r1, r2, marker in refs:
            for q, subject, reference in (
                (named_question(shown, relation, "spleen", r1, r2), name, "spleen"),
                (named_question("aorta", relation, shown, r1, r2), "aorta", name),
            ):
                if subject == reference:
                    continue
                parsed = parse_question(q)
                assert parsed.relation == relation, q
                assert parsed.subject.name == subject, q
                assert parsed.reference.name == reference, q
                assert parsed.subject.marker == parsed.reference.marker == marker, q
                assert parsed.subject.text == (r1 or None), q
                assert parsed.reference.text == (r2 or None), q


@pytest.mark.parametrize("relation", RELATIONS)
def test_generator_marker_questions(relation):
    cases = [("dots", "red", "blue"), ("dots", "blue", "red")]
    for label_id in (1, 3, 26, 27, 52, 93, 117):
        cases += [("numbers", str(label_id), "999"), ("letters", letter_code(label_id), "ZZ")]
    for kind, t1, t2 in cases:
        q = marker_question(kind, t1, relation, t2)
        parsed = parse_question(q)
        assert parsed.relation == relation
        assert _as_tuple(parsed.subject) == (None, kind, t1), q
        assert _as_tuple(parsed.reference) == (None, kind, t2), q


# --- paraphrases ---------------------------------------------------------------------------------

N = None
PARAPHRASES = [
    ("Is the aorta above the spleen?", "aorta", "above", "spleen"),
    (
        "Is the left kidney to the right of the inferior vena cava?",
        "kidney_left",
        "right_of",
        "inferior_vena_cava",
    ),
    ("Is the liver located to the right of the stomach?", "liver", "right_of", "stomach"),
    ("Is the spleen on the left side of the liver?", "spleen", "left_of", "liver"),
    ("Is the spleen on the right of the liver?", "spleen", "right_of", "liver"),
    ("Is the spleen left of the liver?", "spleen", "left_of", "liver"),
    ("Is the stomach right of the aorta", "stomach", "right_of", "aorta"),
    ("Is the aorta higher than the spleen?", "aorta", "above", "spleen"),
    ("Is the aorta lower than the spleen?", "aorta", "below", "spleen"),
    ("Is the liver over the right kidney?", "liver", "above", "kidney_right"),
    ("Is the pancreas under the stomach?", "pancreas", "below", "stomach"),
    ("Is the duodenum beneath the liver?", "duodenum", "below", "liver"),
    ("Is the colon underneath the stomach?", "colon", "below", "stomach"),
    ("Does the aorta lie above the IVC?", "aorta", "above", "inferior_vena_cava"),
    (
        "Is the liver located to the left of the stomach in this image?",
        "liver",
        "left_of",
        "stomach",
    ),
    ("Is the spleen positioned below the stomach?", "spleen", "below", "stomach"),
    ("In this image, is the aorta above the spleen?", "aorta", "above", "spleen"),
    ("Is aorta above spleen", "aorta", "above", "spleen"),
    ("IS THE AORTA ABOVE THE SPLEEN?", "aorta", "above", "spleen"),
    ("  is   the aorta\tabove  the   spleen ? ", "aorta", "above", "spleen"),
    ("Is the aorta superior to the spleen?", "aorta", "above", "spleen"),
    ("Is the aorta inferior to the spleen?", "aorta", "below", "spleen"),
    (
        "Is the superior vena cava inferior to the trachea?",
        "superior_vena_cava",
        "below",
        "trachea",
    ),
    ("Is the SVC to the left of the aorta?", "superior_vena_cava", "left_of", "aorta"),
    ("Is the gall bladder to the left of the stomach?", "gallbladder", "left_of", "stomach"),
    ("Is the L kidney to the right of the R kidney?", "kidney_left", "right_of", "kidney_right"),
    (
        "Is the left adrenal above the right adrenal?",
        "adrenal_gland_left",
        "above",
        "adrenal_gland_right",
    ),
    ("Is the adrenal gland left above the liver?", "adrenal_gland_left", "above", "liver"),
    ("Is the kidney (left) below the spleen?", "kidney_left", "below", "spleen"),
    ("Is the kidney_left below the spleen?", "kidney_left", "below", "spleen"),
    ("Is the vertebra below the aorta?", "vertebrae", "below", "aorta"),
    ("Is the spine below the aorta?", "vertebrae", "below", "aorta"),
    ("Is the L3 vertebra below the aorta?", "vertebrae_l3", "below", "aorta"),
    ("Is the urinary bladder above the rectum?", "urinary_bladder", "above", "rectum"),
    ("Is the bladder above the rectum?", "urinary_bladder", "above", "rectum"),
    ("Is the small intestine left of the colon?", "small_bowel", "left_of", "colon"),
    ("Is the small bowel left of the large bowel?", "small_bowel", "left_of", "colon"),
    (
        "Is the portal vein above the pancreas?",
        "portal_vein_and_splenic_vein",
        "above",
        "pancreas",
    ),
    (
        "Is the portal vein and splenic vein above the IVC?",
        "portal_vein_and_splenic_vein",
        "above",
        "inferior_vena_cava",
    ),
    (
        "Is the left psoas to the left of the right psoas?",
        "iliopsoas_left",
        "left_of",
        "iliopsoas_right",
    ),
    (
        "Is the left kidney cyst above the left kidney?",
        "kidney_cyst_left",
        "above",
        "kidney_left",
    ),
    ("Is the left lung upper lobe above the heart?", "lung_upper_lobe_left", "above", "heart"),
    ("Is the left rib to the left of the vertebrae?", "rib_left", "left_of", "vertebrae"),
    ("Is rib left 11 above the left kidney?", "rib_left_11", "above", "kidney_left"),
    ("Is the oesophagus to the left of the trachea?", "esophagus", "left_of", "trachea"),
    ("Is the prostate/uterus below the bladder?", "prostate_uterus", "below", "urinary_bladder"),
    (
        "Is the left femoral head left of the right femur head?",
        "femur_head_left",
        "left_of",
        "femur_head_right",
    ),
    ("Is the intestine above the adrenal gland?", "intestine", "above", "adrenal_gland"),
    ("Is the liver on the left-hand side of the spleen?", "liver", "left_of", "spleen"),
    ("Is the liver further to the right than the spleen?", "liver", "right_of", "spleen"),
    ("Is it true that the aorta is above the spleen?", "aorta", "above", "spleen"),
    ("Does the aorta appear to be below the spleen in the image?", "aorta", "below", "spleen"),
    ("Is the aorta directly above the spleen (yes/no)?", "aorta", "above", "spleen"),
    ("Q: Is the aorta above the spleen?", "aorta", "above", "spleen"),
    ("Is the left kidney left of the right kidney?", "kidney_left", "left_of", "kidney_right"),
    ("Is the Inferior Vena Cava right of the Aorta.", "inferior_vena_cava", "right_of", "aorta"),
]


def test_paraphrase_table_is_large():
    assert len(PARAPHRASES) >= 40


@pytest.mark.parametrize(("question", "subject", "relation", "reference"), PARAPHRASES)
def test_paraphrases(question, subject, relation, reference):
    parsed = parse_question(question)
    assert (parsed.subject.name, parsed.relation, parsed.reference.name) == (
        subject,
        relation,
        reference,
    )
    assert parsed.subject.marker is None and parsed.reference.marker is None


MARKER_PARAPHRASES = [
    ("Is the letter BZ above the letter AA?", (N, "letters", "BZ"), "above", (N, "letters", "AA")),
    (
        "are the letters bz below the letters aa",
        (N, "letters", "BZ"),
        "below",
        (N, "letters", "AA"),
    ),
    ("Is number 7 left of number 12?", (N, "numbers", "7"), "left_of", (N, "numbers", "12")),
    ("Is the red dot higher than the blue dot?", (N, "dots", "red"), "above", (N, "dots", "blue")),
    ("Is marker BZ above marker 1?", (N, "letters", "BZ"), "above", (N, "numbers", "1")),
    ("Is the thing (BZ) above the spleen?", (N, "letters", "BZ"), "above", ("spleen", N, N)),
    ("Is the kidney (AC) above the spleen?", (N, "letters", "AC"), "above", ("spleen", N, N)),
    (
        "Is the aorta (number 52) above the spleen (number 1)?",
        ("aorta", "numbers", "52"),
        "above",
        ("spleen", "numbers", "1"),
    ),
    (
        "Is the aorta, marked BZ, above the spleen marked AA?",
        ("aorta", "letters", "BZ"),
        "above",
        ("spleen", "letters", "AA"),
    ),
    (
        "Is the IVC (Blue) to the right of the aorta (red)?",
        ("inferior_vena_cava", "dots", "blue"),
        "right_of",
        ("aorta", "dots", "red"),
    ),
]


@pytest.mark.parametrize(("question", "subject", "relation", "reference"), MARKER_PARAPHRASES)
def test_marker_paraphrases(question, subject, relation, reference):
    parsed = parse_question(question)
    assert _as_tuple(parsed.subject) == subject
    assert parsed.relation == relation
    assert _as_tuple(parsed.reference) == reference


def test_ref_keeps_the_phrase():
    parsed = parse_question("Is the aorta (BZ) above the spleen (AA)?")
    assert parsed.subject.phrase == "the aorta (BZ)"
    assert parsed.reference.phrase == "the spleen (AA)"
    assert parsed.question == "Is the aorta (BZ) above the spleen (AA)?"


# --- refusals ------------------------------------------------------------------------------------

REFUSALS = [
    ("Which organ is on the left?", "yes/no"),
    ("What is this?", "yes/no"),
    ("The aorta is above the spleen.", "yes/no"),
    ("Is the liver healthy?", "no spatial relation"),
    ("Is the liver above?", "no second structure"),
    ("Is above the liver?", "no first structure"),
    ("Is the aorta above or below the spleen?", "more than one relation"),
    ("Is the aorta above the spleen and to the left of the liver?", "more than one relation"),
    ("Is the aorta above the spleen and the liver?", "unknown structure 'spleen and the liver'"),
    ("Is the foo above the spleen?", "unknown structure 'foo'"),
    ("Is the spleen above the blob?", "unknown structure 'blob'"),
    ("Is the kidney above the spleen?", "needs a side"),
    ("Is the psoas left of the aorta?", "needs a side"),
    ("Is the aorta anterior to the spleen?", "anatomical direction"),
    ("Is the aorta posterior to the spleen?", "anatomical direction"),
    ("Is the aorta in front of the spine?", "anatomical direction"),
    ("Is the aorta behind the stomach?", "anatomical direction"),
    ("Is the liver on the patient's left of the spleen?", "anatomical direction"),
    ("Is the aorta above the aorta?", "same structure"),
    ("Is the number 3 above the number 3?", "same structure"),
    ("Does the aorta overlap the spleen?", "no spatial relation"),
    ("", "yes/no"),
    # Trailing instructions are not stripped here: use from_prompt=True (extract_question).
    ("Is the aorta above the spleen? Answer 1 or 0.", "unknown structure"),
]


@pytest.mark.parametrize(("question", "message"), REFUSALS)
def test_refusals(question, message):
    with pytest.raises(ParseError, match=message.replace("?", r"\?")):
        parse_question(question)


# --- prompts -------------------------------------------------------------------------------------

PROMPT_CASES = [
    ("rq1", "none", "Is the left kidney below the liver?"),
    ("rq2", "letters", "Is the spleen (AA) to the right of the left kidney (AC)?"),
    ("rq2", "numbers", "Is the spleen (1) to the left of the left kidney (3)?"),
    ("rq2", "dots", "Is the spleen (blue) below the left kidney (red)?"),
    ("rq3", "numbers", "Is the number 1 to the right of the number 3?"),
    ("rq3", "letters", "Are the letters AA to the right of the letters AC?"),
    ("rq3", "dots", "Is the blue dot above the red dot?"),
    ("as", "letters", "Are the letters UW to the right of the letters VM?"),
]


@pytest.mark.parametrize(("setup", "marker", "question"), PROMPT_CASES)
def test_extract_question_from_mirp_prompt(setup, marker, question):
    item = EvalItem("x", setup, marker, Path("x.png"), question, 1)
    prompt = MIRP.render(item)
    assert prompt.count("Q:") == 2  # the example question comes first
    assert extract_question(prompt) == question
    assert parse_question(prompt, from_prompt=True) == parse_question(question)
    with pytest.raises(ParseError):
        parse_question(prompt)


def test_extract_question_fallbacks():
    # The real question without "?" still wins over the example, which has one.
    prompt = "Q: Is the aorta above the spleen? A: 1\nQ: Is the liver below the IVC"
    assert extract_question(prompt) == "Is the liver below the IVC"
    prose = "Look at the slice. Is the aorta above the spleen? Answer with 1 or 0. Is it clear?"
    assert extract_question(prose) == "Is the aorta above the spleen?"
    with pytest.raises(ParseError, match="no question"):
        extract_question("Describe the image.")


# speed: benchmarks/bench_parse.py (no test depends on how fast the machine is)


def test_the_heart_chambers_of_an_rtstruct_parse_by_their_display_names():
    """TotalSegmentator v1's chambers (the chest slab's RTSTRUCT) are structures the generator
    asks about; the agent must read them (the stress run of issue 46/47 found it refused)."""
    from radspatial.core.labels import TOTALSEG_V1_HEART, display_name

    for name in TOTALSEG_V1_HEART.values():
        assert lookup_name(display_name(name)) == name
    parsed = parse_question("Is the right heart ventricle to the left of the left heart atrium?")
    assert (parsed.subject.name, parsed.reference.name) == (
        "heart_ventricle_right",
        "heart_atrium_left",
    )
