"""The report's vocabulary, shared by its builder (``report.py``) and its tables
(``md.py``, ``planes.py``): column names and headers, the transform key, the
axes' titles and the order of setup/marker keys."""

from __future__ import annotations

from typing import Any

from radspatial.core.metrics_blocks import Consistency, FrameMetrics, GroupMetrics, TypeGroup
from radspatial.core.records import DEFAULT_TYPE, SETUPS
from radspatial.imaging.markers import MARKER_STYLES
from radspatial.questions.frames import AXES as FRAME_AXES

TRANSFORMS = ("A1", "A2", "A3", "A4", "B1", "B2", "B3", "B4")
TRANSFORM_KEY = "A = horizontally flipped, B = not flipped; 1-4 = rotated 0°, 90°, 180°, 270°"
AXES = {axis.name: axis.title for axis in FRAME_AXES}  # axis -> its title
FRAME_COLUMNS = (
    "image",
    "standard",
    "anatomical",
    "aligned_image",
    "conflict_image",
    "conflict_anatomical",
)
FRAME_HEADER = (
    "Image (all)",
    "Standard view (all)",
    "Anatomical (all)",
    "Image (aligned)",
    "Image (not aligned)",
    "Anatomical (not aligned)",
)
RELPOS = DEFAULT_TYPE  # MIRP's type, the headline's
DASH = "–"
Group = dict[str, Any]


def rank(key: str) -> tuple[int, int, str]:
    """Sort key of a "setup/marker" key: setups in order, no marker first, then the styles."""
    setup, _, marker = key.partition("/")
    s = SETUPS.index(setup) if setup in SETUPS else len(SETUPS)
    markers = ("none", *MARKER_STYLES.names())  # no marker first, then the styles by name
    m = markers.index(marker) if marker in markers else len(markers)
    return s, m, key


def group_of(obj: Group | GroupMetrics | None, where: str = "summary") -> GroupMetrics:
    """A summary group as its record (``core/metrics_blocks``); absent: no items."""
    if isinstance(obj, GroupMetrics):
        return obj
    return GroupMetrics.from_json(obj or {"n_items": 0}, where)


def type_groups(by: dict[str, Any]) -> dict[str, dict[str, TypeGroup]]:
    """A summary's ``by_question_type`` (model -> type -> group) as records."""
    return {
        model: {name: TypeGroup.from_json(g, f"summary: {model}: {name}") for name, g in m.items()}
        for model, m in by.items()
    }


# model -> setup -> axis -> its frame groups (a summary's ``frames``)
Frames = dict[str, dict[str, dict[str, FrameMetrics]]]


def frame_groups(frames: dict[str, Any]) -> Frames:
    """A summary's ``frames`` (model -> setup -> axis -> view -> group) as records."""
    return {
        model: {
            setup: {
                axis: FrameMetrics.from_json(f, f"summary: frames: {model}: {setup}: {axis}")
                for axis, f in axes.items()
            }
            for setup, axes in setups.items()
        }
        for model, setups in frames.items()
    }


def consistency_groups(by: dict[str, Any]) -> dict[str, dict[str, Consistency]]:
    """A summary's ``consistency`` (model -> scope -> classes) as records."""
    return {
        model: {
            k: Consistency.from_json(c, f"summary: consistency: {model}: {k}") for k, c in m.items()
        }
        for model, m in by.items()
    }
