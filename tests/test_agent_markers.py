"""The ``markers`` localizer: MIRP's published images, our generated images in all 8 variants,
latency, absent markers, ambiguity."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from radspatial.agent.localizers.markers.markers_localizer import MarkerLocalizer, ReadMarker
from radspatial.agent.pipeline.types import Context, Found, Ref, create_localizer, list_localizers
from radspatial.imaging.markers import Mark, draw_marks
from radspatial.imaging.slices import VARIANTS
from radspatial.questions.frames import worded_relation as relation_of

MIRP_SAMPLE = Path(__file__).resolve().parents[2] / "shared" / "data" / "mirp_sample"
needs_mirp = pytest.mark.skipif(not MIRP_SAMPLE.is_dir(), reason="../shared/data not present")
LOC = MarkerLocalizer()
CTX = Context()


def _holds(relation: str, a: tuple[float, float], b: tuple[float, float]) -> bool:
    (x1, y1), (x2, y2) = a, b
    return {"above": y1 < y2, "below": y1 > y2, "left_of": x1 < x2, "right_of": x1 > x2}[relation]


def _mirp_items() -> list[tuple[str, str, Path, dict]]:
    out = []
    for setup in ("RQ2", "RQ3", "AS"):
        for kind in ("dots", "letters", "numbers"):
            for item in json.loads((MIRP_SAMPLE / setup / f"qa_{kind}.json").read_text()):
                path = MIRP_SAMPLE / setup / f"image_{kind}" / item["filename"]
                out += [(setup, kind, path, qa) for qa in item["question_answer"]]
    return out


@needs_mirp
def test_mirp_sample_every_marker_found_at_its_centre_and_every_answer_right():
    items = _mirp_items()
    assert len(items) == 27
    per_kind: Counter = Counter()
    for setup, kind, path, qa in items:
        image = np.asarray(Image.open(path).convert("RGB"))
        texts = [str(qa.get(f"object{i}_gray", qa.get(f"object{i}_label"))) for i in (1, 2)]
        found = LOC.locate(image, [Ref(marker=kind, text=t) for t in texts], CTX)
        for i, (text, f) in enumerate(zip(texts, found, strict=True), start=1):
            where = f"{setup}/{path.name} {kind} {text!r}"
            assert f is not None, where
            assert f.details["read"] == text or text in dict(f.details.get("candidates", [])), where
            centre = (qa[f"object{i}_center_x"], qa[f"object{i}_center_y"])
            # MIRP draws each marker centred on the JSON centre (the organ centroid in RQ2/RQ3)
            assert np.hypot(f.xy[0] - centre[0], f.xy[1] - centre[1]) <= 2.0, (where, f.xy, centre)
        relation = relation_of(qa["question"])
        assert _holds(relation, found[0].xy, found[1].xy) == bool(qa["answer"]), qa["question"]
        per_kind[kind] += 1
    assert per_kind == {"dots": 9, "letters": 9, "numbers": 9}


@needs_mirp
def test_mirp_read_all_reads_both_markers():
    for setup, kind, path, qa in _mirp_items():
        image = np.asarray(Image.open(path).convert("RGB"))
        texts = {str(qa.get(f"object{i}_gray", qa.get(f"object{i}_label"))) for i in (1, 2)}
        seen = {m.text for m in LOC.read_all(image) if m.kind == kind}
        if (setup, path.name, kind) == ("AS", "image_93.png", "letters"):
            texts.discard("GK")  # MIRP's G reads as C or G: a tie (see the ambiguity test)
        assert texts <= seen, (setup, path.name, kind, seen)


@pytest.fixture(scope="module", params=["strict", "mirp"])
def ours(tmp_path_factory, request) -> Path:
    """The bundled CT at 512 px in the ``strict`` and the ``mirp`` marker profile (the folder
    name says which; shared with test_marker_geometry.py)."""
    from shared_datasets import example_512_markers

    return example_512_markers(tmp_path_factory, request.param)


def _rows(root: Path) -> list[dict]:
    rows = [json.loads(line) for line in (root / "manifest.jsonl").read_text().splitlines()]
    return [r for r in rows if r["setup"] in ("rq2", "rq3", "as")]


def test_our_images_every_variant_every_marker_type(ours):
    rows = _rows(ours)
    assert {r["transform"] for r in rows if r["setup"] != "as"} == set(VARIANTS)
    n, ok, times = Counter(), Counter(), []
    for r in rows:
        image = np.asarray(Image.open(ours / r["image"]).convert("RGB"))
        objs = (r["object1"], r["object2"])
        refs = [Ref(marker=r["marker"], text=o["marker_text"]) for o in objs]
        start = time.perf_counter()
        found = LOC.locate(image, refs, CTX)
        times.append(time.perf_counter() - start)
        for o, f in zip(objs, found, strict=True):
            key = f"{r['setup']}/{r['marker']}"
            n[key] += 1
            want = o["marker_xy"]
            if f is not None and f.details["read"] == o["marker_text"]:
                ok[key] += int(np.hypot(f.xy[0] - want[0], f.xy[1] - want[1]) <= 3)
    ms = 1000 * np.array(times)
    print(f"\nmarkers on our images: {dict(ok)} of {dict(n)}")
    print(f"ms/question at 512 px: median {np.median(ms):.1f}, p95 {np.percentile(ms, 95):.1f}")
    if "strict" in str(ours):  # our outlined boxes and ringed dots
        assert ok == n  # product target >= 99 %; this bundled CT reaches 100 %
    else:  # MIRP's look: no outline, a box can merge with bright tissue (as in its own images)
        assert ok["rq2/dots"] == n["rq2/dots"] and ok["rq3/letters"] == n["rq3/letters"]
        assert all(ok[k] >= 0.9 * n[k] for k in n), (ok, n)


def test_absent_markers_and_named_refs_give_none(ours):
    rows = [r for r in _rows(ours) if r["marker"] in ("numbers", "letters")][::15]
    letters = [a + b for a in "AKQZ" for b in "BHMX"]
    numbers = [str(i) for i in (1, 4, 7, 12, 33, 58, 77, 86, 90, 104, 111, 117)]
    checked = 0
    for r in rows:
        image = np.asarray(Image.open(ours / r["image"]).convert("RGB"))
        present = {r["object1"]["marker_text"], r["object2"]["marker_text"]}
        absent = [t for t in (numbers if r["marker"] == "numbers" else letters) if t not in present]
        found = LOC.locate(image, [Ref(marker=r["marker"], text=t) for t in absent], CTX)
        assert found == [None] * len(absent), (r["id"], present, found)
        checked += len(absent)
    assert checked > 100
    image = np.asarray(Image.open(ours / rows[0]["image"]).convert("RGB"))
    refs = [Ref(name="liver"), Ref(marker="dots", text="red"), Ref(marker="letters", text="A1")]
    assert LOC.locate(image, refs, CTX) == [None, None, None]


def _gray(size: int = 512) -> np.ndarray:
    rng = np.random.default_rng(0)
    return np.repeat(rng.normal(110, 20, (size, size, 1)).clip(0, 255).astype(np.uint8), 3, 2)


def test_text_twice_or_two_same_dots_lowers_the_score():
    marks = [Mark("numbers", "52", (100, 100)), Mark("numbers", "7", (300, 200))]
    image = draw_marks(_gray(), marks)
    once = LOC.locate(image, [Ref(marker="numbers", text="52")], CTX)[0]
    twice_img = draw_marks(image, [Mark("numbers", "52", (400, 400))])
    twice = LOC.locate(twice_img, [Ref(marker="numbers", text="52")], CTX)[0]
    assert isinstance(once, Found) and isinstance(twice, Found)
    assert once.score > 0.9 and twice.score <= once.score / 2 and "also_at" in twice.details
    dots = [Mark("dots", "red", (100, 300)), Mark("dots", "red", (300, 100))]
    red = LOC.locate(draw_marks(_gray(), dots), [Ref(marker="dots", text="red")], CTX)[0]
    assert red is not None and red.score < 0.6 and len(red.details["candidates"]) == 2


@needs_mirp
def test_ambiguous_reading_lowers_the_score_and_lists_candidates():
    image = np.asarray(Image.open(MIRP_SAMPLE / "AS/image_letters/image_93.png").convert("RGB"))
    gk, yp = LOC.locate(image, [Ref(marker="letters", text=t) for t in ("GK", "YP")], CTX)
    assert gk is not None and yp is not None and gk.score < yp.score
    assert {"GK", "CK"} <= {t for t, _ in gk.details["candidates"]}


def test_blank_ablation_style_grayscale_input_and_registry():
    marks = [Mark("letters", "QV", (60, 400)), Mark("numbers", "105", (450, 40))]
    image = draw_marks(np.full((512, 512, 3), 255, np.uint8), marks, boxed=False)
    loc = create_localizer("markers")
    assert "markers" in list_localizers() and loc.name == "markers"
    found = loc.locate(image[..., 0], [Ref(marker="letters", text="QV")], CTX)[0]
    assert found is not None and abs(found.xy[0] - 60) <= 2 and abs(found.xy[1] - 400) <= 2
    read = {(m.kind, m.text) for m in loc.read_all(image)}
    assert read == {("letters", "QV"), ("numbers", "105")}
    assert all(isinstance(m, ReadMarker) and m.to_json()["bbox"] for m in loc.read_all(image))


@pytest.mark.parametrize("size", [512, 1024])
def test_dots_both_styles_and_sizes(size):
    image = np.array(draw_marks(_gray(size), [Mark("dots", "red", (size / 4, size / 3))]))
    yy, xx = np.mgrid[:size, :size]
    image[(yy - 308) ** 2 + (xx - 208) ** 2 <= 64] = (0, 0, 255)  # MIRP's: no ring, radius 8
    red, blue = LOC.locate(image, [Ref(marker="dots", text=c) for c in ("red", "blue")], CTX)
    assert red is not None and np.allclose(red.xy, (size / 4, size / 3), atol=1)
    assert blue is not None and np.allclose(blue.xy, (208, 308), atol=0.5)
