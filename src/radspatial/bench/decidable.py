"""The generator's side of decidability: what the rule (``questions/decidability.py``) reads
from a planned slice: every named structure, the body and its midline, the label table's names.

The body is the largest connected region of the CT slice above -500 HU (an MR slice: above a
tenth of its 99th percentile), holes filled (the lungs are inside the body); the midline is the
spine's centre where the slice labels the spine, else the body's centre (the body's centre
moves with an arm or an off-centre patient, the spine does not).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from radspatial.bench.config import GenerateConfig
from radspatial.bench.plans import SlicePlan, candidate, component_areas_of
from radspatial.core.modality import DEFAULT_MODALITY, modality_of
from radspatial.imaging.body import BODY_HU
from radspatial.imaging.body import body_mask as largest_region
from radspatial.imaging.planes import DEFAULT_PLANE
from radspatial.imaging.slices import Geometry, StructureStat, Variant, to_display
from radspatial.imaging.volumes import Volume
from radspatial.questions import QuestionSpec, SliceFacts, get_question_type
from radspatial.questions.decidability import (
    MARKED,
    NAMED,
    SPINE,
    Body,
    Decidability,
    SliceEvidence,
    decide,
    landmark_table,
    reading_of,
)

CT_BODY_HU = BODY_HU  # air outside the body is ~-1000 HU, fat -100, lung -850 (a filled hole)


def body_mask(display: np.ndarray, modality: str | None) -> np.ndarray:
    """The body in a display-oriented slice: the largest region above the threshold, filled."""
    data = np.nan_to_num(display.astype(np.float32), nan=-1024.0)
    if modality_of(modality).upper() == DEFAULT_MODALITY:
        inside = data > CT_BODY_HU
    else:
        high = float(np.percentile(data, 99))
        inside = data > 0.1 * high if high > 0 else np.zeros(data.shape, bool)
    return largest_region(inside, eight=False)


def body_of(
    display_ct: np.ndarray,
    stats: dict[int, StructureStat],
    names: dict[int, str],
    geom: Geometry,
    modality: str | None,
) -> Body | None:
    """The slice's :class:`Body` in standard-view output px (None: no body in the slice)."""
    body = body_mask(display_ct, modality)
    area = int(body.sum())
    if area == 0:
        return None
    radius = math.sqrt(area * geom.px_per_col * geom.px_per_row / math.pi)
    spine = [s for i, s in stats.items() if names.get(i, "").startswith(SPINE)]
    if spine:
        weight = sum(s.area_px for s in spine)
        midline = sum(s.area_px * s.center_xy[0] for s in spine) / weight
    else:
        cols = np.nonzero(body)[1]
        midline = geom.to_output(float(cols.mean()), 0.0)[0]
    return Body(midline, radius)


class PlanJudge:
    """Decides the plans of one volume in one plane (``vol`` reformatted to ``plane``): each
    slice's body and component areas computed once."""

    def __init__(self, vol: Volume, config: GenerateConfig, plane: str = DEFAULT_PLANE) -> None:
        self.vol, self.config, self.plane = vol, config, plane
        self.table = landmark_table(config.landmarks)
        self.vocabulary = frozenset(vol.table.names.values())
        self.geom = Geometry.for_slice(vol.seg.shape[:2], vol.spacing[:2], config.size)
        self._bodies: dict[int, Body | None] = {}
        self._areas: dict[int, Callable[[int], list[float]]] = {}

    def body(self, z: int, stats: dict[int, StructureStat]) -> Body | None:
        if z not in self._bodies:
            display = to_display(self.vol.ct[:, :, z])
            names = self.vol.table.names
            self._bodies[z] = body_of(display, stats, names, self.geom, self.config.modality)
        return self._bodies[z]

    def facts(self, z: int, variant: Variant, stats: dict[int, StructureStat]) -> SliceFacts:
        names, size = self.vol.table.names, self.config.size
        present = tuple(
            candidate(s, names[i], variant, size) for i, s in sorted(stats.items()) if i in names
        )
        if z not in self._areas:
            self._areas[z] = component_areas_of(self.vol, z, self.geom)
        return SliceFacts(variant.code, size, (), present, self._areas[z], self.plane)

    def judge(
        self,
        z: int,
        variant: Variant,
        stats: dict[int, StructureStat],
        spec: QuestionSpec,
        reading: str = NAMED,
    ) -> Decidability:
        """One reading of one question about slice ``z`` shown as ``variant``."""
        evidence = SliceEvidence(
            self.facts(z, variant, stats),
            self.vocabulary,
            self.body(z, stats),
            self.table,
            self.config.rules,
        )
        return decide(get_question_type(spec.question_type), spec, evidence, reading)

    def judge_plan(self, plan: SlicePlan) -> dict[str, Decidability]:
        """Both readings of a plan: by names (RQ1) and by markers (RQ2/RQ3)."""
        return {
            reading: self.judge(plan.z, plan.variant, plan.stats, plan.spec, reading)
            for reading in (NAMED, MARKED)
        }

    def keeps(self, plan: SlicePlan, setups: tuple[str, ...]) -> bool:
        """``--decidable only``: every setup the plan is asked in is decided by the image."""
        return all(
            self.judge(plan.z, plan.variant, plan.stats, plan.spec, reading_of(s)).decidable
            for s in setups
        )
