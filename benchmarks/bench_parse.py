"""Question parsing speed (``radspatial.agent.pipeline.parse.parse_question``), moved here from the
test suite: a test must not depend on how fast the machine is.

    .venv/bin/python benchmarks/bench_parse.py [--repeats 50]

Prints the time per question, and its ratio to a reference measured in the same run on the same
questions (``re.findall(r"\\w+", q.lower())``, a plain tokenisation), so a busy machine moves
both. The agent's budget is about 1 ms per question (it parses once per request).
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from pathlib import Path

from radspatial.agent.pipeline.parse import parse_question

TESTS = Path(__file__).resolve().parents[1] / "tests"


def questions() -> list[str]:
    """The 56 phrasings tests/test_agent_parse.py checks (its PARAPHRASES), one list for both."""
    sys.path.insert(0, str(TESTS))
    from test_agent_parse import PARAPHRASES

    return [q for q, *_ in PARAPHRASES]


def _per_question(fn, qs: list[str], repeats: int) -> float:
    """Median over ``repeats`` passes of the seconds per question."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for q in qs:
            fn(q)
        times.append((time.perf_counter() - start) / len(qs))
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args()
    qs = questions()
    parse_question(qs[0])  # builds the name index once, as a server does at start
    ours = _per_question(parse_question, qs, args.repeats)
    ref = _per_question(lambda q: re.findall(r"\w+", q.lower()), qs, args.repeats)
    print(f"parse_question: {ours * 1e3:.3f} ms per question (median of {args.repeats} passes)")
    print(f"reference tokenisation: {ref * 1e3:.4f} ms; ratio {ours / ref:.0f}x")
    print(f"budget 1 ms per question: {'within' if ours < 1e-3 else 'OVER'}")


if __name__ == "__main__":
    main()
