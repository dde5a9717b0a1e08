"""A run folder written from another harness's logs (``import inspect``, ``import lmms-eval``):
the rows already scored again against the dataset, written as ``eval`` writes a run.

Each importer reads and checks its own logs; this writes what they have in common:
``results.jsonl`` (the rows as given), ``metrics.json`` (``aggregate.compute_metrics`` with
the usage block) and ``run.json`` (the importer's own keys first, then the run's counts, the
usage block and the versions).
"""

from __future__ import annotations

import platform
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from radspatial import __version__

if TYPE_CHECKING:
    from radspatial.eval.usage import Price


@dataclass(frozen=True)
class ImportTarget:
    """What every import is asked besides its logs (both import specs in ``formats/job``):
    the run folder to write (``overwrite``: replace a non-empty one), the dataset every row is
    scored again against, the model's name in ``metrics.json`` (None: the importer's default)
    and the price of the usage block (as ``eval --price``)."""

    out: Path
    data: Path
    overwrite: bool = False
    model: str | None = None
    price: Price | None = None


@dataclass(frozen=True)
class ImportedRun:
    """What an import wrote: the run folder, the logs it read, its rows and error rows, the
    model's name."""

    out: Path
    files: tuple[Path, ...]
    n_rows: int
    n_errors: int
    model: str


def run_info(
    source: Mapping[str, Any], rows: list[dict], *, runs: int, usage: dict[str, Any]
) -> dict[str, Any]:
    """``run.json`` of an imported run: ``source`` (where it came from: harness, data, logs,
    model, ...), then runs, items, status, errors, the usage block and the versions."""
    n_errors = sum(1 for r in rows if r.get("error"))
    return {
        **source,
        "runs": runs,
        "n_items": len({r["id"] for r in rows}),
        "status": "complete" if n_errors == 0 else "incomplete",
        "n_errors": n_errors,
        "usage": usage,
        "versions": {"radspatial": __version__, "python": platform.python_version()},
    }


def write_imported_run(
    stage: Path,
    rows: list[dict],
    source: Mapping[str, Any],
    *,
    runs: int,
    calls: Iterable[dict[str, Any]],
    price: Price | None,
    where: str,
) -> int:
    """Write ``rows`` (in ``eval``'s order) into the staged run folder ``stage`` with their
    metrics and ``run.json``; ``calls``: one usage record per logged call (``eval.usage``),
    ``where``: how a bad usage block is named. Returns the number of error rows."""
    from radspatial.core.io import atomic_write_json, atomic_write_jsonl
    from radspatial.core.metrics_blocks import Usage
    from radspatial.eval.aggregate import compute_metrics
    from radspatial.eval.usage import usage_block

    usage = usage_block(calls, price)
    info = run_info(source, rows, runs=runs, usage=usage)
    metrics = compute_metrics(rows, model=source["model"], runs=runs)
    metrics = metrics.with_blocks(usage=Usage.from_json(usage, where))
    atomic_write_jsonl(stage / "results.jsonl", rows)
    atomic_write_json(stage / "metrics.json", metrics.to_json())
    atomic_write_json(stage / "run.json", info)
    return info["n_errors"]
