"""``radspatial phantom`` and ``radspatial counterfactual``: synthetic and edited volumes."""

from __future__ import annotations

import argparse
from pathlib import Path

from radspatial.cli.common import (
    add_executor_options,
    csv_list,
    triple,
)


def add_phantom(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("phantom", help="write synthetic CT phantoms with TotalSegmentator masks")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--n", type=int, default=1, help="number of phantoms")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--shape", type=triple(int), default=(512, 512, 200), help="X,Y,Z voxels")
    p.add_argument("--spacing", type=triple(float), help="sx,sy,sz mm (default ~0.8,0.8,2.5)")
    p.add_argument(
        "--variant", type=csv_list, default=("normal",), help="normal | situs_inversus | displaced"
    )
    p.add_argument("--workers", type=int, default=1)
    add_executor_options(p)
    p.set_defaults(func=cmd_phantom)


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
    p = sub.add_parser("counterfactual", help="counterfactual anatomy from real volumes")
    p.add_argument("kind", choices=["mirror"], help="mirror: situs-inversus-like left-right mirror")
    p.add_argument("--ct", type=Path, required=True)
    p.add_argument("--seg", type=Path, required=True)
    p.add_argument("--labels", help="label table of --seg (default: totalsegmentator)")
    p.add_argument("--out", type=Path, required=True)
    p.set_defaults(func=cmd_counterfactual)


def cmd_counterfactual(args: argparse.Namespace) -> int:
    from radspatial.counterfactual import mirror_case

    ct, seg = mirror_case(args.ct, args.seg, args.out, labels=args.labels)
    print(f"mirrored CT: {ct}")
    print(f"mirrored mask: {seg}")
    return 0
