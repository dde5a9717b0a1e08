"""Issue 47 round 6: a second model asked where the first's localization is not trusted.

The agent asks its localizer's ``second_opinion`` only when the first abstained for want of a
trusted localization (not found, low confidence, not trusted), never on the question's own rule
(a relation too close to call); the trace says which model answered and keeps the other's steps.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from radspatial.agent.localizers.mask.mask_localizer import MaskLocalizer
from radspatial.agent.localizers.organs import organs
from radspatial.agent.pipeline import trust
from radspatial.agent.pipeline.agent import Agent
from radspatial.agent.pipeline.types import Context

QUESTION = "Is the liver to the left of the spleen?"


class Blind:
    """A first model that finds what the mask holds but trusts none of it (as ``organs`` does
    off its levels), asking ``second`` where it abstains."""

    name = "first"

    def __init__(self, second, reason: str | None = "not seen in real texture") -> None:
        self.mask, self.reason, self.second_opinion = MaskLocalizer(), reason, second
        self.calls = 0

    def locate(self, image, refs, context):
        self.calls += 1
        found = self.mask.locate(image, refs, context)
        if self.reason is None:
            return found
        why = {"abstain_reason": self.reason}
        return [f and replace(f, details={**f.details, **why}) for f in found]


class Counting(MaskLocalizer):
    name = "second"

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def locate(self, image, refs, context):
        self.calls += 1
        return super().locate(image, refs, context)


def scene(liver_x: int, spleen_x: int) -> tuple[np.ndarray, Context]:
    """Liver and spleen at columns ``liver_x`` / ``spleen_x`` (left-right asymmetric)."""
    mask = np.zeros((200, 200), np.uint16)
    mask[60:140, liver_x : liver_x + 30] = 5
    mask[80:120, spleen_x : spleen_x + 20] = 1
    return np.zeros((200, 200, 3), np.uint8), Context(mask=mask)


@pytest.mark.parametrize(("liver_x", "spleen_x", "truth"), [(20, 150, 1), (150, 20, 0)])
def test_the_second_model_answers_where_the_first_does_not_trust_its_localization(
    liver_x, spleen_x, truth
):
    image, context = scene(liver_x, spleen_x)
    second = Counting()
    result = Agent(Blind(second)).answer(image, QUESTION, context=context)
    assert result.answer == truth  # a flip of the image would flip it: the second's reading
    assert second.calls == 1
    trace = result.trace
    assert trace["localizer"] == "second" and trace["first"]["localizer"] == "first"
    assert trace["first"]["decision"]["rule"] == trust.NOT_TRUSTED
    assert "not seen in real texture" in trace["first"]["decision"]["reason"]
    assert "answered by second; the first model abstained" in trace["decision"]["reason"]
    assert "abstain_reason" not in trace["found"][0]["details"] and "second" not in trace
    assert trace["first"]["found"][0]["details"]["abstain_reason"]
    assert trace["timings_ms"]["second_ms"] >= 0


def test_the_question_s_own_rule_is_never_asked_twice():
    """The first trusts both and the relation is within the margin: no second opinion."""
    image, context = scene(90, 95)  # both centres at x = 104.5
    second = Counting()
    result = Agent(Blind(second, reason=None)).answer(image, QUESTION, context=context)
    assert result.answer is None and result.trace["decision"]["rule"] not in (
        trust.NOT_FOUND,
        trust.LOW_CONFIDENCE,
        trust.NOT_TRUSTED,
    )
    assert second.calls == 0 and "first" not in result.trace and "second" not in result.trace


def test_an_answer_of_the_first_is_final():
    image, context = scene(20, 150)
    second = Counting()
    assert Agent(Blind(second, reason=None)).answer(image, QUESTION, context=context).answer == 1
    assert second.calls == 0


def test_both_abstaining_keeps_the_first_decision_and_the_second_s_steps():
    image, context = scene(20, 150)
    empty = replace(context, mask=np.zeros_like(context.mask))
    second = Counting()
    result = Agent(Blind(second)).answer(image, QUESTION, context=empty)
    assert result.answer is None and result.text.endswith("not found")
    assert result.trace["localizer"] == "first"
    assert result.trace["second"]["localizer"] == "second"
    assert result.trace["second"]["decision"]["rule"] == trust.NOT_FOUND
    assert "first" not in result.trace


def test_auto_asks_the_shipped_second_by_default_and_none_with_the_user_s_model(tmp_path):
    shipped = organs.shipped_model_dir()
    auto = organs.AutoLocalizer(second=shipped)
    assert auto.second_opinion is not None
    assert auto.second_opinion.organs.model_dir == shipped
    assert auto.second_opinion.second_opinion is None  # one level only
    assert auto.second_opinion.name == f"auto (second model: {shipped.name})"
    assert organs.AutoLocalizer(second=False).second_opinion is None
    # the default since issue #47 round 14: the shipped second with the shipped first only
    # (a user's model folder, even a copy of the shipped one, gets none unless asked)
    assert organs.AutoLocalizer(model_dir=shipped).second_opinion is None
    default = organs.AutoLocalizer().second_opinion
    assert default is not None and default.organs.model_dir == organs.shipped_second_dir()
    auto = organs.AutoLocalizer(second=True)
    wide = auto.second_opinion
    assert wide is not None and wide.organs.model_dir == organs.shipped_second_dir()
    # issue #47 round 10: the first on 4 re-oriented copies (3 must agree), the second on 2
    assert (auto.organs.checks.variants, auto.organs.checks.min_votes) == (4, 3)
    assert (wide.organs.checks.variants, wide.organs.checks.min_votes) == (2, 2)
    with pytest.raises(FileNotFoundError, match="config.json"):  # named, before torch
        organs.AutoLocalizer(second=tmp_path)


def test_the_command_line_names_the_second_model_or_none(tmp_path, capsys):
    """``radspatial agent --second-model``: a folder is asked where the first abstains (the
    trace keeps its steps); ``none`` asks none; left out, the shipped second is asked; with
    another localizer it is refused."""
    import json

    from PIL import Image

    from radspatial.cli import main

    image = tmp_path / "blank.png"
    Image.new("RGB", (64, 64)).save(image)  # nothing to look at: both models find nothing
    argv = ["agent", "--image", str(image), "--question", QUESTION]
    shipped = str(organs.shipped_model_dir())
    for second, asked in ((shipped, True), ("shipped", True), ("none", False), (None, True)):
        trace = tmp_path / f"{str(second).replace('/', '_')}.json"
        chosen = [] if second is None else ["--second-model", second]
        assert main([*argv, *chosen, "--trace", str(trace)]) == 0
        assert "abstain" in capsys.readouterr().out
        written = json.loads(trace.read_text())
        assert ("second" in written) is asked
        if asked:
            folder = "organs" if second == shipped else "organs_wide"
            assert written["second"]["localizer"] == f"auto (second model: {folder})"
    assert main([*argv, "--localizer", "markers", "--second-model", shipped]) == 2
    assert "--second-model needs --localizer auto" in capsys.readouterr().err


def test_the_shipped_second_model_records_how_it_was_made():
    """Issue #47: weights, atlas, data (every file's sha256), levels, seed, command, time."""
    import json

    from radspatial.core.io import sha256_file
    from radspatial.nets.unet import read_config

    folder = organs.shipped_second_dir()
    assert folder is not None and folder.name == "organs_wide"
    config = read_config(folder)
    assert config["weights"]["sha256"] == sha256_file(folder / "model.safetensors")
    atlas = json.loads((folder / "atlas.json").read_text())
    assert atlas["npz_sha256"] == sha256_file(folder / "atlas.npz")
    training = config["training"]
    assert config["seed"] == 0 and "organs_train" in training["command"]
    assert training["device"] == "cpu" and training["train_cpu_seconds"] > 0
    first = read_config(organs.shipped_model_dir())
    assert training["init"]["weights_sha256"] == first["weights"]["sha256"]  # its warm start
    real = config["data"]["real"]
    assert real["levels"]["span"] == ["T7", "S1"]  # the chest slab's T7 to patient A's S1
    assert real["levels"]["structures_real"]["heart_ventricle_left"] > 0
    drawn = {d["name"]: d for d in real["synthesised"]}
    assert set(drawn) == {"pelvic001", "patient_a"}
    assert all(len(d["seg_sha256"]) == 64 for d in drawn.values())


@pytest.fixture(scope="module")
def chest_image():
    """Slice 10 of the real chest slab at 256 px (soft-tissue window), its labels."""
    organs_data = pytest.importorskip("radspatial.training.organs_data")
    chest = organs_data.chest_slab(organs_data.shared_data())
    lab = organs_data.render_lab(chest.seg, 10, chest.spacing, 256)
    hu = organs_data.render_hu(chest.ct, 10, chest.spacing, 256)
    grey = np.clip((hu + 160) / 400 * 255, 0, 255).astype(np.uint8)
    return np.repeat(grey[:, :, None], 3, axis=2), lab


@pytest.mark.parametrize("flip", [False, True])
def test_the_second_model_answers_the_chest_either_way_round(chest_image, flip):
    """On the real chest (the second model's training patient: this checks the pipeline and
    orientation, not generalisation) the first model alone finds nothing; plain agent, which
    asks the shipped second model by default, answers through it, and mirrored the answer
    flips with the image (the heart fixes the sides)."""
    image, lab = chest_image
    if flip:
        image, lab = image[:, ::-1].copy(), lab[:, ::-1]
    question = "Is the left heart ventricle to the right of the inferior vena cava?"
    ventricle, cava = (np.argwhere(lab == i)[:, 1].mean() for i in (120, 63))
    first = Agent("auto", second=False).answer(image, question)
    assert first.answer is None
    result = Agent("auto").answer(image, question)  # the default: second=None
    assert result.answer == int(ventricle > cava) == (0 if flip else 1)
    assert result.trace["localizer"] == "auto (second model: organs_wide)"
    assert result.trace["first"]["decision"]["answer"] is None


@pytest.mark.parametrize(
    ("posterior", "f", "twin", "pair"),
    [
        ((0.0, 1.0), (40, 60), (90, 70), True),  # back down the image: sides are columns
        ((0.0, 1.0), (40, 60), (30, 90), False),  # both left of the midline column 64
        ((1.0, 0.0), (60, 40), (70, 90), True),  # a rotated view: sides are rows
        ((1.0, 0.0), (40, 60), (90, 62), False),  # across columns, but both above row 64
        ((0.0, -1.0), (90, 70), (40, 60), True),  # flipped back: only the signs count
    ],
)
def test_a_left_right_pair_lies_across_the_midline(posterior, f, twin, pair):
    """Issue #47 round 6 (``AtlasRules.pair_across``): a structure and its counterpart, the two
    readings of a slice that hides the sides, are a pair only on opposite sides of the body's
    midline (the line through the body's centre along the posterior axis)."""
    from types import SimpleNamespace

    from radspatial.agent.pipeline.types import Found

    loc = organs.OrgansLocalizer()
    match = SimpleNamespace(midline=((64.0, 64.0), posterior))
    a, b = Found(f, 0.9, "organs", {}), Found(twin, 0.9, "organs", {})
    reason = loc._one_side(a, b, match)
    assert (reason is None) is pair
    if not pair:
        assert "one side of the midline" in reason
    loc.atlas_rules = replace(loc.atlas_rules, pair_across=False)
    assert loc._one_side(a, b, match) is None


def test_the_two_models_must_agree_where_both_see_a_structure_without_a_side():
    """Issue #47 round 8 (``Agent.agree_tolerance``): the second's answer stands only where
    the first's own pixels of the liver lie near the second's; a sided structure (its side
    may be the other one's) and a centre without pixels (the atlas's) have no say."""
    from radspatial.agent.pipeline.agent import disagreement
    from radspatial.agent.pipeline.types import Found, Ref

    def at(x, method="organs", area=100.0, u=None):
        return Found((x, 50.0), 0.9, method, {"area_px": area, "uncertainty_px": u})

    refs = [Ref(name="liver"), Ref(name="iliopsoas_left")]
    near = [[refs, [at(100), at(300)]], [refs, [at(140), at(20)]]]
    assert disagreement(*near, (512, 512), 0.1) is None  # 40 <= 51 px; the sided one skipped
    far = [[refs, [at(100), None]], [refs, [at(160), None]]]
    reason = disagreement(*far, (512, 512), 0.1)
    assert reason == "the two models disagree on where the liver is: 60 px apart (> 51)"
    assert disagreement(*far, (256, 1024), 0.1) is None  # the larger side: 102 px
    loose = [[refs, [at(100, u=5.0), None]], [refs, [at(160, u=10.0), None]]]
    assert disagreement(*loose, (512, 512), 0.1) is None  # 51 + 5 + 10 >= 60
    atlas = [[refs, [at(100, method="atlas", area=None), None]], [refs, [at(400), None]]]
    assert disagreement(*atlas, (512, 512), 0.1) is None


def test_a_second_answer_the_first_model_contradicts_is_an_abstention():
    """The first found the liver (untrusted) where the mask is; a second model that puts it
    elsewhere does not answer (the first's abstention stands), and the trace says why."""
    image, context = scene(20, 150)

    class Elsewhere(Counting):
        def locate(self, image, refs, context):
            found = super().locate(image, refs, context)
            return [f and replace(f, xy=(f.xy[0] + 120, f.xy[1])) if i == 0 else f
                    for i, f in enumerate(found)]  # fmt: skip

    result = Agent(Blind(Elsewhere())).answer(image, QUESTION, context=context)
    assert result.answer is None and result.text.endswith("not seen in real texture")  # first's
    second = result.trace["second"]["decision"]
    assert second["reason"].startswith("the two models disagree on where the liver is: 120 px")
    relaxed = Agent(Blind(Elsewhere()), agree_tolerance=None).answer(
        image, QUESTION, context=context
    )
    assert relaxed.answer is not None
