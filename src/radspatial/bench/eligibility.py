"""Which structures of a slice may be marked and asked about, by rule profile.

A structure is eligible when it is named, one connected component and large enough for its
markers (``size_rule``), and no near-duplicate of a larger one (``eligible_structures``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from radspatial.bench.config import GenerateConfig
from radspatial.core.rules import MIN_SIZE_FACTOR
from radspatial.imaging.markers import (
    MARKER_TYPES,
    drawn_area,
    marker_area,
    marker_extent,
    marker_geometry,
    marker_style,
)
from radspatial.imaging.slices import StructureStat, referenceable


def size_rule(config: GenerateConfig) -> tuple[float | Callable[[int], float], float]:
    """(minimum area, minimum marker gap) of a structure that may be marked.

    strict: twice the largest box (three digits) for every structure. mirp: twice the largest
    marker drawn on that structure by MIRP's three styles and any other configured one (its
    number's box, its letters' box, a dot), as MIRP's "a size at least twice that of the
    markers"; MIRP's three always count, so ``--markers`` does not change which slices RQ1
    asks about."""
    size, geometry = config.size, marker_geometry(config.rules.profile)
    min_gap = 2 * marker_extent(size, geometry)
    if not config.rules.mirp:
        return MIN_SIZE_FACTOR * marker_area(size, geometry), min_gap
    markers = tuple(dict.fromkeys((*MARKER_TYPES, *config.markers)))

    def min_area(label_id: int) -> float:
        texts = ((m, _text(m, label_id)) for m in markers)
        return MIN_SIZE_FACTOR * max(drawn_area(m, t, size, geometry) for m, t in texts)

    return min_area, min_gap


def _text(marker: str, label_id: int) -> str:
    """What ``marker`` draws on ``label_id``; for an id its code cannot write (letters past
    676, counted by the mirp size rule though not drawn: ``plan_case`` refuses a configured
    one) the style's first example stands in."""
    style = marker_style(marker)
    try:
        return style.texts([label_id], ("red",))[0]
    except ValueError:
        return style.examples[0]


def eligible_structures(
    stats: dict[int, StructureStat],
    names: dict[int, str],
    min_area: float | Callable[[int], float],
    min_gap: float,
) -> list[StructureStat]:
    """The referenceable structures (``slices.referenceable``) that are not near-duplicates.

    ``min_area`` is one area for every structure, or label id -> its own (the mirp profile:
    twice the markers drawn on it). Near-duplicate: same display name as a larger eligible
    structure, or its marker would overlap a larger one's (marker points closer than
    ``min_gap``). The larger one is kept.
    """
    if callable(min_area):
        pool = [s for s in referenceable(stats, names, 0.0) if s.area_px >= min_area(s.label_id)]
    else:
        pool = referenceable(stats, names, min_area)
    kept: list[StructureStat] = []
    for s in sorted(pool, key=lambda s: (-s.area_px, s.label_id)):
        if any(
            names[k.label_id] == names[s.label_id] or math.dist(k.marker_xy, s.marker_xy) < min_gap
            for k in kept
        ):
            continue
        kept.append(s)
    return sorted(kept, key=lambda s: s.label_id)
