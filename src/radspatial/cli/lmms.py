"""``radspatial export lmms-eval`` and ``radspatial import lmms-eval``: a dataset as an lmms-eval
task folder, and lmms-eval's sample logs back as a run folder (docs/howto/lmms_eval.md); their
options are the job specs' (``formats/job``), as ``radspatial.export_lmms`` / ``import_lmms``
take them."""

from __future__ import annotations

import argparse

from radspatial.cli.common import Command, run_job, spec_arguments
from radspatial.cli.inspect_cmd import IMPORT_INSPECT, print_cost
from radspatial.formats.job import ExportLmmsJob, ImportLmmsJob


def _say(head: str, *details: str) -> int:
    """What was written: a headline, then indented details; exit status 0."""
    print("\n".join([head, *(f"  {line}" for line in details)]))
    return 0


def cmd_export_lmms(args: argparse.Namespace) -> int:
    from radspatial.formats.job import run_export_lmms

    _, done = run_job(ExportLmmsJob, args, run_export_lmms)
    group = f"group {done.name}: {', '.join(done.tasks)} ({done.n_items} yes/no items)"
    run = f"run: lmms-eval --include_path {done.out} --tasks {done.name} --log_samples ..."
    return _say(f"lmms-eval task folder: {done.out.resolve()}", group, run)


def cmd_import_lmms(args: argparse.Namespace) -> int:
    from radspatial.formats.job import run_import_lmms

    _, done = run_job(ImportLmmsJob, args, run_import_lmms)
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
    spec_arguments(ExportLmmsJob),
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
                spec_arguments(ImportLmmsJob),
                cmd_import_lmms,
            ),
            IMPORT_INSPECT,
        ),
    ),
)
