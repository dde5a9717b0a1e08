"""Which of a model's classes a question's ref names: by name, or by a marker's text.

A name the model has its own class for resolves to it. A TotalSegmentator name it has no
class for resolves through MIRP's vertebrae / rib grouping, as a marker's number always did:
"the T12 vertebra" (``vertebrae_T12``) is the grouped ``vertebrae`` class, "the 5th left rib"
``rib_left`` (on an axial slice the vertebra shown is the one at its level). A dot names no
structure.
"""

from __future__ import annotations

import functools

from radspatial.agent.pipeline.types import Ref
from radspatial.core.labels import load_table, normalize_name
from radspatial.imaging.markers import marker_label
from radspatial.nets import unet


def resolve(ref: Ref, model: unet.UNetModel) -> tuple[int | None, str]:
    """(label id, how): the name first, then a marker whose text names a label (numbers,
    letters: ``MarkerStyle.label_of``); dots -> None."""
    if ref.name:
        own = model.id_of_name(ref.name)
        if own is None:
            own = _by_name_grouped(ref.name, model)
        if own is None and (whole := model.composite_id(ref.name)) is not None:
            return whole, "name (the union of its parts)"
        return own, "name"
    by_text = marker_label(ref.marker, ref.text)
    if by_text is None:
        return None, "no-structure-named"
    label_id, how = by_text
    if label_id is None:
        return None, f"bad-{ref.marker}"
    return grouped(label_id, model), how


def grouped(label_id: int, model: unet.UNetModel) -> int | None:
    """A TotalSegmentator id, through MIRP's grouping, as the model's label id (or None)."""
    table = _grouped_table()
    name = table.names.get(table.apply(label_id))
    return None if name is None else model.id_of_name(name)


@functools.lru_cache(maxsize=1)
def _grouped_table():  # noqa: ANN202 - a LabelTable, read-only here
    return load_table("totalsegmentator", group=True)


@functools.lru_cache(maxsize=1)
def _totalseg_ids() -> dict[str, int]:
    """Normalised TotalSegmentator name -> its (ungrouped) id."""
    names = load_table("totalsegmentator", group=False).names
    return {normalize_name(n): i for i, n in names.items()}


def _by_name_grouped(name: str, model: unet.UNetModel) -> int | None:
    label = _totalseg_ids().get(normalize_name(name))
    return None if label is None else grouped(label, model)
