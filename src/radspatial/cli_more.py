"""Subcommands for phantoms, counterfactuals and probes (kept apart to keep cli.py small).

Each subcommand calls one public function; heavy imports happen inside the commands.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def _triple(kind: type):
    def parse(text: str) -> tuple:
        error = argparse.ArgumentTypeError(f"expected three comma-separated values, got {text!r}")
        try:
            values = tuple(kind(v) for v in text.split(","))
        except ValueError:
            raise error from None
        if len(values) != 3:
            raise error
        return values

    return parse


def _csv(text: str) -> tuple[str, ...]:
    return tuple(t.strip() for t in text.split(",") if t.strip())


def add_phantom(sub: argparse._SubParsersAction) -> None:
    from radspatial.cli_eval import HelpFormatter

    p = sub.add_parser(
        "phantom",
        help="write synthetic CT phantoms with TotalSegmentator masks",
        description="Writes each phantom's CT and mask as NIfTI and OUT/cases.csv (case_id, "
        "ct, seg, labels, variant) for radspatial generate --cases.",
        formatter_class=HelpFormatter,
    )
    p.add_argument("--out", type=Path, required=True, help="output folder")
    p.add_argument("--n", type=int, default=1, help="number of phantoms")
    p.add_argument("--seed", type=int, default=0, help="seed; phantom i depends on (seed, i)")
    p.add_argument("--shape", type=_triple(int), default=(512, 512, 200), help="X,Y,Z voxels")
    p.add_argument("--spacing", type=_triple(float), help="sx,sy,sz mm (default ~0.8,0.8,2.5)")
    p.add_argument(
        "--variant",
        type=_csv,
        default=("normal",),
        help="anatomy variant(s), comma-separated from normal, situs_inversus, displaced, or "
        "'mixed' (all three); phantom i gets variant i mod the list's length, e.g. "
        "normal,situs_inversus with --n 4: normal, situs_inversus, normal, situs_inversus",
    )
    p.add_argument("--workers", type=int, default=1, help="phantoms built in parallel")
    _executor_options(p)
    p.set_defaults(func=cmd_phantom)


def _executor_options(p: argparse.ArgumentParser) -> None:
    from radspatial.cli import add_executor_options

    add_executor_options(p)


def cmd_phantom(args: argparse.Namespace) -> int:
    from radspatial.phantoms import write_phantoms

    variant = args.variant[0] if len(args.variant) == 1 else args.variant
    cases = write_phantoms(
        args.out,
        n=args.n,
        seed=args.seed,
        shape=args.shape,
        spacing=args.spacing,
        variant=variant,
        workers=args.workers,
        executor=args.executor,
        address=args.ray_address,
    )
    print(f"phantoms: {args.out} ({args.n} case(s))")
    print(f"cases: {cases}  (radspatial generate --cases {cases} --out ...)")
    return 0


def add_counterfactual(sub: argparse._SubParsersAction) -> None:
    from radspatial.cli_eval import HelpFormatter

    p = sub.add_parser(
        "counterfactual",
        help="counterfactual anatomy from real volumes",
        description="mirror: the case mirrored left-right with paired structures relabelled "
        "to their new side, as NIfTI in OUT, plus OUT/cases.csv listing the original "
        "(variant normal) and the mirror (variant mirrored): radspatial generate --cases "
        "OUT/cases.csv ...",
        formatter_class=HelpFormatter,
    )
    p.add_argument("kind", choices=["mirror"], help="mirror: situs-inversus-like left-right mirror")
    p.add_argument("--ct", type=Path, required=True, help="CT: NIfTI file or DICOM series folder")
    p.add_argument("--seg", type=Path, required=True, help="multilabel mask (NIfTI) on the CT grid")
    p.add_argument("--labels", help="label table of --seg (default: totalsegmentator)")
    p.add_argument("--out", type=Path, required=True, help="output folder")
    p.set_defaults(func=cmd_counterfactual)


def cmd_counterfactual(args: argparse.Namespace) -> int:
    from radspatial.counterfactual import mirror_case

    ct, seg = mirror_case(args.ct, args.seg, args.out, labels=args.labels)
    print(f"mirrored CT: {ct}")
    print(f"mirrored mask: {seg}")
    cases = args.out / "cases.csv"
    print(f"cases: {cases}  (radspatial generate --cases {cases} --out ...)")
    return 0


def add_probe(sub: argparse._SubParsersAction) -> None:
    from radspatial.cli_eval import HelpFormatter

    fmt = {"formatter_class": HelpFormatter}
    p = sub.add_parser(
        "probe", help="SPAR probes of vision encoders: build, train, eval, table", **fmt
    )
    ps = p.add_subparsers(dest="probe_command", required=True)
    b = ps.add_parser("build", help="probe datasets from cases (real CT or phantoms)", **fmt)
    b.add_argument(
        "--cases", type=Path, help="cases CSV ct,seg[,labels,case_id,variant] (default: the "
        "bundled example CT)"
    )  # fmt: skip
    b.add_argument("--out", type=Path, required=True, help="probe dataset folder to write")
    b.add_argument("--seed", type=int, default=0, help="seed of every random draw")
    b.add_argument("--size", type=int, default=224, help="whole-slice image side in px")
    b.add_argument("--crop", type=int, default=96, help="organ crop side in px (multiple of 4)")
    b.add_argument(
        "--splits", type=_triple(float), default=(0.7, 0.15, 0.15),
        help="train,val,test fractions of the cases",
    )  # fmt: skip
    b.add_argument("--tasks", type=_csv, help="comma-separated subset of tasks (default: all)")
    b.add_argument(
        "--max-per-case", type=int, help="at most this many samples per task and case "
        "(default: no limit)"
    )  # fmt: skip
    b.add_argument("--workers", type=int, default=1, help="cases built in parallel processes")
    _executor_options(b)
    b.add_argument("--overwrite", action="store_true", help="replace a non-empty --out")
    b.set_defaults(func=cmd_probe_build)
    t = ps.add_parser("train", help="train probe heads on an encoder (frozen or finetuned)", **fmt)
    t.add_argument("--data", type=Path, required=True, help="probe dataset (probe build)")
    t.add_argument("--encoder", required=True, help="e.g. resnet-small, vit-tiny, resnet50, hf:DIR")
    t.add_argument("--head", default="mlp", choices=["mlp", "transformer", "both"], help="head")
    t.add_argument(
        "--frozen", help="encoder checkpoint to freeze: our run folder or hf:DIR (default: "
        "finetune the encoder from scratch)"
    )  # fmt: skip
    t.add_argument("--tasks", type=_csv, help="comma-separated subset of tasks (default: all)")
    t.add_argument("--epochs", type=int, help="training epochs (default: 30)")
    t.add_argument("--batch-size", type=int, help="samples per step (default: 32)")
    t.add_argument("--lr", type=float, help="peak learning rate (default: 0.001)")
    t.add_argument("--seed", type=int, default=0, help="seed of initialisation and batches")
    t.add_argument("--device", default="cpu", help="torch device, e.g. cuda:0")
    t.add_argument("--out", type=Path, required=True, help="probe run folder to write")
    t.set_defaults(func=cmd_probe_train)
    e = ps.add_parser("eval", help="zero-shot transfer of trained probes to another dataset", **fmt)
    e.add_argument("--model", type=Path, required=True, help="probe run folder (probe train)")
    e.add_argument("--data", type=Path, required=True, help="probe dataset to evaluate on")
    e.add_argument("--split", default="test", help="split of --data: train, val or test")
    e.add_argument(
        "--out", type=Path, help="folder for results.json (default: print only, write nothing)"
    )
    e.set_defaults(func=cmd_probe_eval)
    tb = ps.add_parser("table", help="Table 1 (markdown + figure) from result folders", **fmt)
    tb.add_argument("results", nargs="+", type=Path, help="probe run or transfer folders")
    tb.add_argument("--out", type=Path, required=True, help="folder for table1.md and table1.png")
    tb.set_defaults(func=cmd_probe_table)


def cmd_probe_build(args: argparse.Namespace) -> int:
    from radspatial.probes import build_probes
    from radspatial.volumes import Case, read_cases_csv

    if args.cases:
        cases = read_cases_csv(args.cases)
    else:
        from radspatial.cli import bundled_example

        ct, seg = bundled_example()
        cases = [Case("example_ct_sm", ct, seg, "totalsegmentator")]
    info = build_probes(
        cases,
        args.out,
        seed=args.seed,
        size=args.size,
        crop=args.crop,
        splits=args.splits,
        tasks=args.tasks,
        max_per_case=args.max_per_case,
        workers=args.workers,
        overwrite=args.overwrite,
        executor=args.executor,
        address=args.ray_address,
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

    options = {
        k: getattr(args, k) for k in ("epochs", "batch_size", "lr") if getattr(args, k) is not None
    }
    results = train_probe(
        args.data,
        args.out,
        encoder=args.encoder,
        head=args.head,
        frozen=args.frozen,
        tasks=args.tasks,
        seed=args.seed,
        device=args.device,
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


def add_export(sub: argparse._SubParsersAction) -> None:
    from radspatial.cli_eval import HelpFormatter

    p = sub.add_parser("export", help="write a run or dataset in another tool's layout")
    kinds = p.add_subparsers(dest="kind", required=True, metavar="KIND")
    m = kinds.add_parser(
        "mirp",
        help="an eval run in MIRP's inference-output layout (MIRP's scripts run on it)",
        description="One folder per setup and marker (RQ1_qa, RQ2_qa_dots, ...) with "
        "answers/<stem>_all_images_run_<k>.json, and MIRP's standard-view centres file. Run "
        "MIRP's evaluation scripts inside each folder.",
        formatter_class=HelpFormatter,
    )
    m.add_argument("--run", type=Path, required=True, help="run folder written by radspatial eval")
    m.add_argument("--out", type=Path, required=True, help="output folder")
    m.add_argument("--overwrite", action="store_true", help="replace a non-empty --out")
    m.set_defaults(func=cmd_export_mirp)
    h = kinds.add_parser(
        "hf",
        help="a generated dataset as Hugging Face datasets parquet shards with a dataset card",
        description="OUT/data/test-*.parquet (one row per question: every manifest field, the "
        "image as an Image feature) and OUT/README.md (dataset card: YAML header, counts, "
        "columns, licence and provenance of the source CTs). Load it with "
        'datasets.load_dataset("parquet", data_dir="OUT/data"). Needs pyarrow: '
        "pip install 'radspatial[hf-export]'.",
        formatter_class=HelpFormatter,
    )
    h.add_argument("--data", type=Path, required=True, help="dataset folder (radspatial generate)")
    h.add_argument("--out", type=Path, required=True, help="output folder")
    h.add_argument(
        "--license",
        help="licence id for the card, e.g. cc-by-4.0 (default: apache-2.0 for the bundled "
        "example CT, else 'other' and the card says it is not stated)",
    )
    h.add_argument("--name", help="dataset name in the card (default: the --data folder name)")
    h.add_argument(
        "--max-shard-mb", type=float, default=256.0, help="image bytes per parquet shard (MB)"
    )
    h.add_argument("--overwrite", action="store_true", help="replace a non-empty --out")
    h.set_defaults(func=cmd_export_hf)


def cmd_export_hf(args: argparse.Namespace) -> int:
    from radspatial.hf_export import export_hf

    done = export_hf(
        args.data,
        args.out,
        license=args.license,
        name=args.name,
        max_shard_mb=args.max_shard_mb,
        overwrite=args.overwrite,
    )
    print(f"Hugging Face dataset: {done.out.resolve()}")
    print(f"  {done.n_rows} rows in {len(done.shards)} parquet shard(s), licence {done.license}")
    print(f"  columns: {', '.join(done.columns)}")
    print(f'  load: datasets.load_dataset("parquet", data_dir="{done.out / "data"}")')
    return 0


def cmd_export_mirp(args: argparse.Namespace) -> int:
    from radspatial.mirp_export import export_mirp

    done = export_mirp(args.run, args.out, overwrite=args.overwrite)
    print(f"MIRP layout: {done.out.resolve()}")
    print(f"  {len(done.folders)} setup/marker folder(s): {', '.join(done.folders)}")
    print(f"  {done.n_items} items x {done.runs} run(s); {done.n_errors} failed call(s) left out")
    if done.centres:
        print(f"  centres file from {done.centres}")
    else:
        print("  no centres file: MIRP's anatomy script cannot run on this export")
    return 0


def add_serve(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="serve the agent as an OpenAI-compatible API")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    key = p.add_mutually_exclusive_group()
    key.add_argument(
        "--api-key-env",
        metavar="NAME",
        help="require the bearer key in environment variable NAME (default: RADSPATIAL_API_KEY "
        "when set); unlike --api-key it does not show in ps",
    )
    key.add_argument("--api-key", help="require this bearer key (visible to other local users)")
    p.add_argument("--localizer", action="append", help="localizers to serve (default: markers)")
    p.add_argument("--model", type=Path, help="model folder for the unet localizer")
    p.add_argument("--threads", type=_positive(int), default=32, help="agent calls at once")
    p.add_argument(
        "--max-connections", type=_positive(int), help="open connections (default 4 x threads)"
    )
    p.add_argument("--max-pixels", type=_positive(int), help="pixels of one image (4096^2)")
    p.add_argument(
        "--max-total-pixels",
        type=_positive(int),
        help="decoded pixels of all requests at once (default 2 x 4096^2, about 0.5 GB)",
    )
    p.set_defaults(func=cmd_serve)


def _positive(kind: type):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text!r}")
        return value

    return parse


def cmd_serve(args: argparse.Namespace) -> int:
    import os

    from radspatial.agent.server import serve

    api_key = args.api_key
    if args.api_key_env is not None:
        api_key = os.environ.get(args.api_key_env)
        if not api_key:
            raise ValueError(f"--api-key-env {args.api_key_env}: that variable is not set or empty")
    elif api_key is None:
        api_key = os.environ.get("RADSPATIAL_API_KEY")
    try:
        serve(
            host=args.host,
            port=args.port,
            api_key=api_key,
            localizers=args.localizer,
            model_dir=args.model,
            threads=args.threads,
            max_connections=args.max_connections,
            max_pixels=args.max_pixels,
            max_total_pixels=args.max_total_pixels,
        )
    except OSError as exc:  # e.g. the port is taken
        why = exc.strerror or exc
        raise ValueError(f"cannot serve on {args.host}:{args.port}: {why}") from None
    return 0


def add_all(sub: argparse._SubParsersAction) -> None:
    add_phantom(sub)
    add_counterfactual(sub)
    add_probe(sub)
    add_export(sub)
