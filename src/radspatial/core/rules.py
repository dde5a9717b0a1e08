"""Every threshold of the benchmark, defined once (output px of a 512 px image).

The generator asks a question only where its answer does not hang on a few pixels; the agent
abstains below the same thresholds; the SPAR probes use them at a 512 px reference size; the
CLI takes its defaults from here.

Two rule profiles (``radspatial generate --rules``, recorded in ``dataset.json``):

- ``mirp`` (the default) follows MIRP's paper and published items: two centres at least
  ``MIN_DISTANCE_PX`` apart *along the asked axis*, a structure at least ``MIN_SIZE_FACTOR``
  times the area of the marker drawn on it, markers at the centre of mass, MIRP's plain boxes
  and dots, blank-image markers up to ``MIRP_AS_BORDER_PX`` from the border;
- ``strict`` (radspatial's earlier rules): centres ``MIN_DISTANCE_PX`` apart (Euclidean) and
  ``MARGIN_PX`` along the asked axis, markers inside concave structures and ordered like the
  centres, ``MIN_SIZE_FACTOR`` times the largest marker (three digits), our outlined boxes and
  ringed dots. It reproduces datasets made before the profiles existed byte for byte.

See docs/mirp.md for every rule, MIRP's source for it and what each profile does.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from radspatial.core.errors import check_one_of

MIN_DISTANCE_PX = 50.0  # between centres of two structures in one question
MARGIN_PX = 10.0  # relative position: along the asked axis; distance: d1 vs d2
SIZE_TOLERANCE = 0.10  # size/symmetry/distance: differ by >= 10% of the larger
MIN_COMPONENT_PX = 40.0  # count: smaller components are specks, not regions
RELPOS_DOMINANCE = 1.5  # SPAR probe relpos: the dominant axis >= 1.5x the other
MIN_SIZE_FACTOR = 2.0  # a marked structure's area >= this x a marker's area (MIRP: "twice")
MIRP_AS_BORDER_PX = 5.0  # blank images: MIRP's published markers come this close to the border
REFERENCE_PX = 512.0  # the image size the agent's margin is given at (scaled to each image)

RULE_PROFILES: tuple[str, ...] = ("mirp", "strict")


@dataclass(frozen=True)
class QuestionRules:
    """Thresholds in output px; an answer never hangs on a few pixels. ``profile`` is one of
    ``RULE_PROFILES``: which relative-position, size and marker rules the generator applies."""

    min_distance_px: float = MIN_DISTANCE_PX
    margin_px: float = MARGIN_PX
    size_tolerance: float = SIZE_TOLERANCE
    min_component_px: float = MIN_COMPONENT_PX
    profile: str = "mirp"

    def __post_init__(self) -> None:
        check_one_of(self.profile, RULE_PROFILES, "--rules")

    @property
    def mirp(self) -> bool:
        return self.profile == "mirp"

    def at_image(self, shape: tuple[int, ...], reference: float = REFERENCE_PX) -> QuestionRules:
        """The agent's rules for an image of ``shape`` (rows, columns, ...): ``margin_px``,
        given in px of a ``reference`` px image, scaled to the image's larger side (256 px:
        half), as the localizations' uncertainty scales with the anatomy shown. Not scaled:
        ``min_component_px`` (it defines the count answer in px of the rendered slice, as the
        generator counts) and the relative ``size_tolerance``."""
        side = max(int(n) for n in shape[:2])
        return replace(self, margin_px=self.margin_px * side / checked_reference(reference))


def checked_reference(reference: float) -> float:
    """The image size a margin is given at; ValueError unless positive."""
    if reference <= 0:
        raise ValueError(f"the margin's reference image size must be > 0, got {reference:g}")
    return reference
