"""Prompt templates: MIRP's fixed prompts by default, or a custom template file.

MIRP's prompt text is kept verbatim (including its missing space before "Ignore"), so numbers
are comparable with the paper. The in-context example matches the item's setup and marker type
and is fixed per (setup, marker): identical across runs and items, so the spread across runs is
model noise, not prompt noise.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from radspatial.items import EvalItem

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
MIRP_BLANK = (
    "Answer strictly with '1' for Yes or '0' for No. No explanations, no additional text. "
    "Your output must contain exactly one character: '1' or '0'."
    "Focus solely on what the image shows.\n"
    "Example:\n"
    "Q: {example_question} A: {example_answer}\n"
    "Now answer the real question:\n\n"
    "Q: {question}"
)
_MARKER_ONLY = {
    "numbers": "Is the number 52 above the number 1?",
    "letters": "Are the letters BZ above the letters AA?",
    "dots": "Is the red dot above the blue dot?",
}
_NAMED_REFS = {"numbers": ("52", "1"), "letters": ("BZ", "AA"), "dots": ("red", "blue")}


def example_question(setup: str, marker: str) -> str:
    if setup == "rq1" or marker == "none":
        return "Is the aorta above the spleen?"
    if setup == "rq2":
        r1, r2 = _NAMED_REFS[marker]
        return f"Is the aorta ({r1}) above the spleen ({r2})?"
    return _MARKER_ONLY[marker]


@dataclass(frozen=True)
class PromptTemplate:
    """Text with placeholders {question}, {example_question}, {example_answer}, {setup},
    {marker}. ``blank`` is used for the blank-image ablation (AS)."""

    name: str
    ct: str = MIRP_CT
    blank: str = MIRP_BLANK

    def render(self, item: EvalItem) -> str:
        text = self.blank if item.setup == "as" else self.ct
        return text.format(
            question=item.question,
            example_question=example_question(item.setup, item.marker),
            example_answer=1,
            setup=item.setup,
            marker=item.marker,
        )

    def to_json(self) -> dict:
        return {"name": self.name, "ct": self.ct, "blank": self.blank}


MIRP = PromptTemplate("mirp")


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
