"""MIRP's on-disk format, read and written in one place (docs/format.md).

MIRP's download is one folder per setup (``RQ1``, ``RQ2``, ``RQ3``, ``AS``: ``SETUP_DIRS``), each
with one ``qa.json`` (no marker) or ``qa_<marker>.json`` per marker style: a list of image
entries ``{"filename", ..., "question_answer": [{"question", "answer", "object1_name", ...}]}``,
beside the centres file (``MIRP_CENTRES``: standard-view centres per RQ1 image) that MIRP's
anatomy script reads structures from by ``class_name``. The generator writes them
(``MirpStreams``, from ``ManifestRow``s); the evaluator reads them back (``read_mirp_qa``);
MIRP's protocol and statistics stay in ``eval/mirp.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TextIO

from radspatial.core.datafiles import DataFileError, check_fields, read_json
from radspatial.imaging.markers import marker_style
from radspatial.questions import is_mirp_type
from radspatial.questions.manifest import ManifestRow

SETUP_DIRS = {"rq1": "RQ1", "rq2": "RQ2", "rq3": "RQ3", "as": "AS"}
# MIRP's file name, typo included: its anatomy script and download use exactly this name
MIRP_CENTRES = "center_of_anatomical_stuctures_in_standard_radiological_orientation.json"


def class_name(display_name: str) -> str:
    """The key MIRP's anatomy script looks a question's structure up by: "left kidney" ->
    "kidney_left" (lower case, words joined by "_", a leading side moved to the end)."""
    words = display_name.lower().split()
    if words and words[0] in ("left", "right"):
        return "_".join(words[1:] + words[:1])
    return "_".join(words)


def mirp_item(row: ManifestRow) -> dict:
    """One published-MIRP-schema question entry from a manifest row.

    Relative position rows are exactly MIRP's schema, quirks included (see docs/format.md):
    RQ1-RQ3 letters say ``object*_label``, everything else ``object*_gray``; numbers are ints
    (each marker style's ``mirp``; no marker: the label id); AS entries have no names and
    integer centres (keys are written sorted). Other question types (SPAR-VQA) use the same
    fields for each of their objects (``object3_*`` for distance, none for orientation) and add
    ``question_type`` (and ``count``).
    """
    blank = row.setup == "as"
    style = None if row.marker == "none" else marker_style(row.marker)
    objects = [(k, o) for k, o in enumerate((row.object1, row.object2, row.object3), 1) if o]
    item: dict = {}
    if not blank:
        for k, o in objects:
            item[f"object{k}_name"] = o.display_name
    for k, o in objects:
        key, value = (
            ("gray", o.label_id) if style is None else style.mirp(o.label_id, o.marker_text, blank)
        )
        item[f"object{k}_{key}"] = value
    for k, o in objects:
        x, y = o.center_xy
        item[f"object{k}_center_x"] = int(round(x)) if blank else x  # AS: ints, as published
        item[f"object{k}_center_y"] = int(round(y)) if blank else y
    if not is_mirp_type(row.question_type):
        item["question_type"] = row.question_type
        if "n" in (row.params or {}):
            item["count"] = row.params["n"]
    item.update(question=row.question, answer=row.answer)
    if row.decidable is not None and not blank:  # an extra (MIRP has none; AS: as published)
        item.update(decidable=row.decidable, decidable_reason=row.decidable_reason)
    return item


def mirp_entry(row: ManifestRow) -> dict:
    """One image's entry of a ``qa*.json`` (its one question: ``mirp_item``)."""
    entry: dict = {"filename": Path(row.image).name}
    if row.setup != "as":
        entry.update(
            base_name=row.source.case_id,
            slice_index=row.source.slice_index,
            classes_count=row.slice.classes_count,
            multiple_components_same_label=row.slice.multiple_components_same_label,
        )
    entry["question_answer"] = [mirp_item(row)]
    if row.setup != "as":
        entry["rotate_flip_short"] = row.transform
        entry["rotate_flip_long"] = row.transform_name
    entry.update({"plane": row.plane} if row.plane else {})  # an extra: MIRP's are axial
    return entry


def qa_path(root: Path, setup: str, marker: str) -> Path:
    """Where MIRP keeps one setup and marker's questions: ``RQ2/qa_letters.json``."""
    name = "qa.json" if marker == "none" else f"qa_{marker}.json"
    return root / SETUP_DIRS[setup] / name


class MirpStreams:
    """MIRP's qa*.json files (``core.io.dumps`` layout: a list, sorted keys, indent 2) written
    entry by entry, one entry per manifest row.

    Entries come in manifest (id) order, which is image order within a file: ids and image
    names differ only by their suffix ("/q0" vs ".png") after the same base name."""

    def __init__(self, stage: Path) -> None:
        self.stage = stage
        self.files: dict[tuple[str, str], TextIO] = {}

    def add(self, row: ManifestRow) -> None:
        key = (row.setup, row.marker)
        fh = self.files.get(key)
        if fh is None:
            path = qa_path(self.stage, *key)
            path.parent.mkdir(parents=True, exist_ok=True)
            fh = self.files[key] = path.open("w", encoding="utf-8")
            fh.write("[\n")
        else:
            fh.write(",\n")
        text = json.dumps(mirp_entry(row), sort_keys=True, ensure_ascii=False, indent=2)
        fh.write("\n".join("  " + line for line in text.split("\n")))

    def close(self) -> None:
        for fh in self.files.values():
            fh.write("\n]\n")
            fh.close()


def read_mirp_qa(path: Path) -> list[tuple[str, dict, list[tuple[str, dict]]]]:
    """``(where, entry, [(where, qa), ...])`` per entry of a MIRP ``qa*.json``; each entry and
    question checked (a ``DataFileError`` names the entry)."""
    from radspatial.questions import check_answer  # each type checks its own answers

    out = []
    for i, entry in enumerate(read_json(path, want=list)):
        where = f"{path}: entry {i}"
        if not isinstance(entry, dict):
            raise DataFileError(f"{where}: must be a JSON object, got {type(entry).__name__}")
        check_fields(entry, where, {"filename": (str,)}, {"question_answer": (list,)})
        qas = []
        for k, qa in enumerate(entry.get("question_answer") or []):
            qwhere = f"{where} question_answer[{k}]"
            if not isinstance(qa, dict):
                raise DataFileError(f"{qwhere}: must be a JSON object, got {type(qa).__name__}")
            check_fields(qa, qwhere, {"question": (str,)}, {"question_type": (str,)})
            check_answer(qa.get("answer"), qa.get("question_type"), qwhere)
            qas.append((qwhere, qa))
        out.append((where, entry, qas))
    return out
