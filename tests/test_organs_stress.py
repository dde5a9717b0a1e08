"""``benchmarks/organs_stress.py`` (benchmarks/RESULTS.md, issue #34 round 3): items sampled from
generated sets, every agent on every item, tables with the wrong answers and reasons."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from synth import write_case

from radspatial.agent.pipeline.agent import AgentAnswer
from radspatial.bench.config import GenerateConfig
from radspatial.bench.dataset import build_dataset
from radspatial.imaging.volumes import Case

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "organs_stress.py"


def _module():
    spec = importlib.util.spec_from_file_location("organs_stress", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class _Says:
    """An agent that answers ``value`` (None: abstains with a reason holding numbers)."""

    def __init__(self, value):
        self.value = value

    def answer(self, image, question):
        if self.value is None:
            return AgentAnswer(None, "abstain: centres differ by 12.5 px along x", {})
        return AgentAnswer(self.value, str(self.value), {})


def test_every_agent_answers_every_sampled_item_and_the_report_counts_them(tmp_path):
    mod = _module()
    ct, seg = write_case(tmp_path / "in")
    path = tmp_path / "ds"
    cfg = GenerateConfig(setups=("rq1",), size=96, as_count=0, seed=0)
    build_dataset([Case("synth", ct, seg)], cfg, path)
    sets = [{"set": "x", "window": "W400L40", "size": 96, "path": path}]
    named = {"yes": _Says(1), "no": _Says(0), "none": _Says(None), "lopo": {"other": _Says(1)}}
    rows = mod.run(named, sets, per_set=3, seed=0)
    n = len(rows) // 3
    assert n >= 1 and {r["agent"] for r in rows} == {"yes", "no", "none"}  # lopo: no set x
    yes = [r for r in rows if r["agent"] == "yes"]
    wrong = sum(r["truth"] != 1 for r in yes)
    text = mod.report(yes, ("all", "view"))
    assert f"| all | {n} | {n} (100 %" in text and f"wrong answers: {wrong}" in text
    none = mod.report([r for r in rows if r["agent"] == "none"], ("all",))
    assert f"| all | {n} | 0 (0 %" in none
    assert f"{n:4d}  centres differ by # px along x" in none  # numbers stripped to a category


def test_reason_classes_strip_numbers_and_names():
    mod = _module()
    a = mod.reason_class("abstain: subject (liver) unstable: found in 1/2 re-oriented copies (< 2)")
    b = mod.reason_class("abstain: subject (spleen) unstable: found in 0/2 re-oriented copies")
    assert a == b == "subject unstable: found in #/# re-oriented copies"


def test_the_issue_s_targets_count_held_out_sets_and_pelvic_items_apart():
    """Issue #47's targets: the chest/abdomen sets held out, and pelvis-level items whose
    answer does not need the sides, held out (pelvic004, the other sets' pelvic slices) and
    seen (patient A, Pelvic-Ref-001) apart; a wrong answer is counted where it falls."""
    mod = _module()

    def row(name, pelvic, reason, answer, truth=1):
        return {"set": name, "pelvic": pelvic, "decidable_reason": reason, "answer": answer,
                "truth": truth}  # fmt: skip

    free, dep = "mirror-invariant", "side-dependent, no landmark in slice"
    rows = [
        row("B", False, "no sided structure", 1),
        row("s0327", False, free, None),
        row("s0327", True, free, 0),  # pelvic, side-free, wrong
        row("s0328", True, dep, None),
        row("pelvic004", False, free, 1),  # the whole set is the pelvis
        row("a", True, free, 1),  # seen
        row("chest", False, free, 1),  # seen: in neither target
    ]
    lines = mod.targets(rows)
    assert lines[0].startswith("target: chest/abdomen sets, held out: 2 / 4 (50 %")
    assert lines[0].endswith("wrong 1")
    assert lines[1].startswith("target: pelvis, side-free, held out: 2 / 2 (100 %")
    assert lines[1].endswith("wrong 1")
    assert "seen (A real, Pelvic-Ref-001): 1 / 1" in lines[2]
    assert "side-dependent, held out: 0 / 1" in lines[3]
