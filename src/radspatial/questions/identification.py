"""Identification (open): "Which structure does the number 52 mark?" (marker-only, RQ3).

One eligible structure carries the marker; the answer is its display name from the label table
("left kidney"), and any synonym the grader knows ("kidney (left)", "L kidney") counts. The
identity of a structure does not change with the view, so all three frames agree. Not balanced
over classes (the answer is whatever the marker sits on); chance is a uniform guess among the
named structures of the slice, recorded per item in ``params["options"]`` (the type's
``chance`` is the mean over items, written to ``dataset.json``). Note MIRP's numbers are the
label ids, so a model that knows the label table can answer numbers without looking.

The agent names the label under the marker from the label table (needs a localizer that
reports ``label_id``: mask, unet). The anatomy prior has nothing to go on (a pick at random).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from radspatial import questions as q
from radspatial.core.answers import NAME, Answer, Grade
from radspatial.core.datafiles import DataFileError
from radspatial.core.labels import display_name
from radspatial.imaging.markers import marker_style
from radspatial.questions.open_common import OpenType
from radspatial.questions.parsing import lookup_name
from radspatial.questions.reading import read_name
from radspatial.questions.records import Decision, Found, ParsedQuestion, Scene


class Identification(OpenType):
    name = "identification"
    answer_kind = NAME
    setups = ("rq3",)
    n_objects = 1
    group_order = 30
    # no classes: chance is per item, 1 / len(params["options"]) (``item_chance``)
    # "the number 1" marks the spleen: the second example marker
    example = q.Example(("spleen",), answers=("spleen",), first_mark=1)
    pattern = re.compile(r"^which structure (?:does|do) (?P<a>.+?) mark\s*\??$", re.I)

    def check_answer(self, value: Any, where: str, key: str = "answer") -> str:
        """A structure name (any: whatever the marker sits on)."""
        if not isinstance(value, str) or not value.strip():
            raise DataFileError(f"{where}: {key!r} must be a structure name, got {value!r}")
        return value

    def read_text(self, text: str) -> Grade:
        """A structure's name (display names, synonyms, "kidney (left)") as snake_case."""
        return read_name(text, self.answer_kind)

    def canonical(self, value: Any) -> Answer | None:
        """The snake_case name the reader reads ("left kidney" -> kidney_left)."""
        if not isinstance(value, str):
            return None if value is None else Answer(self.answer_kind, value)
        name = lookup_name(value) or value.strip().lower().replace(" ", "_")
        return Answer(self.answer_kind, name)

    def accepted_forms(self, expected: Any) -> str:
        """The name's other forms: snake_case, spaced, "kidney (left)", "left kidney"."""
        if not isinstance(expected, str):
            return "(none)"
        name = lookup_name(expected) or expected
        words = name.split("_")
        forms = {name, name.replace("_", " ")}
        if words[-1] in ("left", "right"):
            base = " ".join(words[:-1])
            forms |= {f"{base} ({words[-1]})", f"{words[-1]} {base}"}
        return ", ".join(sorted(forms - {expected}))

    def propose(
        self, facts: q.SliceFacts, target: int, rng: np.random.Generator, rules: q.QuestionRules
    ) -> q.QuestionSpec | None:
        if not facts.candidates:
            return None
        c = q.pick(facts.candidates, rng)
        name = display_name(c.name)
        options = sorted({display_name(p.name) for p in facts.present} | {name})
        params = {"options": options}
        return q.QuestionSpec(self.name, (c,), "identification", name, name, params, name)

    def mirrored_answer(self, spec: q.QuestionSpec, seen: q.MirrorReading) -> Any:
        return display_name(seen.objects[0].name)

    def text(self, spec: q.QuestionSpec, wording: q.Wording) -> str:
        style = marker_style(wording.marker)
        verb = "do" if style.plural else "does"
        return f"Which structure {verb} {style.ref(wording.marks[0])} mark?"

    def item_chance(self, params: Mapping[str, Any]) -> float:
        return 1.0 / max(1, len(params.get("options") or ()))

    def verify(self, parsed: ParsedQuestion, found: list[Found | None], scene: Scene) -> Decision:
        (f,) = found
        assert f is not None
        label_id = f.details.get("label_id")
        name = (scene.context.labels or {}).get(label_id) if label_id is not None else None
        if name is None:
            return Decision(None, "the localizer names no label under the marker", "")
        return Decision(display_name(name), f"label {label_id} under the marker", "")


q.register_question_type(Identification())
