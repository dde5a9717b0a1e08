"""Agent: verifier edge cases, the mask oracle agrees with the dataset 100%, CLI, overlay."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from radspatial.agent.overlay import draw_overlay
from radspatial.agent.pipeline.agent import Agent, load_image
from radspatial.agent.pipeline.types import Context, Found, Ref, create_localizer, list_localizers
from radspatial.eval.runner import EvalConfig, run_eval
from radspatial.questions.relative_position import verify_relation as verify


def F(x, y, score=1.0):
    return Found((x, y), score, "test")


def test_verify_rules_and_margins():
    assert verify("above", F(10, 10), F(10, 50)).answer == 1  # smaller y is above
    assert verify("below", F(10, 10), F(10, 50)).answer == 0
    assert verify("left_of", F(10, 10), F(50, 10)).answer == 1
    assert verify("right_of", F(10, 10), F(50, 10)).answer == 0
    tie = verify("left_of", F(10, 10), F(19, 80))
    assert tie.answer is None and "margin" in tie.reason and tie.dx == -9
    assert verify("above", F(10, 10), F(19, 80)).answer == 1  # the other axis is clear
    assert verify("left_of", None, F(1, 1)).reason == "subject not found"
    both = verify("left_of", None, None)
    assert both.answer is None and "subject and reference" in both.reason
    low = verify("left_of", F(0, 0, 0.9), F(15, 0, 0.5))
    assert low.confidence == pytest.approx(0.5 * 15 / 30)
    assert verify("left_of", F(0, 0), F(100, 0)).confidence == 1.0


def test_registry_lists_builtin_localizers():
    assert {"markers", "mask"} <= set(list_localizers())
    with pytest.raises(ValueError, match="unknown localizer"):
        create_localizer("nope")


def test_load_image_refuses_bombs(tmp_path):
    big = Image.new("1", (20000, 20000))
    path = tmp_path / "bomb.png"
    big.save(path)
    with pytest.raises(ValueError, match="over the limit"):
        load_image(path.read_bytes())
    assert load_image(np.zeros((4, 5), np.uint8)).shape == (4, 5, 3)


@pytest.fixture(scope="module")
def masked(tmp_path_factory) -> Path:
    from shared_datasets import example_512

    return example_512(tmp_path_factory)  # seed 1, 512 px, AS 10, label images


def test_mask_oracle_agrees_with_every_dataset_answer(masked, tmp_path):
    cfg = EvalConfig(model="agent:mask", runs=1, setups=("rq1", "rq2", "rq3"))
    rows = run_eval(masked, tmp_path / "run", cfg, progress=False)
    assert rows and all(r["error"] is None for r in rows)
    wrong = [(r["id"], r["reply"]) for r in rows if not r["correct"]]
    assert wrong == []  # 100% agreement, every setup and marker type


def test_agent_cli_with_trace_and_overlay(masked, tmp_path):
    from radspatial.cli import main

    row = next(
        json.loads(x)
        for x in (masked / "manifest.jsonl").read_text().splitlines()
        if '"setup": "rq1"' in x
    )
    trace, overlay = tmp_path / "t.json", tmp_path / "o.png"
    code = main(
        ["agent", "--image", str(masked / row["image"]), "--question", row["question"],
         "--localizer", "mask", "--mask", str(masked / row["mask"]),
         "--trace", str(trace), "--overlay", str(overlay)]
    )  # fmt: skip
    assert code == 0
    t = json.loads(trace.read_text())
    assert t["decision"]["answer"] == row["answer"]
    assert t["parsed"]["relation"] == row["relation"]
    assert {"parse_ms", "localize_ms", "verify_ms", "total_ms"} <= set(t["timings_ms"])
    assert Image.open(overlay).size == (512, 512)


def test_unparseable_question_abstains_with_reason(masked):
    row = json.loads((masked / "manifest.jsonl").read_text().splitlines()[0])
    res = Agent("markers").answer(masked / row["image"], "What colour is the sky?")
    assert res.answer is None and res.text.startswith("abstain: parse failure")
    img = draw_overlay(load_image(masked / row["image"]), res)
    assert img.size[0] > 0


def test_mask_localizer_by_name_number_letters_and_dot():
    mask = np.zeros((100, 100), np.uint16)
    mask[10:20, 10:20] = 5  # liver
    mask[70:90, 60:80] = 1  # spleen
    img = np.zeros((100, 100, 3), np.uint8)
    img[78:83, 68:73] = (255, 0, 0)  # red dot on the spleen
    loc = create_localizer("mask")
    refs = [
        Ref(name="liver"),
        Ref(marker="numbers", text="1"),
        Ref(marker="letters", text="AE"),
        Ref(marker="dots", text="red"),
        Ref(marker="dots", text="blue"),
        Ref(name="aorta"),
    ]
    found = loc.locate(img, refs, Context(mask=mask))
    assert found[0].xy == (14.5, 14.5)
    assert found[1].xy == (69.5, 79.5) and found[3].xy == (69.5, 79.5)
    assert found[2].xy == (14.5, 14.5)  # AE = 5
    assert found[4] is None and found[5] is None
    with pytest.raises(ValueError, match="label image"):
        loc.locate(img, refs, Context())


def test_a_dot_at_a_concave_structures_centre_marks_it_not_the_neighbour_it_lies_on():
    """MIRP's rules put a dot at the centre of mass; for a C-shaped structure that point can lie
    on a neighbour inside the concavity. The oracle must take the marked structure."""
    mask = np.zeros((100, 100), np.uint16)
    mask[20:80, 20:30] = 7  # a C open to the right: its centre of mass lies in the opening
    mask[20:30, 20:70] = 7
    mask[70:80, 20:70] = 7
    ys, xs = np.nonzero(mask == 7)
    cx, cy = xs.mean(), ys.mean()
    mask[40:60, 35:55] = 3  # the neighbour under that centre
    assert mask[int(round(cy)), int(round(cx))] == 3
    img = np.zeros((100, 100, 3), np.uint8)
    x, y = int(round(cx)), int(round(cy))
    img[y - 2 : y + 3, x - 2 : x + 3] = (0, 0, 255)  # blue dot at the C's centre
    img[48:53, 88:93] = (255, 0, 0)  # red dot on nothing, right of everything
    mask[45:56, 85:96] = 9
    found = create_localizer("mask").locate(
        img, [Ref(marker="dots", text="blue"), Ref(marker="dots", text="red")], Context(mask=mask)
    )
    assert found[0].details["label_id"] == 7 and found[1].details["label_id"] == 9


def test_a_multiple_choice_question_is_abstained_on_not_read_as_yes_no():
    """SPAR-VQA's lettered options name words ("(E) mirrored") that a yes/no rule would take
    for the question: the agent says it cannot answer instead of replying "1"."""
    question = (
        "Which transformation of the standard radiological view does this image show? Options: "
        "(A) as in the standard radiological view (not rotated, not mirrored); (B) rotated 90 "
        "degrees counter-clockwise; (E) mirrored left to right. Answer with the letter."
    )
    res = Agent("mask").answer(np.zeros((64, 64, 3), np.uint8), question)
    assert res.answer is None and "multiple choice" in res.text


def test_totalsegmentator_localizer_path_on_an_existing_segmentation(masked):
    """The real path minus the network: TotalSegmentator's output for the example CT is the
    bundled mask, so centroids must reproduce every dataset answer."""
    from radspatial.agent.pipeline.parse import parse_question
    from radspatial.cli import bundled_example
    from radspatial.eval.items import load_items

    ct, seg = bundled_example()
    loc = create_localizer("totalsegmentator")
    agent = Agent(loc)
    items = [i for i in load_items(masked) if i.setup in ("rq1", "rq2")][:12]
    for item in items:
        ctx = Context(
            ct_path=str(ct),
            extra={"seg_path": str(seg), "slice_index": item.extra["slice_index"],
                   "transform": item.transform},
        )  # fmt: skip
        res = agent.answer(item.image, item.question, context=ctx)
        assert res.answer == item.expected, (item.id, res.trace["decision"])
        assert res.trace["found"][0]["method"] == "totalsegmentator"
    refs = [parse_question(items[0].question).subject]
    with pytest.raises(ValueError, match="needs the CT volume"):
        loc.locate(load_image(items[0].image), refs, Context())
    bare = Context(ct_path=str(ct), extra={"slice_index": 0, "transform": "B1"})
    with pytest.raises(ImportError, match="pip install TotalSegmentator"):
        loc.locate(load_image(items[0].image), refs, bare)
