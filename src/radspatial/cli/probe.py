"""``radspatial probe`` build / train / eval / table: the SPAR probes of vision encoders (the
options of build, train and eval are the job specs of ``probes/job``)."""

from __future__ import annotations

import argparse

import radspatial.cli.common as common
from radspatial.cli.common import job_command, run_job
from radspatial.cli.probe_vlm import VLM_COMMAND
from radspatial.probes.job import (
    ProbeBuildJob,
    ProbeEvalJob,
    ProbeTableJob,
    ProbeTrainJob,
    run_probe_build,
    run_probe_eval,
    run_probe_table,
    run_probe_train,
)


def cmd_probe_build(args: argparse.Namespace) -> int:
    job, info = run_job(ProbeBuildJob, args, run_probe_build)
    tasks = info["tasks"]
    print(f"probes: {job.out} ({len(tasks)} task(s), {info['n_cases']} case(s), seed {job.seed})")
    print(f"  {'task':<12} {'level':>5}  {'kind':<14} {'train':>6} {'val':>6} {'test':>6}  chance")
    for name, task in tasks.items():
        c = task["counts"]
        metric = task.get("metric") or "accuracy"
        note = "  (no samples)" if not sum(c.values()) else ""
        print(
            f"  {name:<12} {task.get('level', ''):>5}  {task.get('kind', ''):<14} "
            f"{c.get('train', 0):>6} {c.get('val', 0):>6} {c.get('test', 0):>6}  "
            f"{_metric_value(metric, task['chance'])}{note}"
        )
    return 0


_METRIC_NAMES = {"accuracy": "accuracy", "mean_euclidean_distance_px": "distance (lower=better)"}


def _metric_value(metric: str, value: float | None) -> str:
    """Accuracy as a percentage, distances in px, missing as a dash."""
    if value is None:
        return "–"
    if metric.endswith("accuracy"):
        return f"{100 * value:.1f}%"
    return f"{value:.1f} px" if metric.endswith("_px") else f"{value:.3g}"


def _print_probe_results(results: dict, splits: tuple[str, ...]) -> None:
    """One line per task: its metric on each split and the chance level."""
    head = "".join(f" {s:>8}" for s in splits)
    print(f"  {'task':<12} {'level':>5}  {'metric':<26}{head}   chance   n")
    for name, task in results.get("tasks", {}).items():
        metric = task.get("metric") or next(iter(task.get("chance", {})), "accuracy")
        values = "".join(
            f" {_metric_value(metric, task.get(s, {}).get(metric)):>8}" for s in splits
        )
        chance = _metric_value(metric, task.get("chance", {}).get(metric))
        n = task.get(splits[-1], {}).get("n", "–")
        label = _METRIC_NAMES.get(metric, metric)
        print(f"  {name:<12} {task.get('level', ''):>5}  {label:<26}{values} {chance:>8} {n:>3}")
    for name, why in results.get("skipped", {}).items():
        print(f"  {name:<12} skipped: {why}")


def cmd_probe_train(args: argparse.Namespace) -> int:
    job, results = run_job(ProbeTrainJob, args, run_probe_train)
    n = len(results.get("tasks", {}))
    mode = results.get("mode") or ("frozen" if job.frozen else "finetuned")
    print(f"probe run: {job.out} ({job.encoder} + {job.head}, {mode}, {n} task(s) trained)")
    _print_probe_results(results, ("train", "val", "test"))
    return 0


def cmd_probe_eval(args: argparse.Namespace) -> int:
    job, results = run_job(ProbeEvalJob, args, run_probe_eval)
    where = job.out or "(not written: no --out)"
    print(f"transfer: {job.model} on {job.data}, split {job.split}; results: {where}")
    _print_probe_results(results, (job.split,))
    return 0


def cmd_probe_table(args: argparse.Namespace) -> int:
    job, path = run_job(ProbeTableJob, args, run_probe_table)
    print(f"table: {path}")
    return 0


# fmt: off
COMMANDS = (
    common.Command(
        "probe",
        "SPAR probes of vision encoders: build, train, eval, table; vlm (a VLM's own stages)",
        dest="probe_command",
        subcommands=(
            job_command("build", "probe datasets from cases (real CT or phantoms)",
                        ProbeBuildJob, cmd_probe_build),
            job_command("train", "train probe heads on an encoder (frozen or finetuned)",
                        ProbeTrainJob, cmd_probe_train),
            job_command("eval", "zero-shot transfer of trained probes to another dataset",
                        ProbeEvalJob, cmd_probe_eval),
            job_command("table", "Table 1 (markdown + figure) from result folders",
                        ProbeTableJob, cmd_probe_table),
            VLM_COMMAND,
        ),
    ),
)
# fmt: on
