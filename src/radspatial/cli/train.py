"""``radspatial train``: the localizers' trainers, one subcommand each with its own ``--help``:
``unet`` (the unet localizer on a dataset generated with ``--export-masks``), ``organs`` (the
shipped organs network, ``training/organs_train``) and ``atlas`` (the ``organs+atlas``
localizer's atlas, ``training/organs_atlas``). ``radspatial agent train`` still runs
``train unet`` and says so (deprecated). ``train unet``'s options are the job spec
``training/job.TrainUnetJob``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from radspatial.cli.common import Command, run_job, spec_arguments
from radspatial.training.job import TrainUnetJob, run_train_unet

unet_arguments = spec_arguments(TrainUnetJob)  # also ``agent train``'s


def cmd_train_unet(args: argparse.Namespace) -> int:
    job, metrics = run_job(TrainUnetJob, args, run_train_unet)
    print(f"model: {job.out}")
    print(_train_summary(metrics))
    print(f"metrics: {Path(job.out) / 'metrics.json'} (per structure: Dice, centroid error)")
    return 0


def cmd_agent_train(args: argparse.Namespace) -> int:
    """``radspatial agent train``: the old name of ``train unet``, kept working."""
    print(
        "radspatial agent train is deprecated: use radspatial train unet (same options)",
        file=sys.stderr,
    )
    return cmd_train_unet(args)


def _train_summary(m: dict) -> str:
    """Three lines a person reads after training; the whole dict is in metrics.json."""

    def pct(x: float | None) -> str:
        return "–" if x is None else f"{100 * x:.1f}%"

    dice = "–" if m.get("mean_dice") is None else f"{m['mean_dice']:.3f}"
    q = m.get("questions") or {}
    unet, oracle = q.get("unet") or {}, q.get("oracle") or {}
    return (
        f"  validation ({m.get('split')}): {m.get('n_slices')} slice(s), mean Dice {dice} over "
        f"{len(m.get('dice') or {})} structure(s)\n"
        f"  relative-position questions on them: {q.get('n', 0)}, "
        f"accuracy {pct(unet.get('accuracy'))} (abstained {pct(unet.get('abstain_rate'))}); "
        f"mask oracle {pct(oracle.get('accuracy'))}"
    )


def _organs_arguments(p: argparse.ArgumentParser) -> None:
    from radspatial.training.organs_train import arguments  # its defaults: OrgansConfig's

    arguments(p)


def cmd_train_organs(args: argparse.Namespace) -> int:
    from radspatial.training.organs_train import run

    return run(args)


def _atlas_arguments(p: argparse.ArgumentParser) -> None:
    from radspatial.training.organs_atlas import arguments

    arguments(p)


def cmd_train_atlas(args: argparse.Namespace) -> int:
    from radspatial.training.organs_atlas import run

    return run(args)


UNET_HELP = "train the unet localizer on a dataset generated with --export-masks"
UNET_DESCRIPTION = (
    "Trains the unet localizer on DATASET_DIR's slices and label images and writes MODEL_DIR "
    "(config.json, weights, metrics.json); use it with agent --localizer unet --model MODEL_DIR "
    "or eval --model agent:unet@MODEL_DIR."
)

COMMANDS = (
    Command(
        "train",
        "train a localizer: unet (on a generated dataset), organs (the shipped network), atlas",
        "Each trainer has its own options: radspatial train unet --help, train organs --help, "
        "train atlas --help. Training needs pip install 'radspatial[agent]' (torch).",
        subcommands=(
            Command("unet", UNET_HELP, UNET_DESCRIPTION, unet_arguments, cmd_train_unet),
            Command(
                "organs",
                "train the shipped organs localizer (the organs and organs+atlas network)",
                "Trains on the training patients and phantoms in ../shared/data and writes the "
                "model folder (config.json, weights, the command it was run with); "
                "docs/howto/train.md says how the shipped one was trained.",
                _organs_arguments,
                cmd_train_organs,
                lazy=True,
            ),
            Command(
                "atlas",
                "build the organs+atlas localizer's atlas from the training patients' slices",
                "Writes atlas.npz and atlas.json (volumes and their sha256, slices, the "
                "command); docs/howto/train.md says how the shipped one was built.",
                _atlas_arguments,
                cmd_train_atlas,
                lazy=True,
            ),
        ),
        dest="trainer",
        metavar="TRAINER",
    ),
)
