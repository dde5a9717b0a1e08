"""The ``generate`` job spec: every option of ``radspatial generate`` and ``radspatial.generate``,
declared once (``core/jobspec``), and :func:`run_generate`, which both faces call; and the
``counterfactual mirror`` one (:class:`MirrorJob`, ``radspatial.mirror_case``).

Light on purpose: the command line builds its parser from this module, so nothing heavy is
imported at module level.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from radspatial.core import rules as thresholds
from radspatial.core.jobspec import csv_lower, option
from radspatial.core.jobspec import window as window_type
from radspatial.core.modality import MODALITIES
from radspatial.core.records import DEFAULT_TYPE
from radspatial.imaging.planes import DEFAULT_PLANE

if TYPE_CHECKING:
    from radspatial.bench.config import GenerateConfig
    from radspatial.bench.dataset import DatasetSummary
    from radspatial.imaging.volumes import Case

MARKERS = ("numbers", "letters", "dots")  # imaging.markers.MARKER_TYPES (tested equal)
QUESTIONS_HELP = (
    "question types, comma-separated: relative_position (MIRP), orientation, symmetry, size, "
    "distance, count, laterality, direction, identification, counting; 'spar' = SPAR-VQA as "
    "SPAR-Bench's Table 2 (five types, multiple choice where multi-class), 'spar-binary' = the "
    "earlier all-yes/no SPAR-VQA types, 'open' = the four open types, 'all' = every type"
)
RULES_HELP = (
    "mirp: MIRP's rules (centres 50 px apart along the asked axis, size twice the drawn marker, "
    "markers at the centre of mass, MIRP's boxes and dots); strict: radspatial's earlier rules "
    "(interior markers that agree with the centres, a margin, outlined boxes, ringed dots); see "
    "docs/mirp.md"
)
LABELS_HELP = (
    "label table of the masks: totalsegmentator|totalsegmentator_mr|btcv|amos|word or a JSON "
    "file id -> name; with --cases, the table of rows with an empty labels column (a row naming "
    "another table is an error) (default: the names a DICOM SEG or .seg.nrrd gives its "
    "segments, else totalsegmentator)"
)
MODALITY_HELP = (
    "what the volumes are (ct|mr): the display default and the prompts' words, recorded in "
    "dataset.json and the rows (default: mr when the label table is an MR one, "
    "totalsegmentator_mr, else ct; a CT without air, below -200 HU, is refused)"
)


def question_types(text: str) -> tuple[str, ...]:
    """Question type names and groups (all, and those the types declare: spar, open), each
    type once, in the order given."""
    from radspatial.questions import list_question_types, question_groups

    out: list[str] = []
    for name in csv_lower(text):
        groups = {**question_groups(), "all": list_question_types()}
        group = groups.get(name, [name])
        out += [n for n in group if n not in out]
    known = list_question_types()
    bad = [n for n in out if n not in known]
    if bad:
        raise argparse.ArgumentTypeError(f"unknown question type {bad[0]!r}; known: {known}")
    return tuple(out)


def _markers_help() -> str:
    from radspatial.imaging.markers import marker_names  # the registry: plugins' styles too

    return f"marker styles, comma-separated: {', '.join(marker_names())}"


_PATH = "str | Path | None"


# fmt: off
@dataclass(frozen=True, kw_only=True)
class GenerateJob:
    """What one ``generate`` is asked: which cases, where to, and the whole
    :class:`~radspatial.bench.config.GenerateConfig` (its rules as flat thresholds)."""

    # which cases: --ct with --seg or --seg-dir, or a --cases CSV (default: the bundled CT)
    ct: Path | None = option(None, type=Path, exclusive="ct", annotation=_PATH,
        help="CT: NIfTI file or DICOM series folder (default: the bundled CT)")
    cases: Path | tuple[Case, ...] | None = option(None, type=Path, exclusive="ct",
        annotation="str | Path | Sequence[Case] | None",
        help="CSV with columns ct,seg[,labels,case_id,variant], one case per row (default: one "
        "case from --ct)")
    seg: Path | None = option(None, type=Path, exclusive="seg", annotation=_PATH,
        help="multilabel mask of --ct: NIfTI, NRRD label map (.nrrd, .seg.nrrd) or DICOM SEG "
        "(default: the bundled mask)")
    seg_dir: Path | None = option(None, type=Path, exclusive="seg", annotation=_PATH,
        help="TotalSegmentator per-structure output folder of --ct, instead of --seg (default: "
        "none)")
    labels: str | None = option(None, help=LABELS_HELP)
    case_id: str | None = option(None, help="case id for --ct (default: the CT's file name)")
    variant: str | None = option(None,
        help="anatomy variant of the --ct case, recorded in every row, e.g. mirrored or "
        "situs_inversus; --cases takes a variant column (default: normal)")
    out: Path = option(type=Path, positional=True, annotation="str | Path",
        help="dataset folder to write")
    seed: int = option(0, type=int, help="seed of every random draw")
    # what is asked and drawn: setups, markers, image, question types and their thresholds
    setups: tuple[str, ...] = option(("rq1", "rq2", "rq3", "as"), type=csv_lower, csv=True,
        annotation="Sequence[str]", help="MIRP setups to write")
    markers: tuple[str, ...] = option(MARKERS, type=csv_lower, csv=True,
        annotation="Sequence[str]", help=_markers_help)
    size: int = option(512, type=int, help="output image size in px")
    as_count: int = option(100, type=int, help="blank-image items per marker type")
    min_distance: float = option(thresholds.MIN_DISTANCE_PX, type=float,
        help="px between the two centres")
    margin: float = option(thresholds.MARGIN_PX, type=float, help="px along the asked axis")
    questions: tuple[str, ...] = option((DEFAULT_TYPE,), type=question_types, csv=True,
        annotation="Sequence[str]", help=QUESTIONS_HELP)
    size_tolerance: float = option(thresholds.SIZE_TOLERANCE, type=float,
        help="size/symmetry/distance: compared values differ by >= this fraction of the larger")
    min_component: float = option(thresholds.MIN_COMPONENT_PX, type=float,
        help="count: px of the smallest region")
    group: bool | None = option(None, flag="--no-group", action="store_const", const=False,
        help="keep TotalSegmentator vertebrae and ribs separate (default: grouped, as MIRP does)")
    export_masks: bool = option(False, action="store_true",
        help="write each slice's label image (masks/)")
    rules: str = option("mirp", choices=thresholds.RULE_PROFILES, help=RULES_HELP)
    # what the volumes are and how their grey values are shown
    window: tuple[float, float] | None = option(None, type=window_type, csv=True,
        annotation="tuple[float, float] | str | None",
        help="W,L in the volume's units (default: 400,40 HU on CT; on MR black at the volume's "
        "1st and white at its 99th percentile)")
    modality: str | None = option(None, type=str.upper, choices=MODALITIES, help=MODALITY_HELP)
    # which slices are asked about: planes (docs/planes.md), questions per slice, groups
    planes: tuple[str, ...] = option((DEFAULT_PLANE,), type=csv_lower, csv=True,
        annotation="Sequence[str]",
        help="slice planes, comma-separated: axial, coronal, sagittal (docs/planes.md)")
    per_slice: int = option(1, type=int,
        help="questions per slice and type, each on its own image (another pair, variant)")
    consistency: bool = option(False, action="store_true",
        help="relative position in consistency groups: one slice and pair, the same words, "
        "all 8 rotation/flip variants (and the pair asked the other way round)")
    decidable: str = option("all", choices=["all", "only"],
        help="all: every item, each marked decidable or not (MIRP's protocol); only: items the "
        "image decides (docs/benchmark_validity.md)")
    landmarks: str | None = option(None,
        help="handedness landmark table (JSON, docs/benchmark_validity.md); default: built in")
    # how the cases are run
    workers: int = option(1, type=int, help="processes (or Ray CPUs) in parallel")
    executor: str = option("local", choices=["local", "ray"],
        help="local process pool, or Ray (pip install 'radspatial[ray]'): same output bytes")
    ray_address: str | None = option(None,
        help="Ray cluster to join (default: env RAY_ADDRESS, else a local Ray with --workers "
        "CPUs)")
    on_error: str = option("stop", choices=["stop", "skip"],
        help="a failing case: stop with exit 2 (finished cases are kept for the rerun) or skip "
        "it, recorded in failures.jsonl and dataset.json")
    png_level: int = option(3, type=int,
        help="PNG zlib level 0-9; 3 is 2x faster than 6 for ~1%% more bytes")
    overwrite: bool = option(False, action="store_true",
        help="replace an existing --out dataset")
    verbose: bool = option(False, cli=False,
        help="print progress lines (the command line always writes them to stderr)")
# fmt: on


def generate_config(job: GenerateJob, modality: str) -> GenerateConfig:
    """The generator's record of ``job`` (what ``dataset.json`` stores)."""
    from radspatial.bench.config import GenerateConfig
    from radspatial.core.rules import QuestionRules

    question_rules = QuestionRules(
        min_distance_px=job.min_distance,
        margin_px=job.margin,
        size_tolerance=job.size_tolerance,
        min_component_px=job.min_component,
        profile=job.rules,
    )
    return GenerateConfig(
        seed=job.seed, size=job.size, window=job.window, setups=tuple(job.setups),
        markers=tuple(job.markers), as_count=job.as_count, rules=question_rules,
        question_types=tuple(job.questions), group=job.group, export_masks=job.export_masks,
        png_level=job.png_level, modality=modality, planes=tuple(job.planes),
        per_slice=job.per_slice, consistency=job.consistency, decidable=job.decidable,
        landmarks=job.landmarks,
    )  # fmt: skip


def run_generate(
    job: GenerateJob, log: Callable[[str], None], note: Callable[[str], None]
) -> tuple[DatasetSummary, GenerateConfig]:
    """Reads the cases the job names (checked in ``bench/inputs``), says on ``note`` how their
    modality was inferred, and builds the dataset; returns its summary and the config."""
    from radspatial.bench.dataset import build_dataset
    from radspatial.bench.inputs import CaseInputs, cases_modality, resolve_cases

    given = CaseInputs(
        ct=job.ct, seg=job.seg, seg_dir=job.seg_dir, labels=job.labels, modality=job.modality,
        case_id=job.case_id, variant=job.variant, cases=job.cases,
    )  # fmt: skip
    cases = resolve_cases(given)
    modality, why = cases_modality(given, cases)
    if why:
        note(why)
    config = generate_config(job, modality)
    summary = build_dataset(
        cases, config, Path(job.out), workers=job.workers, overwrite=job.overwrite,
        executor=job.executor, address=job.ray_address, on_error=job.on_error, log=log,
    )  # fmt: skip
    return summary, config


# fmt: off
@dataclass(frozen=True, kw_only=True)
class MirrorJob:
    """What one ``counterfactual mirror`` is asked: a case, mirrored left-right into ``out``."""

    ct: Path = option(type=Path, positional=True, annotation=_PATH.removesuffix(" | None"),
        help="CT: NIfTI file or DICOM series folder")
    seg: Path = option(type=Path, positional=True, annotation=_PATH.removesuffix(" | None"),
        help="multilabel mask (NIfTI) on the CT grid")
    labels: str | None = option(None, help="label table of --seg (default: totalsegmentator)")
    out: Path = option(type=Path, positional=True, annotation=_PATH.removesuffix(" | None"),
        help="output folder")
# fmt: on


def run_mirror(job: MirrorJob) -> tuple[Path, Path]:
    """Writes the mirrored case and ``cases.csv`` (``bench/counterfactual.mirror_case``);
    returns the mirrored CT's and mask's paths."""
    from radspatial.bench.counterfactual import mirror_case

    return mirror_case(Path(job.ct), Path(job.seg), Path(job.out), labels=job.labels)
