"""One answer model: a question type defined outside the package, with an answer kind of its
own ("quadrant"), is generated, evaluated and graded end to end through its own reader; grading
knows no type. Also: the Answer and Grade records round-trip through JSON."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

import radspatial.questions as q
from radspatial.bench.dataset import build_dataset
from radspatial.bench.generate import GenerateConfig
from radspatial.cli import bundled_example
from radspatial.core.answers import Answer, Grade
from radspatial.core.datafiles import DataFileError
from radspatial.eval.runner import EvalConfig, run_eval
from radspatial.grading.normalize import normalize
from radspatial.imaging.volumes import Case
from radspatial.questions.open_common import OpenType
from radspatial.questions.reading import collect, decide, hedged
from radspatial.questions.records import Decision

QUADRANTS = ("upper_left", "upper_right", "lower_left", "lower_right")
_SAID = re.compile(r"\b(upper|top|lower|bottom)[\s_-]+(left|right)\b", re.I)
_VERTICAL = {"upper": "upper", "top": "upper", "lower": "lower", "bottom": "lower"}


def _quadrant(xy: tuple[float, float], size: float) -> str:
    return f"{'upper' if xy[1] < size / 2 else 'lower'}_{'left' if xy[0] < size / 2 else 'right'}"


class Quadrant(OpenType):
    """Which quadrant of the image holds a structure: an answer kind no built-in type has."""

    name = "quadrant"
    answer_kind = "quadrant"
    n_objects = 1
    setups = ("rq1",)
    group = ""
    classes = QUADRANTS
    example = q.Example(("aorta",), answers=("lower_left", "upper_right"))
    pattern = re.compile(r"^in which quadrant of the image is (?P<a>.+?)\s*\??$", re.I)

    def propose(self, facts, target, rng, rules):
        want, size, margin = QUADRANTS[target], facts.size, rules.margin_px
        options = [
            c
            for c in facts.candidates
            if _quadrant(c.center_xy, size) == want
            and min(abs(v - size / 2) for v in c.center_xy) >= margin
        ]
        if not options:
            return None
        c = q.pick(options, rng)
        standard = _quadrant(c.center_xy_canonical, size)
        return q.QuestionSpec(self.name, (c,), self.name, want, standard)

    def text(self, spec, wording):
        return f"In which quadrant of the image is {wording.ref(0)}?"

    def read_text(self, text):
        if (bad := hedged(text)) is not None:
            return bad

        def find(clause):
            for m in _SAID.finditer(clause):
                yield m.start(), f"{_VERTICAL[m[1].lower()]}_{m[2].lower()}"

        return decide(*collect(text, find), "quadrant", self.answer_kind)

    def verify(self, parsed, found, scene):
        (f,) = found
        return Decision(_quadrant(f.xy, scene.image.shape[0]), "centre's quadrant", "")


@pytest.fixture
def quadrant():
    q.list_question_types()  # the built-in types first
    q.register_question_type(Quadrant())
    yield
    q.QUESTION_TYPES.remove("quadrant")


def test_a_new_answer_kind_is_read_by_its_type_not_by_grading(quadrant):
    got = normalize("**Final answer:** the top-right quadrant", "quadrant")
    assert got.read == Answer("quadrant", "upper_right") and got.status == "answer"
    assert normalize("upper left or lower right", "quadrant").status == "invalid"
    assert normalize("probably upper left", "quadrant").status == "invalid"
    assert normalize("in the middle", "quadrant").status == "undecided"
    graded = q.get_question_type("quadrant").grade("lower left", "lower_left")
    assert graded.correct is True and graded.source == "rules"


def test_a_plugin_type_with_its_own_answer_kind_runs_end_to_end(quadrant, tmp_path: Path):
    ct, seg = bundled_example()
    config = GenerateConfig(
        seed=3,
        size=256,
        setups=("rq1",),
        markers=("dots",),
        question_types=("quadrant",),
        as_count=0,
        export_masks=True,  # the mask agent reads the label image
    )
    build_dataset([Case("example", ct, seg)], config, tmp_path / "ds", log=lambda _: None)
    manifest = [
        json.loads(x) for x in (tmp_path / "ds" / "manifest.jsonl").read_text().split("\n") if x
    ]
    assert manifest and {r["question_type"] for r in manifest} == {"quadrant"}
    assert {r["answer"] for r in manifest} <= set(QUADRANTS)
    for model in ("agent:mask", "baseline:yes"):
        run = tmp_path / model.replace(":", "_")
        run_eval(tmp_path / "ds", run, EvalConfig(model=model, runs=1), progress=False)
        rows = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
        assert len(rows) == len(manifest)
        for r in rows:  # the type's reader read every reply; correct where it equals the answer
            assert r["grade"] == {"status": "answer", "reason": "one quadrant", "source": "rules"}
            assert r["expected"] in QUADRANTS and r["parsed"] in QUADRANTS  # answers, not 0/1
            assert r["correct"] == (r["parsed"] == r["expected"])
        if model == "agent:mask":  # the mask oracle's centres: every quadrant right
            assert all(r["correct"] for r in rows)
        metrics = json.loads((run / "metrics.json").read_text())
        assert metrics["by_question_type"]["quadrant"]["chance"] == 0.25


def test_answer_and_grade_round_trip():
    for answer in (Answer("yes/no", 1), Answer("choice", "left"), Answer("count", 3)):
        assert Answer.from_json(json.loads(json.dumps(answer.to_json()))) == answer
    grade = Grade(Answer("name", "kidney_left"), "answer", "one structure", True, "judge")
    assert Grade.from_json(json.loads(json.dumps(grade.to_json()))) == grade
    assert Grade.from_json(Grade(None, "undecided").to_json()).value is None
    with pytest.raises(DataFileError, match="kind"):
        Answer.from_json({"kind": "", "value": 1})
    with pytest.raises(DataFileError, match="status"):
        Grade.from_json({"read": None, "status": "maybe"})
    # graded against an expected answer: invalid is wrong, undecided is not graded
    assert Grade(None, "invalid").graded(Answer("count", 2)).correct is False
    assert Grade(None, "undecided").graded(Answer("count", 2)).correct is None
    assert np.isclose(1 / len(QUADRANTS), 0.25)
