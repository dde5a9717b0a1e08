"""``radspatial phantom`` and ``radspatial counterfactual``: synthetic and edited volumes;
``phantom``'s and ``counterfactual mirror``'s options are their job specs'
(``phantoms/job.PhantomJob``, ``bench/job.MirrorJob``), as ``radspatial.phantom`` and
``radspatial.mirror_case`` take them."""

from __future__ import annotations

import argparse

import radspatial.cli.common as common
from radspatial.bench.job import MirrorJob
from radspatial.cli.common import run_job, spec_arguments
from radspatial.phantoms.job import PhantomJob


def cmd_phantom(args: argparse.Namespace) -> int:
    from radspatial.phantoms.job import run_phantom

    _, cases = run_job(PhantomJob, args, run_phantom)
    print(f"phantoms: {args.out} ({args.n} case(s))")
    print(f"cases: {cases}  (radspatial generate --cases {cases} --out ...)")
    return 0


def cmd_counterfactual(args: argparse.Namespace) -> int:
    from radspatial.bench.job import run_mirror

    _, (ct, seg) = run_job(MirrorJob, args, run_mirror)
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
        spec_arguments(PhantomJob),
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
                spec_arguments(MirrorJob),
                cmd_counterfactual,
            ),
        ),
        dest="kind",
    ),
)
