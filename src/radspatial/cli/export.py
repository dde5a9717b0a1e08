"""``radspatial export`` mirp / hf: a dataset or run in another tool's layout."""

from __future__ import annotations

import argparse
from pathlib import Path

from radspatial.cli.common import Command, add_output, pass_on
from radspatial.cli.lmms import EXPORT_LMMS


def _mirp_arguments(m: argparse.ArgumentParser) -> None:
    m.add_argument("--run", type=Path, required=True, help="run folder written by radspatial eval")
    add_output(m, "output folder")


def _hf_arguments(h: argparse.ArgumentParser) -> None:
    h.add_argument("--data", type=Path, required=True, help="dataset folder (radspatial generate)")
    add_output(h, "output folder")
    h.add_argument(
        "--license",
        help="licence id for the card, e.g. cc-by-4.0 (default: apache-2.0 for the bundled "
        "example CT, else 'other' and the card says it is not stated)",
    )
    h.add_argument("--name", help="dataset name in the card (default: the --data folder name)")
    h.add_argument(
        "--max-shard-mb", type=float, default=256.0, help="image bytes per parquet shard (MB)"
    )


def cmd_export_hf(args: argparse.Namespace) -> int:
    from radspatial.core.textsafe import log_text
    from radspatial.formats.hf_export import export_hf

    done = export_hf(
        args.data, args.out, **pass_on(args, "license", "name", "max_shard_mb", "overwrite")
    )
    print(f"Hugging Face dataset: {done.out.resolve()}")
    print(f"  {done.n_rows} rows in {len(done.shards)} parquet shard(s), licence {done.license}")
    print(f"  columns: {log_text(', '.join(done.columns))}")  # a manifest's own keys
    print(f'  load: datasets.load_dataset("parquet", data_dir="{done.out / "data"}")')
    return 0


def cmd_export_mirp(args: argparse.Namespace) -> int:
    from radspatial.formats.mirp_export import export_mirp

    done = export_mirp(args.run, args.out, overwrite=args.overwrite)
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
                _mirp_arguments,
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
                _hf_arguments,
                cmd_export_hf,
            ),
            EXPORT_LMMS,
        ),
    ),
)
