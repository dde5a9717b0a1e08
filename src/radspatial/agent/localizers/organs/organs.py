"""The shipped ``organs`` localizer and the ``auto`` pipeline (markers when a ref has one).

``organs``: a MONAI 2D U-Net trained by the project on the real labelled CT in ../shared
(:mod:`radspatial.training.organs_data`), with the 8 rotation/flip variants, zoom, shift,
windows, gamma, blur and noise as augmentation (:mod:`radspatial.training.organs_train`). Its
weights ship in ``radspatial/data/organs`` (fp16 safetensors + config.json: data, seed, config,
command, sha256), so it works out of the box with no download. A ref's structure comes from its
name, or from a number / letters marker (TotalSegmentator ids, grouped as MIRP did); a dot
names no structure (None). The answer is the centroid of the largest component of the class
(see :func:`radspatial.nets.unet.found_for_class`); the agent abstains when a score is under
``min_score`` or when a check of :mod:`radspatial.agent.localizers.organs.organs_checks` fails
(test-time re-orientation agreement, body region, plausibility), and, with the atlas, on a structure
with a side when no asymmetric organ shows the patient's right
(:mod:`radspatial.agent.localizers.organs.organs_view`); the reason goes to the trace.

``auto``: each ref with a marker goes to the ``markers`` reader, the others to ``organs`` with
the model folder's atlas when it has one (the shipped weights do: ``organs+atlas``); a marker
the reader cannot find falls back to the name, when the ref has one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from importlib import resources
from pathlib import Path

import numpy as np

from radspatial.agent.localizers.organs import (
    organs_atlas,
    organs_checks,
    organs_pairs,
    organs_view,
)
from radspatial.agent.localizers.organs.organs_names import resolve
from radspatial.agent.localizers.organs.organs_predict import merge_parts, predict_small
from radspatial.agent.pipeline.mirror import MIRROR
from radspatial.agent.pipeline.types import (
    Context,
    Found,
    Ref,
    create_localizer,
    register_localizer,
)
from radspatial.imaging.planes import DEFAULT_PLANE
from radspatial.nets import unet

MIN_SCORE = 0.5  # score (organs_checks.core_prob x size factor) under this: abstain


def shipped_model_dir() -> Path:
    return Path(str(resources.files("radspatial.data") / "organs"))


def shipped_second_dir() -> Path | None:
    """The shipped second model folder (``radspatial/data/organs_wide``: the levels the first
    never saw in real texture; ``AutoLocalizer`` asks it by default with the shipped first
    model), None where the package has none."""
    folder = Path(str(resources.files("radspatial.data") / "organs_wide"))
    return folder if (folder / "config.json").is_file() else None


class OrgansLocalizer:
    """``create_localizer("organs")`` (shipped weights) or ``organs`` with ``model_dir=``."""

    name = "organs"
    thread_safe = True  # inference holds the model's lock

    def __init__(
        self,
        model_dir: str | Path | None = None,
        device: str = "cpu",
        min_score: float = MIN_SCORE,
        checks: organs_checks.Checks | None = None,
        atlas: bool | str | Path = False,
        atlas_rules: organs_atlas.AtlasRules | None = None,
        atlas_config: organs_atlas.AtlasConfig | None = None,
    ) -> None:
        self.model_dir = Path(model_dir) if model_dir else shipped_model_dir()
        self.device = device
        self.min_score = float(min_score)
        # fail early, without torch, on a wrong folder; read once (its refusals are asked per
        # question, and the network, loaded once per folder, is this config's)
        self.config = unet.read_config(self.model_dir)
        self.atlas_dir = _atlas_dir(atlas, self.model_dir)
        # with the atlas as the second opinion, 4 copies as the network alone (2 from issue
        # #22 round 4 to issue #47 round 9: benchmarks/RESULTS.md)
        default = organs_checks.WITH_ATLAS if self.atlas_dir else organs_checks.Checks()
        self.checks = checks or default
        self.atlas_rules = atlas_rules or organs_atlas.AtlasRules()
        self.atlas_config = atlas_config or organs_atlas.AtlasConfig()
        if self.atlas_dir is not None:
            self.name = "organs+atlas"

    @property
    def model(self) -> unet.UNetModel:
        return unet.load_model(self.model_dir, self.device)

    def warm_up(self) -> None:
        """Load the network (importing PyTorch, not MONAI: most of a cold first call) and the
        atlas now, so the first question is answered at the usual speed (``serve`` calls it
        before it listens; a plain ``locate`` loads them on its first use)."""
        _ = self.model
        if self.atlas_dir is not None:
            organs_atlas.load_atlas(str(self.atlas_dir))

    def refuses(self, refs: Sequence[Ref], context: Context) -> str | None:
        """Why it will not look (the agent abstains with this reason in its trace): a plane it
        was not trained on, or an MR item for a model trained on CT."""
        if not refs:
            return None
        return _untrained_plane(context) or unet.modality_refusal(self.config, context)

    def locate(
        self, image: np.ndarray, refs: Sequence[Ref], context: Context
    ) -> list[Found | None]:
        model = self.model
        resolved = [resolve(r, model) for r in refs]
        if all(label_id is None for label_id, _ in resolved) or organs_checks.featureless(image):
            return [None] * len(refs)  # nothing to look for, or nothing to look at
        pred, votes, gray = predict_small(model, image, self.checks.variants)
        body = organs_checks.body_of(gray)
        sx, sy = image.shape[1] / model.size, image.shape[0] / model.size
        match = self._match(model, pred, gray, body, votes)
        seen = (model, pred, votes, body, match)
        px = organs_checks.body_radius(body) * (sx + sy) / 2  # one body radius, image px
        out: list[Found | None] = []
        for label_id, via in resolved:
            parts = None if label_id is None else model.composites.get(label_id)
            if parts:  # the whole as one class: its parts merged, no atlas (it holds parts)
                p, v = merge_parts(pred, votes, parts)
                f = self._one(model, p, v, body, parts[0], via, label_id)
                f = None if f is None else replace(f, details={**f.details, "parts": len(parts)})
            elif (pair := self._open_pair(model, match, label_id)) is not None:
                p, v = merge_parts(pred, votes, pair)  # either side: the two probabilities
                f = self._pair(model, (p, v, pred.probs, body, match), pair, label_id, via)
                if f is None:
                    p, v = pred, votes
                    f = self._structure(seen, label_id, via)
            else:
                p, v = pred, votes
                f = self._structure(seen, label_id, via)
            out.append(None if f is None else _to_image(f, p, sx, sy, self.min_score, px, v))
        return out

    def _wrong_side(self, f: Found, name: str, match) -> str | None:
        """Why a structure named for a side is not trusted where the sides are fixed: it lies
        on the other side of the midline (``organs_view.side_offset``); else None."""
        rules = self.atlas_rules
        if not rules.side_consistent or match.midline is None or match.right is None:
            return None
        offset = organs_view.side_offset(f.xy, match.midline[0], match.right, match.body_radius)
        toward = 1.0 if name.endswith("_right") else -1.0  # its own side: + toward the right
        if toward * offset >= -rules.wrong_side_margin:
            return None
        side = "left" if toward < 0 else "right"
        return (
            f"on the wrong side: named {side}, found {abs(offset):.2f} body radii on the "
            f"patient's {'right' if offset > 0 else 'left'} of the midline"
        )

    def _reading(self, twin: Found | None) -> Found | None:
        """The counterpart as the swapped reading's, or None: a centre from the atlas alone is
        no reading (``AtlasRules.mirror_needs_image``)."""
        if twin is not None and self.atlas_rules.mirror_needs_image and twin.method == "atlas":
            return None
        return twin

    def _stand_in(self, f: Found, twin: Found | None, name: str, match) -> Found | None:
        """The counterpart of ``f`` (named ``name``) for the swapped reading: ``twin``, or where
        it was not found ``f`` reflected across the midline (``AtlasRules.reflect_missing``)."""
        if twin is not None or not self.atlas_rules.reflect_missing or match.midline is None:
            return twin
        return organs_view.reflect(f, *match.midline, name=organs_view.counterpart(name))

    def _one_side(self, f: Found, twin: Found | None, match) -> str | None:
        """Why ``f`` and its counterpart ``twin`` (the swapped reading's) are no left-right
        pair (``AtlasRules.pair_across``): both on one side of the body's midline; else None.
        The sides being unknown, only the two offsets' signs are compared."""
        if not self.atlas_rules.pair_across or twin is None or match.midline is None:
            return None
        centre, posterior = match.midline
        across = (-posterior[1], posterior[0])  # either side: only the signs are compared
        a, b = (organs_view.side_offset(x.xy, centre, across, 1.0) for x in (f, twin))
        if a * b < 0:
            return None
        return "no left-right pair: it and its counterpart lie on one side of the midline"

    def _pair_atlas(
        self, f: Found | None, match, ids: tuple[int, ...], cls: int, via: str
    ) -> Found | None:
        """A structure with the atlas's opinion (``_with_atlas``) by its own label (``ids[0]``;
        alone: that opinion, which may place a structure the network missed) or, the sides
        being unknown, its counterpart's (``ids[1:]``). With ``AtlasRules.atlas_either_side``
        the opinion it agrees with best (no veto, no doubt, nearest centre): where the image
        does not show the patient's right, neither can the atlas's orientation, so "where a
        left or a right one lies" is all it can check; else the first the atlas does not veto
        (before session 18)."""
        outs = []
        for label_id in ids:
            opinion = organs_atlas.fuse(match, str(self.atlas_dir), int(label_id))
            extra = {"label_id": int(ids[0]), "class": int(cls), "via": via}
            outs.append(
                self._with_atlas(f, opinion, match.body_radius, extra, match.view_confirmed,
                                 match.score)
            )  # fmt: skip
        kept = [o for o in outs if o is not None]
        if len(kept) < 2:
            return kept[0] if kept else f
        if self.atlas_rules.atlas_either_side:
            return min(kept, key=lambda o: _atlas_fit(o, f))
        return next((o for o in kept if not o.details.get("abstain_reason")), kept[0])

    def _open_pair(self, model, match, label_id: int | None) -> tuple[int, int] | None:
        """(class, counterpart's class) of a sided structure on a slice that hides the sides,
        with ``AtlasRules.pair_sides_open``; else None."""
        if not self.atlas_rules.pair_sides_open or match is None or match.sides:
            return None
        cls = None if label_id is None else model.class_of(label_id)
        if cls is None or not organs_view.lateral(name := model.classes[cls][1]):
            return None
        other = model.id_of_name(organs_view.counterpart(name))
        other_cls = None if other is None else model.class_of(other)
        return None if other_cls is None else (cls, other_cls)

    def _pair(self, model, merged: tuple, pair: tuple[int, int], label_id: int, via: str):
        """The asked member of an open pair (``organs_pairs``), its counterpart as the mirror
        reading's; None when the pair does not show as two components."""
        p, v, probs, body, match = merged
        cls, other = pair
        rules = self.atlas_rules
        split = organs_pairs.members(p, v, probs, cls, other, body, rules.pair_single)
        if split is None:
            return None
        (pa, va), rest = split
        ids = (label_id, model.classes[other][0])
        f = self._one(model, pa, va, body, cls, via, ids[0])
        if f is None:
            return None
        f = self._pair_atlas(f, match, ids, cls, via)
        twin = None if rest is None else self._one(model, *rest, body, cls, via, ids[1])
        twin = None if twin is None else self._pair_atlas(twin, match, ids[::-1], cls, via)
        twin = self._reading(twin)
        if rules.midline_from_outline or rest is None:  # the other not found: f reflected
            twin = self._stand_in(f, twin, model.classes[cls][1], match)
        before = f.details.get("abstain_reason") or (
            "atlas placed it (network under the floor)" if f.method == "atlas" else None
        )
        before = before or self._one_side(f, twin, match)
        how = "split in two" if rest is not None else "one found, either side"
        details = {**f.details, "pair": f"either side (sides not shown), {how}"}
        details["abstain_reason"] = before or organs_view.SIDES_NOT_SHOWN
        if not before and self.atlas_rules.mirror_sides:
            details[MIRROR] = twin
        return replace(f, details=details)

    def _structure(self, seen: tuple, label_id: int | None, via: str, mirror: bool = True):
        """One structure (128 px frame) with the atlas's opinion; a sided one on a slice that
        hides the sides abstains (and may carry its counterpart: ``agent/pipeline/mirror.py``)."""
        model, pred, votes, body, match = seen
        cls = None if label_id is None else model.class_of(label_id)
        f = None if cls is None else self._one(model, pred, votes, body, cls, via)
        if match is None or cls is None:
            return f
        name = model.classes[cls][1]
        lateral = organs_view.lateral(name)
        other = model.id_of_name(organs_view.counterpart(name)) if lateral else None
        either = self.atlas_rules.atlas_either_side and not match.sides and other is not None
        ids = (int(label_id), int(other)) if f is not None and either else (int(label_id),)
        f = self._pair_atlas(f, match, ids, cls, via)
        if f is not None and match.sides and match.sides_from and lateral:
            details = {**f.details, "sides_from": ", ".join(match.sides_from)}
            wrong = self._wrong_side(f, name, match)
            if wrong and not details.get("abstain_reason"):
                details["abstain_reason"] = wrong
            return replace(f, details=details)
        if f is None or match.sides or not lateral:
            return f
        before = f.details.get("abstain_reason")  # a reason of its own comes first
        details = {**f.details, "abstain_reason": before or organs_view.SIDES_NOT_SHOWN}
        rules = self.atlas_rules
        from_atlas = rules.mirror_needs_image and f.method == "atlas"
        if rules.mirror_sides and mirror and not before and not from_atlas:
            twin = None if other is None else self._structure(seen, other, via, False)
            twin = self._stand_in(f, self._reading(twin), name, match)
            if one_side := self._one_side(f, twin, match):
                details["abstain_reason"], twin = one_side, None
            details[MIRROR] = twin
        elif from_atlas and rules.mirror_sides and mirror and not before:
            details[MIRROR] = None  # no swapped reading: this reading alone cannot answer
        return replace(f, details=details)

    def _with_atlas(
        self,
        f: Found | None,
        opinion,
        radius: float,
        extra: dict,
        confirmed: bool = True,
        similarity: float = float("inf"),
    ) -> Found | None:
        """The network's localization with the atlas's opinion (``organs_atlas.combine``); one
        scored under the floor counts as missed (``AtlasRules.weak_to_atlas``): the atlas's
        centre, with its uncertainty, is used when the atlas holds the structure, its match's
        ``similarity`` reaches ``AtlasRules.min_match`` and (with ``AtlasRules.confirm_view``)
        its orientation is ``confirmed`` by the anatomy."""
        rules = self.atlas_rules
        weak = f is not None and f.score < self.min_score and rules.weak_to_atlas
        out = organs_atlas.combine(None if weak else f, opinion, radius, rules, extra)
        alone = out is not None and out.method == "atlas"
        if alone and ((rules.confirm_view and not confirmed) or similarity < rules.min_match):
            out = None  # an orientation or a match the image does not bear out: no centre
        if out is not None and "atlas" in out.details and np.isfinite(similarity):
            opinion = {**out.details["atlas"], "match_score": round(float(similarity), 3)}
            out = replace(out, details={**out.details, "atlas": opinion})  # for the trace
        if not weak:
            return out
        if out is None:
            return f  # nothing from the atlas: abstain on the low score, as before
        note = {"score": round(float(f.score), 4), "used": "atlas (network score under floor)"}
        return replace(out, details={**out.details, "network": note})

    def _match(self, model, pred, gray, body, votes=None) -> organs_atlas.Match | None:
        """The atlas slices registered to this one (None without an atlas or a body);
        ``votes``: each re-oriented copy's labels (the landmark votes read only the pixels
        every copy labels alike, with ``AtlasRules.votes_consensus``)."""
        if self.atlas_dir is None:
            return None
        lut = np.array([c[0] for c in model.classes], np.int64)
        ids = np.where(body, lut[pred.labels], 0)
        m = organs_atlas.match(str(self.atlas_dir), gray, body, ids, self.atlas_config)
        rules = self.atlas_rules
        if m is None or not (rules.confirm_view or rules.need_sides):
            return m
        vote_ids = None
        if rules.votes_consensus and votes is not None and len(votes) > 1:
            vote_ids = np.where((votes == pred.labels).all(axis=0), ids, 0)
        *axes, via = organs_view.anatomy_sides(
            ids,
            body,
            model.id_of_name,
            m.body_radius,
            rules.landmark_votes,
            vote_ids,
            max_skew=rules.right_skew,
        )
        views = organs_view.allowed_views(*axes) if rules.confirm_view else m.views
        shown = organs_view.sides_shown(axes[1], m.orientation)
        centre, posterior = organs_view.body_centre(body), axes[0]
        if posterior is None and centre is not None and rules.midline_from_outline:
            posterior = organs_view.body_depth_axis(body)  # no spine: the outline's depth
        line = None
        if centre is not None and posterior is not None:
            line = (tuple(map(float, centre)), tuple(map(float, posterior)))
        shown = shown or not rules.need_sides
        right = None if axes[1] is None else (float(axes[1][0]), float(axes[1][1]))
        return replace(m, views=views, sides=shown, sides_from=via, midline=line, right=right)

    def _one(
        self, model, pred, votes, body, cls: int, via: str, label_id: int | None = None
    ) -> Found | None:
        """The structure inside the body, with the checks' evidence (and any reason to
        abstain) in its details; ``label_id``: a composite's own (its parts merged in ``cls``)."""
        label_id = model.classes[cls][0] if label_id is None else label_id
        inside = unet.Prediction(pred.probs, np.where(body, pred.labels, 0))
        found = unet.found_for_class(inside, cls, label_id, via, organs_checks.core_prob)
        if found is None:
            return None
        region = organs_checks.largest(inside.labels == cls)
        n_votes, spread, _ = organs_checks.agreement(votes, cls, body)
        outside = int(np.count_nonzero((pred.labels == cls) & ~body))
        reason, doubt = organs_checks.assess(n_votes, spread, self.checks)
        if reason is None and self.checks.plausibility:
            reason = organs_checks.plausible(region, body, model.plausibility.get(label_id))
        reason = reason or model.unseen_in_real(label_id)
        checks = {
            "votes": f"{n_votes}/{self.checks.variants}",
            "spread_body_radii": round(spread, 3) if np.isfinite(spread) else None,
            "outside_body_px_dropped": outside,
        }
        details = {**found.details, "checks": checks}
        details[organs_atlas.UNCERTAINTY] = self.checks.floor
        if reason:
            details["abstain_reason"] = reason
        elif doubt:
            details["uncertain_reason"] = doubt
            details[organs_atlas.UNCERTAINTY] = max(self.checks.floor, spread)
        return Found(found.xy, found.score, found.method, details)


def _to_image(
    found: Found, pred: unet.Prediction, sx: float, sy: float, floor: float, radius_px: float,
    votes: np.ndarray | None = None,
) -> Found:  # fmt: skip
    """Network pixels -> image pixels (pixel centres), with areas (also each re-oriented
    copy's components: ``votes``), box and the uncertainty (``uncertainty_px``, from body
    radii: ``radius_px``) in image pixels. A centre from the atlas (``method`` "atlas") says
    where, not how large or in how many pieces: its area and components are unknown (None)."""
    cls = found.details["class"]
    alone = found.method in ("atlas", organs_view.REFLECTED)  # a centre without pixels
    x, y = (found.xy[0] + 0.5) * sx - 0.5, (found.xy[1] + 0.5) * sy - 0.5
    details = dict(found.details)
    if details.get(MIRROR) is not None:
        details[MIRROR] = _to_image(details[MIRROR], pred, sx, sy, floor, radius_px)
    u = details.get(organs_atlas.UNCERTAINTY)
    if u is not None:
        details[organs_atlas.UNCERTAINTY] = round(float(u), 3)
        details["uncertainty_px"] = round(float(u) * radius_px, 1)
    details = {
        **details,
        "area_px": None if alone else round(found.details["area_px"] * sx * sy, 1),
        "component_areas": None if alone else _component_areas(pred.labels == cls, sx * sy),
        "bbox": _bbox(pred.labels == cls, found.xy, sx, sy),
        "abstain_below": floor,
    }
    if votes is not None and len(votes) > 1 and not alone:
        details["component_areas_copies"] = [_component_areas(v == cls, sx * sy) for v in votes]
    return Found((x, y), found.score, found.method if alone else "organs", details)


def _atlas_dir(atlas: bool | str | Path, model_dir: Path) -> Path | None:
    """The atlas folder: ``True`` -> the model folder's (the shipped atlas beside the shipped
    weights); a path -> that folder; False -> none."""
    if atlas is False or atlas is None:
        return None
    folder = model_dir if atlas is True else Path(atlas)
    if not organs_atlas.has_atlas(folder):
        raise ValueError(f"{folder}: no atlas.npz + atlas.json (radspatial.training.organs_atlas)")
    return folder


def _untrained_plane(context: Context) -> str | None:
    plane = context.extra.get("plane") or DEFAULT_PLANE
    if plane == DEFAULT_PLANE:
        return None
    return f"the organs localizer is not trained on {plane} slices (axial only)"


def _bbox(region: np.ndarray, xy: tuple[float, float], sx: float, sy: float) -> list[int]:
    """Box (image px) of the component that holds the centre used (else of the class)."""
    from scipy import ndimage

    comp, _ = ndimage.label(region, structure=np.ones((3, 3), bool))
    cx, cy = int(round(xy[0])), int(round(xy[1]))
    label = comp[min(max(cy, 0), comp.shape[0] - 1), min(max(cx, 0), comp.shape[1] - 1)]
    ys, xs = np.nonzero(comp == label if label else region)
    if xs.size == 0:  # an atlas-only centre: the network has no pixel of the class
        xs, ys = np.array([cx]), np.array([cy])
    return [
        int(xs.min() * sx),
        int(ys.min() * sy),
        int((xs.max() + 1) * sx),
        int((ys.max() + 1) * sy),
    ]


def _component_areas(region: np.ndarray, scale: float) -> list[float]:
    """8-connected component areas of one class, largest first, in image pixels."""
    from scipy import ndimage

    comp, n = ndimage.label(region, structure=np.ones((3, 3), bool))
    areas = np.bincount(comp.ravel())[1:] * scale if n else np.zeros(0)
    return [round(float(a), 1) for a in sorted(areas, reverse=True)]


class AutoLocalizer:
    """Markers for refs that carry one (falling back to the name), organs for the rest; where
    the organs model's localization is not trusted, the agent asks ``second_opinion`` (the
    same reading with a second organs model folder, ``Agent._second_opinion``)."""

    name = "auto"
    thread_safe = True

    def __init__(
        self,
        model_dir: str | Path | None = None,
        device: str = "cpu",
        atlas: bool | None = None,
        second: bool | str | Path | None = None,
    ) -> None:
        """``atlas``: None (default) -> the model folder's atlas when it has one (the shipped
        weights do: ``organs+atlas``), True / False to force it. ``second``: a second model
        folder asked where the first's localization is not trusted; True -> the shipped one
        (:func:`shipped_second_dir`); False -> none; None (default) -> the shipped one with
        the shipped first model, none with another ``model_dir`` (the two shipped models were
        measured together: issue #47 round 14, docs/agent.md)."""
        self.markers = create_localizer("markers")
        folder = Path(model_dir) if model_dir else shipped_model_dir()
        use = organs_atlas.has_atlas(folder) if atlas is None else atlas
        self.organs = OrgansLocalizer(model_dir, device, atlas=use)
        self.second_opinion: AutoLocalizer | None = None
        if second is None:
            second = shipped_second_dir() if model_dir is None else False
        if second:
            if second is True:
                second = shipped_second_dir()
                if second is None:
                    raise ValueError("this package ships no second organs model")
            self.second_opinion = AutoLocalizer(second, device, atlas, second=False)
            self.second_opinion.name = f"auto (second model: {Path(second).name})"
            if self.second_opinion.organs.atlas_dir is not None:  # 2 copies (#47 round 10)
                self.second_opinion.organs.checks = organs_checks.WITH_ATLAS_SECOND

    def warm_up(self) -> None:
        self.organs.warm_up()
        if self.second_opinion is not None:
            self.second_opinion.warm_up()

    def refuses(self, refs: Sequence[Ref], context: Context) -> str | None:
        """Refs named only (no marker to read) go to ``organs``: its refusal (plane)."""
        return self.organs.refuses([r for r in refs if not r.marker], context)

    def locate(
        self, image: np.ndarray, refs: Sequence[Ref], context: Context
    ) -> list[Found | None]:
        marked = [i for i, r in enumerate(refs) if r.marker]
        out: list[Found | None] = [None] * len(refs)
        if marked:
            found = self.markers.locate(image, [refs[i] for i in marked], context)
            for i, f in zip(marked, found, strict=True):
                out[i] = f
        rest = [i for i, r in enumerate(refs) if out[i] is None and r.name]
        # a marker not read falls back to its name, but never onto an image the network must
        # not look at (an MR slice for a CT model): its refusal comes before loading it
        if rest and self.organs.refuses([Ref(name=refs[i].name) for i in rest], context):
            return out
        if rest:
            found = self.organs.locate(image, [Ref(name=refs[i].name) for i in rest], context)
            for i, f in zip(rest, found, strict=True):
                if f is not None and refs[i].marker:  # said in the trace and the reason
                    note = f"marker {refs[i].text or refs[i].marker} not found: located by name"
                    f = replace(f, details={**f.details, "fallback": note})
                out[i] = f
        return out


@register_localizer("organs")
def _organs(**options: object) -> OrgansLocalizer:
    return OrgansLocalizer(**options)  # type: ignore[arg-type]


@register_localizer("organs+atlas")
def _organs_atlas(**options: object) -> OrgansLocalizer:
    return OrgansLocalizer(**{"atlas": True, **options})  # type: ignore[arg-type]


@register_localizer("auto")
def _auto(**options: object) -> AutoLocalizer:
    return AutoLocalizer(**options)  # type: ignore[arg-type]


def _atlas_fit(out: Found, net: Found) -> tuple:
    """How well a structure fits one atlas opinion (smaller: better): vetoed last, then
    doubted, a centre moved to the atlas's, then the centres' distance in body radii."""
    atlas = out.details.get("atlas") or {}
    distance = atlas.get("distance_body_radii")
    return (
        bool(out.details.get("abstain_reason")),
        bool(out.details.get("uncertain_reason")),
        out.method != net.method,
        float("inf") if distance is None else float(distance),
    )
