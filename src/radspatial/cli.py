"""Command line: thin subcommands, each calling one public function.

Bad input exits with status 2 and one line naming the file and the problem.
"""

from __future__ import annotations

import argparse
import sys
from importlib import resources
from pathlib import Path

EXAMPLE_CT = "example_ct_sm.nii.gz"
EXAMPLE_SEG = "example_seg.nii.gz"


def bundled_example() -> tuple[Path, Path]:
    """Paths of the bundled real CT and its TotalSegmentator mask (Apache-2.0)."""
    root = resources.files("radspatial.data")
    return Path(str(root / EXAMPLE_CT)), Path(str(root / EXAMPLE_SEG))


def _csv(text: str) -> tuple[str, ...]:
    return tuple(t.strip().lower() for t in text.split(",") if t.strip())


def _window(text: str) -> tuple[float, float]:
    try:
        w, level = (float(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--window wants W,L (e.g. 400,40), got {text!r}"
        ) from None
    return (w, level)


def _add_generate(sub: argparse._SubParsersAction) -> None:
    from radspatial.cli_eval import HelpFormatter

    p = sub.add_parser(
        "generate",
        help="generate a MIRP-style spatial QA benchmark from CT volumes and organ masks",
        description="With no --ct/--cases, uses the bundled real example CT and its mask.",
        formatter_class=HelpFormatter,
    )
    src = p.add_mutually_exclusive_group()
    src.add_argument(
        "--ct", type=Path, help="CT: NIfTI file or DICOM series folder (default: the bundled CT)"
    )
    src.add_argument(
        "--cases",
        type=Path,
        help="CSV with columns ct,seg[,labels,case_id,variant], one case per row (default: "
        "one case from --ct)",
    )
    seg = p.add_mutually_exclusive_group()
    seg.add_argument(
        "--seg", type=Path, help="multilabel mask (NIfTI) of --ct (default: the bundled mask)"
    )
    seg.add_argument(
        "--seg-dir",
        type=Path,
        help="TotalSegmentator per-structure output folder of --ct, instead of --seg "
        "(default: none)",
    )
    p.add_argument(
        "--labels",
        help="label table of the masks: totalsegmentator|btcv|amos|word or a JSON file id -> "
        "name; with --cases, the table of rows with an empty labels column (a row naming "
        "another table is an error) (default: totalsegmentator)",
    )
    p.add_argument("--case-id", help="case id for --ct (default: the CT's file name)")
    p.add_argument(
        "--variant",
        help="anatomy variant of the --ct case, recorded in every row, e.g. mirrored or "
        "situs_inversus; --cases takes a variant column (default: normal)",
    )
    p.add_argument("--out", type=Path, required=True, help="dataset folder to write")
    p.add_argument("--seed", type=int, default=0, help="seed of every random draw")
    p.add_argument(
        "--setups", type=_csv, default=("rq1", "rq2", "rq3", "as"), help="MIRP setups to write"
    )
    p.add_argument(
        "--markers", type=_csv, default=("numbers", "letters", "dots"), help="marker types"
    )
    p.add_argument("--size", type=int, default=512, help="output image size in px")
    p.add_argument("--window", type=_window, default=(400.0, 40.0), help="W,L in HU")
    p.add_argument("--as-count", type=int, default=100, help="blank-image items per marker type")
    p.add_argument("--min-distance", type=float, default=50.0, help="px between the two centres")
    p.add_argument("--margin", type=float, default=10.0, help="px along the asked axis")
    p.add_argument(
        "--questions",
        type=_question_types,
        default=("relative_position",),
        help="question types, comma-separated: relative_position (MIRP), orientation, "
        "symmetry, size, distance, count, laterality, direction, identification, counting; "
        "'spar' = the five SPAR-VQA types, 'open' = the four open types, 'all' = every type",
    )
    p.add_argument(
        "--size-tolerance",
        type=float,
        default=0.10,
        help="size/symmetry/distance: compared values differ by >= this fraction of the larger",
    )
    p.add_argument(
        "--min-component", type=float, default=40.0, help="count: px of the smallest region"
    )
    p.add_argument(
        "--no-group",
        action="store_true",
        help="keep TotalSegmentator vertebrae and ribs separate (MIRP groups them)",
    )
    p.add_argument(
        "--export-masks", action="store_true", help="write each slice's label image (masks/)"
    )
    p.add_argument("--workers", type=int, default=1, help="processes (or Ray CPUs) in parallel")
    add_executor_options(p)
    p.add_argument(
        "--on-error",
        choices=["stop", "skip"],
        default="stop",
        help="a failing case: stop with exit 2 (finished cases are kept for the rerun) or "
        "skip it, recorded in failures.jsonl and dataset.json",
    )
    p.add_argument(
        "--png-level",
        type=int,
        default=3,
        help="PNG zlib level 0-9; 3 is 2x faster than 6 for ~1%% more bytes",
    )
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out dataset")
    p.set_defaults(func=cmd_generate)


def add_executor_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--executor",
        choices=["local", "ray"],
        default="local",
        help="local process pool, or Ray (pip install 'radspatial[ray]'): same output bytes",
    )
    p.add_argument(
        "--ray-address",
        help="Ray cluster to join (default: env RAY_ADDRESS, else a local Ray with --workers CPUs)",
    )


def _cases_from_args(args: argparse.Namespace):
    from radspatial.volumes import Case, check_case_id, read_cases_csv

    if args.cases:
        if args.seg or args.seg_dir:
            raise ValueError("--seg/--seg-dir go with --ct, not --cases")
        for flag, value in (("--case-id", args.case_id), ("--variant", args.variant)):
            if value is not None:
                raise ValueError(f"{flag} goes with --ct; --cases takes a {flag[2:]} column")
        return read_cases_csv(args.cases, labels=args.labels)
    if args.ct:
        seg = args.seg or args.seg_dir
        if seg is None:
            raise ValueError("--ct needs --seg (multilabel mask) or --seg-dir (TotalSegmentator)")
        if args.seg_dir and args.labels not in (None, "totalsegmentator"):
            raise ValueError(f"--labels {args.labels}: a --seg-dir folder is TotalSegmentator's")
        labels = "totalsegmentator" if args.seg_dir else args.labels
        if args.case_id is not None:
            case_id = check_case_id(args.case_id, "--case-id")
        else:
            case_id = check_case_id(_case_id_for(args.ct), f"{args.ct} (use --case-id)")
        variant = args.variant or "normal"
        if not variant.replace("_", "").replace("-", "").isalnum():
            raise ValueError(f"--variant {variant!r}: use letters, digits, _ and -")
        return [Case(case_id, args.ct, seg, labels, variant)]
    if args.seg or args.seg_dir:
        raise ValueError("--seg/--seg-dir need --ct")
    if args.variant not in (None, "normal"):
        raise ValueError(f"--variant {args.variant}: the bundled example is normal anatomy")
    if args.labels not in (None, "totalsegmentator"):
        raise ValueError(f"--labels {args.labels}: the bundled example is TotalSegmentator's")
    ct, seg = bundled_example()
    return [Case("example_ct_sm", ct, seg, "totalsegmentator")]


def _question_types(text: str) -> tuple[str, ...]:
    from radspatial.questions import OPEN, SPAR_VQA, list_question_types

    out: list[str] = []
    for name in _csv(text):
        groups = {"all": list_question_types(), "spar": list(SPAR_VQA), "open": list(OPEN)}
        group = groups.get(name, [name])
        out += [n for n in group if n not in out]
    known = list_question_types()
    bad = [n for n in out if n not in known]
    if bad:
        raise argparse.ArgumentTypeError(f"unknown question type {bad[0]!r}; known: {known}")
    return tuple(out)


def _case_id_for(ct: Path) -> str:
    name = ct.name
    for suffix in (".nii.gz", ".nii"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def cmd_generate(args: argparse.Namespace) -> int:
    from radspatial.dataset import build_dataset
    from radspatial.generate import GenerateConfig
    from radspatial.questions import QuestionRules

    config = GenerateConfig(
        seed=args.seed,
        size=args.size,
        window=args.window,
        setups=args.setups,
        markers=args.markers,
        as_count=args.as_count,
        rules=QuestionRules(
            min_distance_px=args.min_distance,
            margin_px=args.margin,
            size_tolerance=args.size_tolerance,
            min_component_px=args.min_component,
        ),
        question_types=args.questions,
        group=False if args.no_group else None,
        export_masks=args.export_masks,
        png_level=args.png_level,
    )
    cases = _cases_from_args(args)
    summary = build_dataset(
        cases,
        config,
        args.out,
        workers=args.workers,
        overwrite=args.overwrite,
        executor=args.executor,
        address=args.ray_address,
        on_error=args.on_error,
        log=lambda line: print(line, file=sys.stderr),
    )
    print(f"dataset: {summary.out.resolve()}")
    print(f"questions: {summary.n_questions} from {len(summary.cases)} case(s)")
    for case in summary.cases:
        print(f"  {case['case_id']}: {case['n_selected']} of {case['n_slices']} slices used")
    for key, c in {**summary.counts, **summary.question_types}.items():
        if "classes" in c and not c["yes"]:  # an open type: answers per class
            spread = ", ".join(f"{k}: {v}" for k, v in sorted(c["classes"].items())[:6])
            more = " ..." if len(c["classes"]) > 6 else ""
            print(f"  {key:<17} {c['n']:>5} questions, {spread}{more}")
            continue
        n_open = sum(c.get("classes", {}).values())
        tail = f" (+{n_open} open)" if n_open else ""
        yes, no = c["yes"], c["n"] - n_open - c["yes"]
        print(f"  {key:<17} {c['n']:>5} questions, {yes} yes / {no} no{tail}")
    print(f"manifest: {summary.out / 'manifest.jsonl'}")
    if summary.failures:
        print(f"skipped {len(summary.failures)} failing case(s): {summary.out / 'failures.jsonl'}")
    return 0


def _add_eval(sub: argparse._SubParsersAction) -> None:
    from radspatial.cli_eval import (
        MODEL_ARGS_HELP,
        EvalHelpParser,
        HelpFormatter,
        add_backend_flags,
    )

    p = sub.add_parser(
        "eval",
        help="evaluate one or more models on a dataset (radspatial or MIRP layout)",
        description="Model specs: openai:<model>, openai-compat:<model>@<base_url>, "
        "hf:<path or id>, vllm:<path or id>, "
        "baseline:random|yes|no|anatomy-prior|standard-view[@dataset], "
        "agent:<localizer> with localizer one of {localizers} (agent:unet@<model_dir>). "
        "Rerunning the same command resumes: finished calls are never repeated.",
        formatter_class=HelpFormatter,
    )
    p.__class__ = EvalHelpParser  # fills {localizers} from the registry only when help prints
    p.add_argument("--data", type=Path, required=True, help="dataset folder")
    p.add_argument(
        "--model",
        required=True,
        nargs="+",
        action="extend",
        metavar="SPEC",
        help="model spec(s); with several, each gets its run folder OUT/<spec> and one report "
        "is written to OUT/report",
    )
    p.add_argument(
        "--out", type=Path, required=True, help="run folder (with several models: parent folder)"
    )
    p.add_argument("--model-args", metavar="K=V,...", help=MODEL_ARGS_HELP + " (default: none)")
    p.add_argument("--runs", type=int, default=3, help="repeats of every item")
    p.add_argument("--concurrency", type=int, default=8, help="calls in flight at once")
    p.add_argument(
        "--limit",
        type=int,
        help="evaluate N items sampled across setups, markers and question types, answers "
        "balanced, seeded by --limit-seed (default: all items)",
    )
    p.add_argument("--limit-seed", type=int, default=0, help="seed of the --limit sample")
    p.add_argument("--setups", type=_csv, help="only these setups, e.g. rq1,rq2 (default: all)")
    p.add_argument(
        "--markers", type=_csv, help="only these marker types, e.g. dots,letters (default: all)"
    )
    p.add_argument(
        "--questions",
        type=_question_types,
        help="only these question types, e.g. spar or size,distance (default: all)",
    )
    p.add_argument(
        "--prompt",
        type=Path,
        help="custom prompt template file ({question} etc.; default: MIRP's prompts)",
    )
    p.add_argument(
        "--protocol",
        choices=("radspatial", "mirp"),
        default="radspatial",
        help="radspatial: fixed balanced example per item, our parser; mirp: MIRP's "
        "replication protocol (example drawn from another item per run, text before image, "
        "MIRP's prompt for every setup, MIRP's answer parser)",
    )
    p.add_argument("--temperature", type=float, default=0.0, help="sampling temperature")
    p.add_argument("--max-tokens", type=int, default=1024, help="new tokens per reply")
    p.add_argument(
        "--judge",
        help="LLM judge for open answers the rules cannot read, any model spec "
        "(e.g. openai-compat:MODEL@URL); verdicts cached in judge_calls.jsonl "
        "(default: no judge, the rules alone)",
    )
    p.add_argument(
        "--judge-all", action="store_true", help="judge every open answer, not only undecided"
    )
    add_backend_flags(p)
    p.set_defaults(func=cmd_eval)


def cmd_eval(args: argparse.Namespace) -> int:
    import shlex

    from radspatial.cli_eval import backend_options, run_dir_for, show_retries
    from radspatial.models.base import Decoding
    from radspatial.prompts import load_template
    from radspatial.runguard import sigterm_as_interrupt
    from radspatial.runner import EvalConfig, run_eval

    specs = list(dict.fromkeys(args.model))
    if len(specs) != len(args.model):
        raise ValueError("--model: the same spec is given twice")
    options = {spec: backend_options(args, spec) for spec in specs}  # all checked up front
    template = load_template(args.prompt) if args.prompt else None
    out_dirs = {s: args.out if len(specs) == 1 else run_dir_for(args.out, s) for s in specs}
    if len(set(out_dirs.values())) != len(specs):
        raise ValueError("--model: two specs map to the same run folder name")
    show_retries()
    n_err = 0
    for spec in specs:
        config = EvalConfig(
            model=spec,
            runs=args.runs,
            concurrency=args.concurrency,
            limit=args.limit,
            limit_seed=args.limit_seed,
            setups=args.setups,
            markers=args.markers,
            question_types=args.questions,
            decoding=Decoding(temperature=args.temperature, max_tokens=args.max_tokens),
            template=template,
            protocol=args.protocol,
            backend_options=options[spec],
            judge=args.judge,
            judge_all=args.judge_all,
        )
        with sigterm_as_interrupt(), eval_progress(out_dirs[spec], spec):
            try:
                rows = run_eval(args.data, out_dirs[spec], config)
            except (PermissionError, IsADirectoryError, NotADirectoryError) as exc:
                raise ValueError(f"{exc.filename}: {exc.strerror}") from None
        n_err += _print_eval(out_dirs[spec], rows)
    if len(specs) > 1:
        from radspatial.report import build_report

        report = build_report(list(out_dirs.values()), args.out / "report")
        print(f"report: {report.index_html}")
    if n_err:
        again = shlex.join(["radspatial", *getattr(args, "argv", ["eval", "..."])])
        where = args.out / "results.jsonl" if len(specs) == 1 else "each run's results.jsonl"
        print(
            f"radspatial eval: {n_err} call(s) failed after retries (errors, not wrong answers; "
            f"see {where}); to resume, rerun the same command: {again}",
            file=sys.stderr,
        )
        return 3
    return 0


def _print_eval(out: Path, rows: list[dict]) -> int:
    """Print the run's summary; returns the number of errors (calls without an answer)."""
    import json

    metrics = json.loads((out / "metrics.json").read_text())
    o = metrics["overall"]
    n_err = metrics["errors"]
    if o.get("accuracy_mean") is None:
        print(f"{metrics['model']}: no answered calls (errors {n_err} of {metrics['n_rows']})")
    else:
        print(
            f"{metrics['model']}: accuracy {100 * o['accuracy_mean']:.1f} +- "
            f"{100 * (o['accuracy_std'] or 0):.1f}% over {o['runs']} run(s) of "
            f"{o['n_items']} items, invalid {100 * o['invalid_rate']:.1f}%, "
            f"errors {n_err} (not counted in accuracy)"
        )
    h = metrics.get("headline") or {}
    if h.get("accuracy_mean") is not None and h.get("n_items") != o.get("n_items"):
        print(
            f"  relative position RQ1-RQ3 (MIRP's overall): {100 * h['accuracy_mean']:.1f} +- "
            f"{100 * (h['accuracy_std'] or 0):.1f}% of {h['n_items']} items"
        )
    print(f"results: {out / 'results.jsonl'}")
    return n_err


def _add_report(sub: argparse._SubParsersAction) -> None:
    from radspatial.cli_eval import HelpFormatter

    p = sub.add_parser(
        "report",
        help="tables, figures and a browsable HTML report from one or more eval run folders",
        description="Writes summary.md, summary.json, the figures and index.html (tables, "
        "figures and an item gallery with filters; open it in a browser, no server needed).",
        formatter_class=HelpFormatter,
    )
    p.add_argument("runs", nargs="+", type=Path, help="run folders written by radspatial eval")
    p.add_argument("--out", type=Path, required=True, help="report folder")
    p.add_argument(
        "--review",
        type=Path,
        help="human review marks (JSONL, e.g. downloaded from the gallery; "
        "docs/open_questions.md): folded in beside the automatic grades, never over them "
        "(default: none)",
    )
    p.set_defaults(func=cmd_report)


def cmd_report(args: argparse.Namespace) -> int:
    from radspatial.progress import heartbeat
    from radspatial.report import build_report

    with heartbeat("report") as note:
        summary = build_report(args.runs, args.out, review=args.review, log=note)
    print(f"report: {summary.summary_md}")
    print(f"html: {summary.index_html}")
    for fig in summary.figures:
        print(f"figure: {fig}")
    return 0


def _add_agent(sub: argparse._SubParsersAction) -> None:
    from radspatial.cli_eval import EvalHelpParser, HelpFormatter

    class AgentHelpFormatter(HelpFormatter, argparse.RawDescriptionHelpFormatter):
        pass

    p = sub.add_parser(
        "agent",
        help="answer a question about an image with the modular agent (or: agent train)",
        description="radspatial agent --image PNG --question TEXT [--localizer NAME] ...\n"
        "  prints the answer and the agent's reason; --json prints the whole trace instead,\n"
        "  --trace FILE writes it to a file.\n"
        "radspatial agent train --data DATASET_DIR --out MODEL_DIR (unet localizer)\n\n"
        "Localizers: {localizers}.",
        formatter_class=AgentHelpFormatter,
    )
    p.__class__ = EvalHelpParser  # fills {localizers} from the registry only when help prints
    p.add_argument("action", nargs="?", choices=["train"], help="train the unet localizer")
    p.add_argument(
        "--image", type=Path, help="the image, PNG/JPEG; required unless train (default: none)"
    )
    p.add_argument("--question", help="the spatial question; required unless train (default: none)")
    p.add_argument(
        "--localizer",
        default="auto",
        help="auto: markers for marker references, the shipped organs model otherwise; or "
        "one of the localizers listed above",
    )
    p.add_argument(
        "--model",
        type=Path,
        help="model folder: unet's, or organs' instead of the shipped one (default: shipped)",
    )
    p.add_argument(
        "--mask",
        type=Path,
        help="label image in the shown frame, for the mask localizer (default: none)",
    )
    p.add_argument("--labels", help="label table of --mask (default: totalsegmentator, grouped)")
    p.add_argument("--margin", type=float, default=10.0, help="px: abstain below this")
    p.add_argument("--json", action="store_true", help="print the whole trace as JSON")
    p.add_argument(
        "--trace", type=Path, help="write the trace JSON to this file (default: not written)"
    )
    p.add_argument("--overlay", type=Path, help="write an overlay PNG here (default: not written)")
    p.add_argument(
        "--data",
        type=Path,
        help="train: dataset generated with --export-masks; required (default: none)",
    )
    p.add_argument(
        "--out", type=Path, help="train: model folder to write; required (default: none)"
    )
    p.add_argument("--epochs", type=int, help="train: epochs (default: the trainer's)")
    p.add_argument(
        "--size", type=int, help="train: network input size in px (default: the trainer's)"
    )
    p.add_argument("--seed", type=int, default=0, help="train: seed")
    p.add_argument("--threads", type=int, help="train: torch CPU threads (default: torch's)")
    p.set_defaults(func=cmd_agent)


def cmd_agent(args: argparse.Namespace) -> int:
    if args.action == "train":
        return _agent_train(args)
    if args.image is None or args.question is None:
        raise ValueError("radspatial agent needs --image and --question (or: agent train)")
    import json

    from radspatial.agent.core import Agent, draw_overlay, load_image
    from radspatial.agent.types import Context
    from radspatial.io import atomic_write_bytes, atomic_write_json

    if not args.image.is_file():
        raise ValueError(f"{args.image}: no such image")
    options = {"model_dir": args.model} if args.model else {}
    agent = Agent(args.localizer, margin=args.margin, **options)
    context = Context()
    if args.mask is not None:
        import numpy as np
        from PIL import Image

        from radspatial.labels import load_table

        context = Context(
            mask=np.asarray(Image.open(args.mask)), labels=load_table(args.labels).names
        )
    image = load_image(args.image)
    result = agent.answer(image, args.question, context=context)
    verdict = {1: "yes", 0: "no", None: "abstain"}[result.answer]
    if args.json:
        print(json.dumps(result.trace, indent=2))
    else:
        print(f"answer: {verdict} ({result.trace['decision']['reason']})")
    if args.trace:
        atomic_write_json(args.trace, result.trace)
        print(f"trace: {args.trace}", file=sys.stderr if args.json else sys.stdout)
    if args.overlay:
        import io

        buf = io.BytesIO()
        draw_overlay(image, result).save(buf, format="PNG")
        atomic_write_bytes(args.overlay, buf.getvalue())
        print(f"overlay: {args.overlay}", file=sys.stderr if args.json else sys.stdout)
    return 0


def _agent_train(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from radspatial.agent.unet_train import TrainConfig, train_unet

    if args.data is None or args.out is None:
        raise ValueError("radspatial agent train needs --data DATASET_DIR and --out MODEL_DIR")
    config = TrainConfig(seed=args.seed)
    if args.epochs is not None:
        config = replace(config, epochs=args.epochs)
    if args.size is not None:
        config = replace(config, size=args.size)
    if args.threads is not None:
        config = replace(config, threads=args.threads)
    metrics = train_unet(args.data, args.out, config, progress=False)
    print(f"model: {args.out}")
    for key, value in metrics.items():
        print(f"  {key}: {value}")
    return 0


DEMO_MODELS = (
    "baseline:random",
    "baseline:yes",
    "baseline:anatomy-prior",
    "baseline:standard-view",
    "agent:markers",
    "agent:mask",
)
# The mask oracle needs each slice's label image: blank ablation images have none.
_DEMO_SETUPS = {"agent:mask": ("rq1", "rq2", "rq3")}


def _add_demo(sub: argparse._SubParsersAction) -> None:
    from radspatial.cli_eval import HelpFormatter

    p = sub.add_parser(
        "demo",
        help="the main job on the bundled real CT: generate, evaluate the baselines, report",
        description="Generates OUT/dataset from the bundled real CT, evaluates each model into "
        "OUT/eval/<model> and writes OUT/report. Progress goes to stderr (plain lines every "
        "RADSPATIAL_PROGRESS_SECONDS, default 5, when not a terminal).",
        formatter_class=HelpFormatter,
    )
    p.add_argument("--out", type=Path, default=Path("runs/demo"), help="output folder")
    p.add_argument("--runs", type=int, default=3, help="repeats of every item")
    p.add_argument(
        "--model",
        action="append",
        help=f"model spec to evaluate (repeatable; default: {', '.join(DEMO_MODELS)})",
    )
    p.add_argument(
        "--questions",
        type=_question_types,
        default="all",
        help="question types, comma-separated, or spar, open, all (every type: MIRP relative "
        "position, the SPAR-VQA and the open types)",
    )
    p.set_defaults(func=cmd_demo)


def _stage(text: str) -> None:
    print(f"demo: {text}", file=sys.stderr, flush=True)


def eval_progress(run_dir: Path, spec: str):
    """Calls finished so far, printed every few seconds when stderr is not a terminal (the
    runner's own bar shows only on a terminal)."""
    import json

    from radspatial.progress import watch_lines
    from radspatial.runner import CALLS

    def total() -> int | None:
        try:
            info = json.loads((run_dir / "run.json").read_text())
            return int(info["n_items"]) * int(info["runs"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    return watch_lines(run_dir / CALLS, f"eval {spec}: calls", total)


def cmd_demo(args: argparse.Namespace) -> int:
    import time

    from radspatial.dataset import build_dataset
    from radspatial.generate import GenerateConfig
    from radspatial.report import build_report
    from radspatial.runner import EvalConfig, run_eval
    from radspatial.volumes import Case

    ct, seg = bundled_example()
    data = args.out / "dataset"
    specs = args.model or DEMO_MODELS
    n_steps = len(specs) + 2
    start = time.monotonic()
    _stage(f"[1/{n_steps}] generating the benchmark from the bundled CT into {data}")
    summary = build_dataset(
        [Case("example_ct_sm", ct, seg, "totalsegmentator")],
        GenerateConfig(export_masks=True, question_types=args.questions),
        data,
        overwrite=True,
    )
    print(f"dataset: {data} ({summary.n_questions} questions)", flush=True)
    run_dirs = []
    for k, spec in enumerate(specs, start=2):
        run_dir = args.out / "eval" / spec.replace(":", "_").replace("/", "_").replace("@", "_")
        _stage(f"[{k}/{n_steps}] evaluating {spec} ({time.monotonic() - start:.0f} s so far)")
        config = EvalConfig(model=spec, runs=args.runs, setups=_DEMO_SETUPS.get(spec))
        with eval_progress(run_dir, spec):
            rows = run_eval(data, run_dir, config)
        _print_eval(run_dir, rows)
        sys.stdout.flush()
        run_dirs.append(run_dir)
    _stage(f"[{n_steps}/{n_steps}] writing the report ({time.monotonic() - start:.0f} s so far)")
    report = build_report(run_dirs, args.out / "report", log=_stage)
    print(f"report: {report.summary_md}")
    for fig in report.figures:
        print(f"figure: {fig}")
    _stage(f"done in {time.monotonic() - start:.0f} s")
    return 0


def build_parser() -> argparse.ArgumentParser:
    from radspatial import __version__

    parser = argparse.ArgumentParser(
        prog="radspatial", description="Spatial-reasoning benchmarks, evaluation and agents for CT"
    )
    parser.add_argument("--version", action="version", version=f"radspatial {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_generate(sub)
    _add_eval(sub)
    _add_report(sub)
    _add_demo(sub)
    _add_agent(sub)
    from radspatial.cli_more import add_all, add_serve

    add_serve(sub)
    add_all(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        code = _main(argv)
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
        return code
    except BrokenPipeError:  # `radspatial ... | head` closed stdout early: stop quietly
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the exit-time flush must not fail again
        return 141  # as if killed by SIGPIPE (128 + 13), what shells show for `cmd | head`


def _main(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)  # --help prints here
    args.argv = list(sys.argv[1:] if argv is None else argv)
    from radspatial.volumes import InputError

    try:
        return args.func(args)
    except (InputError, FileExistsError, ValueError) as exc:
        msg = " ".join(str(exc).split())
        print(f"radspatial {args.command}: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        print(f"radspatial {args.command}: interrupted", file=sys.stderr)
        return 143 if type(exc).__name__ == "Terminated" else 130


if __name__ == "__main__":
    raise SystemExit(main())
