"""Which of the 8 rotation / flip views a slice is shown in, from the anatomy the network found.

The atlas (``organs_atlas.match``) chooses its orientation by how well its slices' grey ranks
and labels match the query under each of the 8 views. Off the training patients' levels
(thorax, pelvis, other scanners) that choice was wrong on 46 % of the label-map patients'
items (benchmarks/RESULTS.md, issue #34 round 3), and every confidently wrong answer there came from
a wrong orientation. This module estimates the view from the network's labels alone (the
atlas's grey match plays no part; the labels also steer the atlas, so the two are not
independent):

- *posterior*: the direction from the body's centroid to the spine's (vertebrae, spinal
  cord, autochthon muscles); this fixes the rotation up to a left-right mirror;
- *patient's right*: the direction from the left-sided organs (spleen, stomach) to the liver,
  or from the midline to the liver alone; this fixes the mirror. Where neither is found, any
  other handedness landmark of the decidability rule's table (``questions/decidability.py``:
  the same table the generator marks items with; for this network gallbladder, pancreas,
  aorta, inferior vena cava) votes from its own side of the midline, across the posterior
  axis, when it lies at least its table offset off the midline; the votes must agree (one
  contradicting landmark: no right), and the trace names the landmarks (``sides_from``).

:func:`allowed_views` returns the views consistent with what was found (8 when nothing is, 2
when only the spine is: the mirror stays open); gating atlas-only centres on it
(``AtlasRules.confirm_view``) failed its rule and is off. :func:`sides_shown` is what ships
(``AtlasRules.need_sides``): a structure with a side (:func:`lateral`) is located only when
the patient's right is found and agrees with the atlas's orientation; on a slice without
asymmetric organs a mirrored view is the same image, and the sides are a guess.

Views are numbered as ``organs_checks.dihedral`` and ``organs_atlas._dihedral_np`` number
them, relative to the atlas's stored (standard, radiological) view, in which posterior is
down and the patient's right is on the image's left. Pure functions on arrays.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from radspatial.questions.records import Found

SPINE = ("vertebrae", "spinal_cord", "autochthon_left", "autochthon_right")
RIGHT = ("liver",)
LEFT = ("spleen", "stomach")
MIN_OFFSET = 0.2  # body radii: a centroid this far from the reference to give a direction
MIN_PX = 8  # pixels of a class before it counts
SIDES_NOT_SHOWN = (
    "sides not shown: no handedness landmark (liver vs spleen / stomach, or the table's others) "
    "fixes the patient's right"
)


def _unit_views() -> np.ndarray:
    """(8, 2, 2): per view k, the image directions (dx, dy) of the standard view's posterior
    (0, +1) and patient's right (-1, 0), found by transforming a 3 x 3 image exactly as the
    atlas transforms its slices (so no convention is restated here)."""
    out = np.zeros((8, 2, 2))
    for k in range(8):
        for j, (dx, dy) in enumerate(((0, 1), (-1, 0))):
            a = np.zeros((3, 3))
            a[1 + dy, 1 + dx] = 1.0
            b = np.rot90(a, k % 4)
            b = b[:, ::-1] if k >= 4 else b
            y, x = np.argwhere(b == 1.0)[0]
            out[k, j] = (x - 1, y - 1)
    return out


VIEW_AXES = _unit_views()


def _centroid(mask: np.ndarray) -> np.ndarray | None:
    ys, xs = np.nonzero(mask)
    if ys.size < MIN_PX:
        return None
    return np.array([xs.mean(), ys.mean()])


def _direction(a: np.ndarray | None, b: np.ndarray | None, radius: float) -> np.ndarray | None:
    """Unit vector from ``a`` to ``b`` when they are at least ``MIN_OFFSET`` radii apart."""
    if a is None or b is None:
        return None
    d = b - a
    n = float(np.hypot(*d))
    return d / n if n >= MIN_OFFSET * radius else None


def anatomy_axes(
    ids: np.ndarray, body: np.ndarray, id_of: Callable[[str], int | None], radius: float
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """(posterior, patient's right) unit vectors in the image (x, y), either None when the
    network's labels ``ids`` (label ids, 0 background) do not show it. ``id_of``: name -> id."""
    posterior, right, _ = anatomy_sides(ids, body, id_of, radius)
    return posterior, right


def anatomy_sides(
    ids: np.ndarray,
    body: np.ndarray,
    id_of: Callable[[str], int | None],
    radius: float,
    votes: bool = True,
    vote_ids: np.ndarray | None = None,
    max_skew: float = 1.0,
) -> tuple[np.ndarray | None, np.ndarray | None, tuple[str, ...]]:
    """``anatomy_axes`` and the landmarks that fixed the patient's right (empty: none);
    ``votes``: the table's other landmarks may fix it (``landmark_votes``), read from
    ``vote_ids`` when given (the pixels every re-oriented copy labels alike), else ``ids``;
    ``max_skew``: liver vs spleen/stomach fix nothing when their direction's cosine with the
    posterior axis is above it (1: any direction; ``AtlasRules.right_skew``)."""

    def mask_of(names: tuple[str, ...], labels: np.ndarray = ids) -> np.ndarray:
        wanted = [i for i in (id_of(n) for n in names) if i is not None]
        return np.isin(labels, wanted) & body

    centre = _centroid(body)
    posterior = _direction(centre, _centroid(mask_of(SPINE)), radius)
    right_c, left_c = _centroid(mask_of(RIGHT)), _centroid(mask_of(LEFT))
    right = _direction(left_c, right_c, radius)
    if right is not None and posterior is not None and abs(float(right @ posterior)) > max_skew:
        return posterior, None, ()  # liver vs stomach/spleen as much front-back as across
    if right is not None:
        found = [n for n in RIGHT + LEFT if _centroid(mask_of((n,))) is not None]
        return posterior, right, tuple(found)
    if posterior is not None and right_c is not None and centre is not None:
        side = _direction(centre, right_c, radius)  # the liver alone: its side of the midline
        if side is not None:
            across = side - posterior * float(side @ posterior)
            n = float(np.hypot(*across))
            if n >= 0.5:
                return posterior, across / n, RIGHT
    if posterior is None or centre is None or not votes:
        return posterior, None, ()
    voters = ids if vote_ids is None else vote_ids
    right, names = landmark_votes(centre, posterior, radius, lambda n: mask_of(n, voters))
    return posterior, right, names


def landmark_votes(
    centre: np.ndarray,
    posterior: np.ndarray,
    radius: float,
    mask_of: Callable[[tuple[str, ...]], np.ndarray],
) -> tuple[np.ndarray | None, tuple[str, ...]]:
    """The patient's right from the table's other landmarks: each found one at least its
    offset off the midline (across ``posterior``) votes for the side it lies on; None when
    none does or two disagree."""
    from radspatial.questions.decidability import landmark_table

    votes: list[np.ndarray] = []
    names: list[str] = []
    for mark in landmark_table().landmarks:
        if mark.structure in RIGHT + LEFT:
            continue
        c = _centroid(mask_of((mark.structure,)))
        if c is None:
            continue
        d = c - centre
        across = d - posterior * float(d @ posterior)
        offset = float(np.hypot(*across)) / radius
        if offset < max(mark.offset, 1e-6):
            continue
        unit = across / (offset * radius)
        votes.append(unit if mark.side == "right" else -unit)
        names.append(mark.structure)
    if not votes or any(float(a @ b) < 0 for a in votes for b in votes):
        return None, ()
    mean = np.mean(votes, axis=0)
    return mean / float(np.hypot(*mean)), tuple(names)


def allowed_views(posterior: np.ndarray | None, right: np.ndarray | None) -> tuple[int, ...]:
    """The views whose posterior (and right, when known) point within 45 degrees of the
    found ones: 8 without a posterior, 2 with it alone, 1 with both (or 8 again when the two
    found directions are not at right angles, i.e. the labels contradict each other)."""
    if posterior is None:
        return tuple(range(8))
    cos45 = np.sqrt(0.5)
    ok = [k for k in range(8) if VIEW_AXES[k, 0] @ posterior > cos45]
    if right is None:
        return tuple(ok)
    both = [k for k in ok if VIEW_AXES[k, 1] @ right > cos45]
    return tuple(both) if both else tuple(range(8))


def side_offset(
    xy: tuple[float, float],
    centre: tuple[float, float],
    right: tuple[float, float],
    radius: float,
) -> float:
    """How far ``xy`` lies toward the patient's right of the midline through ``centre``
    (``right``: a unit vector), in body radii: negative on the patient's left."""
    d = np.asarray(xy, float) - np.asarray(centre, float)
    return float(d @ np.asarray(right, float)) / max(radius, 1e-6)


REFLECTED = "reflected"  # a Found's method: its counterpart's centre across the midline
REFLECT_UNCERTAINTY = 0.15  # body radii: how far a left-right pair may be from symmetric


def body_centre(body: np.ndarray) -> np.ndarray | None:
    """The body's centroid (x, y), or None without enough body."""
    return _centroid(body)


MIN_ELONGATION = 1.2  # body width / depth (principal axes) for its short axis to be front-back


def body_depth_axis(body: np.ndarray) -> np.ndarray | None:
    """The body's short principal axis (x, y unit vector, either sign): the front-back line
    of a transverse slice, which is wider than deep at every level from the chest to the
    thighs; None where the outline is too round (``MIN_ELONGATION``) to tell. The midline a
    counterpart is reflected across where no spine shows it (below the sacrum)."""
    ys, xs = np.nonzero(body)
    if ys.size < MIN_PX:
        return None
    cov = np.cov(np.stack([xs, ys]).astype(float))
    values, vectors = np.linalg.eigh(cov)  # ascending
    if values[0] <= 0 or np.sqrt(values[1] / values[0]) < MIN_ELONGATION:
        return None
    return vectors[:, 0] / float(np.hypot(*vectors[:, 0]))


def reflect(
    found: Found,
    centre: tuple[float, float],
    posterior: tuple[float, float],
    *,
    name: str,
) -> Found:
    """Where ``found``'s counterpart on the other side lies if the pair is symmetric: its
    centre reflected across the body's midline (the line through ``centre`` along
    ``posterior``), with at least :data:`REFLECT_UNCERTAINTY` body radii of uncertainty.
    Used when the slice does not show the sides and the counterpart was not found."""
    from radspatial.agent.localizers.organs.organs_atlas import UNCERTAINTY

    c, p = np.asarray(centre, float), np.asarray(posterior, float)
    d = np.asarray(found.xy, float) - c
    xy = c + 2 * float(d @ p) * p - d
    details = {k: v for k, v in found.details.items() if k != "abstain_reason"}
    u = max(float(details.get(UNCERTAINTY) or 0.0), REFLECT_UNCERTAINTY)
    details |= {UNCERTAINTY: u, "reflected_from": counterpart(name), "structure": name}
    return Found((float(xy[0]), float(xy[1])), found.score, REFLECTED, details)


def counterpart(name: str) -> str:
    """The same structure on the other side (``femur_left`` -> ``femur_right``): the
    decidability rule's ``other_side``, the one place a side word is swapped."""
    from radspatial.questions.decidability import other_side

    return other_side(name) or name


def lateral(name: str) -> bool:
    """A structure with a side (``..._left`` / ``..._right``)."""
    return name.endswith(("_left", "_right"))


def sides_shown(right: np.ndarray | None, view: int) -> bool:
    """The patient's right was found (``anatomy_axes``) and agrees, within 45 degrees, with
    the right of ``view`` (the atlas's orientation)."""
    return right is not None and float(VIEW_AXES[view, 1] @ right) > np.sqrt(0.5)
