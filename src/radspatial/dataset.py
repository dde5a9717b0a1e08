"""The on-disk benchmark: staging, MIRP-compatible JSON, manifest.jsonl, dataset.json.

Everything is written into ``OUT.partial/`` and renamed to ``OUT`` only once complete, with
``dataset.json`` written last: a folder without ``dataset.json`` is never a finished dataset.
"""

from __future__ import annotations

import platform
import shutil
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from radspatial import __version__
from radspatial.ablation import generate_ablation
from radspatial.generate import (
    SETUP_DIRS,
    CaseOutput,
    GenerateConfig,
    encode_png,
    generate_case,
    image_relpath,
    keyed_rng,
)
from radspatial.io import atomic_write_json, atomic_write_jsonl, dumps
from radspatial.mirp import MIRP_CENTRES
from radspatial.questions import chance_levels, get_question_type
from radspatial.questions.open_common import is_open
from radspatial.volumes import Case

FORMAT = "radspatial-dataset"
FORMAT_VERSION = 1


@dataclass(frozen=True)
class DatasetSummary:
    out: Path
    n_questions: int
    counts: dict[str, dict[str, int]]  # "rq2/dots" -> {"n", "yes"}
    question_types: dict[str, dict]  # "size" -> {"n", "yes", "chance"}
    cases: list[dict]


def software_versions() -> dict[str, str]:
    """Versions of everything that shapes the output, for provenance records."""
    import nibabel
    import numpy
    import PIL
    import pydicom
    import scipy

    return {
        "radspatial": __version__,
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "scipy": scipy.__version__,
        "nibabel": nibabel.__version__,
        "pydicom": pydicom.__version__,
        "pillow": PIL.__version__,
    }


@contextmanager
def staged(out: Path, overwrite: bool) -> Iterator[Path]:
    """Build a folder in ``OUT.partial`` and rename it to ``OUT`` only if the block succeeds.

    A non-empty ``out`` is refused unless ``overwrite``; on any error the staging folder is
    removed, so a half-written output never looks complete.
    """
    out = Path(out)
    stage = prepare_out(out, overwrite)
    try:
        yield stage
        if out.exists():
            shutil.rmtree(out)
        stage.rename(out)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise


def prepare_out(out: Path, overwrite: bool) -> Path:
    """Refuse a non-empty ``out`` unless ``overwrite``; return a fresh staging folder."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not overwrite:
        raise FileExistsError(f"{out}: output folder exists and is not empty (use --overwrite)")
    stage = out.with_name(out.name + ".partial")
    if stage.exists():
        shutil.rmtree(stage)
    stage.mkdir(parents=True)
    return stage


def _mirp_item(row: dict) -> dict:
    """One published-MIRP-schema question entry from a manifest row.

    Relative position rows are exactly MIRP's schema, quirks included (see docs/format.md):
    RQ1-RQ3 letters say ``object*_label``, everything else ``object*_gray``; numbers are ints;
    AS entries have no names and integer centres (keys are written sorted). Other
    question types (SPAR-VQA) use the same fields for each of their objects (``object3_*`` for
    distance, none for orientation) and add ``question_type`` (and ``count``).
    """
    blank = row["setup"] == "as"
    key = "label" if row["marker"] == "letters" and not blank else "gray"
    objects = [(k, row.get(f"object{k}")) for k in (1, 2, 3)]
    objects = [(k, o) for k, o in objects if o]
    item: dict = {}
    if not blank:
        for k, o in objects:
            item[f"object{k}_name"] = o["display_name"]
    for k, o in objects:
        if row["marker"] == "none" or row["marker"] == "numbers" and not blank:
            item[f"object{k}_{key}"] = o["label_id"]
        elif row["marker"] == "numbers":
            item[f"object{k}_{key}"] = int(o["marker_text"])
        else:
            item[f"object{k}_{key}"] = o["marker_text"]
    for k, o in objects:
        x, y = o["center_xy"]
        item[f"object{k}_center_x"] = int(round(x)) if blank else x  # AS: ints, as published
        item[f"object{k}_center_y"] = int(round(y)) if blank else y
    if row.get("question_type", "relative_position") != "relative_position":
        item["question_type"] = row["question_type"]
        if "n" in row.get("params", {}):
            item["count"] = row["params"]["n"]
    item.update(question=row["question"], answer=row["answer"])
    return item


def write_mirp_json(stage: Path, rows: Sequence[dict]) -> None:
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for row in rows:
        groups[(row["setup"], row["marker"])].append(row)
    for (setup, marker), items in groups.items():
        entries = []
        for row in sorted(items, key=lambda r: r["image"]):
            entry: dict = {"filename": Path(row["image"]).name}
            if setup != "as":
                sl = row["slice"]
                entry.update(
                    base_name=row["source"]["case_id"],
                    slice_index=row["source"]["slice_index"],
                    classes_count=sl["classes_count"],
                    multiple_components_same_label=sl["multiple_components_same_label"],
                )
            entry["question_answer"] = [_mirp_item(row)]
            if setup != "as":
                entry["rotate_flip_short"] = row["transform"]
                entry["rotate_flip_long"] = row["transform_name"]
            entries.append(entry)
        name = "qa.json" if marker == "none" else f"qa_{marker}.json"
        (stage / SETUP_DIRS[setup] / name).write_text(dumps(entries))


def _ablation_rows(config: GenerateConfig, stage: Path) -> list[dict]:
    rng = keyed_rng(config.seed, "__ablation__")
    rows = []
    for k, marker, img, fields in generate_ablation(
        rng, config.as_count, config.markers, config.size, config.rules
    ):
        rel = image_relpath("as", marker, f"image_{k + 1}.png")
        path = stage / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(encode_png(img))
        for obj in ("object1", "object2"):
            fields[obj].update(
                name=None, display_name=None, label_id=None, center_xy_canonical=None, area_px=None
            )
        rows.append(
            {
                "id": f"as/{marker}/image_{k + 1}/q0",
                "setup": "as",
                "marker": marker,
                "image": rel,
                "answer_standard": None,  # blank: no view to undo, no patient
                "answer_anatomical": None,
                "question_type": "relative_position",
                "transform": None,
                "transform_name": None,
                "variant": "blank",
                "source": None,
                **fields,
            }
        )
    return rows


def _run_cases(
    cases: Sequence[Case], config: GenerateConfig, stage: Path, workers: int
) -> list[CaseOutput]:
    bar = tqdm(total=len(cases), desc="cases", unit="case", disable=None)
    outputs: list[CaseOutput] = []
    try:
        if workers <= 1 or len(cases) <= 1:
            for case in cases:
                outputs.append(generate_case(case, config, stage))
                bar.update()
        else:
            with ProcessPoolExecutor(max_workers=workers) as pool:
                futures = [pool.submit(generate_case, c, config, stage) for c in cases]
                for fut in futures:
                    outputs.append(fut.result())
                    bar.update()
    finally:
        bar.close()
    return outputs


def _chance(name: str, rows: Sequence[dict]) -> float | None:
    """The type's chance level; where it depends on the item (identification), the mean."""
    chance = chance_levels()[name]
    item_chance = getattr(get_question_type(name), "item_chance", None)
    if chance is None and item_chance is not None:
        values = [item_chance(r.get("params") or {}) for r in rows if r["question_type"] == name]
        return round(sum(values) / len(values), 6) if values else None
    return chance


def build_dataset(
    cases: Sequence[Case],
    config: GenerateConfig,
    out: Path,
    *,
    workers: int = 1,
    overwrite: bool = False,
    log: Callable[[str], None] = print,
) -> DatasetSummary:
    """Generate the benchmark for ``cases`` into ``out`` (atomically, see module docstring)."""
    ids = [c.case_id for c in cases]
    if len(set(ids)) != len(ids):
        dup = sorted({i for i in ids if ids.count(i) > 1})
        raise ValueError(f"duplicate case ids: {', '.join(dup)}")
    out = Path(out)
    with staged(out, overwrite) as stage:
        outputs = _run_cases(cases, config, stage, workers)
        rows = [r for o in outputs for r in o.rows]
        if "as" in config.setups and config.as_count:
            rows += _ablation_rows(config, stage)
        rows.sort(key=lambda r: r["id"])
        write_mirp_json(stage, rows)
        centres = sorted((c for o in outputs for c in o.centres), key=lambda c: c["filename"])
        if centres:
            (stage / MIRP_CENTRES).write_text(dumps(centres))
        atomic_write_jsonl(stage / "manifest.jsonl", rows)
        counts: dict[str, dict[str, int]] = {}
        by_type: dict[str, dict[str, int]] = {}
        for row in rows:
            for key, table in (
                (f"{row['setup']}/{row['marker']}", counts),
                (row["question_type"], by_type),
            ):
                c = table.setdefault(key, {"n": 0, "yes": 0})
                c["n"] += 1
                if is_open(row["question_type"]):  # a word or a number: count the classes
                    classes = c.setdefault("classes", {})
                    classes[str(row["answer"])] = classes.get(str(row["answer"]), 0) + 1
                else:
                    c["yes"] += row["answer"]
        variants = Counter(r["transform"] for r in rows if r["setup"] == "rq1")
        case_info = [
            {**o.source, "modality": "CT", "n_slices": o.n_slices, "n_selected": o.n_selected}
            for o in outputs
        ]
        meta = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "config": config.to_json(),
            "seed": config.seed,
            "n_questions": len(rows),
            "counts": dict(sorted(counts.items())),
            "question_types": {
                name: {**by_type[name], "chance": _chance(name, rows)} for name in sorted(by_type)
            },
            "rq1_transforms": dict(sorted(variants.items())),
            "cases": case_info,
            "versions": software_versions(),
        }
        atomic_write_json(stage / "dataset.json", meta)
    return DatasetSummary(out, len(rows), meta["counts"], meta["question_types"], case_info)
