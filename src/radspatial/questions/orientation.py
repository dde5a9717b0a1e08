"""Orientation: "Ignoring any rotation, is this image mirrored ... ?" (SPAR-VQA).

The answer is whether the shown variant includes the horizontal flip (MIRP codes ``A1..A4``):
a mirror image stays a mirror image under any rotation, so the question has one answer per image
and cannot be read off the position of a single organ. The generator chooses the variant from
the wanted answer (yes: a flipped variant, no: an unflipped one, rotation at random), so answers
are balanced and every rotation occurs with both answers. In standard view the answer is no.

The agent reads any question with "mirrored", "mirror image", "(horizontally) flipped" or
"reflected" in it as this one and decides it from the patient's sides and the spine, never
from one organ. Two directions in the shown image are measured:

- the patient's left, ``L``: from each found right-sided structure to its left-sided partner
  (kidney_right -> kidney_left, autochthon, iliopsoas, lungs, ...), averaged as unit vectors;
- posterior, ``P``: from the body's centre (the largest non-air region of the image) to the spine
  (vertebrae, spinal cord or sacrum), or where no spine is found, to the midpoint of a posterior
  muscle pair (autochthon, gluteus maximus: the back muscles beside the spine, the buttocks).

In the standard radiological view the patient's left is on the image's right (+x) and posterior
is at the bottom (+y, y grows downward), so ``cross(L, P) = Lx * Py - Ly * Px`` is positive. A
rotation keeps the sign, a mirror flips it: mirrored iff the cross product is negative. The
agent abstains when either direction is missing or they are far from perpendicular.
Side labels name the patient's sides by definition, so this holds for situs inversus as well.
The anatomy prior assumes the standard view: never mirrored.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from radspatial import questions as q
from radspatial.core.labels import load_table, side_pairs
from radspatial.imaging.slices import Variant
from radspatial.questions.records import Context, Decision, Found, ParsedQuestion, Ref, Scene

QUESTION = (
    "Ignoring any rotation, is this image mirrored (flipped left to right) compared with the "
    "standard radiological view?"
)
RELATION = "mirrored"
_ORIENTATION_RE = re.compile(
    r"\b(?:mirrored|mirror[\s-]+image|(?:horizontally\s+)?flipped|reflected)\b", re.IGNORECASE
)


class Orientation(q.TypeDefaults):
    name = "orientation"
    setups = ("rq1",)
    n_objects = 0
    chance = 0.5
    # one question per image, so the example is a different question about the view
    example = q.Example(
        question="Is the top of this image the front (anterior side) of the patient?"
    )
    relations = (RELATION,)
    parse_order = 20  # any lead-in: before the types that need "Is/Are/Does"
    group, group_order = "spar-binary", 10
    reads_handedness = True  # the answer is the view's handedness (questions/decidability.py)

    def choose_variant(self, target: int, default: str, rng: np.random.Generator) -> str:
        return ("A" if target else "B") + str(int(rng.integers(4)) + 1)

    def propose(
        self, facts: q.SliceFacts, target: int, rng: np.random.Generator, rules: q.QuestionRules
    ) -> q.QuestionSpec | None:
        answer = int(Variant(facts.variant).flip)
        if answer != target:
            return None
        return q.QuestionSpec(self.name, (), RELATION, answer, 0)

    def text(self, spec: q.QuestionSpec, wording: q.Wording) -> str:
        return QUESTION

    def parse(self, asked: q.Asked) -> ParsedQuestion | None:
        if _ORIENTATION_RE.search(asked.question):
            return ParsedQuestion((), RELATION, asked.question, self.name)
        return None

    def to_locate(self, parsed: ParsedQuestion, context: Context) -> list[Ref]:
        pairs, spine = orientation_refs(_names(context))
        return [r for _, left, right in pairs for r in (left, right)] + spine

    def found_json(self, refs: Sequence[Ref], found: Sequence[Found | None]) -> Any:
        return {ref.name: f.to_json() for ref, f in zip(refs, found, strict=True) if f is not None}

    def verify(self, parsed: ParsedQuestion, found: list[Found | None], scene: Scene) -> Decision:
        pairs, _ = orientation_refs(_names(scene.context))
        n = 2 * len(pairs)
        bases = [b for b, _, _ in pairs]
        found_pairs = list(zip(bases, found[0:n:2], found[1:n:2], strict=True))
        return verify_orientation(found_pairs, found[n:], body_centre(scene.image))

    def prior(self, given: q.PriorInput) -> int:
        return 0  # a reader who assumes the standard view never sees a mirror image


q.register_question_type(Orientation())


def _names(context: Context) -> dict[int, str]:
    return context.labels or load_table("totalsegmentator").names


RULE = "yes iff cross(patient's left, posterior) < 0 in image coordinates"
SPINE_PREFIXES = ("vertebrae", "spinal_cord", "sacrum")
POSTERIOR_PAIRS = ("autochthon", "gluteus_maximus")
_BODY_MIN = 20  # grey level above which a pixel is body, not air (W400/L40: fat ~ 38)
_MIN_SIN = 0.5  # |sin| of the angle between L and P below this: abstain


def orientation_refs(names: dict[int, str]) -> tuple[list[tuple[str, Ref, Ref]], list[Ref]]:
    """(base, left, right) refs of every paired structure in a label table, and the spine
    refs."""
    pairs = [
        (base, Ref(name=names[left]), Ref(name=names[right]))
        for base, left, right in side_pairs(names)
    ]
    spine = [Ref(name=n) for n in sorted(set(names.values())) if n.startswith(SPINE_PREFIXES)]
    return pairs, spine


def body_centre(image: np.ndarray) -> tuple[float, float] | None:
    """Centre of the largest non-air region of an RGB image (the patient's body)."""
    from scipy import ndimage

    grey = image[..., :3].astype(np.int16).sum(axis=2) // 3
    body = grey > _BODY_MIN
    lab, n = ndimage.label(body)
    if n == 0:
        return None
    sizes = np.bincount(lab.ravel())[1:]
    ys, xs = np.nonzero(lab == int(np.argmax(sizes)) + 1)
    return float(xs.mean()), float(ys.mean())


def _unit(v: tuple[float, float]) -> tuple[float, float] | None:
    norm = math.hypot(*v)
    return None if norm < 1e-6 else (v[0] / norm, v[1] / norm)


def _posterior_point(
    pairs: Sequence[tuple[str, Found, Found]], spine: Sequence[Found]
) -> tuple[tuple[float, float], str] | None:
    """The spine's area-weighted centre, else the midpoint of a posterior muscle pair."""
    if spine:
        weights = [max(f.details.get("area_px") or 1, 1) for f in spine]  # None: unknown
        total = sum(weights)
        x = sum(w * f.xy[0] for w, f in zip(weights, spine, strict=True)) / total
        y = sum(w * f.xy[1] for w, f in zip(weights, spine, strict=True)) / total
        return (x, y), "spine"
    for base in POSTERIOR_PAIRS:
        for b, left, right in pairs:
            if b == base:
                mid = ((left.xy[0] + right.xy[0]) / 2, (left.xy[1] + right.xy[1]) / 2)
                return mid, f"{base} midpoint"
    return None


def verify_orientation(
    pairs: Sequence[tuple[str, Found | None, Found | None]],
    spine: Sequence[Found | None],
    body: tuple[float, float] | None,
) -> Decision:
    """Mirrored or not from found side pairs (base name, left, right), found spine parts and
    the body centre."""
    both = [(b, lf, rf) for b, lf, rf in pairs if lf is not None and rf is not None]
    lefts = [u for _, lf, rf in both if (u := _unit((lf.xy[0] - rf.xy[0], lf.xy[1] - rf.xy[1])))]
    if not lefts:
        return Decision(None, "no paired structure found on both sides", RULE)
    back = _posterior_point(both, [f for f in spine if f is not None])
    if back is None or body is None:
        return Decision(None, "no spine or back muscles (or no body) for posterior", RULE)
    (sx, sy), via = back
    lx, ly = (sum(c) / len(lefts) for c in zip(*lefts, strict=True))
    left, post = _unit((lx, ly)), _unit((sx - body[0], sy - body[1]))
    measured: dict[str, Any] = {
        "patient_left": None if left is None else [round(c, 3) for c in left],
        "posterior": None if post is None else [round(c, 3) for c in post],
        "pairs_used": len(lefts),
        "posterior_from": via,
        "body_centre": [round(c, 1) for c in body],
    }
    if left is None or post is None:
        return Decision(
            None, "the side pairs or the spine give no direction", RULE, measured=measured
        )
    cross = left[0] * post[1] - left[1] * post[0]
    measured["cross"] = round(cross, 4)
    if abs(cross) < _MIN_SIN:
        reason = f"patient's left and posterior are not perpendicular (|sin| = {abs(cross):.2f})"
        return Decision(None, reason, RULE, measured=measured)
    agreement = sum(1 for u in lefts if (u[0] * post[1] - u[1] * post[0]) * cross > 0) / len(lefts)
    scores = [f.score for f in spine if f is not None] or [f.score for _, f, _ in both]
    confidence = min(1.0, abs(cross)) * agreement * min(scores)
    reason = f"cross(left, posterior) = {cross:+.2f}: " + (
        "mirrored" if cross < 0 else "not mirrored"
    )
    return Decision(int(cross < 0), reason, RULE, confidence=confidence, measured=measured)
