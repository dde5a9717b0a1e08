"""The on-disk benchmark: staging, MIRP-compatible JSON, manifest.jsonl, dataset.json.

Everything is written into ``OUT.partial/`` and renamed to ``OUT`` only once complete, with
``dataset.json`` written last: a folder without ``dataset.json`` is never a finished dataset.
"""

from __future__ import annotations

import errno
import os
import platform
import shutil
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from radspatial import __version__
from radspatial.ablation import generate_ablation
from radspatial.executor import TaskFailed, check_workers, run_ordered, sigterm_as_interrupt
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
from radspatial.questions import chance_levels
from radspatial.volumes import Case, InputError

# errors of the output disk, not of one case: stop at once, never retried or skipped
_DISK_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM}

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
        with sigterm_as_interrupt():
            yield stage
        swap_in(stage, out)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise


def swap_in(new: Path, out: Path) -> None:
    """Put folder ``new`` at ``out``: the old ``out`` is renamed aside, ``new`` renamed in, and
    only then the old one deleted; if the second rename fails the old one is put back."""
    old = None
    if out.exists() or out.is_symlink():
        old = out.with_name(f"{out.name}.old-{os.getpid()}")
        os.rename(out, old)
    try:
        os.rename(new, out)
    except BaseException:
        if old is not None:
            os.rename(old, out)
        raise
    if old is not None:
        if old.is_dir() and not old.is_symlink():
            shutil.rmtree(old, ignore_errors=True)
        else:
            old.unlink(missing_ok=True)


def check_out(out: Path) -> None:
    """Refuse output folders whose replacement would destroy more than a dataset."""
    resolved, cwd = out.resolve(), Path.cwd().resolve()
    if resolved == cwd or resolved in cwd.parents or not out.name or out.name in (".", ".."):
        raise InputError(
            f"--out {out}: is the current folder or one above it; name a new folder for the output"
        )


def prepare_out(out: Path, overwrite: bool) -> Path:
    """Refuse a non-empty ``out`` unless ``overwrite``; return a fresh staging folder."""
    out = Path(out)
    check_out(out)
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise InputError(f"{out}: exists and is not a folder; remove it or choose another --out")
    if out.exists() and any(out.iterdir()) and not overwrite:
        raise FileExistsError(f"{out}: output folder exists and is not empty (use --overwrite)")
    stage = out.with_name(out.name + ".partial")
    if stage.is_symlink() or (stage.exists() and not stage.is_dir()):
        raise InputError(f"{stage}: staging path exists and is not a folder; remove it")
    try:
        if stage.exists():
            shutil.rmtree(stage)
        stage.mkdir(parents=True)
    except OSError as exc:
        raise InputError(disk_error_line(exc, stage)) from None
    return stage


def disk_error_line(exc: OSError, where: Path) -> str:
    """One line for an OSError of the output disk (full, read-only, no permission)."""
    path = exc.filename or where
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"{path}: no space left on the output disk (free some space and rerun)"
    return f"{path}: cannot write the output ({exc.strerror or exc})"


def _mirp_item(row: dict) -> dict:
    """One published-MIRP-schema question entry from a manifest row.

    Relative position rows are exactly MIRP's schema. Other question types (SPAR-VQA) use the
    same fields for each of their objects (``object3_*`` for distance, none for orientation)
    and add ``question_type`` (and ``count`` for count questions).
    """
    key = "label" if row["marker"] == "letters" else "gray"
    objects = [(k, row.get(f"object{k}")) for k in (1, 2, 3)]
    objects = [(k, o) for k, o in objects if o]
    item: dict = {}
    if row["setup"] != "as":
        for k, o in objects:
            item[f"object{k}_name"] = o["display_name"]
    for k, o in objects:
        if row["marker"] == "none" or row["marker"] == "numbers" and row["setup"] != "as":
            item[f"object{k}_{key}"] = o["label_id"]
        else:
            item[f"object{k}_{key}"] = o["marker_text"]
    for k, o in objects:
        item[f"object{k}_center_x"] = o["center_xy"][0]
        item[f"object{k}_center_y"] = o["center_xy"][1]
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
                "answer_canonical": None,
                "question_type": "relative_position",
                "transform": None,
                "transform_name": None,
                "variant": "blank",
                "source": None,
                **fields,
            }
        )
    return rows


@dataclass(frozen=True)
class CaseFailure:
    """A case that could not be generated: bad input, or (``fatal``) the output disk."""

    case_id: str
    reason: str  # one line naming the file and the problem
    fatal: bool = False


def case_task(job: tuple[Case, GenerateConfig, Path]) -> CaseOutput | CaseFailure:
    """One case on any executor; expected failures come back as values (never retried)."""
    case, config, stage = job
    try:
        return generate_case(case, config, stage)
    except InputError as exc:
        return CaseFailure(case.case_id, " ".join(str(exc).split()))
    except ValueError as exc:
        return CaseFailure(case.case_id, f"{case.ct}: {' '.join(str(exc).split())}")
    except OSError as exc:
        if exc.errno in _DISK_ERRNOS:
            return CaseFailure(case.case_id, disk_error_line(exc, stage), fatal=True)
        raise


def _run_cases(
    cases: Sequence[Case], config: GenerateConfig, stage: Path, workers: int
) -> list[CaseOutput]:
    bar = tqdm(total=len(cases), desc="cases", unit="case", disable=None)
    outputs: list[CaseOutput] = []
    jobs = [(c, config, stage) for c in cases]
    try:
        for i, result in run_ordered(case_task, jobs, workers=workers):
            if isinstance(result, TaskFailed):
                raise InputError(f"{cases[i].ct}: case {cases[i].case_id} failed: {result.message}")
            if isinstance(result, CaseFailure):
                raise InputError(result.reason)
            outputs.append(result)
            bar.update()
    finally:
        bar.close()
    return outputs


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
    check_workers(workers, "local")
    ids = [c.case_id for c in cases]
    if len(set(ids)) != len(ids):
        dup = sorted({i for i in ids if ids.count(i) > 1})
        raise ValueError(f"duplicate case ids: {', '.join(dup)}")
    out = Path(out)
    _check_inputs_outside(cases, out)
    try:
        return _build(cases, config, out, workers=workers, overwrite=overwrite)
    except OSError as exc:
        if exc.errno in _DISK_ERRNOS:
            raise InputError(disk_error_line(exc, out)) from None
        raise


def _build(
    cases: Sequence[Case], config: GenerateConfig, out: Path, *, workers: int, overwrite: bool
) -> DatasetSummary:
    with staged(out, overwrite) as stage:
        outputs = _run_cases(cases, config, stage, workers)
        rows = [r for o in outputs for r in o.rows]
        if "as" in config.setups and config.as_count:
            rows += _ablation_rows(config, stage)
        rows.sort(key=lambda r: r["id"])
        write_mirp_json(stage, rows)
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
                c["yes"] += row["answer"]
        variants = Counter(r["transform"] for r in rows if r["setup"] == "rq1")
        case_info = [
            {**o.source, "n_slices": o.n_slices, "n_selected": o.n_selected} for o in outputs
        ]
        meta = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "config": config.to_json(),
            "seed": config.seed,
            "n_questions": len(rows),
            "counts": dict(sorted(counts.items())),
            "question_types": {
                name: {**by_type[name], "chance": chance_levels()[name]} for name in sorted(by_type)
            },
            "rq1_transforms": dict(sorted(variants.items())),
            "cases": case_info,
            "versions": software_versions(),
        }
        atomic_write_json(stage / "dataset.json", meta)
    return DatasetSummary(out, len(rows), meta["counts"], meta["question_types"], case_info)


def _check_inputs_outside(cases: Sequence[Case], out: Path) -> None:
    """--overwrite replaces ``out`` whole: refuse when an input file lies inside it."""
    root = out.resolve()
    for case in cases:
        for path in (case.ct, case.seg):
            if root == path.resolve() or root in path.resolve().parents:
                raise InputError(f"{path}: input lies inside --out {out}; choose another --out")
