"""``radspatial export`` mirp / hf: a dataset or run in another tool's layout; their options are
the job specs' (``formats/job``: ``ExportMirpJob``, ``ExportHFJob``), as ``radspatial.export_mirp``
and ``radspatial.export_hf`` take them."""

from __future__ import annotations

import argparse

from radspatial.cli.common import Command, run_job, spec_arguments
from radspatial.cli.lmms import EXPORT_LMMS
from radspatial.formats.job import ExportHFJob, ExportMirpJob


def cmd_export_hf(args: argparse.Namespace) -> int:
    from radspatial.core.textsafe import log_text
    from radspatial.formats.job import run_export_hf

    _, done = run_job(ExportHFJob, args, run_export_hf)
    print(f"Hugging Face dataset: {done.out.resolve()}")
    print(f"  {done.n_rows} rows in {len(done.shards)} parquet shard(s), licence {done.license}")
    print(f"  columns: {log_text(', '.join(done.columns))}")  # a manifest's own keys
    print(f'  load: datasets.load_dataset("parquet", data_dir="{done.out / "data"}")')
    return 0


def cmd_export_mirp(args: argparse.Namespace) -> int:
    from radspatial.formats.job import run_export_mirp

    _, done = run_job(ExportMirpJob, args, run_export_mirp)
    print(f"MIRP layout: {done.out.resolve()}")
    print(f"  {len(done.folders)} setup/marker folder(s): {', '.join(done.folders)}")
    print(f"  {done.n_items} items x {done.runs} run(s); {done.n_errors} failed call(s) left out")
    if done.centres:
        print(f"  centres file from {done.centres}")
    else:
        print("  no centres file: MIRP's anatomy script cannot run on this export")
    return 0


COMMANDS = (
    Command(
        "export",
        "write a run or dataset in another tool's layout",
        dest="kind",
        metavar="KIND",
        subcommands=(
            Command(
                "mirp",
                "an eval run in MIRP's inference-output layout (MIRP's scripts run on it)",
                "One folder per setup and marker (RQ1_qa, RQ2_qa_dots, ...) with "
                "answers/<stem>_all_images_run_<k>.json, and MIRP's standard-view centres "
                "file. Run MIRP's evaluation scripts inside each folder.",
                spec_arguments(ExportMirpJob),
                cmd_export_mirp,
            ),
            Command(
                "hf",
                "a generated dataset as Hugging Face datasets parquet shards with a dataset card",
                "OUT/data/test-*.parquet (one row per question: every manifest field, the "
                "image as an Image feature) and OUT/README.md (dataset card: YAML header, counts, "
                "columns, licence and provenance of the source CTs). Load it with "
                'datasets.load_dataset("parquet", data_dir="OUT/data"). Needs pyarrow: '
                "pip install 'radspatial[hf-export]'.",
                spec_arguments(ExportHFJob),
                cmd_export_hf,
            ),
            EXPORT_LMMS,
        ),
    ),
)
