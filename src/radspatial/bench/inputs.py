"""Which cases a ``generate`` run reads, from what its caller gave: one checker that the
command line (``cli/generate.py``) and the Python API (``api.generate``) share, so the API
refuses what the command line refuses. A refusal is a ``core.jobspec.ParamError`` naming its
parameters, worded in the caller's terms by ``caller_terms``: ``--seg-dir`` on the command
line, ``seg_dir=`` in Python.

- ``--cases`` (a CSV or, from Python, a list of ``Case``) excludes ``--ct``/``--seg``/
  ``--seg-dir``/``--case-id``/``--variant`` (the CSV has those columns);
- ``--ct`` needs ``--seg`` (a multilabel mask) or ``--seg-dir`` (TotalSegmentator's folder,
  whose table is TotalSegmentator's); its case id (default: the CT's file name) and variant
  (default: normal) must be safe in a file name;
- with neither, the bundled example: normal anatomy, TotalSegmentator's table, a CT.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from radspatial.core.errors import InputError
from radspatial.core.jobspec import ParamError
from radspatial.core.modality import DEFAULT_MODALITY, infer_modality, modality_of
from radspatial.core.runtime import bundled_example
from radspatial.imaging.volumes import Case, check_case_id, read_cases_csv


@dataclass(frozen=True)
class CaseInputs:
    """What a caller gave to say which cases to read (each None: not given; paths may be
    strings, as the API takes them)."""

    ct: Path | None = None  # --ct: NIfTI file or DICOM series folder
    seg: Path | None = None  # --seg: its multilabel mask
    seg_dir: Path | None = None  # --seg-dir: its TotalSegmentator folder
    labels: str | None = None  # --labels: the mask's label table
    modality: str | None = None  # --modality (None: the label tables say, ``cases_modality``)
    case_id: str | None = None  # --case-id
    variant: str | None = None  # --variant: anatomy variant (default normal)
    cases: Path | Sequence[Case] | None = None  # --cases: a CSV, or from Python Case records


def resolve_cases(given: CaseInputs) -> list[Case]:
    """The cases ``given`` names, or a ``ValueError``/``InputError`` saying what is wrong."""
    if given.ct is not None and given.cases is not None:
        raise ParamError(("ct", "cases"), "{ct} and {cases}: give one of them")
    if given.seg is not None and given.seg_dir is not None:
        raise ParamError(("seg", "seg_dir"), "{seg} and {seg_dir}: give one of them")
    if given.cases is not None:
        cases = _listed(given)
    elif given.ct is not None:
        cases = [_one_case(given)]
    else:
        cases = [_bundled(given)]
    if modality_of(given.modality) != DEFAULT_MODALITY and given.ct is None and given.cases is None:
        why = f"{{modality}} {str(given.modality).lower()}: the bundled example is a CT"
        raise ParamError("modality", why)
    return cases


def cases_modality(given: CaseInputs, cases: Sequence[Case]) -> tuple[str, str | None]:
    """The dataset's modality and, when inferred, the line that says why: ``--modality`` as
    given, else what the cases' label tables say (``core.modality.infer_modality``)."""
    if given.modality is not None:
        return given.modality, None
    modality = infer_modality(c.labels for c in cases)
    if modality == DEFAULT_MODALITY:
        return modality, None
    tables = ", ".join(sorted({str(c.labels) for c in cases}))
    return modality, f"modality: MR (the label table is {tables}; --modality ct to override)"


def _listed(given: CaseInputs) -> list[Case]:
    if given.seg or given.seg_dir:
        raise ParamError(
            ("seg", "seg_dir", "ct", "cases"), "{seg}/{seg_dir} go with {ct}, not {cases}"
        )
    for name, value in (("case_id", given.case_id), ("variant", given.variant)):
        if value is not None:
            column = name.replace("_", "-")
            why = f"{{param}} goes with {{ct}}; {{cases}} takes a {column} column"
            raise ParamError((name, "ct", "cases"), why)
    if isinstance(given.cases, str | Path):
        return read_cases_csv(Path(given.cases), labels=given.labels)
    return list(given.cases or ())


def _one_case(given: CaseInputs) -> Case:
    ct = Path(given.ct)  # type: ignore[arg-type]
    seg = given.seg or given.seg_dir
    if seg is None:
        why = "{ct} needs {seg} (multilabel mask) or {seg_dir} (TotalSegmentator)"
        raise ParamError(("ct", "seg", "seg_dir"), why)
    if given.seg_dir and given.labels not in (None, "totalsegmentator"):
        why = f"{{labels}} {given.labels}: a {{seg_dir}} folder is TotalSegmentator's"
        raise ParamError(("labels", "seg_dir"), why)
    labels = "totalsegmentator" if given.seg_dir else given.labels
    if given.case_id is not None:
        case_id = _given_case_id(given.case_id)
    else:
        case_id = check_case_id(case_id_for(ct), f"{ct} (use --case-id)")
    variant = given.variant or "normal"
    if not variant.replace("_", "").replace("-", "").isalnum():
        raise ParamError("variant", f"{{param}} {variant!r}: use letters, digits, _ and -")
    return Case(case_id, ct, Path(seg), labels, variant)


def _bundled(given: CaseInputs) -> Case:
    if given.seg or given.seg_dir:
        raise ParamError(("seg", "seg_dir", "ct"), "{seg}/{seg_dir} need {ct}")
    if given.variant not in (None, "normal"):
        why = f"{{param}} {given.variant}: the bundled example is normal anatomy"
        raise ParamError("variant", why)
    if given.labels not in (None, "totalsegmentator"):
        why = f"{{param}} {given.labels}: the bundled example is TotalSegmentator's"
        raise ParamError("labels", why)
    case_id = "example_ct_sm" if given.case_id is None else _given_case_id(given.case_id)
    ct, seg = bundled_example()
    return Case(case_id, ct, seg, "totalsegmentator")


def _given_case_id(case_id: str) -> str:
    """A case id the caller gave, refused (naming the parameter) unless safe in a file name."""
    try:
        return check_case_id(case_id, "{param}")
    except InputError as exc:
        raise ParamError("case_id", str(exc)) from None


def case_id_for(ct: Path) -> str:
    """A CT's default case id: its file name without ``.nii.gz``/``.nii``."""
    name = ct.name
    for suffix in (".nii.gz", ".nii"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name
