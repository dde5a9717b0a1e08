"""``radspatial import lmms-eval``: lmms-eval's ``--log_samples`` files as a radspatial run folder.

A task written by ``radspatial export lmms-eval`` scores every reply into a ``results.jsonl``
row (``eval.lmms_tasks``) and lmms-eval logs it with the sample (under each metric name; we read
``accuracy``). This reads every ``*_samples_<task>.jsonl`` under ``--samples`` (a file or a
folder), checks each row (``ResultRow.from_json``) and that its reply is the sample's
``filtered_resps``, and writes ``results.jsonl``, ``metrics.json`` (``aggregate.compute_metrics``)
and ``run.json`` into ``OUT``, staged, so ``report`` and ``export mirp`` read it as any run.

An item logged twice (a task run again into the same folder) keeps the row of the file whose
name sorts last: lmms-eval's names start with the run's date and time.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from radspatial import __version__
from radspatial.core.datafiles import DataFileError, read_json_lines
from radspatial.core.records import ResultRow
from radspatial.core.safepath import inside
from radspatial.eval.lmms_tasks import ROW_METRIC

SAMPLES_GLOB = "*_samples_*.jsonl"


@dataclass(frozen=True)
class LmmsImport:
    out: Path
    files: tuple[Path, ...]
    n_rows: int
    n_errors: int
    model: str


def sample_files(samples: Path) -> list[Path]:
    """The sample logs at ``samples``: the file itself, or every log under the folder."""
    samples = Path(samples)
    if samples.is_file():
        return [samples]
    if not samples.is_dir():
        raise DataFileError(f"{samples}: no such file or folder")
    files = sorted(samples.rglob(SAMPLES_GLOB), key=lambda p: (p.name, str(p)))
    if not files:
        raise DataFileError(f"{samples}: no lmms-eval sample logs ({SAMPLES_GLOB})")
    return files


def _sample_row(where: str, sample: dict[str, Any]) -> dict[str, Any]:
    row = sample.get(ROW_METRIC)
    if not isinstance(row, dict) or "id" not in row:
        raise DataFileError(
            f"{where}: no radspatial result row under {ROW_METRIC!r} (not a task written by "
            "radspatial export lmms-eval?)"
        )
    record = ResultRow.from_json(row, where)  # a bad row is refused, naming its line and field
    reply = sample.get("filtered_resps")
    if isinstance(reply, list) and len(reply) == 1:
        reply = reply[0]
    if record.error is None and reply != record.reply:
        raise DataFileError(f"{where}: the row's reply differs from the sample's filtered_resps")
    return record.to_json()


def read_samples(files: list[Path]) -> list[dict[str, Any]]:
    """The result rows of the sample logs, one per item (the last file's, if logged twice),
    sorted by item id as ``eval`` writes them."""
    rows: dict[str, dict[str, Any]] = {}
    for path in files:
        for where, sample in read_json_lines(path):
            row = _sample_row(where, sample)
            rows[row["id"]] = row
    if not rows:
        raise DataFileError(f"{files[0]}: no samples")
    return [rows[k] for k in sorted(rows)]


def import_lmms(
    samples: Path,
    out: Path,
    *,
    model: str | None = None,
    data: Path | None = None,
    overwrite: bool = False,
) -> LmmsImport:
    """Write the run folder ``out`` from lmms-eval sample logs at ``samples``.

    ``model``: the name in ``metrics.json`` (default: the folder holding the first log, which
    lmms-eval names after the model); ``data``: the dataset it was exported from, recorded in
    ``run.json`` as ``eval`` does, absolute, as are the rows' image paths (``report`` and
    ``export mirp``, which reads MIRP's centres file there, may run from another folder).
    Raises ``DataFileError`` (a ValueError) on a bad log.
    """
    from radspatial.core.io import atomic_write_json, atomic_write_jsonl
    from radspatial.core.staging import staged
    from radspatial.eval.aggregate import compute_metrics

    files = [f.resolve() for f in sample_files(samples)]
    rows = read_samples(files)
    data = None if data is None else Path(data).resolve()  # absolute, as eval stores it
    if data is not None:  # the image paths as eval writes them: inside the dataset folder
        for r in rows:
            r["image"] = str(inside(Path(data), r["image"], where=f"{r['id']}", what="image"))
    model = model or files[0].parent.name
    n_errors = sum(1 for r in rows if r.get("error"))
    run_info = {
        "source": "lmms-eval",
        **({"data": str(data)} if data is not None else {}),
        "samples": [str(p) for p in files],
        "model": model,
        "runs": 1,
        "n_items": len(rows),
        "status": "complete" if n_errors == 0 else "incomplete",
        "n_errors": n_errors,
        "versions": {"radspatial": __version__, "python": platform.python_version()},
    }
    with staged(Path(out), overwrite) as stage:
        atomic_write_jsonl(stage / "results.jsonl", rows)
        atomic_write_json(stage / "metrics.json", compute_metrics(rows, model=model, runs=1))
        atomic_write_json(stage / "run.json", run_info)
    return LmmsImport(Path(out), tuple(files), len(rows), n_errors, model)
