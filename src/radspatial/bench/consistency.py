"""Consistency groups (``generate --consistency``): one slice, one pair, the same words, 8 views.

For each slice with a pair of structures whose centres and markers are separated by the margin
along *both* axes of the standard view (so every rotation/flip variant can be asked about them
with the same words), one relative-position question is asked in all 8 variants: a group. Its
answers are 4 yes and 4 no (a 180-degree turn flips every answer), and the patient-frame answer
is the same in all 8. The group's *twin* asks the same pair the other way round ("Is B left of
A?"), on the same images: a model that recites anatomy answers the twins oppositely, one that
always says yes does not, which is how the report tells the two apart (``eval/consistency.py``).

Balanced as far as the geometry allows: the relation cycles through the four (a shuffled block
per four groups), and the pair's order alternates so that half the groups have the anatomical
answer yes. Groups are recorded in the manifest (``group``, ``group_twin``).
"""

from __future__ import annotations

import math

from radspatial.bench.config import GenerateConfig
from radspatial.bench.plans import SliceInfo as _SliceInfo
from radspatial.bench.plans import SlicePlan, plane_key
from radspatial.bench.plans import candidate as _candidate
from radspatial.core.runtime import keyed_rng
from radspatial.imaging.slices import VARIANTS, Variant
from radspatial.imaging.volumes import Volume
from radspatial.questions import QuestionSpec, mirp_type_name, pairs
from radspatial.questions.relative_position import (
    anatomical_holds,
    relation_holds,
    separated,
)

RELATIONS = ("left_of", "right_of", "above", "below")
# a group is asked 8 times: its pair is held 1 px beyond the margin, so a reader that
# measures the centres again on the resampled label image (the mask oracle: within a pixel of
# the generator's) never falls under the margin in one variant and abstains there
_SLACK_PX = 1.0


def _both_axes(info: _SliceInfo, vol: Volume, config: GenerateConfig) -> list[tuple]:
    """Pairs separated by the margin (+ ``_SLACK_PX``) along both standard-view axes, far enough
    apart."""
    names, size, rules = vol.table.names, config.size, config.rules
    cands = [_candidate(s, names[s.label_id], Variant("B1"), size) for s in info.eligible]
    return [
        (a, b)
        for a, b in pairs(cands)
        if math.dist(a.center_xy, b.center_xy) >= rules.min_distance_px
        and all(separated(a, b, axis, rules.margin_px + _SLACK_PX) for axis in (0, 1))
    ]


def plan_groups(
    vol: Volume, config: GenerateConfig, plane: str, usable: list[_SliceInfo]
) -> list[SlicePlan]:
    """Two groups (a pair and its twin) of 8 variants per slice that has a pair to ask."""
    key = plane_key(vol.case_id, plane)
    rng = keyed_rng(config.seed, f"{key}/consistency")
    plans: list[SlicePlan] = []
    relations: list[str] = []
    n_groups = 0
    for info in usable:
        options = _both_axes(info, vol, config)
        if not options:
            continue
        if not relations:
            relations = [RELATIONS[int(i)] for i in rng.permutation(len(RELATIONS))]
        relation = relations.pop()
        a, b = options[int(rng.integers(len(options)))]
        std_a, std_b = a.center_xy_canonical, b.center_xy_canonical
        if int(anatomical_holds(relation, std_a, std_b, plane)) != n_groups % 2:
            a, b = b, a  # alternate the anatomical answer: yes, no, yes, ...
        colours = ("red", "blue") if rng.random() < 0.5 else ("blue", "red")
        base = f"{key}_slice{info.z:03d}_consistency"
        ids = [f"{base}/{relation}/{x.name}-{y.name}" for x, y in ((a, b), (b, a))]
        for (x, y), dots, (group, twin) in (
            ((a, b), colours, ids),
            ((b, a), colours[::-1], ids[::-1]),
        ):
            for code in VARIANTS:
                variant = Variant(code)
                objs = tuple(
                    _candidate(info.stats[o.label_id], o.name, variant, config.size) for o in (x, y)
                )
                spec = QuestionSpec(
                    mirp_type_name(),
                    objs,
                    relation,
                    int(relation_holds(relation, objs[0].center_xy, objs[1].center_xy)),
                    int(relation_holds(relation, x.center_xy_canonical, y.center_xy_canonical)),
                    answer_anatomical=int(
                        anatomical_holds(
                            relation, x.center_xy_canonical, y.center_xy_canonical, plane
                        )
                    ),
                )
                name = f"{base}_{x.label_id:03d}-{y.label_id:03d}_{code}"
                plans.append(
                    SlicePlan(info.z, name, variant, spec, info.stats, dots, plane, group, twin)
                )
        n_groups += 1
    return plans
