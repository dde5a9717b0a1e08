"""A question type is one module: a built-in type module taken out of the package and loaded
back as a plugin from another folder drives the generator, the agent (parse + verify through
``Agent.answer``), the anatomy prior, the prompt example and the CLI's type groups
(``--question-types spar|open``, at the same place) exactly as the built-in did."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

import radspatial.questions as questions_pkg
from radspatial.agent.pipeline.parse import parse_question
from radspatial.agent.pipeline.types import ParseError
from radspatial.bench.dataset import build_dataset
from radspatial.bench.generate import GenerateConfig
from radspatial.cli import bundled_example
from radspatial.cli.common import question_types
from radspatial.eval.prompts import example_question
from radspatial.eval.runner import EvalConfig, run_eval
from radspatial.imaging.volumes import Case
from radspatial.models.base import Request
from radspatial.models.baselines import Baseline, builtin_atlases
from radspatial.questions import QUESTION_TYPES, list_question_types, question_groups

# module -> (the types it registers, a question of its first type, the item a prior reads);
# size's and distance's types are in the CLI group "spar", laterality in "open"
MODULES = {
    # MIRP's own type: the frames and reply words it shares live in questions/frames.py, so
    # nothing else imports it; it is in no CLI group
    "relative_position": (
        ("relative_position",),
        "Is the liver to the left of the spleen?",
        {"relation": "left_of", "object1": "liver", "object2": "spleen"},
    ),
    "size": (
        ("size", "symmetry"),
        "Is the liver larger than the spleen in this image?",
        {"relation": "larger_than", "object1": "liver", "object2": "spleen"},
    ),
    "distance": (
        ("distance",),
        "Is the spleen closer to the liver than to the aorta?",
        {"relation": "closer_to", "object1": "spleen", "object2": "liver", "object3": "aorta"},
    ),
    "laterality": (
        ("laterality",),
        "On which side of the image is the spleen: left or right?",
        {"object1": "spleen"},
    ),
}
MODELS = ("agent:mask", "baseline:anatomy-prior", "baseline:standard-view")


def _outputs(out: Path, names: tuple[str, ...]) -> dict[str, object]:
    """Dataset, agent and baseline results (answers, prompts, traces; no wall times)."""
    ct, seg = bundled_example()
    config = GenerateConfig(
        seed=5,
        size=256,
        setups=("rq1", "rq3"),
        markers=("dots",),
        question_types=names,
        export_masks=True,
        as_count=0,
    )
    build_dataset([Case("example", ct, seg)], config, out / "ds", log=lambda _: None)
    result: dict[str, object] = {"manifest": (out / "ds" / "manifest.jsonl").read_text()}
    for model in MODELS:
        run = out / model.replace(":", "_")
        run_eval(out / "ds", run, EvalConfig(model=model, runs=1), progress=False)
        for name in ("results.jsonl", "calls.jsonl"):
            rows = [json.loads(x) for x in (run / name).read_text().splitlines()]
            for row in rows:
                row.pop("latency_s", None)
                trace = (row.get("meta") or {}).get("trace") or {}
                trace.pop("timings_ms", None)
            text = json.dumps(sorted(rows, key=lambda r: (r.get("key", ""), r["id"])))
            result[f"{model}/{name}"] = text.replace(str(out), "<OUT>")
    return result


def _prior(meta: dict) -> tuple[str, object]:
    """What the anatomy prior replies, and what the type's prior says (None: nothing)."""
    prior = Baseline("baseline:anatomy-prior", "anatomy-prior", builtin_atlases(), "built-in")
    req = Request("k", "p", b"", meta)
    return prior.answer(req), prior._prior(req)


def _load_plugin(module: str, folder: Path) -> None:
    """The module's source, copied to ``folder`` and imported from there under another name."""
    source = Path(questions_pkg.__file__).with_name(f"{module}.py")
    path = folder / f"plugin_{module}.py"
    path.write_text(source.read_text())
    spec = importlib.util.spec_from_file_location(f"plugin_{module}", path)
    assert spec and spec.loader
    plugin = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = plugin
    try:
        spec.loader.exec_module(plugin)  # registers its types
    finally:
        del sys.modules[spec.name]


@pytest.fixture
def restore_types():
    """Whatever a test does to the registry, the built-in types are back afterwards."""
    list_question_types()  # the registry imports the built-in modules first
    builtin = dict(QUESTION_TYPES.items())
    yield
    for name in list_question_types():
        QUESTION_TYPES.remove(name)
    for name, qt in builtin.items():
        QUESTION_TYPES.add(name, qt)


@pytest.mark.parametrize("module", list(MODULES))
def test_a_type_module_outside_the_package_works_as_the_built_in(module, tmp_path, restore_types):
    names, question, meta = MODULES[module]
    meta = {"question_type": names[0], **meta}
    builtin = _outputs(tmp_path / "builtin", names)
    builtin_parse = parse_question(question)
    builtin_example = example_question("rq3", "dots", names[0])
    builtin_prior = _prior(meta)
    builtin_groups = question_groups()
    group = next((g for g, members in builtin_groups.items() if names[0] in members), None)
    builtin_group = question_types(group) if group else ()

    for name in names:
        QUESTION_TYPES.remove(name)
    # without the module nothing knows the type: no parse, no example, no prior, no group
    with pytest.raises(ParseError):
        parse_question(question)
    with pytest.raises(ValueError, match="unknown question type"):
        example_question("rq3", "dots", names[0])
    assert _prior(meta)[1] is None
    if group:
        assert question_types(group) == tuple(n for n in builtin_group if n not in names)

    _load_plugin(module, tmp_path)
    assert type(QUESTION_TYPES.get(names[0])).__module__ == f"plugin_{module}"
    plugin = _outputs(tmp_path / "plugin", names)
    assert parse_question(question) == builtin_parse
    assert example_question("rq3", "dots", names[0]) == builtin_example
    assert _prior(meta) == builtin_prior
    # back in its CLI group, at its place in the group's order: no list to edit
    assert question_groups() == builtin_groups
    if group:
        assert question_types(group) == builtin_group
    assert plugin.keys() == builtin.keys()
    for key in builtin:
        assert plugin[key] == builtin[key], key
    # the agent parsed every item as the type, and the prior had something to say or not
    calls = json.loads(str(plugin["agent:mask/calls.jsonl"]))
    kinds = {row["meta"]["trace"]["parsed"]["kind"] for row in calls}
    assert kinds == {names[0]} and builtin_parse.kind == names[0]
    assert (builtin_prior[1] is None) == (module == "size")  # the atlas holds no areas


def test_a_plugin_type_without_a_rule_makes_the_agent_abstain():
    """A type may parse a question and leave the decision out: the agent abstains, with the
    reason in its answer, instead of failing."""
    import re

    import numpy as np

    from radspatial.agent.pipeline.agent import Agent
    from radspatial.agent.pipeline.types import Context, ParsedQuestion

    class Wobbly(questions_pkg.KeepVariant):
        name, n_objects, chance, parse_order = "wobbly", 1, 0.5, 1
        relations, roles = ("wobbly",), ("structure",)

        def parse(self, asked):
            if not (m := re.fullmatch(r"(.+?)\s+wobbly", asked.plain)):
                return None
            return ParsedQuestion(
                (asked.ref(m[1], "structure"),), "wobbly", asked.question, "wobbly"
            )

    questions_pkg.register_question_type(Wobbly())
    try:
        mask = np.zeros((64, 64), np.uint16)
        mask[20:40, 10:30] = 5
        image, context = np.zeros((64, 64, 3), np.uint8), Context(mask, {5: "liver"})
        result = Agent("mask").answer(image, "Is the liver wobbly?", context=context)
    finally:
        QUESTION_TYPES.remove("wobbly")
    assert result.answer is None
    assert result.text == "abstain: no rule to decide wobbly questions"
    assert result.trace["parsed"]["kind"] == "wobbly"


def test_a_type_that_proposes_questions_without_wording_them_is_refused_when_registered():
    class Mute(questions_pkg.KeepVariant):
        name, n_objects, chance = "mute", 1, 0.5

        def propose(self, facts, target, rng, rules):
            return None

    with pytest.raises(TypeError, match="'mute' proposes questions: it must define text"):
        questions_pkg.register_question_type(Mute())
    assert "mute" not in QUESTION_TYPES
