"""The ``probe build``, ``train``, ``eval`` and ``table`` job specs: every option of those
commands and of ``radspatial.probe_build`` / ``probe_train`` / ``probe_eval`` / ``probe_table``,
declared once (``core/jobspec``), and the ``run_probe_*`` functions both faces call.

The library functions underneath (``build_probes(cases, out, ...)``, ``train_probe``,
``evaluate_probe``) keep their signatures: they take a list of ``Case``s and settings with no
flag (``slice_samples``); these entries take what the command line takes (a cases CSV), plus
the cases as a list in Python.

Light on purpose: the command line builds its parsers from this module, so nothing heavy is
imported at module level.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from radspatial.core.jobspec import csv_list, fractions, option

RAY_HELP = "Ray cluster to join (default: env RAY_ADDRESS, else a local Ray with --workers CPUs)"
TASKS_HELP = "comma-separated subset of tasks (default: all)"
PROGRESS_HELP = "print progress on stderr (the command line always does)"


# fmt: off
@dataclass(frozen=True, kw_only=True)
class ProbeBuildJob:
    """What one ``probe build`` is asked: the cases, the folder, the images and tasks."""

    cases: Path | Sequence[Any] | None = option(None, type=Path,
        annotation="str | Path | Sequence[Case] | None",
        help="cases CSV ct,seg[,labels,case_id,variant] (default: the bundled example CT)")
    out: Path = option(type=Path, positional=True, annotation="str | Path",
        help="probe dataset folder to write")
    overwrite: bool = option(False, action="store_true", help="replace a non-empty --out")
    seed: int = option(0, type=int, help="seed of every random draw")
    size: int = option(224, type=int, help="whole-slice image side in px")
    crop: int = option(96, type=int, help="organ crop side in px (multiple of 4)")
    context: str = option("keep", choices=["keep", "remove"],
        help="organ crops with the tissue around the organ (keep) or without it (remove: "
        "SPAR-Bench's context-free tiles)")
    splits: tuple[float, float, float] = option((0.7, 0.15, 0.15), type=fractions, csv=True,
        annotation="tuple[float, float, float] | str", help="train,val,test fractions of the cases")
    tasks: tuple[str, ...] | None = option(None, type=csv_list, csv=True,
        annotation="str | Sequence[str] | None", help=TASKS_HELP)
    max_per_case: int | None = option(None, type=int,
        help="at most this many samples per task and case (default: no limit)")
    workers: int = option(1, type=int, help="cases built in parallel processes")
    executor: str = option("local", choices=["local", "ray"],
        help="local process pool, or Ray (pip install 'radspatial[ray]'): same output bytes")
    ray_address: str | None = option(None, help=RAY_HELP)
    progress: bool = option(True, cli=False, help=PROGRESS_HELP)


@dataclass(frozen=True, kw_only=True)
class ProbeTrainJob:
    """What one ``probe train`` is asked: the probe dataset, the encoder and head, training."""

    data: Path = option(type=Path, positional=True, annotation="str | Path",
        help="probe dataset (probe build)")
    encoder: str = option(help="e.g. resnet-small, vit-tiny, resnet50, hf:DIR")
    head: str = option("mlp", choices=["mlp", "transformer", "both"], help="head")
    frozen: str | None = option(None, annotation="str | Path | None",
        help="encoder checkpoint to freeze: our run folder or hf:DIR (default: finetune the "
        "encoder from scratch)")
    tasks: tuple[str, ...] | None = option(None, type=csv_list, csv=True,
        annotation="str | Sequence[str] | None", help=TASKS_HELP)
    epochs: int | None = option(None, type=int, help="training epochs (default: 30)")
    batch_size: int | None = option(None, type=int, help="samples per step (default: 32)")
    lr: float | None = option(None, type=float, help="peak learning rate (default: 0.001)")
    seed: int = option(0, type=int, help="seed of initialisation and batches")
    device: str = option("cpu", help="torch device, e.g. cuda:0")
    out: Path = option(type=Path, positional=True, annotation="str | Path",
        help="probe run folder to write")
    progress: bool = option(True, cli=False, help=PROGRESS_HELP)


@dataclass(frozen=True, kw_only=True)
class ProbeEvalJob:
    """What one ``probe eval`` (zero-shot transfer) is asked."""

    model: Path = option(type=Path, positional=True, annotation="str | Path",
        help="probe run folder (probe train)")
    data: Path = option(type=Path, positional=True, annotation="str | Path",
        help="probe dataset to evaluate on")
    split: str = option("test", help="split of --data: train, val or test")
    out: Path | None = option(None, type=Path, annotation="str | Path | None",
        help="folder for results.json (default: print only, write nothing)")
    batch_size: int = option(64, type=int, help="samples per forward pass")
    device: str = option("cpu", help="torch device, e.g. cuda:0")


@dataclass(frozen=True, kw_only=True)
class ProbeTableJob:
    """What one ``probe table`` (Table 1) is asked: the result folders, where, which split."""

    result_dirs: tuple[Path, ...] = option(type=Path, argument=True, positional=True, nargs="+",
        metavar="results", annotation="Sequence[str | Path]",
        help="probe run or transfer folders")
    out: Path = option(type=Path, positional=True, annotation="str | Path",
        help="folder for table1.md and table1.png")
    split: str = option("test", choices=["train", "val", "test"],
        help="split whose results the table shows")
# fmt: on


def probe_cases(cases: Path | Sequence[Any] | None) -> list[Any]:
    """The cases a build reads: a cases CSV, a list of ``Case``s, or (None) the bundled CT."""
    from radspatial.imaging.volumes import Case, read_cases_csv

    if cases is None:
        from radspatial.core.runtime import bundled_example

        ct, seg = bundled_example()
        return [Case("example_ct_sm", ct, seg, "totalsegmentator")]
    if isinstance(cases, str | Path):
        return read_cases_csv(Path(cases))
    return list(cases)


def run_probe_build(job: ProbeBuildJob) -> dict[str, Any]:
    """Builds the probe dataset ``job`` asks for (``probes/build.build_probes``); returns its
    ``probes.json`` info, with ``n_cases`` added."""
    from radspatial.probes.build import build_probes

    cases = probe_cases(job.cases)
    info = build_probes(
        cases, Path(job.out), seed=job.seed, size=job.size, crop=job.crop, context=job.context,
        splits=job.splits, tasks=job.tasks, max_per_case=job.max_per_case, workers=job.workers,
        overwrite=job.overwrite, progress=job.progress, executor=job.executor,
        address=job.ray_address,
    )  # fmt: skip
    return {**info, "n_cases": len(cases)}


def run_probe_train(job: ProbeTrainJob) -> dict[str, Any]:
    """Trains the probes ``job`` asks for (``probes/train.train_probe``); returns results.json."""
    from radspatial.probes.train import train_probe

    given = {k: getattr(job, k) for k in ("epochs", "batch_size", "lr")}
    return train_probe(
        Path(job.data), Path(job.out), encoder=job.encoder, head=job.head, frozen=job.frozen,
        tasks=job.tasks, seed=job.seed, device=job.device, progress=job.progress,
        **{k: v for k, v in given.items() if v is not None},
    )  # fmt: skip


def run_probe_eval(job: ProbeEvalJob) -> dict[str, Any]:
    """The zero-shot transfer ``job`` asks for (``probes/evaluate.evaluate_probe``)."""
    from radspatial.probes.evaluate import evaluate_probe

    out = Path(job.out) if job.out is not None else None
    return evaluate_probe(Path(job.model), Path(job.data), out, split=job.split,
                          batch_size=job.batch_size, device=job.device)  # fmt: skip


def run_probe_table(job: ProbeTableJob) -> Path:
    """Table 1 of ``job``'s result folders (``probes/table.write_table``); the .md path."""
    from radspatial.probes.table import write_table

    return write_table([Path(d) for d in job.result_dirs], Path(job.out), split=job.split)
