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

from radspatial.core.modality import modality_sentence
from radspatial.core.records import DEFAULT_TYPE
from radspatial.eval.items import EvalItem
from radspatial.imaging.markers import marker_style
from radspatial.questions import (
    Example,
    QuestionSpec,
    QuestionType,
    Wording,
    get_question_type,
)

_ASK = (
    "Ignore anatomical correctness; focus solely on what the image shows.\n"
    "Example:\n"
    "Q: {example_question} A: {example_answer}\n"
    "Now answer the real question:\n\n"
    "Q: {question}"
)
MIRP_ANSWER = (
    "Answer strictly with '1' for Yes or '0' for No. No explanations, no additional text. "
    "Your output must contain exactly one character: '1' or '0'."
)
MIRP_CT = f"{modality_sentence('CT')}{MIRP_ANSWER}{_ASK}"


def ct_prompt(answer_instruction: str) -> str:
    """MIRP's CT prompt with its answer format replaced by a type's (``answer_instruction``:
    one word, structure name or number for the open types), nothing else."""
    return f"{modality_sentence('CT')}{answer_instruction}{_ASK}"


MIRP_BLANK = (
    "Answer strictly with '1' for Yes or '0' for No. No explanations, no additional text. "
    "Your output must contain exactly one character: '1' or '0'."
    "Focus solely on what the image shows.\n"
    "Example:\n"
    "Q: {example_question} A: {example_answer}\n"
    "Now answer the real question:\n\n"
    "Q: {question}"
)


def example_question(
    setup: str, marker: str, question_type: str = DEFAULT_TYPE, answer: int = 1
) -> str:
    """The example for a (question type, setup, marker), worded like the real questions from
    the type's ``example`` (its structures; the relation asked for a yes and for a no).

    With ``answer=1`` these are MIRP's examples verbatim for relative position ("Is the aorta
    above the spleen?", "Is the aorta (52) above the spleen (1)?", "Are the letters BZ above
    the letters AA?"); with ``answer=0`` the opposite relation ("Is the aorta below ...").
    """
    qtype, example = _example(question_type)
    if example.question:
        return example.question
    relation = example.relations[1 if answer else 0]
    setup = "rq1" if marker == "none" else "rq3" if setup == "as" else setup
    spec = QuestionSpec(question_type, (), relation, answer, answer, dict(example.params))
    return qtype.text(spec, _example_wording(example, setup, marker))


def open_example(item_id: str, setup: str, marker: str, question_type: str) -> tuple[str, Any]:
    """The fixed example of an open item: worded like its real question (same setup and
    marker), with one of the type's example answers picked by a hash of the item id (not its
    own answer)."""
    qtype, example = _example(question_type)
    answers = example.answers
    answer = answers[hashlib.sha256(item_id.encode()).digest()[0] % len(answers)]
    spec = QuestionSpec(question_type, (), question_type, answer, answer)
    return qtype.text(spec, _example_wording(example, setup, marker)), answer


def _example(question_type: str) -> tuple[QuestionType, Example]:
    qtype = get_question_type(question_type)
    if qtype.example is None:
        raise ValueError(f"no example question for question type {question_type!r}")
    return qtype, qtype.example


def _example_wording(example: Example, setup: str, marker: str) -> Wording:
    first, n = example.first_mark, len(example.names)
    marks = () if setup == "rq1" else marker_style(marker).examples[first : first + n]
    return Wording(setup, marker, example.names, marks)


def fixed_example(item_id: str, setup: str, marker: str, question_type: str) -> tuple[str, Any]:
    """Our protocol's example of an item: its type's example worded like the item (setup,
    marker) with an answer picked by a hash of the item id; a type whose example lists its
    ``answers`` (words, numbers) picks one of them, else the yes/no example (1 or 0)."""
    if _example(question_type)[1].answers:
        return open_example(item_id, setup, marker, question_type)
    answer = example_answer(item_id)
    return example_question(setup, marker, question_type, answer), answer


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
        instruction = get_question_type(item.question_type).answer_instruction
        if instruction and self.name in ("mirp", "mirp-protocol"):  # the type's answer format
            text = ct_prompt(instruction)
        text = _for_modality(text, item.extra.get("modality"), item.extra.get("plane"))
        if example is None:
            example = fixed_example(item.id, item.setup, item.marker, item.question_type)
        return text.format(
            question=item.question,
            example_question=example[0],
            example_answer=example[1],
            setup=item.setup,
            marker=item.marker,
        )

    def to_json(self) -> dict:
        return {"name": self.name, "ct": self.ct, "blank": self.blank}


def _for_modality(text: str, modality: str | None, plane: str | None = None) -> str:
    """MIRP's CT sentence swapped for the item's modality's and plane's (MR: "... of an
    abdominal MRI scan."; a coronal item: "a 2D coronal slice"); a text without it (the blank
    prompt, a custom template) is left as it is."""
    ct = modality_sentence("CT")
    want = modality_sentence(modality, plane)
    if want == ct or not text.startswith(ct):
        return text
    return want + text[len(ct) :]


MIRP = PromptTemplate("mirp")
# MIRP's inference code sends the CT prompt for every setup, the blank images included
MIRP_PROTOCOL = PromptTemplate("mirp-protocol", MIRP_CT, MIRP_CT)


def load_template(path: Path | None) -> PromptTemplate:
    """MIRP's prompts, or a text file used for every setup (it must contain {question})."""
    if path is None:
        return MIRP
    path = Path(path)
    from radspatial.core.datafiles import read_text_bounded

    text = read_text_bounded(path, 2**20)  # UTF-8, a regular file, at most 1 MiB
    if "{question}" not in text:
        raise ValueError(f"{path}: prompt template has no {{question}} placeholder")
    try:
        text.format(question="", example_question="", example_answer="", setup="", marker="")
    except (KeyError, IndexError, ValueError) as exc:
        raise ValueError(f"{path}: bad placeholder in prompt template ({exc})") from None
    return PromptTemplate(path.name, text, text)
