"""``radspatial generate``: a benchmark dataset from CT cases (one public call: build_dataset)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import radspatial.cli.common as common
from radspatial.core import rules
from radspatial.core.records import DEFAULT_TYPE


def _arguments(p: argparse.ArgumentParser) -> None:
    _add_inputs(p)
    p.add_argument("--out", type=Path, required=True, help="dataset folder to write")
    p.add_argument("--seed", type=int, default=0, help="seed of every random draw")
    _add_question_options(p)
    _add_rules_option(p)
    _add_display_options(p)
    _add_plane_options(p)
    common.add_executor_options(p, workers="processes (or Ray CPUs) in parallel")
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


def _add_inputs(p: argparse.ArgumentParser) -> None:
    """Which cases: --ct with --seg or --seg-dir, or a --cases CSV (default: the bundled CT)."""
    either_or = (
        {
            "--ct": "CT: NIfTI file or DICOM series folder (default: the bundled CT)",
            "--cases": "CSV with columns ct,seg[,labels,case_id,variant], one case per row "
            "(default: one case from --ct)",
        },
        {
            "--seg": "multilabel mask of --ct: NIfTI, NRRD label map (.nrrd, .seg.nrrd) or "
            "DICOM SEG (default: the bundled mask)",
            "--seg-dir": "TotalSegmentator per-structure output folder of --ct, instead of "
            "--seg (default: none)",
        },
    )
    for flags in either_or:
        group = p.add_mutually_exclusive_group()
        for flag, text in flags.items():
            group.add_argument(flag, type=Path, help=text)
    p.add_argument(
        "--labels",
        help="label table of the masks: totalsegmentator|totalsegmentator_mr|btcv|amos|word or a "
        "JSON file id -> name; with --cases, the table of rows with an empty labels column (a "
        "row naming another table is an error) (default: the names a DICOM SEG or .seg.nrrd "
        "gives its segments, else totalsegmentator)",
    )
    p.add_argument("--case-id", help="case id for --ct (default: the CT's file name)")
    p.add_argument(
        "--variant",
        help="anatomy variant of the --ct case, recorded in every row, e.g. mirrored or "
        "situs_inversus; --cases takes a variant column (default: normal)",
    )


def _add_rules_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--rules",
        choices=rules.RULE_PROFILES,
        default="mirp",
        help="mirp: MIRP's rules (centres 50 px apart along the asked axis, size twice the "
        "drawn marker, markers at the centre of mass, MIRP's boxes and dots); strict: "
        "radspatial's earlier rules (interior markers that agree with the centres, a margin, "
        "outlined boxes, ringed dots); see docs/mirp.md",
    )


def _add_question_options(p: argparse.ArgumentParser) -> None:
    """What is asked and drawn: setups, markers, image, question types and their thresholds."""
    from radspatial.imaging.markers import MARKER_TYPES, marker_names

    p.add_argument(
        "--setups",
        type=common.csv_lower,
        default=("rq1", "rq2", "rq3", "as"),
        help="MIRP setups to write",
    )
    p.add_argument(
        "--markers",
        type=common.csv_lower,
        default=MARKER_TYPES,
        help=f"marker styles, comma-separated: {', '.join(marker_names())}",
    )
    p.add_argument("--size", type=int, default=512, help="output image size in px")
    p.add_argument("--as-count", type=int, default=100, help="blank-image items per marker type")
    p.add_argument(
        "--min-distance",
        type=float,
        default=rules.MIN_DISTANCE_PX,
        help="px between the two centres",
    )
    p.add_argument("--margin", type=float, default=rules.MARGIN_PX, help="px along the asked axis")
    p.add_argument(
        "--questions",
        type=common.question_types,
        default=(DEFAULT_TYPE,),
        help="question types, comma-separated: relative_position (MIRP), orientation, "
        "symmetry, size, distance, count, laterality, direction, identification, counting; "
        "'spar' = SPAR-VQA as SPAR-Bench's Table 2 (five types, multiple choice where "
        "multi-class), 'spar-binary' = the earlier all-yes/no SPAR-VQA types, 'open' = the four "
        "open types, 'all' = every type",
    )
    p.add_argument(
        "--size-tolerance",
        type=float,
        default=rules.SIZE_TOLERANCE,
        help="size/symmetry/distance: compared values differ by >= this fraction of the larger",
    )
    p.add_argument(
        "--min-component",
        type=float,
        default=rules.MIN_COMPONENT_PX,
        help="count: px of the smallest region",
    )
    p.add_argument(
        "--no-group",
        action="store_true",
        help="keep TotalSegmentator vertebrae and ribs separate (MIRP groups them)",
    )
    p.add_argument(
        "--export-masks", action="store_true", help="write each slice's label image (masks/)"
    )


def _add_display_options(p: argparse.ArgumentParser) -> None:
    """What the volumes are and how their grey values are shown."""
    p.add_argument(
        "--window",
        type=common.window,
        help="W,L in the volume's units (default: 400,40 HU on CT; on MR black at the volume's "
        "1st and white at its 99th percentile)",
    )
    p.add_argument(
        "--modality", type=str.upper, choices=("CT", "MR"),
        help="what the volumes are (ct|mr): the display default and the prompts' words, "
        "recorded in dataset.json and the rows (default: mr when the label table is an MR "
        "one, totalsegmentator_mr, else ct; a CT without air, below -200 HU, is refused)",
    )  # fmt: skip


def _add_plane_options(p: argparse.ArgumentParser) -> None:
    """Which slices are asked about: planes (docs/planes.md), questions per slice, groups."""
    p.add_argument(
        "--planes",
        type=common.csv_lower,
        default=("axial",),
        help="slice planes, comma-separated: axial, coronal, sagittal (docs/planes.md)",
    )
    p.add_argument(
        "--per-slice",
        type=int,
        default=1,
        help="questions per slice and type, each on its own image (another pair, variant)",
    )
    p.add_argument(
        "--consistency",
        action="store_true",
        help="relative position in consistency groups: one slice and pair, the same words, "
        "all 8 rotation/flip variants (and the pair asked the other way round)",
    )


def _cases_from_args(args: argparse.Namespace) -> tuple[list, str]:
    """The cases the flags name, checked as the Python API checks them (``bench/inputs.py``),
    and their modality (``--modality``, else what their label tables say)."""
    from radspatial.bench.inputs import CaseInputs, cases_modality, resolve_cases

    given = CaseInputs(
        **common.pass_on(args, "ct", "seg", "seg_dir", "labels", "case_id", "variant"),
        cases=args.cases,
        modality=args.modality,
    )
    cases = resolve_cases(given)
    modality, note = cases_modality(given, cases)
    if note:
        print(note, file=sys.stderr)
    return cases, modality


def cmd_generate(args: argparse.Namespace) -> int:
    from radspatial.bench.dataset import build_dataset
    from radspatial.bench.generate import GenerateConfig
    from radspatial.core.rules import QuestionRules

    cases, modality = _cases_from_args(args)
    config = GenerateConfig(
        **common.pass_on(args, "seed", "size", "window", "setups", "markers", "as_count"),
        rules=QuestionRules(
            min_distance_px=args.min_distance,
            margin_px=args.margin,
            size_tolerance=args.size_tolerance,
            min_component_px=args.min_component,
            profile=args.rules,
        ),
        question_types=args.questions,
        planes=args.planes,
        consistency=args.consistency,
        per_slice=args.per_slice,
        group=False if args.no_group else None,
        **common.pass_on(args, "export_masks", "png_level"),
        modality=modality,
    )
    summary = build_dataset(
        cases,
        config,
        args.out,
        **common.executor_args(args),
        **common.pass_on(args, "overwrite", "on_error"),
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
    _warn_missing_types(config, summary.question_types, len(summary.cases))
    if summary.failures:
        print(f"skipped {len(summary.failures)} failing case(s): {summary.out / 'failures.jsonl'}")
    return 0


def _warn_missing_types(config: Any, counts: dict[str, Any], n_cases: int) -> None:
    """A type asked for that no slice could ask is said, not just left out of the counts."""
    from radspatial.questions import get_question_type

    for name in config.question_types:
        if set(get_question_type(name).setups) & set(config.setups) and name not in counts:
            print(f"warning: no {name} question in {n_cases} case(s): no slice met its rules "
                  "(structures, distances and margins; docs/spar_vqa.md, docs/open_questions.md)",
                  file=sys.stderr)  # fmt: skip


COMMANDS = (
    common.Command(
        "generate",
        "generate a MIRP-style spatial QA benchmark from CT volumes and organ masks",
        "With no --ct/--cases, uses the bundled real example CT and its mask.",
        _arguments,
        cmd_generate,
    ),
)
