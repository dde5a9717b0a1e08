"""Every threshold of the benchmark, defined once (output px of a 512 px image).

The generator asks a question only where its answer does not hang on a few pixels; the agent
abstains below the same thresholds; the SPAR probes use them at a 512 px reference size; the
CLI takes its defaults from here.
"""

from __future__ import annotations

from dataclasses import dataclass

MIN_DISTANCE_PX = 50.0  # between centres of two structures in one question
MARGIN_PX = 10.0  # relative position: along the asked axis; distance: d1 vs d2
SIZE_TOLERANCE = 0.10  # size/symmetry/distance: differ by >= 10% of the larger
MIN_COMPONENT_PX = 40.0  # count: smaller components are specks, not regions
RELPOS_DOMINANCE = 1.5  # SPAR probe relpos: the dominant axis >= 1.5x the other


@dataclass(frozen=True)
class QuestionRules:
    """Thresholds in output px; an answer never hangs on a few pixels."""

    min_distance_px: float = MIN_DISTANCE_PX
    margin_px: float = MARGIN_PX
    size_tolerance: float = SIZE_TOLERANCE
    min_component_px: float = MIN_COMPONENT_PX
