"""Evaluation items from a dataset folder: ``radspatial generate`` output or a MIRP download.

MIRP layout (as published): ``RQ1/images + qa.json``; ``RQ2|RQ3|AS/image_{dots,letters,numbers}
+ qa_{dots,letters,numbers}.json``. Setup and marker type come from the layout. Quirks handled:
letter files say ``object1_label`` where the others say ``object1_gray``; some files lack
``rotate_flip_*``; file names differ between the sample and the full release (we use the names in
the JSON). If the dataset root holds MIRP's
``center_of_anatomical_stuctures_in_standard_radiological_orientation.json``, the answers in
standard view (``expected_standard``) and in the patient's frame (``expected_anatomical``, MIRP's
anatomical truth) are derived from it. Datasets written before the three frames had names store
``answer_canonical`` (the standard view); it is read as such.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from radspatial.bench.mirp import MIRP_CENTRES, SETUP_DIRS, read_mirp_qa
from radspatial.core.datafiles import DataFileError, check_reason, check_unique_ids, read_json
from radspatial.core.eval_item import EvalItem
from radspatial.core.labels import normalize_name
from radspatial.core.modality import DEFAULT_MODALITY, modality_of
from radspatial.core.records import DEFAULT_TYPE, RELPOS
from radspatial.core.safepath import PathEscapeError, inside
from radspatial.questions import check_answer
from radspatial.questions.frames import (
    anatomical_from_standard,
    anatomical_holds,
    relation_holds,
    worded_relation,
)
from radspatial.questions.manifest import ManifestRow, read_manifest

MIRP_SETUPS = {folder: setup for setup, folder in SETUP_DIRS.items()}


def load_items(
    root: Path,
    *,
    setups: Sequence[str] | None = None,
    markers: Sequence[str] | None = None,
    question_types: Sequence[str] | None = None,
) -> list[EvalItem]:
    """All items of a dataset folder, sorted by id, optionally filtered."""
    root = Path(root)
    manifest = root / "manifest.jsonl"
    if manifest.exists() or manifest.is_symlink():
        items = _from_manifest(root)
        if not items:
            raise DataFileError(f"{manifest}: no rows (an empty manifest)")
    elif (root / "dataset.json").is_file():  # a radspatial dataset that lost its manifest
        raise DataFileError(f"{manifest}: missing (the folder has a radspatial dataset.json)")
    elif any((root / d).is_dir() for d in MIRP_SETUPS):
        items = _from_mirp(root)
    else:
        raise ValueError(
            f"{root}: not a dataset (no manifest.jsonl and no MIRP RQ1/RQ2/RQ3/AS folders)"
        )
    if setups:
        items = [i for i in items if i.setup in setups]
    if markers:
        items = [i for i in items if i.marker in markers or i.marker == "none"]
    if question_types:
        items = [i for i in items if i.question_type in question_types]
    missing = [i.image for i in items if not i.image.is_file()]
    if missing:
        raise ValueError(f"{missing[0]}: image missing ({len(missing)} of {len(items)} missing)")
    if not items:
        raise ValueError(f"{root}: no items match the chosen setups/markers/question types")
    check_unique_ids([i.id for i in items], root)
    return sorted(items, key=lambda i: i.id)


def _case_tables(root: Path) -> dict[str, dict]:
    """case id -> {"labels": table, "grouping": ...} from dataset.json, if present."""
    meta_path = root / "dataset.json"
    if not meta_path.exists() and not meta_path.is_symlink():
        return {}
    cases = read_json(meta_path, want=dict).get("cases") or []
    if not isinstance(cases, list) or not all(isinstance(c, dict) for c in cases):
        raise DataFileError(f"{meta_path}: 'cases' must be a list of objects")
    return {
        c["case_id"]: {
            "labels": _contained_table(root, c.get("labels"), f"{meta_path}: cases[{i}]"),
            "grouping": c.get("grouping"),
            "modality": c.get("modality"),
            **({"label_names": c["label_names"]} if isinstance(c.get("label_names"), dict) else {}),
        }
        for i, c in enumerate(cases)
        if isinstance(c.get("case_id"), str)
    }


def _contained_table(root: Path, labels: object, where: str) -> str | None:
    """A case's label table: a built-in name, or a JSON file inside the dataset folder (given
    relative to it; the agent opens it, so it may not point anywhere else)."""
    from radspatial.core.labels import BUILTIN_TABLES

    if labels is None or labels in BUILTIN_TABLES:
        return labels
    if not isinstance(labels, str):
        raise DataFileError(f"{where}: 'labels' must be a table name or a path, got {labels!r}")
    try:
        return str(inside(root, labels, where=where, what="labels"))
    except PathEscapeError as exc:
        raise DataFileError(
            f"{exc} (copy the label table into the dataset folder and name it relative there)"
        ) from None


def _from_manifest(root: Path) -> list[EvalItem]:
    tables = _case_tables(root)
    centres = _mirp_centres(root / MIRP_CENTRES)
    return [
        _manifest_item(root, where, row, order, tables, centres)
        for order, (where, row) in enumerate(read_manifest(root / "manifest.jsonl"))
    ]


# the manifest row's fields an item takes as they are
_AS_READ = (
    "id",
    "setup",
    "marker",
    "question",
    "relation",
    "transform",
    "variant",
    "question_type",
)


def _point(p: tuple[float, float] | None) -> list[float] | None:
    return None if p is None else list(p)


def _manifest_item(
    root: Path,
    where: str,
    row: ManifestRow,
    order: int,
    tables: dict[str, dict],
    centres: dict[str, dict[str, tuple[float, float]]],
) -> EvalItem:
    o1, o2 = row.object1, row.object2
    extra: dict[str, Any] = {
        "center1_canonical": _point(o1.center_xy_canonical) if o1 else None,
        "center2_canonical": _point(o2.center_xy_canonical) if o2 else None,
    }
    if row.object3:
        extra["object3"] = row.object3.name
    if row.params:
        extra["params"] = row.params
    source = row.source
    if source and source.ct:  # for localizers that work on the volume (TotalSegmentator)
        extra.update(ct=source.ct, slice_index=source.slice_index)
    case_id = source.case_id if source else None
    case_info = tables.get(case_id, {}) if case_id is not None else {}
    extra["modality"] = modality_of(case_info.get("modality") or row.modality)
    named = centres.get(Path(row.image).name)
    if named:  # every named structure of the slice, for the anatomy-region subgroups
        extra["structures"] = sorted(named)
    if row.mask:
        extra["mask"] = str(inside(root, row.mask, where=where, what="mask"))
        extra.update({k: v for k, v in case_info.items() if k != "modality"})
    anatomical = row.answer_anatomical
    if row.legacy_frames and row.question_type == RELPOS:  # derive it from the standard view
        anatomical = anatomical_from_standard(row.relation, row.answer_standard)
    extra["order"] = order
    extra.update({k: getattr(row, k) for k in ("plane", "group", "group_twin") if getattr(row, k)})
    if row.decidable is not None:  # absent: unknown (a dataset made before the rule)
        extra.update(decidable=row.decidable, decidable_reason=row.decidable_reason)
    return EvalItem(
        **{k: getattr(row, k) for k in _AS_READ},
        image=inside(root, row.image, where=where, what="image"),
        expected=row.answer,
        expected_standard=row.answer_standard,
        expected_anatomical=anatomical,
        object1=o1.name if o1 else None,
        object2=o2.name if o2 else None,
        extra=extra,
    )


def manifest_item(root: Path, where: str, row: ManifestRow, order: int = 0) -> EvalItem:
    """The item of one manifest row, outside a dataset folder's tables (an exported task's
    document: no ``dataset.json`` label tables, no MIRP centres file)."""
    return _manifest_item(root, where, row, order, {}, {})


def _mirp_name(qa: dict, k: int) -> str | None:
    name = qa.get(f"object{k}_name")
    return normalize_name(name) if isinstance(name, str) and name else None


def _from_mirp(root: Path) -> list[EvalItem]:
    centres = _mirp_centres(root / MIRP_CENTRES)
    items: list[EvalItem] = []
    for folder, setup in MIRP_SETUPS.items():
        for qa_file in sorted((root / folder).glob("qa*.json")):
            stem = qa_file.stem  # qa | qa_dots | ...
            marker = "none" if stem == "qa" else stem.split("_", 1)[1]
            image_dir = f"{folder}/{'images' if marker == 'none' else f'image_{marker}'}"
            for where, entry, qas in read_mirp_qa(qa_file):
                filename = entry["filename"]
                image = _mirp_image(root, image_dir, filename, where)
                for k, (qwhere, qa) in enumerate(qas):
                    question = qa["question"]
                    relation = worded_relation(question)
                    n1, n2 = _mirp_name(qa, 1), _mirp_name(qa, 2)
                    standard = anatomical = None
                    extra: dict[str, Any] = {
                        "order": len(items),
                        "filename": filename,
                        "modality": DEFAULT_MODALITY,
                        **decidable_of(qa, qwhere),
                    }
                    if setup != "as" and relation and n1 and n2 and filename in centres:
                        c = centres[filename]
                        if n1 in c and n2 in c:
                            standard = int(relation_holds(relation, c[n1], c[n2]))
                            anatomical = int(anatomical_holds(relation, c[n1], c[n2]))
                            extra.update(center1_canonical=c[n1], center2_canonical=c[n2])
                    items.append(
                        EvalItem(
                            id=f"{setup}/{marker}/{filename}/q{k}",
                            setup=setup,
                            marker=marker,
                            image=image,
                            question=question,
                            expected=check_answer(qa["answer"], qa.get("question_type"), qwhere),
                            expected_standard=standard,
                            expected_anatomical=anatomical,
                            relation=relation,
                            transform=entry.get("rotate_flip_short"),
                            object1=n1,
                            object2=n2,
                            variant="blank" if setup == "as" else "normal",
                            # our MIRP-layout files name SPAR-VQA types; MIRP's own have none
                            question_type=qa.get("question_type", DEFAULT_TYPE),
                            extra=extra,
                        )
                    )
    return items


def decidable_of(qa: dict, where: str) -> dict[str, Any]:
    """An exported MIRP entry's ``decidable`` and reason (ours add them; MIRP's own files have
    none: unknown, never read as decidable)."""
    value = qa.get("decidable")
    if value is None:
        return {}
    if not isinstance(value, bool):
        raise DataFileError(f"{where}: 'decidable' must be true, false or null, got {value!r}")
    reason = qa.get("decidable_reason")
    check_reason(reason, where)
    return {"decidable": value, "decidable_reason": reason}


def _mirp_image(root: Path, image_dir: str, filename: str, where: str) -> Path:
    """A qa file's image: a plain file name in its setup's image folder, resolving inside the
    dataset (it may link to another setup's copy of the same image)."""
    if "/" in filename or "\\" in filename:
        raise DataFileError(f"{where}: 'filename' must be a file name, got {filename!r}")
    return inside(root, f"{image_dir}/{filename}", where=where, what="filename")


def _mirp_centres(path: Path) -> dict[str, dict[str, tuple[float, float]]]:
    if not path.is_file():
        return {}
    out: dict[str, dict[str, tuple[float, float]]] = {}
    for i, entry in enumerate(read_json(path, want=list)):
        try:
            out[entry["filename"]] = {
                normalize_name(li["class_name"]): (float(li["center_x"]), float(li["center_y"]))
                for li in entry.get("label_info", [])
            }
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise DataFileError(f"{path}: entry {i}: bad filename/label_info ({exc!r})") from None
        bad = [n for n, xy in out[entry["filename"]].items() if not all(map(math.isfinite, xy))]
        if bad:  # NaN or inf would silently turn every truth about it into 0
            raise DataFileError(f"{path}: entry {i}: centre of {bad[0]!r} is not a finite number")
    return out


def sample_items(items: Sequence[EvalItem], n: int, *, seed: int = 0) -> list[EvalItem]:
    """``n`` items spread over setups, markers and question types, seeded; in ``items``' order.

    Items are grouped by (setup, marker, question type); each group is shuffled with a generator
    keyed by ``seed`` and interleaved yes/no, then the groups are taken round-robin. So a small
    ``n`` covers every group before any group gets a second item, the answers stay balanced, and
    the sample for ``n`` is contained in the sample for ``n + 1``.

    Example:
        >>> sample_items(load_items(root), 12, seed=0)  # doctest: +SKIP
    """
    import random

    if n >= len(items):
        return list(items)
    groups: dict[tuple[str, str, str], list[EvalItem]] = {}
    for item in sorted(items, key=lambda i: i.id):
        groups.setdefault((item.setup, item.marker, item.question_type), []).append(item)
    queues = []
    for key in sorted(groups):
        rng = random.Random(f"{seed}|{'|'.join(key)}")
        by_answer = [
            [i for i in groups[key] if i.expected == a] for a in _answer_classes(groups[key])
        ]
        for part in by_answer:
            rng.shuffle(part)
        if rng.random() < 0.5:  # which answer leads, per group
            by_answer.reverse()
        queues.append(_interleave(by_answer))
    chosen: set[str] = set()
    for depth in range(max(len(q) for q in queues)):
        for queue in queues:
            if depth < len(queue) and len(chosen) < n:
                chosen.add(queue[depth].id)
    return [i for i in items if i.id in chosen]


def _answer_classes(group: Sequence[EvalItem]) -> list[int | str]:
    """A group's answer classes: yes then no for yes/no items (the order every earlier sample
    was drawn in), else every answer that occurs (open types: words or counts), sorted."""
    answers = {i.expected for i in group}
    if answers <= {0, 1}:
        return [1, 0]
    return sorted(answers, key=lambda a: (isinstance(a, str), a))


def _interleave(parts: list[list[EvalItem]]) -> list[EvalItem]:
    """Round-robin over ``parts``: one of each while each lasts, then the rest in order."""
    return [p[k] for k in range(max(map(len, parts), default=0)) for p in parts if k < len(p)]
