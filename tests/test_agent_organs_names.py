"""A question's names resolve to the model's classes as its markers do: through MIRP's
vertebrae / rib grouping when the model has no class of that name (issue #34 round 4: a
hidden set asked about "T12", which resolved to nothing before)."""

from __future__ import annotations

from radspatial.agent.localizers.organs.organs import shipped_model_dir
from radspatial.agent.localizers.organs.organs_names import resolve
from radspatial.agent.pipeline.parse import parse_question
from radspatial.agent.pipeline.types import Ref
from radspatial.core.labels import load_table
from radspatial.nets import unet


def test_a_named_vertebra_or_rib_resolves_to_its_group_as_its_marker_does():
    model = unet.load_model(shipped_model_dir(), "cpu")
    vertebrae, rib_left = model.id_of_name("vertebrae"), model.id_of_name("rib_left")
    assert vertebrae is not None and rib_left is not None and vertebrae != rib_left
    (ref,) = [r for r in parse_question("Is the aorta left of the T12 vertebra?").refs[1:]]
    assert resolve(ref, model) == (vertebrae, "name")
    assert resolve(Ref(name="rib_left_5"), model) == (rib_left, "name")
    assert resolve(Ref(name="rib_right_5"), model)[0] == model.id_of_name("rib_right")
    full = load_table("totalsegmentator", group=False).names
    t12 = next(i for i, n in full.items() if n == "vertebrae_t12")
    assert resolve(Ref(marker="numbers", text=str(t12)), model)[0] == vertebrae
    assert resolve(Ref(name="liver"), model)[0] == model.id_of_name("liver")  # its own class
    assert resolve(Ref(name="no_such_organ"), model) == (None, "name")
