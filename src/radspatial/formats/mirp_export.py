"""``radspatial export mirp``: any eval run in MIRP's inference-output layout.

MIRP's evaluation scripts read one folder per setup and marker holding
``answers/<stem>_all_images_run_<k>.json``: a list of ``{file_name, results_call: [{question,
model_answer, expected_answer, entire_prompt}]}`` (``stem`` is the qa file's name: ``qa``,
``qa_dots``, ...). The anatomy script also needs MIRP's standard-view centres file in the folder
it runs in. Layout written::

    OUT/center_of_anatomical_stuctures_in_standard_radiological_orientation.json
    OUT/RQ1_qa/answers/qa_all_images_run_0.json ...   (+ a copy of the centres file)
    OUT/RQ2_qa_dots/answers/qa_dots_all_images_run_0.json ...
    OUT/AS_qa_numbers/answers/...

Run MIRP's scripts inside each folder, e.g. ``cd OUT/RQ1_qa && python
RQ3-1_calculate_results_anatomy.py``. Relative-position items only (MIRP's question type). A
failed call (no reply: an error, not an answer) is left out, as the run's metrics leave it out;
resume the run first to have every item.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from radspatial.bench.mirp import MIRP_CENTRES, class_name
from radspatial.core.datafiles import read_bytes_bounded, read_json
from radspatial.core.io import atomic_write_bytes, dumps
from radspatial.core.records import RELPOS, ResultRow, read_results
from radspatial.core.safepath import inside, recorded_root
from radspatial.questions.manifest import read_manifest


@dataclass(frozen=True)
class MirpExport:
    out: Path
    folders: list[str]  # one per setup and marker, e.g. RQ1_qa, RQ2_qa_dots
    runs: int
    n_items: int
    n_errors: int  # failed calls, left out (as the run's metrics leave them out)
    centres: str | None  # where the centres file came from, or None when unavailable


def folder_name(setup: str, marker: str) -> tuple[str, str]:
    """(folder, qa stem): ("RQ1_qa", "qa"), ("RQ2_qa_dots", "qa_dots")."""
    stem = "qa" if marker == "none" else f"qa_{marker}"
    return f"{setup.upper()}_{stem}", stem


def file_name(row: ResultRow) -> str:
    """The image's file name (MIRP's key); older results without ``image`` use the id."""
    if row.image:
        return Path(row.image).name
    name = row.id.split("/")[2]
    return name if name.endswith(".png") else f"{name}.png"


def _answers(rows: list[ResultRow]) -> list[dict[str, Any]]:
    """One run's rows of one setup/marker as MIRP's list of per-image entries, in item order."""
    entries: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        entries.setdefault(file_name(r), []).append(
            {
                "question": r.question,
                "model_answer": r.reply,
                "expected_answer": int(r.expected),
                "entire_prompt": r.prompt or "",
            }
        )
    return [{"file_name": k, "results_call": v} for k, v in entries.items()]


def _centres_from_manifest(root: Path) -> list[dict[str, Any]] | None:
    """Centres of the asked structures, for datasets generated before the centres file."""
    manifest = root / "manifest.jsonl"
    if not manifest.is_file():
        return None
    by_file: dict[str, dict[str, dict]] = defaultdict(dict)
    for _, row in read_manifest(manifest):
        for obj in row.objects:
            if obj.display_name and obj.center_xy_canonical:
                x, y = obj.center_xy_canonical
                name = class_name(obj.display_name)
                entry = {"class_name": name, "center_x": x, "center_y": y}
                by_file[Path(row.image).name][name] = entry
    return [
        {"filename": f, "label_info": list(v.values())} for f, v in sorted(by_file.items())
    ] or None


def run_data(run_dir: Path) -> Path | None:
    """The dataset folder run.json names (``core.safepath.recorded_root``), or None."""
    info_path = run_dir / "run.json"
    if not info_path.is_file():
        return None
    return recorded_root(run_dir, read_json(info_path, want=dict).get("data"))


def _centres(run_dir: Path) -> tuple[bytes | None, str | None]:
    root = run_data(run_dir)
    if root is None:
        return None, None
    if (root / MIRP_CENTRES).is_file():
        return read_bytes_bounded(root / MIRP_CENTRES), str(root / MIRP_CENTRES)
    built = _centres_from_manifest(root)
    if built is None:
        return None, None
    return dumps(built).encode(), f"{root / 'manifest.jsonl'} (asked structures only)"


def export_mirp(run_dir: Path, out: Path, *, overwrite: bool = False) -> MirpExport:
    """Write ``run_dir``'s replies in MIRP's inference-output layout under ``out``."""
    from radspatial.core.staging import staged

    run_dir = Path(run_dir)
    results = run_dir / "results.jsonl"
    if not results.is_file():
        raise ValueError(f"{run_dir}: no results.jsonl (did the eval finish?)")
    rows = [r for r in read_results(results) if r.question_type == RELPOS]
    if not rows:
        raise ValueError(f"{results}: no relative-position items to export")
    n_errors = sum(1 for r in rows if r.error or r.reply is None)
    answered = [r for r in rows if not (r.error or r.reply is None)]
    groups: dict[tuple[str, str], dict[int, list]] = defaultdict(lambda: defaultdict(list))
    for r in sorted(answered, key=lambda r: (r.run, r.id)):
        groups[(r.setup, r.marker)][r.run].append(r)
    centres, source = _centres(run_dir)
    folders = []
    inputs = {"--run": run_dir, "the run's dataset": run_data(run_dir)}
    made = ("*_qa*/answers", "a MIRP export")
    with staged(Path(out), overwrite, inputs, made) as stage:
        for (setup, marker), by_run in sorted(groups.items()):
            folder, stem = folder_name(setup, marker)
            folders.append(folder)
            for run, run_rows in sorted(by_run.items()):
                rel = f"{folder}/answers/{stem}_all_images_run_{run}.json"
                path = inside(stage, rel, where=str(results), what="output path")
                path.parent.mkdir(parents=True, exist_ok=True)
                atomic_write_bytes(path, dumps(_answers(run_rows)).encode())
            if centres is not None and setup == "rq1":
                atomic_write_bytes(stage / folder / MIRP_CENTRES, centres)
        if centres is not None:
            atomic_write_bytes(stage / MIRP_CENTRES, centres)
    n_runs = len({r.run for r in rows})
    return MirpExport(
        Path(out),
        folders,
        n_runs,
        len(rows) // max(n_runs, 1),
        n_errors,
        source,
    )
