"""Benchmark generation: one pure-ish function per case, run in a process pool.

``bench/case.generate_case`` loads one volume, plans its questions (per plane:
``imaging/planes.py``), renders and writes its PNGs into a staging folder and returns the
rows; it reads no global state, so it runs unchanged in a local pool or on a cluster worker.
Randomness comes from one generator per case keyed by (seed, case id), so adding a case leaves
every other case byte-identical.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field

import numpy as np
from PIL import Image

from radspatial.bench.blocks import plan_in_views, propose_other_class
from radspatial.bench.config import GenerateConfig
from radspatial.bench.decidable import PlanJudge
from radspatial.bench.mirp import SETUP_DIRS
from radspatial.bench.plans import (
    SliceInfo,
    SlicePlan,
    candidate,
    min_eligible,
    plane_key,
    usable_slices,
)
from radspatial.core.labels import display_name
from radspatial.core.modality import recorded_modality
from radspatial.core.runtime import keyed_rng
from radspatial.imaging.markers import (
    DOT_ORDER,
    Mark,
    draw_marks,
    marker_geometry,
    marker_style,
)
from radspatial.imaging.planes import DEFAULT_PLANE
from radspatial.imaging.slices import (
    VARIANTS,
    Geometry,
    StructureStat,
    Variant,
    percentile_window,
    render_gray,
    render_labels,
    to_display,
)
from radspatial.imaging.volumes import InputError, Volume
from radspatial.questions import (
    QuestionSpec,
    QuestionType,
    SliceFacts,
    Wording,
    get_question_type,
)
from radspatial.questions.decidability import Decidability
from radspatial.questions.manifest import ManifestRow, ObjectRow, SliceRow, SourceRow


def plan_case(vol: Volume, config: GenerateConfig, plane: str = DEFAULT_PLANE) -> list[SlicePlan]:
    """Choose slices, variants, objects and answers for one volume (no rendering); ``vol`` is
    ``planes.reformat``'ed to ``plane`` (axis 2 indexes its slices).

    A type asked in none of the configured setups (count with ``--setups rq3``) is skipped.
    Slice analysis (structure stats, eligibility, rendered components) is done once and shared
    by every question type. With ``config.consistency`` relative position is asked in
    consistency groups (``bench/consistency.py``)."""
    qtypes = [get_question_type(n) for n in config.question_types]
    qtypes = [q for q in qtypes if set(q.setups) & set(config.setups)]
    if not qtypes:
        return []
    _check_codes(vol, config)
    usable = usable_slices(vol, config, min(min_eligible(q) for q in qtypes))
    judge = PlanJudge(vol, config, plane) if config.decidable == "only" else None
    plans: list[SlicePlan] = []
    for q in qtypes:
        if config.consistency and q.mirp_type:  # MIRP's type: 8-variant groups
            from radspatial.bench.consistency import plan_groups

            groups = plan_groups(vol, config, plane, [u for u in usable if len(u.eligible) > 1])
            plans += groups if judge is None else _decided_groups(groups, judge, config)
        else:
            plans += _plan_type(vol, config, q, usable, plane, judge)
    return plans


def _check_codes(vol: Volume, config: GenerateConfig) -> None:
    """A configured marker style that cannot write the mask's largest named id (letters: MIRP's
    two-letter codes cover ids 1..676) is refused here, naming the mask, not mid-slice."""
    top = int(vol.seg.max()) if vol.seg.size else 0
    for marker in config.markers if top else ():
        try:
            marker_style(marker).texts([top], ("red",))
        except ValueError as exc:
            raise InputError(
                f"{vol.source.get('seg', vol.case_id)}: the {marker} marker cannot mark label id "
                f"{top} ({exc}); leave {marker} out of --markers"
            ) from None


def _decided_groups(
    plans: list[SlicePlan], judge: PlanJudge, config: GenerateConfig
) -> list[SlicePlan]:
    """``--decidable only`` on consistency groups: a group and its twin are kept whole (each
    is 4 yes and 4 no) when the image decides every one of their items."""
    undecided = {p.group for p in plans if not judge.keeps(p, _setups(config, p))}
    return [p for p in plans if p.group not in undecided and p.group_twin not in undecided]


def _setups(config: GenerateConfig, plan: SlicePlan) -> tuple[str, ...]:
    return tuple(dict.fromkeys(s for s, _ in combos_for(config, plan)))


def _plan_type(
    vol: Volume,
    config: GenerateConfig,
    qtype: QuestionType,
    usable: list[SliceInfo],
    plane: str = DEFAULT_PLANE,
    judge: PlanJudge | None = None,
) -> list[SlicePlan]:
    """One question type's plans. Relative position keeps the original per-case random stream
    (datasets made before other types existed are reproduced byte for byte). Open types
    balance over their classes in blocks of one view (``blocks.plan_in_views``). With a
    ``judge`` (``--decidable only``) a question the image does not decide is not asked: the
    slice is passed over as one without a question, so the blocks stay balanced."""
    relpos = qtype.mirp_type  # its stream: keyed by the case alone, as before other types
    key = plane_key(vol.case_id, plane)
    rng = keyed_rng(config.seed, key if relpos else f"{key}/{qtype.name}")
    cycle = [VARIANTS[i] for i in rng.permutation(len(VARIANTS))]
    block = qtype.n_balanced

    def scan(left: list[SliceInfo], shift: int, plans: list[SlicePlan]) -> list[SlicePlan]:
        return _scan(vol, config, qtype, left, (rng, cycle, shift, block, plane, judge), plans)

    eligible_for = [i for i in usable if len(i.eligible) >= min_eligible(qtype)]
    return plan_in_views(eligible_for, block, len(cycle), scan)


def _scan(
    vol: Volume,
    config: GenerateConfig,
    qtype: QuestionType,
    usable: list[SliceInfo],
    how: tuple[np.random.Generator, list[str], int, int, str, PlanJudge | None],
    plans: list[SlicePlan],
) -> list[SlicePlan]:
    """``plans`` extended by one pass over ``usable`` (the unfinished block left on)."""
    rng, cycle, shift, block, plane, judge = how
    key, names = plane_key(vol.case_id, plane), vol.table.names
    suffix = "" if qtype.mirp_type else f"_{qtype.name}"  # MIRP's file names for its type
    plans = list(plans)
    pair_targets: list[int] = []
    asked = {_asked_key(p.z, p.spec) for p in plans}  # --per-slice asks each once
    qtype_setups = tuple(s for s in config.setups if s in qtype.setups)
    for info, rep in ((i, r) for i in usable for r in range(config.per_slice)):
        z, stats, eligible = info.z, info.stats, info.eligible
        k = len(plans)
        if k % block == 0 and block != 2:
            pair_targets = [int(t) for t in rng.permutation(block)]
        elif k % 2 == 0 and block == 2:  # each pair of accepted slices: one yes and one no
            first = int(rng.integers(2))
            pair_targets = [first, 1 - first]
        target = pair_targets[k % block]
        default = cycle[(k // block + shift) % len(cycle)]
        variant = Variant(qtype.choose_variant(target, default, rng))
        facts = SliceFacts(
            plane=plane,
            variant=variant.code,
            size=config.size,
            candidates=tuple(
                candidate(s, names[s.label_id], variant, config.size) for s in eligible
            ),
            present=tuple(
                candidate(s, names[i], variant, config.size)
                for i, s in sorted(stats.items())
                if i in names
            ),
            component_areas=info.component_areas,
        )
        spec = qtype.propose(facts, target, rng, config.rules)
        if spec is None and block > 2:  # another class still open in this block, if any
            spec = propose_other_class(qtype, facts, pair_targets, k % block, rng, config.rules)
        if spec is None or (same := _asked_key(z, spec)) in asked:
            continue
        if judge and not judge.keeps(SlicePlan(z, "", variant, spec, stats, ()), qtype_setups):
            continue
        asked.add(same)
        if len(spec.objects) <= 2:
            dots = ("red", "blue") if rng.random() < 0.5 else ("blue", "red")
        else:
            dots = tuple(str(c) for c in rng.permutation(DOT_ORDER[: len(spec.objects)]))
        base = f"{key}_slice{z:03d}{suffix}" + (f"_{rep}" if rep else "")
        plans.append(SlicePlan(z, base, variant, spec, stats, dots[: len(spec.objects)], plane))
    if block <= 2:
        while len(plans) % block:  # an unfinished pair (block) would unbalance the answers
            plans.pop()
    return plans


def _asked_key(z: int, spec: QuestionSpec) -> tuple:
    relation = {"right_of": "left_of", "below": "above"}.get(spec.relation, spec.relation)
    return (z, frozenset(o.label_id for o in spec.objects), relation)


def _marker_texts(plan: SlicePlan, marker: str) -> tuple[str, ...]:
    return marker_style(marker).texts([o.label_id for o in plan.spec.objects], plan.dots)


def question_text(setup: str, marker: str, plan: SlicePlan) -> str:
    names = tuple(display_name(o.name) for o in plan.spec.objects)
    marks = () if setup == "rq1" else _marker_texts(plan, marker)
    return plan.question_type.text(plan.spec, Wording(setup, marker, names, marks))


def combos_for(config: GenerateConfig, plan: SlicePlan) -> list[tuple[str, str]]:
    """The (setup, marker) pairs a plan is asked in: the config's, limited to its type's."""
    return [c for c in config.combos() if c[0] in plan.question_type.setups]


def encode_png(rgb: np.ndarray, level: int | None = None) -> bytes:
    """PNG bytes; ``level`` is the zlib level (None: Pillow's default, 6)."""
    buf = io.BytesIO()
    options = {} if level is None else {"compress_level": level}
    Image.fromarray(rgb).save(buf, format="PNG", **options)
    return buf.getvalue()


def image_relpath(setup: str, marker: str, filename: str) -> str:
    folder = "images" if marker == "none" else f"image_{marker}"
    return f"{SETUP_DIRS[setup]}/{folder}/{filename}"


@dataclass(frozen=True)
class CaseOutput:
    case_id: str
    source: dict
    rows: list[ManifestRow]
    n_slices: int
    n_selected: int  # slices with a question
    centres: list[dict] = field(default_factory=list)  # MIRP's standard-view centres file


def centres_entry(filename: str, stats: dict[int, StructureStat], names: dict[int, str]) -> dict:
    """One entry of MIRP's ``center_of_anatomical_stuctures_in_standard_radiological_
    orientation.json``: every named structure of the slice, centre of mass in standard view
    (output px), under the class name MIRP's anatomy script looks questions up by."""
    from radspatial.bench.mirp import class_name

    info = [
        {
            "class_name": class_name(display_name(names[i])),
            "center_x": round(s.center_xy[0], 3),
            "center_y": round(s.center_xy[1], 3),
        }
        for i, s in sorted(stats.items())
        if i in names
    ]
    return {"filename": filename, "label_info": info}


def _rounded(point: tuple[float, float]) -> tuple[float, float]:
    return (round(point[0], 3), round(point[1], 3))


def _object_row(plan: SlicePlan, which: int, marker: str, size: int) -> ObjectRow | None:
    if which > len(plan.spec.objects):
        return None
    cand = plan.spec.objects[which - 1]
    stat = plan.stats[cand.label_id]
    return ObjectRow(
        name=cand.name,
        display_name=display_name(cand.name),
        label_id=cand.label_id,
        marker_text=None if marker == "none" else _marker_texts(plan, marker)[which - 1],
        center_xy=_rounded(cand.center_xy),
        center_xy_canonical=_rounded(cand.center_xy_canonical),
        marker_xy=_rounded(plan.variant.apply_point(stat.marker_xy, size)),
        marker_xy_canonical=_rounded(stat.marker_xy),
        marker_inside=stat.inside,
        area_px=round(stat.area_px, 2),
    )


def manifest_row(
    vol: Volume,
    plan: SlicePlan,
    setup: str,
    marker: str,
    config: GenerateConfig,
    z_mm: float,
    decided: Decidability | None = None,
) -> ManifestRow:
    """The question a plan asks in one (setup, marker), as its ``manifest.jsonl`` row;
    ``decided``: whether the image decides it in that setup (``bench/decidable.py``)."""
    spec, size, filename = plan.spec, config.size, f"{plan.base_name}.png"
    several = any(s.n_components > 1 for s in plan.stats.values())
    hashed = ("case_id", "ct", "seg", "ct_sha256", "seg_sha256")
    return ManifestRow(
        id=f"{setup}/{marker}/{plan.base_name}/q0",
        setup=setup,
        marker=marker,
        image=image_relpath(setup, marker, filename),
        question=question_text(setup, marker, plan),
        answer=spec.answer,
        answer_standard=spec.answer_standard,
        answer_anatomical=spec.answer_anatomical,
        relation=spec.relation,
        question_type=spec.question_type,
        transform=plan.variant.code,
        transform_name=plan.variant.long_name,
        variant=vol.variant,
        modality=recorded_modality(config.modality),
        object1=_object_row(plan, 1, marker, size),
        object2=_object_row(plan, 2, marker, size),
        object3=_object_row(plan, 3, marker, size),
        params=spec.params or None,
        slice=SliceRow(plan.base_name, len(plan.stats), several),
        source=SourceRow(
            **{k: vol.source.get(k) for k in hashed}, slice_index=plan.z, z_mm=round(z_mm, 3)
        ),
        mask=f"masks/{filename}" if config.export_masks else None,
        plane=None if plan.plane == DEFAULT_PLANE else plan.plane,
        group=plan.group,
        group_twin=plan.group_twin,
        decidable=None if decided is None else decided.decidable,
        decidable_reason=None if decided is None else decided.reason,
    )


def display_window(vol: Volume, config: GenerateConfig) -> tuple[float, float]:
    """The (width, level) a case's slices are shown with: ``--window``, else the volume's own
    percentiles (MR: ``slices.percentile_window``). A volume whose 1st and 99th percentiles
    are equal would show blank slices: refused."""
    if config.window:
        return config.window
    try:
        return percentile_window(vol.ct)
    except ValueError as exc:
        raise InputError(f"{vol.source.get('ct', vol.case_id)}: {exc}") from None


def render_plan(
    vol: Volume, plan: SlicePlan, config: GenerateConfig, window: tuple[float, float] | None = None
) -> dict[str, bytes]:
    """PNG bytes per marker type ("none" = plain) for one planned slice, shown frame."""
    geom = Geometry.for_slice(vol.ct.shape[:2], vol.spacing[:2], config.size)
    window = window or display_window(vol, config)
    gray = render_gray(to_display(vol.ct[:, :, plan.z]), geom, window)
    shown = plan.variant.apply_image(np.repeat(gray[:, :, None], 3, axis=2))
    out: dict[str, bytes] = {}
    markers_needed = {m for s, m in combos_for(config, plan)}
    labels = None  # the shown label image, for styles drawn from the structure (contour, box)
    for marker in sorted(markers_needed):
        if marker == "none":
            out[marker] = encode_png(shown, config.png_level)
            continue
        if labels is None and marker_style(marker).needs_region:
            lab = render_labels(to_display(vol.seg[:, :, plan.z]), geom)
            labels = plan.variant.apply_image(lab)
        marks = [
            Mark(marker, text, obj.marker_xy, None if labels is None else labels == obj.label_id)
            for text, obj in zip(_marker_texts(plan, marker), plan.spec.objects, strict=True)
        ]
        geometry = marker_geometry(config.rules.profile)
        out[marker] = encode_png(draw_marks(shown, marks, geometry=geometry), config.png_level)
    if config.export_masks:
        lab = render_labels(to_display(vol.seg[:, :, plan.z]), geom)
        out["mask"] = encode_png_16(plan.variant.apply_image(lab), config.png_level)
    return out


def encode_png_16(lab: np.ndarray, level: int | None = None) -> bytes:
    return encode_png(lab.astype(np.uint16), level)
