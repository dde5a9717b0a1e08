"""``radspatial probe`` build / train / eval / table: the SPAR probes of vision encoders."""

from __future__ import annotations

import argparse
from pathlib import Path

import radspatial.cli.common as common
from radspatial.cli.probe_vlm import VLM_COMMAND


def _build_arguments(b: argparse.ArgumentParser) -> None:
    b.add_argument(
        "--cases", type=Path, help="cases CSV ct,seg[,labels,case_id,variant] (default: the "
        "bundled example CT)"
    )  # fmt: skip
    common.add_output(b, "probe dataset folder to write")
    b.add_argument("--seed", type=int, default=0, help="seed of every random draw")
    b.add_argument("--size", type=int, default=224, help="whole-slice image side in px")
    b.add_argument("--crop", type=int, default=96, help="organ crop side in px (multiple of 4)")
    b.add_argument(
        "--context", choices=["keep", "remove"], default="keep",
        help="organ crops with the tissue around the organ (keep) or without it (remove: "
        "SPAR-Bench's context-free tiles)",
    )  # fmt: skip
    b.add_argument(
        "--splits", type=common.fractions, default=(0.7, 0.15, 0.15),
        help="train,val,test fractions of the cases",
    )  # fmt: skip
    b.add_argument(
        "--tasks", type=common.csv_list, help="comma-separated subset of tasks (default: all)"
    )
    b.add_argument(
        "--max-per-case", type=int, help="at most this many samples per task and case "
        "(default: no limit)"
    )  # fmt: skip
    common.add_executor_options(b, workers="cases built in parallel processes")


def _train_arguments(t: argparse.ArgumentParser) -> None:
    t.add_argument("--data", type=Path, required=True, help="probe dataset (probe build)")
    t.add_argument("--encoder", required=True, help="e.g. resnet-small, vit-tiny, resnet50, hf:DIR")
    t.add_argument("--head", default="mlp", choices=["mlp", "transformer", "both"], help="head")
    t.add_argument(
        "--frozen", help="encoder checkpoint to freeze: our run folder or hf:DIR (default: "
        "finetune the encoder from scratch)"
    )  # fmt: skip
    t.add_argument(
        "--tasks", type=common.csv_list, help="comma-separated subset of tasks (default: all)"
    )
    t.add_argument("--epochs", type=int, help="training epochs (default: 30)")
    t.add_argument("--batch-size", type=int, help="samples per step (default: 32)")
    t.add_argument("--lr", type=float, help="peak learning rate (default: 0.001)")
    t.add_argument("--seed", type=int, default=0, help="seed of initialisation and batches")
    t.add_argument("--device", default="cpu", help="torch device, e.g. cuda:0")
    t.add_argument("--out", type=Path, required=True, help="probe run folder to write")


def _eval_arguments(e: argparse.ArgumentParser) -> None:
    e.add_argument("--model", type=Path, required=True, help="probe run folder (probe train)")
    e.add_argument("--data", type=Path, required=True, help="probe dataset to evaluate on")
    e.add_argument("--split", default="test", help="split of --data: train, val or test")
    e.add_argument(
        "--out", type=Path, help="folder for results.json (default: print only, write nothing)"
    )


def _table_arguments(tb: argparse.ArgumentParser) -> None:
    tb.add_argument("results", nargs="+", type=Path, help="probe run or transfer folders")
    tb.add_argument("--out", type=Path, required=True, help="folder for table1.md and table1.png")


def cmd_probe_build(args: argparse.Namespace) -> int:
    from radspatial.imaging.volumes import Case, read_cases_csv
    from radspatial.probes import build_probes

    if args.cases:
        cases = read_cases_csv(args.cases)
    else:
        from radspatial.core.runtime import bundled_example

        ct, seg = bundled_example()
        cases = [Case("example_ct_sm", ct, seg, "totalsegmentator")]
    info = build_probes(
        cases,
        args.out,
        **common.pass_on(
            args,
            "seed",
            "size",
            "crop",
            "context",
            "splits",
            "tasks",
            "max_per_case",
            "overwrite",
        ),
        **common.executor_args(args),
    )
    tasks = info["tasks"]
    print(f"probes: {args.out} ({len(tasks)} task(s), {len(cases)} case(s), seed {args.seed})")
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
    from radspatial.probes.train import train_probe

    given = common.pass_on(args, "epochs", "batch_size", "lr")
    options = {k: v for k, v in given.items() if v is not None}
    results = train_probe(
        args.data,
        args.out,
        **common.pass_on(args, "encoder", "head", "frozen", "tasks", "seed", "device"),
        **options,
    )
    n = len(results.get("tasks", {}))
    mode = results.get("mode") or ("frozen" if args.frozen else "finetuned")
    print(f"probe run: {args.out} ({args.encoder} + {args.head}, {mode}, {n} task(s) trained)")
    _print_probe_results(results, ("train", "val", "test"))
    return 0


def cmd_probe_eval(args: argparse.Namespace) -> int:
    from radspatial.probes.evaluate import evaluate_probe

    results = evaluate_probe(args.model, args.data, args.out, split=args.split)
    where = args.out or "(not written: no --out)"
    print(f"transfer: {args.model} on {args.data}, split {args.split}; results: {where}")
    _print_probe_results(results, (args.split,))
    return 0


def cmd_probe_table(args: argparse.Namespace) -> int:
    from radspatial.probes.table import write_table

    path = write_table(args.results, args.out)
    print(f"table: {path}")
    return 0


COMMANDS = (
    common.Command(
        "probe",
        "SPAR probes of vision encoders: build, train, eval, table; vlm (a VLM's own stages)",
        dest="probe_command",
        subcommands=(
            common.Command(
                "build",
                "probe datasets from cases (real CT or phantoms)",
                arguments=_build_arguments,
                run=cmd_probe_build,
            ),
            common.Command(
                "train",
                "train probe heads on an encoder (frozen or finetuned)",
                arguments=_train_arguments,
                run=cmd_probe_train,
            ),
            common.Command(
                "eval",
                "zero-shot transfer of trained probes to another dataset",
                arguments=_eval_arguments,
                run=cmd_probe_eval,
            ),
            common.Command(
                "table",
                "Table 1 (markdown + figure) from result folders",
                arguments=_table_arguments,
                run=cmd_probe_table,
            ),
            VLM_COMMAND,
        ),
    ),
)
