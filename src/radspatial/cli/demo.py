"""``radspatial demo``: generate, evaluate the baselines and report on the bundled CT."""

from __future__ import annotations

import argparse
from pathlib import Path

from radspatial.cli.eval import _print_eval
from radspatial.cli.generate import _question_types
from radspatial.core.runtime import bundled_example

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


def add_demo(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo",
        help="the main job on the bundled real CT: generate, evaluate the baselines, report",
    )
    p.add_argument("--out", type=Path, default=Path("runs/demo"))
    p.add_argument("--runs", type=int, default=3)
    p.add_argument(
        "--model",
        action="append",
        help=f"model spec to evaluate (repeatable; default: {', '.join(DEMO_MODELS)})",
    )
    p.add_argument(
        "--questions",
        type=_question_types,
        default=_question_types("all"),
        help="question types (default: all = MIRP relative position + the SPAR-VQA types)",
    )
    p.set_defaults(func=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    from radspatial.dataset import build_dataset
    from radspatial.generate import GenerateConfig
    from radspatial.report import build_report
    from radspatial.runner import EvalConfig, run_eval
    from radspatial.volumes import Case

    ct, seg = bundled_example()
    data = args.out / "dataset"
    summary = build_dataset(
        [Case("example_ct_sm", ct, seg, "totalsegmentator")],
        GenerateConfig(export_masks=True, question_types=args.questions),
        data,
        overwrite=True,
    )
    print(f"dataset: {data} ({summary.n_questions} questions)")
    run_dirs = []
    for spec in args.model or DEMO_MODELS:
        run_dir = args.out / "eval" / spec.replace(":", "_").replace("/", "_").replace("@", "_")
        config = EvalConfig(model=spec, runs=args.runs, setups=_DEMO_SETUPS.get(spec))
        rows = run_eval(data, run_dir, config)
        _print_eval(run_dir, rows)
        run_dirs.append(run_dir)
    report = build_report(run_dirs, args.out / "report")
    print(f"report: {report.summary_md}")
    for fig in report.figures:
        print(f"figure: {fig}")
    return 0
