"""``radspatial phantom`` and ``radspatial counterfactual``: synthetic and edited volumes."""

from __future__ import annotations

import argparse
from pathlib import Path

import radspatial.cli.common as common


def _phantom_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", type=Path, required=True, help="output folder")
    p.add_argument("--n", type=int, default=1, help="number of phantoms")
    p.add_argument("--seed", type=int, default=0, help="seed; phantom i depends on (seed, i)")
    p.add_argument("--shape", type=common.triple(int), default=(512, 512, 200), help="X,Y,Z voxels")
    p.add_argument("--spacing", type=common.spacing, help="sx,sy,sz mm (default ~0.8,0.8,2.5)")
    p.add_argument(
        "--variant",
        type=common.csv_list,
        default=("normal",),
        help="anatomy variant(s), comma-separated from normal, situs_inversus, displaced, or "
        "'mixed' (all three); phantom i gets variant i mod the list's length, e.g. "
        "normal,situs_inversus with --n 4: normal, situs_inversus, normal, situs_inversus",
    )
    common.add_executor_options(p, workers="phantoms built in parallel")


def cmd_phantom(args: argparse.Namespace) -> int:
    from radspatial.phantoms import write_phantoms

    variant = args.variant[0] if len(args.variant) == 1 else args.variant
    cases = write_phantoms(
        args.out,
        **common.pass_on(args, "n", "seed", "shape", "spacing"),
        variant=variant,
        **common.executor_args(args),
    )
    print(f"phantoms: {args.out} ({args.n} case(s))")
    print(f"cases: {cases}  (radspatial generate --cases {cases} --out ...)")
    return 0


def _counterfactual_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ct", type=Path, required=True, help="CT: NIfTI file or DICOM series folder")
    p.add_argument("--seg", type=Path, required=True, help="multilabel mask (NIfTI) on the CT grid")
    p.add_argument("--labels", help="label table of --seg (default: totalsegmentator)")
    p.add_argument("--out", type=Path, required=True, help="output folder")


def cmd_counterfactual(args: argparse.Namespace) -> int:
    from radspatial.bench.counterfactual import mirror_case

    ct, seg = mirror_case(args.ct, args.seg, args.out, labels=args.labels)
    print(f"mirrored CT: {ct}")
    print(f"mirrored mask: {seg}")
    cases = args.out / "cases.csv"
    print(f"cases: {cases}  (radspatial generate --cases {cases} --out ...)")
    return 0


COMMANDS = (
    common.Command(
        "phantom",
        "write synthetic CT phantoms with TotalSegmentator masks",
        "Writes each phantom's CT and mask as NIfTI and OUT/cases.csv (case_id, "
        "ct, seg, labels, variant) for radspatial generate --cases.",
        _phantom_arguments,
        cmd_phantom,
    ),
    common.Command(
        "counterfactual",
        "counterfactual anatomy from real volumes",
        "Counterfactual anatomy written as NIfTI cases that radspatial generate --cases reads; "
        "one kind so far: mirror (counterfactual mirror --help).",
        subcommands=(
            common.Command(
                "mirror",
                "the case mirrored left-right (situs-inversus-like)",
                "The case mirrored left-right with paired structures relabelled to their new "
                "side, as NIfTI in OUT, plus OUT/cases.csv listing the original (variant "
                "normal) and the mirror (variant mirrored): radspatial generate --cases "
                "OUT/cases.csv ...",
                _counterfactual_arguments,
                cmd_counterfactual,
            ),
        ),
        dest="kind",
    ),
)
