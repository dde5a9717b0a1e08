"""``radspatial export lmms-eval`` and ``radspatial import lmms-eval``: a dataset as an lmms-eval
task folder, and lmms-eval's sample logs back as a run folder (docs/lmms_eval.md)."""

from __future__ import annotations

import argparse
from pathlib import Path

from radspatial.cli.common import Command, add_output, pass_on
from radspatial.cli.inspect_cmd import IMPORT_INSPECT


def _say(head: str, *details: str) -> int:
    """What was written: a headline, then indented details; exit status 0."""
    print("\n".join([head, *(f"  {line}" for line in details)]))
    return 0


def _export_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", type=Path, required=True, help="dataset folder (radspatial generate)")
    add_output(p, "task folder to write")
    p.add_argument("--name", default="radspatial", help="group name; the tasks are NAME_<setup>")
    p.add_argument(
        "--protocol",
        choices=("radspatial", "mirp"),
        default="radspatial",
        help="prompt protocol: ours, or MIRP's (its examples, text first, its parser)",
    )


def cmd_export_lmms(args: argparse.Namespace) -> int:
    from radspatial.formats.lmms_export import export_lmms

    done = export_lmms(args.data, args.out, **pass_on(args, "name", "protocol", "overwrite"))
    group = f"group {done.name}: {', '.join(done.tasks)} ({done.n_items} yes/no items)"
    run = f"run: lmms-eval --include_path {done.out} --tasks {done.name} --log_samples ..."
    return _say(f"lmms-eval task folder: {done.out.resolve()}", group, run)


def _import_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--samples",
        type=Path,
        required=True,
        help="an lmms-eval *_samples_<task>.jsonl file, or its --output_path folder",
    )
    add_output(p, "run folder to write")
    p.add_argument("--model", help="model name in metrics.json (default: the log's folder)")
    p.add_argument(
        "--data",
        type=Path,
        required=True,
        help="the dataset the task was exported from: every logged row is scored again "
        "against its answers (a row that differs is refused)",
    )


def cmd_import_lmms(args: argparse.Namespace) -> int:
    from radspatial.formats.lmms_import import import_lmms

    done = import_lmms(args.samples, args.out, **pass_on(args, "model", "data", "overwrite"))
    return _say(
        f"run folder: {done.out.resolve()}",
        f"{done.n_rows} rows from {len(done.files)} sample log(s); {done.n_errors} failed",
        f"report: radspatial report {done.out} --out REPORT",
    )


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
