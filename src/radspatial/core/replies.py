"""Reply cleaning shared by every reader of model text: reasoning blocks, markup, JSON wrappers.

The bottom of the scoring stack: ``eval.scoring`` (yes/no replies), the question types' open
readers (``questions/reading.py``) and the judge's verdict reader (``grading.verdict``) all
clean a reply here first, so none of them imports another's private helpers.

- ``strip_think``: up to the last ``</think>`` is reasoning, and so is all after an
  unterminated ``<think>``;
- ``demarkup``: markdown, LaTeX and HTML-ish tags removed, ``\\boxed{x}`` and
  ``<answer>x</answer>`` turned into ``Final answer: x``;
- ``clean_open``: the part of a reply that answers an open question (no reasoning, code fence,
  JSON wrapper, markup, ``Final answer:`` lead, echoed question or option list).
"""

from __future__ import annotations

import json
import re

_THINK_OPEN = re.compile(r"<(?:think|thinking|reasoning)>", re.I)
_THINK_CLOSE = re.compile(r"</(?:think|thinking|reasoning)>", re.I)
_FINAL = re.compile(
    r"\b(?:final\s+answer|answer|response|result|prediction|output)\b\s*(?:is|:|=|-)\s*", re.I
)
_JSON_KEYS = ("final_answer", "answer", "result", "prediction", "output", "response")


def strip_think(text: str) -> str:
    """The reply without its reasoning (chat templates often open the block themselves, and a
    model that ran out of tokens leaves it unterminated)."""
    text = _THINK_CLOSE.split(text)[-1]
    opened = _THINK_OPEN.search(text)
    return text[: opened.start()] if opened else text


def demarkup(text: str) -> str:
    """Markdown, LaTeX and tags removed; ``\\boxed{}`` and ``<answer>`` as ``Final answer:``."""
    text = text.translate(str.maketrans("‘’“”：", "''\"\":"))
    text = re.sub(r"\\boxed\s*\{((?:[^{}]|\{[^{}]*\})*)\}", r" Final answer: \1 ", text)
    text = re.sub(r"<answer>(.*?)</answer>", r" Final answer: \1 ", text, flags=re.I | re.S)
    text = re.sub(r"\\(?:text|textbf|mathrm|mathbf)\s*\{([^{}]*)\}", r"\1", text)
    text = re.sub(r"</?[A-Za-z][^<>\n]{0,20}>|<\|[^<>|]*\|>|\\[()\[\]]|\$", " ", text)
    text = re.sub(r"^[ \t]*(?:#{1,6}|>|[-+*](?=\s))[ \t]*", "", text, flags=re.M)
    return re.sub(r"[*`~]|(?<!\w)_+|_+(?!\w)", "", text)


def clean_open(reply: str, question: str | None = None) -> str:
    """The part of a reply that answers: no reasoning, markup, JSON wrapper or echoed question."""
    text = strip_think(reply)
    text = re.sub(r"```[A-Za-z]*\n?(.*?)```", r"\1", text, flags=re.S)
    for obj in reversed(re.findall(r"\{[^{}]*\}", text)):
        try:
            data = json.loads(obj)
        except ValueError:
            continue
        if isinstance(data, dict):
            keys = {str(k).lower().replace(" ", "_"): v for k, v in data.items()}
            hit = next((keys[k] for k in _JSON_KEYS if k in keys), None)
            if hit is not None:
                return str(hit)
    text = demarkup(text)
    finals = list(_FINAL.finditer(text))
    if finals:
        text = text[finals[-1].end() :]
    if question:
        core = question.split(":")[0].split("?")[0]
        text = re.sub(re.escape(core) + r"\s*[:?]?", " ", text, flags=re.I)
        if ":" in question:  # the option list ("left or right?") read back is no hedge
            opts = question.split(":", 1)[1].strip(" ?")
            text = re.sub(re.escape(opts) + r"\??", " ", text, flags=re.I)
    text = re.sub(r"\s+", " ", text).strip()
    # a yes/no lead-in ("No, it is on the left") is not part of an open answer
    return re.sub(r"^(?:yes|no|ok|okay|sure)\s*[,.!:;-]+\s*", "", text, flags=re.I)
