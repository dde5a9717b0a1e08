"""Prompt templates: MIRP's fixed prompts by default, or a custom template file.

MIRP's prompt text is kept verbatim (including its missing space before "Ignore"), so numbers
are comparable with the paper. Our protocol's in-context example matches the item's setup and
marker type and is fixed per item (identical across runs, so the spread across runs is model
noise, not prompt noise); its answer is 1 for about half the items and 0 for the others (the
opposite relation), chosen by a hash of the item id, so the example never teaches "always 1".
MIRP's own protocol (an example drawn from another item, per run) lives in ``radspatial.eval.mirp``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from radspatial.eval.items import EvalItem
from radspatial.imaging.markers import marker_style
from radspatial.questions import QuestionSpec, Wording, get_question_type
from radspatial.questions.open_common import is_open

MIRP_CT = (
    "The image is a 2D axial slice of an abdominal CT scan with soft tissue windowing. "
    "Answer strictly with '1' for Yes or '0' for No. No explanations, no additional text. "
    "Your output must contain exactly one character: '1' or '0'."
    "Ignore anatomical correctness; focus solely on what the image shows.\n"
    "Example:\n"
    "Q: {example_question} A: {example_answer}\n"
    "Now answer the real question:\n\n"
    "Q: {question}"
)
# the open types (a word or a number as the answer): MIRP's CT prompt with the answer format
# changed, nothing else
OPEN_CT = (
    "The image is a 2D axial slice of an abdominal CT scan with soft tissue windowing. "
    "Answer with only the requested word, structure name or number. No explanations, no "
    "additional text. "
    "Ignore anatomical correctness; focus solely on what the image shows.\n"
    "Example:\n"
    "Q: {example_question} A: {example_answer}\n"
    "Now answer the real question:\n\n"
    "Q: {question}"
)
MIRP_BLANK = (
    "Answer strictly with '1' for Yes or '0' for No. No explanations, no additional text. "
    "Your output must contain exactly one character: '1' or '0'."
    "Focus solely on what the image shows.\n"
    "Example:\n"
    "Q: {example_question} A: {example_answer}\n"
    "Now answer the real question:\n\n"
    "Q: {question}"
)
# question type -> (relation, structure names, params) of its fixed in-context example
_EXAMPLES: dict[str, tuple[str, tuple[str, ...], dict]] = {
    "relative_position": ("above", ("aorta", "spleen"), {}),  # MIRP's example
    "size": ("larger_than", ("liver", "spleen"), {}),
    "symmetry": ("larger_than", ("left kidney", "right kidney"), {}),
    "distance": ("closer_to", ("aorta", "spleen", "liver"), {}),
    "count": ("count", ("colon",), {"n": 2}),
}
# the example whose answer is 0 asks the opposite relation (same structures, same anatomy)
_OPPOSITE = {
    "above": "below",
    "larger_than": "smaller_than",
    "closer_to": "farther_from",
    "count": "count",  # "exactly 2?" with answer 0: no image is shown with the example
}
# orientation has one question, so its example is a different question about the view
_ORIENTATION_EXAMPLE = "Is the top of this image the front (anterior side) of the patient?"


def example_question(
    setup: str, marker: str, question_type: str = "relative_position", answer: int = 1
) -> str:
    """The example for a (question type, setup, marker), worded like the real questions.

    With ``answer=1`` these are MIRP's examples verbatim for relative position ("Is the aorta
    above the spleen?", "Is the aorta (52) above the spleen (1)?", "Are the letters BZ above
    the letters AA?"); with ``answer=0`` the opposite relation ("Is the aorta below ...").
    """
    if question_type == "orientation":
        return _ORIENTATION_EXAMPLE
    if question_type not in _EXAMPLES:
        raise ValueError(f"no example question for question type {question_type!r}")
    relation, names, params = _EXAMPLES[question_type]
    if not answer:
        relation = _OPPOSITE[relation]
    qtype = get_question_type(question_type)
    setup = "rq1" if marker == "none" else "rq3" if setup == "as" else setup
    marks = () if setup == "rq1" else marker_style(marker).examples[: len(names)]
    spec = QuestionSpec(question_type, (), relation, answer, answer, params)
    return qtype.text(spec, Wording(setup, marker, names, marks))


# open type -> (structure names, fixed answers to pick from by the item's hash)
_OPEN_EXAMPLES: dict[str, tuple[tuple[str, ...], tuple]] = {
    "laterality": (("aorta",), ("left", "right")),
    "direction": (("aorta", "spleen"), ("left", "right", "above", "below")),
    "identification": (("spleen",), ("spleen",)),
    "counting": (("colon",), (2,)),
}


def open_example(item_id: str, setup: str, marker: str, question_type: str) -> tuple[str, Any]:
    """The fixed example of an open item: worded like its real question (same setup and
    marker), with an answer picked by a hash of the item id (not its own answer)."""
    names, answers = _OPEN_EXAMPLES[question_type]
    answer = answers[hashlib.sha256(item_id.encode()).digest()[0] % len(answers)]
    first = 1 if question_type == "identification" else 0  # "the number 1" marks the spleen
    marks = () if setup == "rq1" else marker_style(marker).examples[first : first + len(names)]
    spec = QuestionSpec(question_type, (), question_type, answer, answer)
    text = get_question_type(question_type).text(spec, Wording(setup, marker, names, marks))
    return text, answer


def example_answer(item_id: str) -> int:
    """Our protocol's example answer for an item: 1 or 0 by a hash of its id (about half
    each, independent of the item's own answer)."""
    return hashlib.sha256(item_id.encode()).digest()[0] & 1


@dataclass(frozen=True)
class PromptTemplate:
    """Text with placeholders {question}, {example_question}, {example_answer}, {setup},
    {marker}. ``blank`` is used for the blank-image ablation (AS)."""

    name: str
    ct: str = MIRP_CT
    blank: str = MIRP_BLANK

    def render(self, item: EvalItem, example: tuple[str, int] | None = None) -> str:
        """The prompt for ``item``; ``example`` (question, answer) replaces our fixed one."""
        text = self.blank if item.setup == "as" else self.ct
        if is_open(item.question_type):
            if self.name in ("mirp", "mirp-protocol"):  # ours: the open answer format
                text = OPEN_CT
            if example is None:
                example = open_example(item.id, item.setup, item.marker, item.question_type)
        if example is None:
            answer = example_answer(item.id)
            question = example_question(item.setup, item.marker, item.question_type, answer)
            example = (question, answer)
        return text.format(
            question=item.question,
            example_question=example[0],
            example_answer=example[1],
            setup=item.setup,
            marker=item.marker,
        )

    def to_json(self) -> dict:
        return {"name": self.name, "ct": self.ct, "blank": self.blank}


MIRP = PromptTemplate("mirp")
# MIRP's inference code sends the CT prompt for every setup, the blank images included
MIRP_PROTOCOL = PromptTemplate("mirp-protocol", MIRP_CT, MIRP_CT)


def load_template(path: Path | None) -> PromptTemplate:
    """MIRP's prompts, or a text file used for every setup (it must contain {question})."""
    if path is None:
        return MIRP
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ValueError(f"{path}: cannot read prompt template ({exc.strerror})") from None
    if "{question}" not in text:
        raise ValueError(f"{path}: prompt template has no {{question}} placeholder")
    try:
        text.format(question="", example_question="", example_answer="", setup="", marker="")
    except (KeyError, IndexError, ValueError) as exc:
        raise ValueError(f"{path}: bad placeholder in prompt template ({exc})") from None
    return PromptTemplate(path.name, text, text)
