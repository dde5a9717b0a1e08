"""What a backend is told of an item: ``Request.meta`` (what a model may know) and, for an
oracle only (a backend with ``reads_truth``), ``Request.truth`` (what it may not)."""

from __future__ import annotations

from typing import Any

from radspatial.eval.items import EvalItem

# what only an oracle may read (``Request.truth``): the label image and its table, the CT and
# the slice it came from, the shown rotation/flip, the structures' standard-view centres
TRUTH_KEYS = (
    "mask",
    "labels",
    "grouping",
    "label_names",
    "ct",
    "slice_index",
    "center1_canonical",
    "center2_canonical",
)


def item_meta(item: EvalItem) -> dict[str, Any]:
    """What a model may know of an item (``Request.meta``): no answer, no truth."""
    named = item.setup in ("rq1", "rq2")
    return {
        "id": item.id,
        "setup": item.setup,
        "marker": item.marker,
        "question": item.question,
        "question_type": item.question_type,
        "relation": item.relation,
        # what the question itself names (a model sees names only in rq1/rq2)
        "object1": item.object1 if named else None,
        "object2": item.object2 if named else None,
        "object3": item.extra.get("object3") if named else None,
        **{k: item.extra[k] for k in ("modality", "plane") if item.extra.get(k) is not None},
        # open identification: the slice's structures (what a uniform guess picks from)
        **({"options": o} if (o := (item.extra.get("params") or {}).get("options")) else {}),
    }


def item_truth(item: EvalItem) -> dict[str, Any]:
    """What only an oracle may read of an item (``Request.truth``)."""
    truth = {k: item.extra[k] for k in TRUTH_KEYS if item.extra.get(k) is not None}
    return {**truth, "transform": item.transform}
