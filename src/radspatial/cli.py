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
    p = sub.add_parser(
        "generate",
        help="generate a MIRP-style spatial QA benchmark from CT volumes and organ masks",
        description="With no --ct/--cases, uses the bundled real example CT and its mask.",
    )
    src = p.add_mutually_exclusive_group()
    src.add_argument("--ct", type=Path, help="CT: NIfTI file or DICOM series folder")
    src.add_argument("--cases", type=Path, help="CSV with columns ct,seg[,labels,case_id,variant]")
    seg = p.add_mutually_exclusive_group()
    seg.add_argument("--seg", type=Path, help="multilabel mask (NIfTI)")
    seg.add_argument("--seg-dir", type=Path, help="TotalSegmentator per-structure output folder")
    p.add_argument("--labels", help="totalsegmentator|btcv|amos|word or a JSON file id -> name")
    p.add_argument("--case-id", help="case id for --ct (default: file name)")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--setups", type=_csv, default=("rq1", "rq2", "rq3", "as"))
    p.add_argument("--markers", type=_csv, default=("numbers", "letters", "dots"))
    p.add_argument("--size", type=int, default=512, help="output image size in px")
    p.add_argument("--window", type=_window, default=(400.0, 40.0), help="W,L in HU")
    p.add_argument("--as-count", type=int, default=100, help="blank-image items per marker type")
    p.add_argument("--min-distance", type=float, default=50.0, help="px between the two centres")
    p.add_argument("--margin", type=float, default=10.0, help="px along the asked axis")
    p.add_argument(
        "--no-group",
        action="store_true",
        help="keep TotalSegmentator vertebrae and ribs separate (MIRP groups them)",
    )
    p.add_argument("--export-masks", action="store_true", help="write each slice's label image")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--overwrite", action="store_true")
    p.set_defaults(func=cmd_generate)


def _cases_from_args(args: argparse.Namespace):
    from radspatial.volumes import Case, read_cases_csv

    if args.cases:
        if args.seg or args.seg_dir:
            raise SystemExit("radspatial generate: --seg/--seg-dir go with --ct, not --cases")
        return read_cases_csv(args.cases)
    if args.ct:
        seg = args.seg or args.seg_dir
        if seg is None:
            raise SystemExit("radspatial generate: --ct needs --seg or --seg-dir")
        labels = "totalsegmentator" if args.seg_dir else args.labels
        case_id = args.case_id or _case_id_for(args.ct)
        return [Case(case_id, args.ct, seg, labels)]
    if args.seg or args.seg_dir:
        raise SystemExit("radspatial generate: --seg/--seg-dir need --ct")
    ct, seg = bundled_example()
    return [Case("example_ct_sm", ct, seg, "totalsegmentator")]


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
        rules=QuestionRules(min_distance_px=args.min_distance, margin_px=args.margin),
        group=False if args.no_group else None,
        export_masks=args.export_masks,
    )
    cases = _cases_from_args(args)
    summary = build_dataset(cases, config, args.out, workers=args.workers, overwrite=args.overwrite)
    print(f"dataset: {summary.out.resolve()}")
    print(f"questions: {summary.n_questions} from {len(summary.cases)} case(s)")
    for case in summary.cases:
        print(f"  {case['case_id']}: {case['n_selected']} of {case['n_slices']} slices used")
    for key, c in summary.counts.items():
        print(f"  {key:<14} {c['n']:>5} questions, {c['yes']} yes / {c['n'] - c['yes']} no")
    print(f"manifest: {summary.out / 'manifest.jsonl'}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    from radspatial import __version__

    parser = argparse.ArgumentParser(
        prog="radspatial", description="Spatial-reasoning benchmarks, evaluation and agents for CT"
    )
    parser.add_argument("--version", action="version", version=f"radspatial {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_generate(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from radspatial.volumes import InputError

    try:
        return args.func(args)
    except (InputError, FileExistsError, ValueError) as exc:
        msg = " ".join(str(exc).split())
        print(f"radspatial {args.command}: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"radspatial {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
