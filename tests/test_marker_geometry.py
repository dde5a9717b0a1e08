"""Marker geometry of the mirp profile equals MIRP's published images within 2 px.

Box size, glyph height, dot diameter and colour are measured by one function
(``imaging.marker_measure``) on ../shared/data/mirp_sample's PNGs and on a dataset generated
with the default rules from the bundled CT; the strict profile's look (outline, ring) is
measured too, so the measurement can tell the two apart.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from radspatial.bench.generate import GenerateConfig
from radspatial.imaging.marker_measure import measure_box, measure_dot
from radspatial.imaging.markers import DOT_COLORS
from radspatial.questions.manifest import ManifestRow

MIRP = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "mirp_sample"
TOL = 2


def _png(path: Path) -> np.ndarray:
    return np.asarray(Image.open(path).convert("RGB"))


def _published() -> tuple[dict, list]:
    """(text length -> box measures), dot measures, from MIRP's RQ2/RQ3/AS files."""
    boxes: dict[tuple[str, int], list] = defaultdict(list)
    dots = []
    for setup in ("RQ2", "RQ3", "AS"):
        for marker in ("numbers", "letters", "dots"):
            key = "label" if marker == "letters" and setup != "AS" else "gray"
            for entry in json.loads((MIRP / setup / f"qa_{marker}.json").read_text()):
                image = _png(MIRP / setup / f"image_{marker}" / entry["filename"])
                qa = entry["question_answer"][0]
                for k in (1, 2):
                    xy = (qa[f"object{k}_center_x"], qa[f"object{k}_center_y"])
                    text = str(qa[f"object{k}_{key}"])
                    if marker == "dots":
                        dots.append((setup, measure_dot(image, xy, DOT_COLORS[text])))
                    elif setup != "AS":  # AS text is bare, no box
                        boxes[(marker, len(text))].append(measure_box(image, xy))
    return boxes, dots


def _ours(root: Path) -> tuple[dict, list]:
    boxes: dict[tuple[str, int], list] = defaultdict(list)
    dots = []
    for line in (root / "manifest.jsonl").read_text().splitlines():
        row = ManifestRow.from_json(json.loads(line))
        if row.marker == "none" or row.setup == "as" and row.marker != "dots":
            continue
        image = _png(root / row.image)
        for obj in (row.object1, row.object2):
            text = obj.marker_text
            if row.marker == "dots":
                dots.append((row.setup, measure_dot(image, obj.marker_xy, DOT_COLORS[text])))
            else:
                boxes[(row.marker, len(text))].append(measure_box(image, obj.marker_xy))
    return boxes, dots


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> dict[str, Path]:
    """The bundled CT at 512 px in both marker profiles (shared with test_agent_markers.py)."""
    from shared_datasets import example_512_markers

    return {p: example_512_markers(tmp_path_factory, p) for p in ("mirp", "strict")}


def test_mirp_profile_draws_markers_as_mirp_published_them(generated):
    assert GenerateConfig().rules.profile == "mirp"  # the default
    pub_boxes, pub_dots = _published()
    our_boxes, our_dots = _ours(generated["mirp"])
    clean = {k: [m for m in v if m is not None] for k, v in pub_boxes.items()}
    # measurable published boxes: one-digit numbers and two-letter codes (the sample's aorta
    # boxes merge with the bright aorta and are left out)
    assert len(clean[("numbers", 1)]) >= 3 and len(clean[("letters", 2)]) >= 3
    compared = 0
    for key, theirs in clean.items():
        ours = [m for m in our_boxes.get(key, []) if m is not None]
        if not theirs or not ours:
            continue
        for mine in ours:
            assert mine.outlined is not True
            assert any(abs(mine.width - t.width) <= TOL for t in theirs), (key, mine, theirs)
            assert all(abs(mine.height - t.height) <= TOL for t in theirs), (key, mine, theirs)
            glyph = statistics.median(t.glyph_height for t in theirs)
            assert abs(mine.glyph_height - glyph) <= TOL, (key, mine, glyph)
            compared += 1
    assert compared >= 5
    assert not any(t.outlined for v in clean.values() for t in v)  # None counts as no
    theirs_d = [d for _, d in pub_dots]
    assert theirs_d and all(d is not None for d in theirs_d)
    # a ring shows on CT only (the blank page is white around any dot)
    on_ct = [d.ringed for setup, d in pub_dots if setup != "AS"]
    assert True not in on_ct and on_ct.count(False) >= 3
    assert len(our_dots) >= 4 and all(d is not None for _, d in our_dots)
    for _, mine in our_dots:
        assert mine.ringed is not True
        assert all(abs(mine.diameter - t.diameter) <= TOL for t in theirs_d), mine


def test_strict_profile_keeps_our_outlined_boxes_and_ringed_dots(generated):
    boxes, dots = _ours(generated["strict"])
    measured = [m for v in boxes.values() for m in v if m is not None]
    outlined = [m.outlined for m in measured]
    assert False not in outlined and outlined.count(True) >= 3
    on_ct = [d.ringed for setup, d in dots if setup != "as"]
    assert on_ct and False not in on_ct and on_ct.count(True) >= 3
