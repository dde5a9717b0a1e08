"""Evidence that an ``organs`` localization can be trusted, and the reason when it cannot.

- **Test-time re-orientation**: the network runs on the first ``Checks.variants`` (4) of the
  8 rotation / flip variants of the slice in :data:`VARIANT_ORDER` (one batch); each output
  is mapped back to the shown frame. Probabilities are averaged
  for the answer; each variant's own answer gives the agreement: the structure must be found
  in at least ``min_votes`` variants and their centres must lie within ``max_spread`` body
  radii of the consensus centre.
- **Body region**: the trunk is the largest connected region brighter than air (holes
  filled); a structure is only looked for inside it (an arm lying beside the trunk is never
  taken for the stomach).
- **Score**: the class probability over the component's core (:func:`core_prob`) x the size
  factor of :func:`radspatial.nets.unet.found_for_class`, against ``organs.MIN_SCORE``.
- **Plausibility**: area / body area and centre distance from the body's centre / body
  radius must lie in the range seen in training (``config.json`` ``data.real.plausibility``).

Thresholds live in :class:`Checks`; their values and how they were chosen are in
benchmarks/RESULTS.md (chosen on training slices only).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from radspatial.imaging.body import BODY_GREY as BODY_GREY
from radspatial.imaging.body import BODY_HU as BODY_HU
from radspatial.imaging.body import body_mask as body_mask
from radspatial.imaging.body import body_of as body_of
from radspatial.imaging.body import body_radius as body_radius
from radspatial.imaging.body import region_stats as region_stats

_EIGHT = np.ones((3, 3), bool)


@dataclass(frozen=True)
class Checks:
    variants: int = 4  # test-time re-orientations (1 = none; the first of VARIANT_ORDER)
    min_votes: int = 3  # variants that must find the structure
    max_spread: float = 0.25  # body radii: farthest variant centre from the consensus
    plausibility: bool = True
    # uncertainty (body radii) of a centre every check passes (0: trusted to the margin, as
    # before round 4); a doubted one's spread or atlas distance is its uncertainty
    floor: float = 0.0
    max_uncertainty: float = 0.5  # body radii: beyond this the centre is no localization


def with_copies(variants: int) -> Checks:
    """The shipped checks on ``variants`` test-time copies, 3 in 4 of which must find the
    structure (rounded: 1 of 1, 2 of 2, 3 of 4, 6 of 8)."""
    return Checks(variants=variants, min_votes=max(1, round(0.75 * variants)))


# the checks of ``organs+atlas``: the identity, the left-right mirror and their half turns, 3
# of 4 must find the structure (issue #47 round 9; 2 copies since issue #22 round 4: the
# half-turned copies catch the network reading an image upside down, which the atlas, matched
# in the same wrong orientation, did not)
WITH_ATLAS = with_copies(4)
# the second model's (asked where the first's localization is not trusted): the identity and
# the left-right mirror, both must find it (issue #47 round 10: no wrong answer on a fresh
# seed, as on 4 copies, 4 more answers, about 80 % of the cascade's CPU)
WITH_ATLAS_SECOND = with_copies(2)

# test-time copies in the order used: the first ``variants`` run (2: identity and left-right
# flip, the copy that tells sides apart; 4: and their half turns; 8: every quarter turn)
VARIANT_ORDER = (0, 4, 2, 6, 1, 5, 3, 7)


def dihedral(x, k: int):
    """Variant ``k`` (0-7) of a (..., H, W) tensor: k % 4 quarter turns, then a left-right
    flip when k >= 4."""
    import torch

    y = torch.rot90(x, k % 4, dims=(-2, -1))
    return torch.flip(y, dims=(-1,)) if k >= 4 else y


def undo_dihedral(x, k: int):
    import torch

    y = torch.flip(x, dims=(-1,)) if k >= 4 else x
    return torch.rot90(y, -(k % 4), dims=(-2, -1))


def core_prob(probs: np.ndarray) -> float:
    """Mean class probability over a component's core: its pixels at or above the component's
    median probability (the better half). A thin structure's many boundary pixels, where the
    class wins the argmax at a low probability, do not pull it down; a component that is
    unsure throughout still scores low (docs/agent_design.md)."""
    if probs.size == 0:
        return 0.0
    return float(probs[probs >= np.median(probs)].mean())


def largest(region: np.ndarray) -> np.ndarray | None:
    from scipy import ndimage

    comp, n = ndimage.label(region, structure=_EIGHT)
    if n == 0:
        return None
    sizes = np.bincount(comp.ravel())[1:]
    return comp == int(np.argmax(sizes)) + 1


def agreement(votes: np.ndarray, cls: int, body: np.ndarray) -> tuple[int, float, list]:
    """(variants that found ``cls`` inside the body, spread of their centres in body radii,
    the centres) from (V, H, W) per-variant class maps in the shown frame."""
    centres = []
    for v in votes:
        comp = largest((v == cls) & body)
        if comp is not None and comp.sum() >= 4:
            ys, xs = np.nonzero(comp)
            centres.append((float(xs.mean()), float(ys.mean())))
    if not centres:
        return 0, float("inf"), []
    c = np.array(centres)
    med = np.median(c, axis=0)
    spread = float(np.max(np.hypot(*(c - med).T))) / body_radius(body)
    return len(centres), spread, centres


def plausible(region: np.ndarray, body: np.ndarray, ranges: dict | None) -> str | None:
    """None when the region's area and position fit the training range, else the reason."""
    if not ranges or body.sum() < 50:
        return None
    area, radial = region_stats(region, body)
    lo, hi = ranges["area_frac"]
    if not lo <= area <= hi:
        return (
            f"implausible: area {100 * area:.2f}% of the body outside the training range "
            f"{100 * lo:.2f}-{100 * hi:.2f}%"
        )
    lo, hi = ranges["radial"]
    if not lo <= radial <= hi:
        return (
            f"implausible: centre {radial:.2f} body radii from the body's centre, training "
            f"range {lo:.2f}-{hi:.2f}"
        )
    return None


def verdict(n_votes: int, spread: float, checks: Checks) -> str | None:
    if checks.variants <= 1:
        return None
    if n_votes < checks.min_votes:
        return (
            f"unstable: found in {n_votes}/{checks.variants} re-oriented copies "
            f"(< {checks.min_votes})"
        )
    if spread > checks.max_spread:
        return (
            f"unstable: re-oriented copies disagree by {spread:.2f} body radii "
            f"(> {checks.max_spread:g})"
        )
    return None


def assess(n_votes: int, spread: float, checks: Checks) -> tuple[str | None, str | None]:
    """(reason to abstain, reason to doubt): too few copies found the structure, or their
    centres lie more than ``max_uncertainty`` apart -> abstain; more than ``max_spread``
    apart -> doubt (a rule that weighs uncertainty decides with the spread as it)."""
    reason = verdict(n_votes, spread, checks)
    if reason is None or n_votes < checks.min_votes or spread > checks.max_uncertainty:
        return reason, None
    return None, reason


def featureless(image: np.ndarray) -> bool:
    """A blank or nearly uniform image (no body to find organs in): grey spread under 2 levels."""
    grey = image[::4, ::4, :3].mean(axis=2) if image.ndim == 3 else image[::4, ::4]
    return float(np.std(grey)) < 2.0
