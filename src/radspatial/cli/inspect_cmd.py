"""``radspatial import inspect``: inspect_ai logs of a ``radspatial/<task>`` run as a run folder
(docs/inspect.md). The tasks themselves are inspect's to run: ``inspect eval radspatial/bench
-T data=DATASET --model ...`` (``eval/inspect_tasks.py``). Its options are the job spec's
(``formats/job.ImportInspectJob``), as ``radspatial.import_inspect`` takes them."""

from __future__ import annotations

import argparse
from pathlib import Path

from radspatial.cli.common import Command
from radspatial.core.jobspec import add_arguments, caller_terms, from_namespace
from radspatial.formats.job import ImportInspectJob


def _import_arguments(p: argparse.ArgumentParser) -> None:
    add_arguments(p, ImportInspectJob)


def print_cost(run: Path) -> None:
    """An imported run's cost line, as ``eval --price`` prints it."""
    import json

    from radspatial.cli.eval import _print_cost

    _print_cost(json.loads((run / "metrics.json").read_text()).get("usage"))


def cmd_import_inspect(args: argparse.Namespace) -> int:
    from radspatial.formats.job import run_import_inspect

    with caller_terms(ImportInspectJob, "cli"):
        done = run_import_inspect(from_namespace(ImportInspectJob, args))
    lines = [
        f"run folder: {done.out.resolve()}",
        f"  {done.n_rows} rows from {len(done.files)} inspect log(s); {done.n_errors} failed",
        f"  report: radspatial report {done.out} --out REPORT",
    ]
    print("\n".join(lines))
    print_cost(done.out)
    return 0


IMPORT_INSPECT = Command(
    "inspect",
    "inspect_ai logs of a radspatial task (inspect eval radspatial/bench ...) as a run folder",
    "results.jsonl, metrics.json and run.json: each sample's reply scored again against the "
    "dataset (its id and prompt must be the dataset's), so report and export mirp work on the "
    "run. Needs inspect_ai (radspatial[inspect]).",
    _import_arguments,
    cmd_import_inspect,
)
