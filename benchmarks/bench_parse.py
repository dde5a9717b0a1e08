"""Question parsing speed (``radspatial.agent.parse.parse_question``), moved here from the test
suite: a test must not depend on how fast the machine is.

    .venv/bin/python benchmarks/bench_parse.py [--repeats 50]

Prints the time per question, and its ratio to a reference measured in the same run on the same
questions (``re.findall(r"\\w+", q.lower())``, a plain tokenisation), so a busy machine moves
both. The agent's budget is about 1 ms per question (it parses once per request).
"""

from __future__ import annotations

import argparse
import re
import statistics
import time

from radspatial.agent.parse import parse_question

QUESTIONS = [  # the phrasings tests/test_agent_parse.py checks (PARAPHRASES)
    "Is the aorta above the spleen?",
    "Is the left kidney to the right of the inferior vena cava?",
    "Is the liver located to the right of the stomach?",
    "Is the spleen on the left side of the liver?",
    "Is the spleen on the right of the liver?",
    "Is the spleen left of the liver?",
    "Is the stomach right of the aorta",
    "Is the aorta higher than the spleen?",
    "Is the aorta lower than the spleen?",
    "Is the liver over the right kidney?",
    "Is the pancreas under the stomach?",
    "Is the duodenum beneath the liver?",
    "Is the colon underneath the stomach?",
    "Does the aorta lie above the IVC?",
    "Is the liver located to the left of the stomach in this image?",
    "Is the spleen positioned below the stomach?",
    "In this image, is the aorta above the spleen?",
    "Is aorta above spleen",
    "IS THE AORTA ABOVE THE SPLEEN?",
    "  is   the aorta\tabove  the   spleen ? ",
    "Is the aorta superior to the spleen?",
    "Is the aorta inferior to the spleen?",
    "Is the superior vena cava inferior to the trachea?",
    "Is the SVC to the left of the aorta?",
    "Is the gall bladder to the left of the stomach?",
    "Is the L kidney to the right of the R kidney?",
    "Is the left adrenal above the right adrenal?",
    "Is the adrenal gland left above the liver?",
    "Is the kidney (left) below the spleen?",
    "Is the kidney_left below the spleen?",
    "Is the vertebra below the aorta?",
    "Is the spine below the aorta?",
    "Is the L3 vertebra below the aorta?",
    "Is the urinary bladder above the rectum?",
    "Is the bladder above the rectum?",
    "Is the small intestine left of the colon?",
    "Is the small bowel left of the large bowel?",
    "Is the portal vein above the pancreas?",
    "Is the portal vein and splenic vein above the IVC?",
    "Is the left psoas to the left of the right psoas?",
    "Is the left kidney cyst above the left kidney?",
    "Is the left lung upper lobe above the heart?",
    "Is the left rib to the left of the vertebrae?",
    "Is rib left 11 above the left kidney?",
    "Is the oesophagus to the left of the trachea?",
    "Is the prostate/uterus below the bladder?",
    "Is the left femoral head left of the right femur head?",
    "Is the intestine above the adrenal gland?",
    "Is the liver on the left-hand side of the spleen?",
    "Is the liver further to the right than the spleen?",
    "Is it true that the aorta is above the spleen?",
    "Does the aorta appear to be below the spleen in the image?",
    "Is the aorta directly above the spleen (yes/no)?",
    "Q: Is the aorta above the spleen?",
    "Is the left kidney left of the right kidney?",
    "Is the Inferior Vena Cava right of the Aorta.",
]


def _per_question(fn, repeats: int) -> float:
    """Median over ``repeats`` passes of the seconds per question."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for q in QUESTIONS:
            fn(q)
        times.append((time.perf_counter() - start) / len(QUESTIONS))
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args()
    parse_question(QUESTIONS[0])  # builds the name index once, as a server does at start
    ours = _per_question(parse_question, args.repeats)
    ref = _per_question(lambda q: re.findall(r"\w+", q.lower()), args.repeats)
    print(f"parse_question: {ours * 1e3:.3f} ms per question (median of {args.repeats} passes)")
    print(f"reference tokenisation: {ref * 1e3:.4f} ms; ratio {ours / ref:.0f}x")
    print(f"budget 1 ms per question: {'within' if ours < 1e-3 else 'OVER'}")


if __name__ == "__main__":
    main()
