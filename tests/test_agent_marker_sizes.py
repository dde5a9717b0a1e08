"""The ``markers`` reader at every image size the generator writes: our own datasets (bundled
real CT, MIRP's rule profile, the default of ``generate``) at small, odd and large sizes, where
MIRP's boxes stop framing the glyphs (the font has an 8 px floor, the box does not)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from radspatial.agent.localizers.markers.marker_templates import framed, locate_rendered
from radspatial.agent.localizers.markers.markers_localizer import MarkerLocalizer
from radspatial.agent.pipeline.agent import Agent
from radspatial.agent.pipeline.types import Context, Ref
from radspatial.bench.dataset import build_dataset
from radspatial.bench.generate import GenerateConfig
from radspatial.cli import bundled_example
from radspatial.core.rules import QuestionRules
from radspatial.imaging.markers import Mark, draw_marks
from radspatial.imaging.volumes import Case

AGENT = Agent("markers")


@pytest.fixture(scope="module")
def datasets(tmp_path_factory) -> dict[int, Path]:
    return {}


def _dataset(cache: dict[int, Path], root: Path, size: int, profile: str = "mirp") -> Path:
    if size in cache:
        return cache[size]
    ct, seg = bundled_example()
    out = cache[size] = root / f"ds_{profile}_{size}"
    config = GenerateConfig(
        seed=7, size=size, as_count=0, setups=("rq3",), rules=QuestionRules(profile=profile)
    )
    build_dataset([Case("ex", ct, seg)], config, out, log=lambda _: None)
    return out


def _rows(root: Path, step: int) -> list[dict]:
    rows = [json.loads(line) for line in (root / "manifest.jsonl").read_text().splitlines()]
    by_marker: dict[str, list[dict]] = {}
    for r in rows:
        by_marker.setdefault(r["marker"], []).append(r)
    return [r for marker in sorted(by_marker) for r in by_marker[marker][::step]]


@pytest.mark.parametrize("size", [192, 256, 384])
def test_every_marker_style_answered_and_right_at_other_sizes(datasets, tmp_path, size):
    root = _dataset(datasets, tmp_path, size)
    n, right = Counter(), Counter()
    for r in _rows(root, 3):
        result = AGENT.answer(root / r["image"], r["question"])
        n[r["marker"]] += 1
        assert result.answer == r["answer"], (size, r["id"], r["question"], result.text)
        right[r["marker"]] += 1
    assert set(n) == {"numbers", "letters", "dots"} and min(n.values()) >= 5, n
    assert right == n


def test_absent_texts_are_not_found_where_glyphs_touch_their_box(datasets, tmp_path):
    size = 256
    assert not framed("88", size) and framed("88", 1024)  # the generator's own look decides
    root = _dataset(datasets, tmp_path, size)
    loc, checked = MarkerLocalizer(), 0
    for r in [r for r in _rows(root, 4) if r["marker"] in ("numbers", "letters")]:
        image = np.asarray(Image.open(root / r["image"]).convert("RGB"))
        present = {r["object1"]["marker_text"], r["object2"]["marker_text"]}
        pool = ("5", "8", "9", "58", "68", "85", "89", "105") if r["marker"] == "numbers" else (
            "AB", "AE", "AF", "BD", "CK", "DI", "OH", "QI"
        )  # fmt: skip
        absent = [t for t in pool if t not in present]
        found = loc.locate(image, [Ref(marker=r["marker"], text=t) for t in absent], Context())
        assert found == [None] * len(absent), (r["id"], present, found)
        checked += len(absent)
    assert checked >= 40


def test_template_reader_finds_its_marker_on_any_background_and_size():
    rng = np.random.default_rng(3)
    for size in (128, 256, 768):
        gray = rng.normal(60, 25, (size, size, 1)).clip(0, 255).astype(np.uint8)
        image = draw_marks(np.repeat(gray, 3, 2), [Mark("numbers", "52", (size / 3, size / 2))])
        found = locate_rendered(image, "numbers", "52")
        assert found is not None and np.allclose(found.xy, (size / 3, size / 2), atol=1), size
        assert found.details["ncc"] > 0.99 and found.score > 0.5
        assert locate_rendered(image, "numbers", "53") is None
