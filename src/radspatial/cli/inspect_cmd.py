"""``radspatial import inspect``: inspect_ai logs of a ``radspatial/<task>`` run as a run folder
(docs/inspect.md). The tasks themselves are inspect's to run: ``inspect eval radspatial/bench
-T data=DATASET --model ...`` (``eval/inspect_tasks.py``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from radspatial.cli.common import Command, add_output, pass_on


def _import_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--log",
        type=Path,
        required=True,
        help="an inspect log (.eval or .json), or its --log-dir folder",
    )
    p.add_argument(
        "--data",
        type=Path,
        required=True,
        help="the dataset the task ran on (-T data=...): every reply is scored again against it",
    )
    add_output(p, "run folder to write")
    p.add_argument("--model", help="model name in metrics.json (default: the log's model)")


def cmd_import_inspect(args: argparse.Namespace) -> int:
    from radspatial.formats.inspect_import import import_inspect

    done = import_inspect(args.log, args.data, args.out, **pass_on(args, "model", "overwrite"))
    lines = [
        f"run folder: {done.out.resolve()}",
        f"  {done.n_rows} rows from {len(done.files)} inspect log(s); {done.n_errors} failed",
        f"  report: radspatial report {done.out} --out REPORT",
    ]
    print("\n".join(lines))
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
