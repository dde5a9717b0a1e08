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

QUESTIONS = [
    "Is the aorta above the spleen?",
    "Is the left kidney to the right of the inferior vena cava?",
    "Is the liver (3) below the stomach (7)?",
    "Is the structure marked A to the left of the structure marked B?",
    "Is the red dot above the blue dot?",
    "Looking at this slice, is the spleen positioned superior to the left kidney?",
    "Is the pancreas more anterior than the aorta?",
    "Is the gallbladder to the patient's right of the liver?",
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
