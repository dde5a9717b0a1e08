"""Multi-atlas label propagation for the ``organs+atlas`` localizer (BTCV's original method).

The atlas (``radspatial/data/organs/atlas.npz`` + ``atlas.json``, built by
:mod:`radspatial.training.organs_atlas` from the training patients' labelled slices) holds,
per slice, its grey image and label map cut to the body's bounding box and resized to
``SIZE`` x ``SIZE``, and which label ids that slice's patient has labelled at all (a partially
labelled patient says nothing about the others).

For a query slice (the network's 128 px grey, in the shown frame):

1. *normalise*: cut to the body's box, resize to ``SIZE``; grey -> rank within the body (any
   monotone display window gives the same ranks, up to clipping);
2. *match*: every atlas slice under each of the 8 rotations / flips is compared with the
   query by normalised cross-correlation of the rank images plus the agreement of its labels
   with the network's labels (which tells left from right better than grey alone); the
   orientation with the best matches wins, and its ``k`` best slices are kept;
3. *register*: an affine map per kept slice, fitted by gradient descent on the squared rank
   difference (torch, one batch);
4. *fuse*: per asked structure, the kept slices' warped masks are averaged (weighted voting
   over the slices that label it); the centre is the centroid of the largest component where
   the vote is >= 0.5, with the support (share of slices that hold it) and the spread of the
   slices' own centres as the atlas's confidence.

Pure functions on arrays; loading is cached per path.
"""

from __future__ import annotations

import functools
import hashlib
import weakref
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from radspatial.agent.localizers.organs.organs_checks import body_radius, largest
from radspatial.core.errors import first_line
from radspatial.core.textsafe import log_text
from radspatial.nets.atlas_grid import SIZE as SIZE
from radspatial.nets.atlas_grid import UNKNOWN as UNKNOWN
from radspatial.nets.atlas_grid import body_box as body_box
from radspatial.nets.atlas_grid import crop_resize as crop_resize
from radspatial.nets.atlas_grid import rank_image as rank_image

UNCERTAINTY = "uncertainty_body_radii"  # a Found's uncertainty in the 128 px frame


@dataclass(frozen=True)
class AtlasConfig:
    k: int = 5  # atlas slices fused
    label_weight: float = 1.0  # weight of the network-label agreement in the match
    steps: int = 10  # affine refinement steps (0 = body box only)
    lr: float = 0.02


@dataclass(frozen=True, eq=False)
class Atlas:
    grey: np.ndarray  # (N, SIZE, SIZE) uint8 rank image (0 outside the body)
    labels: np.ndarray  # (N, SIZE, SIZE) uint8 grouped label ids, UNKNOWN where unlabelled
    known: np.ndarray  # (N, 256) bool: label ids the slice's patient has labelled
    meta: dict


@dataclass(frozen=True)
class AtlasRules:
    """How the atlas's opinion is used (benchmarks/RESULTS.md: chosen on a training patient)."""

    min_support: float = 0.6  # share of fused slices holding a structure the network missed
    max_spread: float = 0.25  # body radii: slice centres around the fused one
    agree: float = 0.12  # body radii: network vs atlas centre beyond this -> doubt
    rescue: bool = False  # atlas agreement overrides the network's own score / vote checks
    floor: float = 0.25  # body radii: uncertainty of a centre taken from the atlas alone
    max_apart: float = 0.5  # body radii: network vs atlas centre beyond this -> abstain
    weak_to_atlas: bool = True  # a network centre scored under the floor counts as missed
    # on: a centre from the atlas alone needs the atlas's orientation to be the one view the
    # network's anatomy allows (organs_view); off: it failed its rule (#34 r3 in
    # benchmarks/RESULTS.md)
    confirm_view: bool = False
    # a structure with a side needs the patient's right shown by non-lateralised anatomy and
    # agreeing with the atlas's orientation (organs_view.sides_shown; #34 round 3, 2nd)
    need_sides: bool = True
    # on a slice that does not show the sides, answer when the question's answer is the same
    # with every side swapped (agent/pipeline/mirror.py; #34 round 4: its rule was met, on)
    mirror_sides: bool = True
    # a centre from the atlas alone needs the match's similarity (``Match.score``) at least
    # this (0: any match); #34 round 5: its rule was met on a fresh set, on
    min_match: float = 0.95
    # where liver vs spleen/stomach are not found, the other handedness landmarks of the
    # decidability table vote for the patient's right (organs_view.landmark_votes; #46/#47)
    landmark_votes: bool = True
    # on a slice that does not show the sides, a sided structure whose counterpart is not
    # found stands in for it reflected across the midline (organs_view.reflect; #47)
    reflect_missing: bool = True
    # the landmark votes read only the pixels every re-oriented copy labels alike (a landmark
    # the copies disagree on does not vote; #47 round 2)
    votes_consensus: bool = True
    # on a slice that hides the sides, a sided structure and its counterpart are located as
    # one structure on either side and split into its two members (organs_pairs; #47 r2)
    pair_sides_open: bool = True
    # where the sides are fixed, a structure named for a side that lies on the other side of
    # the body's midline (beyond ``wrong_side_margin`` body radii) is not trusted (#47 r3)
    side_consistent: bool = True
    wrong_side_margin: float = 0.05
    # liver vs spleen/stomach fix the right only when their direction lies within 60 degrees
    # of across the body (|cos| with the posterior axis <= this; 1.0: any; #47 round 3)
    right_skew: float = 0.5
    # an answer that holds with every side swapped rests on what the network found: a centre
    # from the atlas alone takes no part in the two readings (#47 round 4)
    mirror_needs_image: bool = True
    # the two readings' members (a structure and its counterpart, an open pair's two parts)
    # lie on opposite sides of the body's midline, as a left-right pair does; two on one side
    # are no pair and no swapped reading (#47 round 6)
    pair_across: bool = True
    # on a slice that hides the sides, a sided structure is checked against the atlas's
    # place for it or for its counterpart, whichever it fits (the atlas's orientation cannot
    # show the sides either; session 18)
    atlas_either_side: bool = True
    # where no spine shows the midline (below the sacrum), the body outline's short axis
    # does (organs_view.body_depth_axis), and an open pair's missing part is reflected
    # across it as a missing counterpart is (session 18)
    midline_from_outline: bool = True
    # on a slice that hides the sides, an open pair the network shows on one side only is
    # that one member, either side (its checks on the pair's merged class, whose copies do
    # not flip between the sides), its counterpart reflected across the midline (session 18)
    pair_single: bool = True


@dataclass(frozen=True)
class AtlasFound:
    xy: tuple[float, float]  # centre in the query's 128 px frame
    support: float  # share of the fused slices (that label it) holding the structure
    spread: float  # farthest slice centre from the fused centre, body radii
    n_slices: int  # fused slices that label the structure


@dataclass(frozen=True, eq=False)
class Match:
    """The query's kept atlas slices (warped into the query's box frame) and the box."""

    labels: np.ndarray  # (k, SIZE, SIZE) the kept slices' label ids (before the warp)
    warp: object  # torch affine grids (k, SIZE, SIZE, 2)
    slices: tuple[int, ...]
    orientation: int
    similarity: tuple[float, ...]
    box: tuple[int, int, int, int]  # y0, y1, x0, x1 in the 128 px frame
    body_radius: float  # 128 px frame
    views: tuple[int, ...] = tuple(range(8))  # views the network's anatomy allows (organs_view)
    sides: bool = True  # the patient's right is shown and agrees with ``orientation``
    sides_from: tuple[str, ...] = ()  # the landmarks that showed it (organs_view)
    # the body's centre and posterior unit vector (x, y; 128 px frame) where the spine shows
    # it: the midline a structure is reflected across when its counterpart is not found
    midline: tuple[tuple[float, float], tuple[float, float]] | None = None
    right: tuple[float, float] | None = None  # the patient's right (x, y) where it was fixed

    @property
    def score(self) -> float:
        """Mean similarity of the kept slices (grey rank correlation + weighted label
        agreement, as ranked): how well the best orientation's slices fit the query."""
        return float(np.mean(self.similarity)) if self.similarity else 0.0

    @property
    def view_confirmed(self) -> bool:
        """The anatomy allows one view only, and it is the atlas's orientation."""
        return self.views == (self.orientation,)


@functools.lru_cache(maxsize=4)
def load_atlas(folder: str) -> Atlas:
    """The atlas of ``folder``; ValueError naming the file when it is not one (a missing or
    pickled array, shapes that disagree, a damaged archive)."""
    from radspatial.core.datafiles import read_json

    path = Path(folder) / "atlas.npz"
    try:
        with np.load(path, allow_pickle=False) as z:
            grey, labels, known = z["grey"], z["labels"], z["known"]
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
        raise ValueError(f"{path}: not an atlas archive ({first_line(exc)})") from None
    n = len(grey)
    if grey.ndim != 3 or labels.shape != grey.shape or known.ndim != 2 or len(known) != n:
        raise ValueError(f"{path}: grey, labels and known arrays do not fit one atlas")
    meta = read_json(Path(folder) / "atlas.json", want=dict)
    _check_meta(Path(folder) / "atlas.json", meta, grey.shape, path)
    return Atlas(grey, labels, known.astype(bool), meta)


def _check_meta(path: Path, meta: dict, shape: tuple[int, ...], npz: Path) -> None:
    """ValueError naming ``atlas.json`` unless it describes the archive beside it: its format,
    the slice count and size of the arrays, and the archive's sha256."""
    want = {"format": "radspatial-organs-atlas", "format_version": 1}
    want |= {"slices": shape[0], "size": SIZE}
    for key, value in want.items():
        got = meta.get(key)
        if type(got) is not type(value) or got != value:
            shown = log_text(repr(got))[:60]
            raise ValueError(f"{path}: {key} is {shown}, expected {value!r} (the atlas beside it)")
    if shape[1:] != (SIZE, SIZE):
        raise ValueError(f"{npz}: slices are {shape[1:]} px, expected {SIZE} x {SIZE}")
    if meta.get("npz_sha256") != hashlib.sha256(npz.read_bytes()).hexdigest():
        raise ValueError(f"{path}: npz_sha256 is not the sha256 of {npz.name} (edited or swapped)")


def has_atlas(folder: Path) -> bool:
    return (folder / "atlas.npz").is_file() and (folder / "atlas.json").is_file()


def _dihedral_np(a: np.ndarray, k: int) -> np.ndarray:
    """Variant ``k`` of (..., H, W) as ``organs_checks.dihedral``: quarter turns, then a flip."""
    y = np.rot90(a, k % 4, axes=(-2, -1))
    return y[..., ::-1] if k >= 4 else y


@functools.lru_cache(maxsize=4)
def _bank(folder: str) -> tuple[np.ndarray, np.ndarray]:
    """(8N, SIZE*SIZE) zero-mean unit-norm rank features and (SIZE*SIZE, 8N) labels of every
    atlas slice under each of the 8 variants (variant-major; labels pixel-major, so the rows
    of the query's foreground pixels are gathered at once: 10x faster than columns)."""
    atlas = load_atlas(folder)
    feats = np.concatenate([_dihedral_np(atlas.grey, k) for k in range(8)]).astype(np.float32)
    feats = feats.reshape(len(feats), -1)
    feats -= feats.mean(axis=1, keepdims=True)
    feats /= np.linalg.norm(feats, axis=1, keepdims=True) + 1e-6
    labels = np.concatenate([_dihedral_np(atlas.labels, k) for k in range(8)])
    return feats, np.ascontiguousarray(labels.reshape(len(labels), -1).T)


def match(
    folder: str,
    grey128: np.ndarray,
    body128: np.ndarray,
    net_ids128: np.ndarray,
    cfg: AtlasConfig,
    views: tuple[int, ...] = tuple(range(8)),
) -> Match | None:
    """The ``cfg.k`` best atlas slices under the best orientation among ``views`` (default
    all 8), affinely registered to the query; None without a body. ``net_ids128``: the
    network's label ids (0 background)."""
    box = body_box(body128)
    if box is None:
        return None
    body = crop_resize(body128.astype(np.uint8), box, nearest=True) > 0
    q = rank_image(crop_resize(grey128.astype(np.uint8), box, nearest=False), body)
    net = crop_resize(net_ids128.astype(np.uint8), box, nearest=True).ravel()
    feats, labels = _bank(folder)
    qf = q.astype(np.float32).ravel()
    qf = (qf - qf.mean()) / (np.linalg.norm(qf - qf.mean()) + 1e-6)
    sim = _similarity(feats, qf)
    fg = net > 0
    if cfg.label_weight and fg.any():
        idx = np.flatnonzero(fg)
        agree = np.count_nonzero(labels[idx] == net[idx][:, None], axis=0) / idx.size
        sim = sim + cfg.label_weight * agree
    n = len(feats) // 8
    per_k = sim.reshape(8, n)
    top = np.sort(per_k, axis=1)[:, ::-1][:, : cfg.k].mean(axis=1)
    k_best = max(views, key=lambda k: top[k])
    order = np.argsort(per_k[k_best])[::-1][: cfg.k]
    atlas = load_atlas(folder)
    grey = _dihedral_np(atlas.grey[order], k_best).astype(np.float32)
    lab = np.ascontiguousarray(_dihedral_np(atlas.labels[order], k_best))
    warp = register(q.astype(np.float32), grey, cfg)
    radius = body_radius(body128)
    sims = tuple(round(float(s), 4) for s in per_k[k_best][order])
    return Match(lab, warp, tuple(int(i) for i in order), k_best, sims, box, radius)


def _similarity(feats: np.ndarray, query: np.ndarray) -> np.ndarray:
    """``feats @ query`` through torch, so on the threads torch is given: numpy's BLAS keeps
    its own pool (every core), whose idle threads spin after each call, doubling the CPU of
    an answer on 2 cores (issue #47 round 14; the other steps all run in torch)."""
    import torch

    return torch.mv(torch.from_numpy(feats), torch.from_numpy(query)).numpy()


def register(query: np.ndarray, moving: np.ndarray, cfg: AtlasConfig):
    """Affine sampling grids (k, SIZE, SIZE, 2) taking each moving image onto the query,
    fitted by Adam on the mean squared rank difference (identity when ``cfg.steps`` is 0).

    The gradient is torch's own, without its autograd: the kernels autograd would call on
    ``((grid_sample(moving, affine_grid(theta)) - query) ** 2).mean()`` (the grid as
    ``affine_grid`` makes it, one ``bmm`` of its base grid), the same numbers in a third
    less CPU (the graph's bookkeeping dominated at 5 x 64 x 64: 8.0 -> 5.9 ms)."""
    import torch
    import torch.nn.functional as F

    k = len(moving)
    theta = torch.eye(2, 3).repeat(k, 1, 1)
    size = [k, 1, SIZE, SIZE]
    if cfg.steps:
        fixed = torch.from_numpy(query / 255.0)[None, None].expand(size)
        mov = torch.from_numpy(np.ascontiguousarray(moving) / 255.0)[:, None].float()
        base = _base_grid(k)
        theta.requires_grad_(True)  # a leaf for Adam; no graph is recorded (no_grad)
        opt = torch.optim.Adam([theta], lr=cfg.lr)
        with torch.no_grad():
            for _ in range(cfg.steps):
                grid = base.bmm(theta.transpose(1, 2)).view(k, SIZE, SIZE, 2)
                diff = F.grid_sample(mov, grid, align_corners=False) - fixed
                # d mean(diff ** 2) / d diff as autograd forms it: (1 / n) * (2 * diff)
                grad = torch.ones((), dtype=diff.dtype).expand(diff.shape) / diff.numel()
                grad = grad * (2.0 * diff)
                _, grad_grid = torch.ops.aten.grid_sampler_2d_backward(
                    grad, mov, grid, 0, 0, False, [False, True]
                )  # bilinear, zeros padding, align_corners False: grid_sample's arguments
                flat = grad_grid.view(k, SIZE * SIZE, 2)
                theta.grad = base.transpose(1, 2).bmm(flat).transpose(1, 2)
                opt.step()
        theta = theta.detach()
    return F.affine_grid(theta, size, align_corners=False)


@functools.lru_cache(maxsize=8)
def _base_grid(k: int):
    """``affine_grid``'s base grid for k SIZE x SIZE images, (k, SIZE*SIZE, 3) rows (x, y, 1):
    its grid is ``base.bmm(theta.transpose(1, 2))``, as torch computes it (read back through
    the identity, which it reproduces exactly)."""
    import torch
    import torch.nn.functional as F

    eye = torch.eye(2, 3)[None].expand(k, 2, 3)
    xy = F.affine_grid(eye, [k, 1, SIZE, SIZE], align_corners=False)
    return torch.cat([xy, torch.ones(k, SIZE, SIZE, 1)], -1).reshape(k, SIZE * SIZE, 3)


_FUSED: weakref.WeakKeyDictionary[Any, dict] = weakref.WeakKeyDictionary()


def fuse(m: Match, folder: str, label_id: int) -> AtlasFound | None:
    """The structure's fused centre (128 px frame) over the kept slices that label it; kept
    per match (compared by identity), as one answer asks for a structure up to 4 times (its
    pair, its counterpart, the mirror readings: 42 % of the calls on seed 24's slices)."""
    memo = _FUSED.setdefault(m, {})
    key = (folder, int(label_id))
    if key not in memo:
        memo[key] = _fuse(m, folder, label_id)
    return memo[key]


def _fuse(m: Match, folder: str, label_id: int) -> AtlasFound | None:
    import torch
    import torch.nn.functional as F

    known = load_atlas(folder).known[list(m.slices), label_id]
    if not known.any():
        return None
    absent = AtlasFound((float("nan"), float("nan")), 0.0, float("inf"), int(known.sum()))
    masks = torch.from_numpy((m.labels[known] == label_id).astype(np.float32))[:, None]
    warped = F.grid_sample(masks, m.warp[torch.from_numpy(known)], align_corners=False)
    warped = warped[:, 0].numpy()
    vote = warped.mean(axis=0)
    region = largest(vote >= 0.5)
    if region is None:
        return absent
    centre = _centroid(region)
    held = [_centroid(w >= 0.5) for w in warped if (w >= 0.5).sum() >= 2]
    y0, y1, x0, x1 = m.box
    sx, sy = (x1 - x0) / SIZE, (y1 - y0) / SIZE
    dists = [np.hypot((c[0] - centre[0]) * sx, (c[1] - centre[1]) * sy) for c in held]
    spread = max(dists, default=0.0)
    xy = (x0 + (centre[0] + 0.5) * sx - 0.5, y0 + (centre[1] + 0.5) * sy - 0.5)
    support = len(held) / int(known.sum())
    return AtlasFound(xy, support, float(spread) / m.body_radius, int(known.sum()))


def _centroid(region: np.ndarray) -> tuple[float, float]:
    ys, xs = np.nonzero(region)
    return float(xs.mean()), float(ys.mean())


def combine(net, atlas: AtlasFound | None, radius: float, rules: AtlasRules, extra: dict):
    """The network's localization (``Found`` in the 128 px frame, or None) with the atlas's
    opinion: disagreement beyond ``rules.agree`` is a reason to abstain; a structure the
    network missed is taken from the atlas when enough slices hold it in one place.
    ``extra``: label_id, class, via (the details of an atlas-only ``Found``)."""
    from radspatial.agent.pipeline.types import Found

    if atlas is None:
        return net
    opinion = {"support": round(atlas.support, 3), "slices": atlas.n_slices}
    if np.isfinite(atlas.spread):
        opinion["spread_body_radii"] = round(atlas.spread, 3)
    if net is None:
        if atlas.support < rules.min_support or atlas.spread > rules.max_spread:
            return None
        u = max(rules.floor, atlas.spread)
        details = {**extra, "area_px": 0, "n_components": 1, "atlas": opinion}
        return Found(atlas.xy, float(atlas.support), "atlas", {**details, UNCERTAINTY: u})
    details = dict(net.details)
    reason = doubt = None
    if atlas.support == 0:
        opinion["distance_body_radii"] = None
        reason = "atlas disagrees: no fused atlas slice holds it here"
    else:
        d = float(np.hypot(net.xy[0] - atlas.xy[0], net.xy[1] - atlas.xy[1])) / radius
        opinion["distance_body_radii"] = round(d, 3)
        if d > rules.agree:
            why = f"atlas disagrees: centres {d:.2f} body radii apart (> {rules.agree:g})"
            reason, doubt = (why, None) if d > rules.max_apart else (None, why)
            details[UNCERTAINTY] = max(details.get(UNCERTAINTY, 0.0), d)
    details["atlas"] = opinion
    score = net.score
    if doubt and not details.get("uncertain_reason"):
        details["uncertain_reason"] = doubt
    if reason:
        details["abstain_reason"] = details.get("abstain_reason") or reason
    elif rules.rescue and not doubt and atlas.support >= rules.min_support:
        details.pop("abstain_reason", None)
        score = max(score, atlas.support)
    return Found(net.xy, score, net.method, details)
