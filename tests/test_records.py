"""The typed records between stages (core/records.py): exact round trips of what generate and
eval write, older rows still read, bad rows named, and docs/format.md's tables checked."""

from __future__ import annotations

import json
import re
from dataclasses import fields
from pathlib import Path

import pytest

from radspatial.bench.config import GenerateConfig
from radspatial.bench.dataset import build_dataset
from radspatial.core.datafiles import DataFileError
from radspatial.core.records import GRADED_RESULT_FIELDS, RESULT_FIELDS, ResultRow, read_results
from radspatial.core.runtime import bundled_example
from radspatial.eval.runner import EvalConfig, run_eval
from radspatial.imaging.volumes import Case
from radspatial.questions import list_question_types
from radspatial.questions.manifest import (
    MANIFEST_FIELDS,
    OBJECT_FIELDS,
    ManifestRow,
    SliceRow,
    SourceRow,
    read_manifest,
)

FORMAT_DOC = Path(__file__).resolve().parents[1] / "docs" / "format.md"


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    """Every question type, setup and marker, masks exported (every optional field written)."""
    out = tmp_path_factory.mktemp("records") / "ds"
    types = tuple(list_question_types())
    config = GenerateConfig(seed=1, size=256, question_types=types, export_masks=True, as_count=4)
    build_dataset([Case("example", *bundled_example())], config, out, log=lambda _: None)
    return out


@pytest.fixture(scope="module")
def run(data, tmp_path_factory) -> tuple[Path, list[dict]]:
    out = tmp_path_factory.mktemp("records_run") / "run"
    rows = run_eval(data, out, EvalConfig("baseline:random", runs=1), progress=False)
    return out, rows


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def test_every_manifest_line_round_trips_byte_for_byte(data):
    lines = _lines(data / "manifest.jsonl")
    rows = read_manifest(data / "manifest.jsonl")
    assert len(rows) == len(lines)
    types = set()
    for line, (_, row) in zip(lines, rows, strict=True):
        again = json.dumps(row.to_json(), sort_keys=True, ensure_ascii=False)
        assert again == line
        types.add(row.question_type)
    assert types == set(list_question_types())  # every type's fields went through the record
    blank = next(r for _, r in rows if r.setup == "as")
    assert "slice" not in blank.to_json() and "marker_inside" not in blank.to_json()["object1"]


def test_every_result_line_round_trips_and_run_eval_returns_what_it_wrote(run):
    out, returned = run
    lines = _lines(out / "results.jsonl")
    rows = read_results(out / "results.jsonl")
    assert any(r.reading is not None for r in rows) and any(r.reading is None for r in rows)
    for line, row, ret in zip(lines, rows, returned, strict=True):
        assert json.dumps(row.to_json(), sort_keys=True, ensure_ascii=False) == line
        assert row.to_json() == ret and list(row.to_json()) == list(ret)  # keys in written order


def test_results_key_order_is_the_row_order_written_before_records(run):
    _, returned = run
    yes_no = next(r for r in returned if "grade" not in r)
    assert list(yes_no)[:3] == ["id", "run", "setup"]
    written_when_set = ("plane", "group", "group_twin", "decidable")
    assert [k for k in yes_no if k not in written_when_set][-5:] == [
        "structures_asked",
        "region",
        "modality",
        "expected_answer",  # the grade is added after the columns (issue 51)
        "grades",
    ]
    assert yes_no["expected_answer"] == {"kind": "yes/no", "value": yes_no["expected"]}
    assert yes_no["grades"]["image"]["correct"] == yes_no["correct"]
    open_row = next(r for r in returned if "grade" in r)
    keys = list(open_row)
    assert keys.index("expected_anatomical") + 1 == keys.index("image")
    assert keys.index("reply") + 1 == keys.index("parsed")
    assert keys.index("modality") + 1 == keys.index("grade")
    side = next(r for r in returned if r["question_type"] == "laterality")
    assert side["expected"] in ("left", "right") and side["parsed"] in ("left", "right", None)
    assert keys.index("error") < keys.index("structures_asked")


def test_older_manifest_rows_still_read():
    old = {
        "id": "rq1/none/a_slice001/q0",
        "setup": "rq1",
        "marker": "none",
        "image": "RQ1/images/a_slice001.png",
        "question": "Is the liver to the left of the spleen?",
        "answer": "1",
        "answer_canonical": 0,  # before the three frames had names: the standard view
        "relation": "left_of",
        "object1": {"name": "liver", "center_xy": [1.0, 2.0]},
    }
    row = ManifestRow.from_json(old, "old: line 1")
    assert row.answer == 1 and row.answer_standard == 0 and row.answer_anatomical is None
    assert row.legacy_frames and row.question_type == "relative_position"
    assert row.variant == "normal" and row.object1.center_xy == (1.0, 2.0)
    assert not ManifestRow.from_json({**old, "answer_anatomical": 1}).legacy_frames


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda r: r.pop("id"), r"^m: line 3: missing required field 'id'$"),
        (lambda r: r.update(object1="liver"), r"^m: line 3: 'object1' must be an object or null"),
        (
            lambda r: r["object1"].update(center_xy=[1.0]),
            r"^m: line 3: object1: 'center_xy' must be \[x, y\] or null",
        ),
        (
            lambda r: r["object2"].update(label_id="five"),
            r"^m: line 3: object2: 'label_id' must be an integer or null",
        ),
        (
            lambda r: r.update(slice={"classes_count": "3"}),
            r"^m: line 3: slice: 'classes_count' must be an integer or null",
        ),
        (lambda r: r.update(answer="maybe"), r"^m: line 3: 'answer' must be 0 or 1"),
    ],
)
def test_bad_manifest_rows_name_the_line_and_field(data, edit, message):
    row = json.loads(_lines(data / "manifest.jsonl")[0])
    row.setdefault("object2", {})
    row["object1"] = row["object1"] or {}
    row["object2"] = row["object2"] or {}
    edit(row)
    with pytest.raises(DataFileError, match=message):
        ManifestRow.from_json(row, "m: line 3")


def test_older_result_rows_still_read():
    old = {
        "id": "rq1/none/a/q0",
        "run": 0,
        "setup": "rq1",
        "marker": "none",
        "question": "q",
        "expected": 1,
        "expected_canonical": 0,
        "parsed": 1,
        "correct": True,
    }
    row = ResultRow.from_json(old)
    assert row.expected_standard == 0 and row.image is None and row.reading is None
    with pytest.raises(DataFileError, match=r"^r: missing required field 'run'$"):
        ResultRow.from_json({k: v for k, v in old.items() if k != "run"}, "r")


def test_older_open_rows_read_as_their_answers():
    """An open row written before one answer model (expected 1, parsed the grade, answer_*
    columns) reads as the answers it held, and writes in today's form."""
    old = {
        "id": "rq1/none/a/q0", "run": 0, "setup": "rq1", "marker": "none", "question": "q",
        "question_type": "laterality", "expected": 1, "expected_standard": None,
        "expected_anatomical": None, "answer_expected": "left", "answer_standard": "right",
        "answer_anatomical": "left", "reply": "the right", "answer_read": "right",
        "rules": {"value": "right", "status": "answer", "reason": "one side"},
        "grade_source": "rules", "parsed": 0, "correct": False, "correct_standard": True,
    }  # fmt: skip
    row = ResultRow.from_json(old)
    assert (row.expected, row.expected_standard, row.parsed) == ("left", "right", "right")
    assert row.grade.status == "answer" and row.grade.source == "rules" and row.answered
    new = row.to_json()
    assert "answer_expected" not in new and new["grade"]["reason"] == "one side"
    assert ResultRow.from_json(new) == row
    with pytest.raises(DataFileError, match="grade"):
        ResultRow.from_json({**new, "grade": {"status": "answer", "source": "oracle"}})


def _doc_fields(heading: str, first_line: str | None = None) -> list[set[str]]:
    """Per table under ``heading`` (up to the next ``## ``): the backticked names of each row's
    first cell; ``first_line`` picks the tables after a line starting with it."""
    text = FORMAT_DOC.read_text()
    section = text.split(f"## {heading}", 1)[1].split("\n## ", 1)[0]
    if first_line is not None:
        section = section.split(first_line, 1)[1]
    tables: list[set[str]] = []
    in_table = False
    for line in section.splitlines():
        if line.startswith("| field |"):
            tables.append(set())
            in_table = True
        elif in_table and line.startswith("|") and not line.startswith("|---"):
            tables[-1] |= set(re.findall(r"`([a-z_0-9]+)`", line.split("|")[1]))
        elif not line.startswith("|"):
            in_table = False
    return tables


def _row_cell(heading: str, name: str) -> str:
    text = FORMAT_DOC.read_text().split(f"## {heading}", 1)[1]
    line = next(x for x in text.splitlines() if x.startswith(f"| `{name}` |"))
    return re.split(r"(?<!\\)\|", line)[3]  # cells split at unescaped pipes


def test_format_doc_lists_exactly_the_manifest_fields():
    manifest, objects = _doc_fields("manifest.jsonl")
    assert manifest == set(MANIFEST_FIELDS)
    assert objects == set(OBJECT_FIELDS)
    for name, record in (("slice", SliceRow), ("source", SourceRow)):
        cell = set(re.findall(r"`([a-z_0-9]+)`", _row_cell("manifest.jsonl", name)))
        assert {f.name for f in fields(record)} <= cell, name


def test_format_doc_lists_exactly_the_result_fields():
    results, open_rows = _doc_fields("results.jsonl")
    assert results == set(RESULT_FIELDS)
    assert open_rows == set(GRADED_RESULT_FIELDS)
