"""Benchmark generation: one pure-ish function per case, run in a process pool.

``bench/case.generate_case`` loads one volume, plans its questions (per plane:
``imaging/planes.py``), renders and writes its PNGs into a staging folder and returns the
rows; it reads no global state, so it runs unchanged in a local pool or on a cluster worker.
Randomness comes from one generator per case keyed by (seed, case id), so adding a case leaves
every other case byte-identical.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
from PIL import Image
from scipy import ndimage

from radspatial.bench.blocks import plan_in_views, propose_other_class
from radspatial.bench.config import SETUP_DIRS, GenerateConfig
from radspatial.bench.eligibility import eligible_structures, size_rule
from radspatial.core.labels import display_name
from radspatial.core.progress import step
from radspatial.core.records import ManifestRow, ObjectRow, SliceRow, SourceRow
from radspatial.core.runtime import keyed_rng
from radspatial.imaging.markers import (
    DOT_ORDER,
    Mark,
    draw_marks,
    marker_geometry,
    marker_style,
)
from radspatial.imaging.slices import (
    VARIANTS,
    Geometry,
    StructureStat,
    Variant,
    component_areas,
    render_gray,
    render_labels,
    structure_stats,
    to_display,
)
from radspatial.imaging.volumes import Volume
from radspatial.questions import (
    Candidate,
    QuestionSpec,
    QuestionType,
    SliceFacts,
    Wording,
    get_question_type,
)


@dataclass(frozen=True)
class SlicePlan:
    z: int
    base_name: str
    variant: Variant
    spec: QuestionSpec
    stats: dict[int, StructureStat]
    dots: tuple[str, ...]  # dot colour of each object, in object order
    plane: str = "axial"  # imaging/planes.py; ``z`` indexes the plane's slices
    group: str | None = None  # consistency group (--consistency: bench/consistency.py)
    group_twin: str | None = None  # the group asking the same pair the other way round

    @property
    def question_type(self) -> QuestionType:
        return get_question_type(self.spec.question_type)


def _candidate(s: StructureStat, name: str, variant: Variant, size: int) -> Candidate:
    return Candidate(
        s.label_id,
        name,
        variant.apply_point(s.center_xy, size),
        s.center_xy,
        variant.apply_point(s.marker_xy, size),
        s.area_px,
        s.marker_xy,
    )


def _component_areas(vol: Volume, z: int, geom: Geometry) -> Callable[[int], list[float]]:
    """label id -> component areas (output px, largest first) in the rendered slice, cached."""
    cache: dict[str, object] = {}

    def areas(label_id: int) -> list[float]:
        if "boxes" not in cache:
            lab = render_labels(to_display(vol.seg[:, :, z]), geom)
            cache["lab"], cache["boxes"] = lab, ndimage.find_objects(lab.astype(np.int32))
        boxes = cache["boxes"]
        if label_id > len(boxes) or boxes[label_id - 1] is None:
            return []
        return component_areas(cache["lab"], label_id, boxes[label_id - 1])

    return areas


def plan_case(vol: Volume, config: GenerateConfig, plane: str = "axial") -> list[SlicePlan]:
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
    usable = _usable_slices(vol, config)
    plans: list[SlicePlan] = []
    for q in qtypes:
        if config.consistency and q.name == "relative_position":
            from radspatial.bench.consistency import plan_groups

            plans += plan_groups(vol, config, plane, usable)
        else:
            plans += _plan_type(vol, config, q, usable, plane)
    return plans


def _usable_slices(vol: Volume, config: GenerateConfig) -> list[_SliceInfo]:
    """Every slice with at least two eligible structures, analysed once."""
    geom = Geometry.for_slice(vol.seg.shape[:2], vol.spacing[:2], config.size)
    min_area, min_gap = size_rule(config)
    usable: list[_SliceInfo] = []
    n_z = vol.seg.shape[2]
    for z in range(n_z):
        step(f"{vol.case_id}: analysing slice {z + 1}/{n_z}")
        stats = structure_stats(to_display(vol.seg[:, :, z]), geom)
        if config.rules.mirp:  # MIRP marks the centre of mass, inside the structure or not
            stats = {k: replace(s, marker_xy=s.center_xy) for k, s in stats.items()}
        eligible = eligible_structures(stats, vol.table.names, min_area, min_gap)
        if len(eligible) >= 2:
            usable.append(_SliceInfo(z, stats, tuple(eligible), _component_areas(vol, z, geom)))
    return usable


@dataclass(frozen=True)
class _SliceInfo:
    """One slice with at least two eligible structures, analysed once for every type."""

    z: int
    stats: dict[int, StructureStat]
    eligible: tuple[StructureStat, ...]
    component_areas: Callable[[int], list[float]]


def plane_key(case_id: str, plane: str) -> str:
    """The random stream's and the file names' case part: the case id, plus the plane when
    not axial (axial datasets are reproduced byte for byte)."""
    return case_id if plane == "axial" else f"{case_id}_{plane}"


def _plan_type(
    vol: Volume,
    config: GenerateConfig,
    qtype: QuestionType,
    usable: list[_SliceInfo],
    plane: str = "axial",
) -> list[SlicePlan]:
    """One question type's plans. Relative position keeps the original per-case random stream
    (datasets made before other types existed are reproduced byte for byte). Open types
    balance over their classes in blocks of one view (``blocks.plan_in_views``)."""
    relpos = qtype.name == "relative_position"
    key = plane_key(vol.case_id, plane)
    rng = keyed_rng(config.seed, key if relpos else f"{key}/{qtype.name}")
    cycle = [VARIANTS[i] for i in rng.permutation(len(VARIANTS))]
    block = len(getattr(qtype, "classes", (0, 1))) or 1

    def scan(left: list[_SliceInfo], shift: int, plans: list[SlicePlan]) -> list[SlicePlan]:
        return _scan(vol, config, qtype, left, (rng, cycle, shift, block, plane), plans)

    return plan_in_views(usable, block, len(cycle), scan)


def _scan(
    vol: Volume,
    config: GenerateConfig,
    qtype: QuestionType,
    usable: list[_SliceInfo],
    how: tuple[np.random.Generator, list[str], int, int, str],
    plans: list[SlicePlan],
) -> list[SlicePlan]:
    """``plans`` extended by one pass over ``usable`` (the unfinished block left on)."""
    rng, cycle, shift, block, plane = how
    key, names = plane_key(vol.case_id, plane), vol.table.names
    suffix = "" if qtype.name == "relative_position" else f"_{qtype.name}"
    plans = list(plans)
    pair_targets: list[int] = []
    asked = {_asked_key(p.z, p.spec) for p in plans}  # --per-slice asks each once
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
                _candidate(s, names[s.label_id], variant, config.size) for s in eligible
            ),
            present=tuple(
                _candidate(s, names[i], variant, config.size)
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
    from radspatial.eval.mirp import class_name

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
    vol: Volume, plan: SlicePlan, setup: str, marker: str, config: GenerateConfig, z_mm: float
) -> ManifestRow:
    """The question a plan asks in one (setup, marker), as its ``manifest.jsonl`` row."""
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
        object1=_object_row(plan, 1, marker, size),
        object2=_object_row(plan, 2, marker, size),
        object3=_object_row(plan, 3, marker, size),
        params=spec.params or None,
        slice=SliceRow(plan.base_name, len(plan.stats), several),
        source=SourceRow(
            **{k: vol.source.get(k) for k in hashed}, slice_index=plan.z, z_mm=round(z_mm, 3)
        ),
        mask=f"masks/{filename}" if config.export_masks else None,
        plane=None if plan.plane == "axial" else plan.plane,
        group=plan.group,
        group_twin=plan.group_twin,
    )


def render_plan(vol: Volume, plan: SlicePlan, config: GenerateConfig) -> dict[str, bytes]:
    """PNG bytes per marker type ("none" = plain) for one planned slice, shown frame."""
    geom = Geometry.for_slice(vol.ct.shape[:2], vol.spacing[:2], config.size)
    gray = render_gray(to_display(vol.ct[:, :, plan.z]), geom, config.window)
    shown = plan.variant.apply_image(np.repeat(gray[:, :, None], 3, axis=2))
    out: dict[str, bytes] = {}
    markers_needed = {m for s, m in combos_for(config, plan)}
    for marker in sorted(markers_needed):
        if marker == "none":
            out[marker] = encode_png(shown, config.png_level)
            continue
        marks = [
            Mark(marker, text, obj.marker_xy)
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
