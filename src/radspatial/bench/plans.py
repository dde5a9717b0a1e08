"""What the generator plans before it renders: the slices worth asking about and one planned
question per image (``SlicePlan``). Shared by the per-type planner (``bench/generate.py``) and
the consistency groups (``bench/consistency.py``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
from scipy import ndimage

from radspatial.bench.config import GenerateConfig
from radspatial.bench.eligibility import eligible_structures, size_rule
from radspatial.core.progress import step
from radspatial.imaging.planes import DEFAULT_PLANE
from radspatial.imaging.slices import (
    Geometry,
    StructureStat,
    Variant,
    component_areas,
    render_labels,
    structure_stats,
    to_display,
)
from radspatial.imaging.volumes import Volume
from radspatial.questions import Candidate, QuestionSpec, QuestionType, get_question_type


@dataclass(frozen=True)
class SlicePlan:
    z: int
    base_name: str
    variant: Variant
    spec: QuestionSpec
    stats: dict[int, StructureStat]
    dots: tuple[str, ...]  # dot colour of each object, in object order
    plane: str = DEFAULT_PLANE  # imaging/planes.py; ``z`` indexes the plane's slices
    group: str | None = None  # consistency group (--consistency: bench/consistency.py)
    group_twin: str | None = None  # the group asking the same pair the other way round

    @property
    def question_type(self) -> QuestionType:
        return get_question_type(self.spec.question_type)


def candidate(s: StructureStat, name: str, variant: Variant, size: int) -> Candidate:
    """A structure's stats as a question type sees it, in ``variant``'s shown frame."""
    return Candidate(
        s.label_id,
        name,
        variant.apply_point(s.center_xy, size),
        s.center_xy,
        variant.apply_point(s.marker_xy, size),
        s.area_px,
        s.marker_xy,
    )


def component_areas_of(vol: Volume, z: int, geom: Geometry) -> Callable[[int], list[float]]:
    """label id -> component areas (output px, largest first) in the rendered slice, cached."""
    cache: dict[str, object] = {}

    def areas(label_id: int) -> list[float]:
        if "boxes" not in cache:
            lab = render_labels(to_display(vol.seg[:, :, z]), geom)
            cache["lab"], cache["boxes"] = lab, ndimage.find_objects(lab.astype(np.int32))
        boxes = cache["boxes"]
        if label_id > len(boxes) or boxes[label_id - 1] is None:
            return []
        return component_areas(cache["lab"], label_id, boxes[label_id - 1])

    return areas


def usable_slices(vol: Volume, config: GenerateConfig, need: int = 2) -> list[SliceInfo]:
    """Every slice with at least ``need`` eligible structures, analysed once."""
    geom = Geometry.for_slice(vol.seg.shape[:2], vol.spacing[:2], config.size)
    min_area, min_gap = size_rule(config)
    usable: list[SliceInfo] = []
    n_z = vol.seg.shape[2]
    for z in range(n_z):
        step(f"{vol.case_id}: analysing slice {z + 1}/{n_z}")
        stats = structure_stats(to_display(vol.seg[:, :, z]), geom)
        if config.rules.mirp:  # MIRP marks the centre of mass, inside the structure or not
            stats = {k: replace(s, marker_xy=s.center_xy) for k, s in stats.items()}
        eligible = eligible_structures(stats, vol.table.names, min_area, min_gap)
        if len(eligible) >= need:
            usable.append(SliceInfo(z, stats, tuple(eligible), component_areas_of(vol, z, geom)))
    return usable


def min_eligible(qtype: QuestionType) -> int:
    """Eligible structures a slice needs for ``qtype``: one for the single-structure types (so
    a mask of one organ, e.g. a liver SEG, still makes questions), else two (as always)."""
    return 1 if qtype.n_objects == 1 else 2


@dataclass(frozen=True)
class SliceInfo:
    """One slice with at least two eligible structures, analysed once for every type."""

    z: int
    stats: dict[int, StructureStat]
    eligible: tuple[StructureStat, ...]
    component_areas: Callable[[int], list[float]]


def plane_key(case_id: str, plane: str) -> str:
    """The random stream's and the file names' case part: the case id, plus the plane when
    not axial (axial datasets are reproduced byte for byte)."""
    return case_id if plane == DEFAULT_PLANE else f"{case_id}_{plane}"
