"""A left-right pair on a slice that does not show the sides (issue #47): one structure seen
on either side, then split into the pair's two members.

Where no handedness landmark shows the patient's right (the pelvis, the legs), a network
trained with flips cannot tell ``gluteus_maximus_left`` from ``_right``: each pixel's
probability is split between the two, so each side alone is "found with low confidence" and
the re-oriented copies disagree on which is which. What the image does show is the structure
on each side. So the pair is located as one class (its two probabilities summed,
``organs.merge_parts``); its two largest components are the pair's members; the one the
network leans to for the asked side stands for it, the other for its counterpart. Every check
(score, copies, plausibility) runs on the merged class, component by component. The sides stay
unknown (the sides abstention is kept): the agent answers only when both readings, as
labelled and with every side swapped, give the same answer (``agent/pipeline/mirror.py``).
"""

from __future__ import annotations

import numpy as np

from radspatial.nets import unet

View = tuple[unet.Prediction, np.ndarray]


def members(
    merged: unet.Prediction,
    merged_votes: np.ndarray,
    probs: np.ndarray,
    cls: int,
    other: int,
    body: np.ndarray,
    single: bool = False,
) -> tuple[View, View | None] | None:
    """(the asked member's view, its counterpart's view): ``merged`` / ``merged_votes`` with
    only that member's component left in class ``cls`` (``probs``: the network's own class
    probabilities, (C, H, W), to tell which member it leans to for ``cls``). None when the
    merged class has fewer than two components of ``unet.MIN_AREA_PX`` inside the body; with
    ``single``, where it has one, that one is the asked member (``merged`` as it is) and its
    counterpart None: the pair shows on one side only, which side the image does not say."""
    from scipy import ndimage

    region = (merged.labels == cls) & body
    comp, n = ndimage.label(region, structure=np.ones((3, 3), bool))
    sizes = np.bincount(comp.ravel())[1:]
    big = int(np.count_nonzero(sizes >= unet.MIN_AREA_PX))
    if single and big == 1:
        return (merged, merged_votes), None
    if n < 2:
        return None
    a, b = (int(i) + 1 for i in np.argsort(sizes)[::-1][:2])
    if sizes[b - 1] < unet.MIN_AREA_PX:
        return None
    lean = probs[cls] - probs[other]
    if float(lean[comp == a].mean()) < float(lean[comp == b].mean()):
        a, b = b, a
    return _only(merged, merged_votes, cls, comp != b), _only(merged, merged_votes, cls, comp != a)


def _only(
    merged: unet.Prediction, votes: np.ndarray, cls: int, keep: np.ndarray
) -> tuple[unet.Prediction, np.ndarray]:
    """The merged class kept where ``keep`` (the other member's pixels become background)."""
    labels = np.where((merged.labels == cls) & ~keep, 0, merged.labels)
    return unet.Prediction(merged.probs, labels), np.where((votes == cls) & ~keep, 0, votes)
