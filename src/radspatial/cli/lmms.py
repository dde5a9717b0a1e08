"""``radspatial export lmms-eval`` and ``radspatial import lmms-eval``: a dataset as an lmms-eval
task folder, and lmms-eval's sample logs back as a run folder (docs/lmms_eval.md); their
options are the job specs' (``formats/job``), as ``radspatial.export_lmms`` / ``import_lmms``
take them."""

from __future__ import annotations

import argparse

from radspatial.cli.common import Command
from radspatial.cli.inspect_cmd import IMPORT_INSPECT, print_cost
from radspatial.core.jobspec import add_arguments, caller_terms, from_namespace
from radspatial.formats.job import ExportLmmsJob, ImportLmmsJob


def _say(head: str, *details: str) -> int:
    """What was written: a headline, then indented details; exit status 0."""
    print("\n".join([head, *(f"  {line}" for line in details)]))
    return 0


def _export_arguments(p: argparse.ArgumentParser) -> None:
    add_arguments(p, ExportLmmsJob)


def cmd_export_lmms(args: argparse.Namespace) -> int:
    from radspatial.formats.job import run_export_lmms

    with caller_terms(ExportLmmsJob, "cli"):
        done = run_export_lmms(from_namespace(ExportLmmsJob, args))
    group = f"group {done.name}: {', '.join(done.tasks)} ({done.n_items} yes/no items)"
    run = f"run: lmms-eval --include_path {done.out} --tasks {done.name} --log_samples ..."
    return _say(f"lmms-eval task folder: {done.out.resolve()}", group, run)


def _import_arguments(p: argparse.ArgumentParser) -> None:
    add_arguments(p, ImportLmmsJob)


def cmd_import_lmms(args: argparse.Namespace) -> int:
    from radspatial.formats.job import run_import_lmms

    with caller_terms(ImportLmmsJob, "cli"):
        done = run_import_lmms(from_namespace(ImportLmmsJob, args))
    _say(
        f"run folder: {done.out.resolve()}",
        f"{done.n_rows} rows from {len(done.files)} sample log(s); {done.n_errors} failed",
        f"report: radspatial report {done.out} --out REPORT",
    )
    print_cost(done.out)
    return 0


EXPORT_LMMS = Command(
    "lmms-eval",
    "a generated dataset as an lmms-eval task folder scored by radspatial",
    "One task per setup (NAME_rq1, ...) and the group NAME, the dataset as parquet, and "
    "utils.py hooks that call radspatial's prompt, parser and scoring. Run it with "
    "lmms-eval --include_path OUT --tasks NAME. Needs pyarrow (radspatial[hf-export]).",
    _export_arguments,
    cmd_export_lmms,
)

COMMANDS = (
    Command(
        "import",
        "read another tool's outputs into radspatial's layout",
        dest="kind",
        metavar="KIND",
        subcommands=(
            Command(
                "lmms-eval",
                "lmms-eval sample logs (--log_samples) of an exported task as a run folder",
                "results.jsonl, metrics.json and run.json from the result rows the task's "
                "hooks logged, each scored again against --data, so report and export mirp "
                "work on the run.",
                _import_arguments,
                cmd_import_lmms,
            ),
            IMPORT_INSPECT,
        ),
    ),
)
