"""The shipped ``organs`` localizer, the ``auto`` pipeline (plain ``agent``), abstention, clipped
markers, the overlay, ``agent train`` through the CLI and ``serve`` with ``"model": "agent"``."""

from __future__ import annotations

import base64
import io
import json
import subprocess
import sys

import httpx
import numpy as np
import pytest
from PIL import Image

from radspatial.agent.localizers.organs.organs import OrgansLocalizer, shipped_model_dir
from radspatial.agent.overlay import draw_overlay
from radspatial.agent.pipeline.agent import Agent
from radspatial.agent.pipeline.types import Context, Found, Ref, create_localizer, list_localizers
from radspatial.agent.server.server import build_agents, make_server
from radspatial.cli import bundled_example
from radspatial.core.io import sha256_file
from radspatial.core.labels import letter_code
from radspatial.imaging.markers import Mark, draw_marks
from radspatial.imaging.slices import (
    VARIANTS,
    Geometry,
    Variant,
    render_gray,
    render_labels,
    to_display,
)
from radspatial.imaging.volumes import Case, load_case
from radspatial.nets.unet import read_config

CTX = Context()
TARGETS = ("liver", "spleen", "kidney_left", "kidney_right", "aorta")


@pytest.fixture(scope="module")
def volume():
    ct, seg = bundled_example()
    return load_case(Case("example_ct_sm", ct, seg, "totalsegmentator"))


def _slice(volume, z: int, size: int = 256) -> tuple[np.ndarray, np.ndarray]:
    geom = Geometry.for_slice(volume.ct.shape[:2], volume.spacing[:2], size)
    gray = render_gray(to_display(volume.ct[:, :, z]), geom, (400.0, 40.0))
    lab = render_labels(to_display(volume.seg[:, :, z]), geom)
    return np.repeat(gray[:, :, None], 3, axis=2), lab


def _best_slice(volume) -> int:
    """The slice where all five targets are largest together."""
    ids = [k for k, n in volume.table.names.items() if n in TARGETS]
    areas = [min((volume.seg[:, :, z] == i).sum() for i in ids) for z in range(volume.seg.shape[2])]
    return int(np.argmax(areas))


def test_registry_and_shipped_weights_are_recorded():
    assert {"organs", "auto", "markers"} <= set(list_localizers())
    folder = shipped_model_dir()
    config = read_config(folder)
    assert config["format"] == "radspatial-organs"
    assert config["weights"]["sha256"] == sha256_file(folder / "model.safetensors")
    assert (folder / "model.safetensors").stat().st_size < 5 * 2**20
    assert config["seed"] == 0 and "organs_train" in config["training"]["command"]
    assert config["data"]["held_out_never_used"]
    names = {c["name"] for c in config["classes"]}
    assert set(TARGETS) <= names


@pytest.mark.parametrize("code", VARIANTS)
def test_shipped_weights_find_the_organs_in_every_variant(volume, code):
    """On the bundled CT (a training volume: this checks loading and orientation handling,
    not generalisation), each target within 12 px of the mask centre of the 256 px image."""
    image, lab = _slice(volume, _best_slice(volume))
    variant = Variant(code)
    shown, shown_lab = variant.apply_image(image), variant.apply_image(lab)
    loc = create_localizer("organs")
    found = loc.locate(shown, [Ref(name=n) for n in TARGETS], CTX)
    for name, f in zip(TARGETS, found, strict=True):
        label_id = next(k for k, n in volume.table.names.items() if n == name)
        ys, xs = np.nonzero(shown_lab == label_id)
        assert f is not None, (code, name)
        assert np.hypot(f.xy[0] - xs.mean(), f.xy[1] - ys.mean()) < 12, (code, name, f.xy)
        assert f.method == "organs" and f.details["area_px"] > 0


def test_localizer_contract_names_markers_unknown(volume):
    image, _ = _slice(volume, _best_slice(volume))
    loc = OrgansLocalizer()
    refs = [
        Ref(name="liver"),
        Ref(marker="numbers", text="5"),  # liver's TotalSegmentator id
        Ref(marker="letters", text=letter_code(5)),  # liver by letters
        Ref(marker="dots", text="red"),  # a colour names no structure
        Ref(name="unicorn_gland"),
        Ref(marker="numbers", text="27"),  # vertebra L5: grouped into "vertebrae"
    ]
    by_name, by_number, by_letters, dot, unknown, vertebra = loc.locate(image, refs, CTX)
    assert by_name is not None and by_number is not None and by_letters is not None
    assert by_name.xy == by_number.xy == by_letters.xy
    assert dot is None and unknown is None
    assert vertebra is not None and vertebra.details["via"] == "marker-number"
    assert loc.locate(image, [Ref(name="unicorn_gland")], CTX) == [None]


def test_blank_image_abstains():
    agent = Agent("organs")
    for fill in (0, 255):
        blank = np.full((512, 512, 3), fill, np.uint8)
        result = agent.answer(blank, "Is the liver to the left of the spleen?")
        assert result.answer is None, result.trace
        assert result.text.startswith("abstain:")
        assert "not found" in result.text or "low confidence" in result.text


def test_low_confidence_and_margin_abstain_with_reason():
    class Fixed:
        name = "fixed"

        def __init__(self, *found):
            self.found = list(found)

        def locate(self, image, refs, context):
            return self.found

    low = Found((10.0, 10.0), 0.2, "organs", {"abstain_below": 0.5})
    ok = Found((100.0, 100.0), 0.9, "organs", {"abstain_below": 0.5})
    image = np.zeros((512, 512, 3), np.uint8)  # the margin is 10 px at 512 px
    result = Agent(Fixed(low, ok)).answer(image, "Is the liver above the spleen?")
    assert result.answer is None and "low confidence 0.20 < 0.5" in result.text
    near = Found((100.0, 95.0), 0.9, "organs", {"abstain_below": 0.5})
    result = Agent(Fixed(ok, near)).answer(image, "Is the liver above the spleen?")
    assert result.answer is None and "margin" in result.text


def test_auto_uses_markers_for_marker_refs_and_organs_for_names(volume):
    image, lab = _slice(volume, _best_slice(volume), size=512)
    ys, xs = np.nonzero(lab == 1)  # spleen
    marked = draw_marks(image, [Mark("numbers", "52", (60.0, 60.0))])
    loc = create_localizer("auto")
    by_marker, by_name = loc.locate(
        marked, [Ref(marker="numbers", text="52"), Ref(name="spleen")], CTX
    )
    assert by_marker is not None and by_marker.method == "glyph-match"
    assert abs(by_marker.xy[0] - 60) < 3 and abs(by_marker.xy[1] - 60) < 3
    assert by_name is not None and by_name.method == "organs"
    assert np.hypot(by_name.xy[0] - xs.mean(), by_name.xy[1] - ys.mean()) < 20


def _clipped(kind: str, text: str, edge: str, offset: int, size: int) -> tuple[np.ndarray, tuple]:
    """A boxed marker drawn as ``draw_marks`` draws it, but centred ``offset`` px inside
    ``edge`` without its clamping, so part of it may lie outside the image."""
    from PIL import ImageDraw

    from radspatial.imaging.markers import _font, _scaled, text_box_size

    pil = Image.new("RGB", (size, size), (60, 60, 60))
    mid = size // 2
    cx, cy = {
        "top": (mid, offset),
        "bottom": (mid, size - 1 - offset),
        "left": (offset, mid),
        "right": (size - 1 - offset, mid),
    }[edge]
    w, h = text_box_size(text, size)
    draw = ImageDraw.Draw(pil)
    box = (cx - w // 2, cy - h // 2, cx - w // 2 + w, cy - h // 2 + h)
    draw.rounded_rectangle(box, radius=_scaled(4, size), fill="white", outline="black")
    draw.text((cx, cy), text, fill="black", font=_font(size), anchor="mm")
    return np.asarray(pil), (cx, cy)


@pytest.mark.parametrize("edge", ["top", "bottom", "left", "right"])
@pytest.mark.parametrize("size", [512, 256])
def test_markers_clipped_at_or_touching_each_edge_are_read(edge, size):
    from radspatial.imaging.markers import text_box_size

    loc = create_localizer("markers")
    for kind, text in (("numbers", "52"), ("letters", "BZ")):
        w, h = text_box_size(text, size)
        half = (h if edge in ("top", "bottom") else w) // 2
        # clipped: the held-out miss (a number centred 5 px from the top edge, glyphs cut in
        # half) and, across left/right, the box cut 3 px into its padding (a glyph cut off
        # sideways is gone: no reader can tell "BZ" from "Z"); then a box touching the edge
        clipped = 5 * size // 512 if edge in ("top", "bottom") else half - 3
        for offset in (clipped, half):
            image, xy = _clipped(kind, text, edge, offset, size)
            found = loc.locate(image, [Ref(marker=kind, text=text)], CTX)[0]
            assert found is not None, (edge, size, kind, offset)
            assert np.hypot(found.xy[0] - xy[0], found.xy[1] - xy[1]) < 8, (edge, found.xy, xy)


def test_overlay_prints_question_outlines_and_keeps_labels_inside(volume):
    image, _ = _slice(volume, _best_slice(volume), size=512)
    question = "Is the liver to the left of the spleen?"
    result = Agent("organs").answer(image, question)
    assert result.trace["found"][0]["details"]["bbox"]
    pil = draw_overlay(image, result)
    out = np.asarray(pil)
    assert out.shape == image.shape
    assert (out[-3:, :, :] == 0).mean() > 0.5  # the question's banner at the bottom
    assert (out[:3, :, :] == 0).mean() > 0.5  # the verdict's banner at the top
    # a label near the right edge is moved inside: its plate is drawn, nothing raises
    fake = {
        **result.trace,
        "found": [
            {"xy": [505.0, 250.0], "score": 0.9, "method": "organs", "details": {}},
            {"xy": [5.0, 505.0], "score": 0.9, "method": "organs", "details": {}},
        ],
    }
    pil = draw_overlay(image, type(result)(1, "1", fake))
    assert np.asarray(pil).shape == image.shape


def test_agent_cli_default_is_the_auto_pipeline(tmp_path, volume):
    image, _ = _slice(volume, _best_slice(volume), size=512)
    path = tmp_path / "slice.png"
    Image.fromarray(image).save(path)
    res = subprocess.run(
        [sys.executable, "-m", "radspatial.cli", "agent", "--image", str(path), "--question",
         "Is the liver to the left of the spleen?", "--overlay", str(tmp_path / "o.png"),
         "--trace", str(tmp_path / "t.json")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("answer: yes"), res.stdout[:300]
    trace = (tmp_path / "t.json").read_text()  # the trace goes to --trace (or --json), only
    assert '"localizer": "auto"' in trace and '"localizer"' not in res.stdout
    assert (tmp_path / "o.png").is_file()


def test_serve_answers_model_agent(volume):
    image, _ = _slice(volume, _best_slice(volume), size=512)
    buf = io.BytesIO()
    Image.fromarray(image).save(buf, format="PNG")
    url = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()
    with make_server(agents=build_agents(("auto", "markers")), default_model="agent") as srv:
        models = [m["id"] for m in httpx.get(f"{srv.url}/models", timeout=120).json()["data"]]
        assert models == ["agent", "agent:markers"]
        body = {
            "model": "agent",
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "Is the liver to the left of the spleen?"},
                        {"type": "image_url", "image_url": {"url": url}},
                    ],
                }
            ],
        }
        response = httpx.post(f"{srv.url}/chat/completions", json=body, timeout=600)
        assert response.status_code == 200, response.text
        reply = response.json()
        assert reply["model"] == "agent"
        assert reply["choices"][0]["message"]["content"] == "1"
        assert reply["radspatial_trace"]["localizer"] == "auto"


def test_eval_spec_agent_is_the_auto_pipeline():
    from radspatial.models.base import create_backend

    backend = create_backend("agent")
    assert backend.describe()["localizer"] == "auto" and backend.describe()["spec"] == "agent"
    assert backend.describe()["margin_reference_px"] == 512.0  # the margin scales per image
    assert create_backend("agent:markers").describe()["localizer"] == "markers"


def test_serve_command_defaults_to_model_agent(volume):
    """``radspatial serve`` as the README runs it: plain ``agent`` listed first and answering."""
    from served import serve_cli

    image, _ = _slice(volume, _best_slice(volume), size=512)
    buf = io.BytesIO()
    Image.fromarray(image).save(buf, format="PNG")
    url = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()
    with serve_cli() as (base, _):
        models = httpx.get(f"{base}/models", timeout=60).json()
        # oracles are listed only when served (--localizer mask)
        assert [m["id"] for m in models["data"]] == ["agent", "agent:markers"]
        text = "Is the spleen to the right of the liver?"
        content = [{"type": "text", "text": text}, {"type": "image_url", "image_url": {"url": url}}]
        body = {"model": "agent", "messages": [{"role": "user", "content": content}]}
        # the first call loads the network: minutes on a loaded machine, never a speed check
        reply = httpx.post(f"{base}/chat/completions", json=body, timeout=600).json()
        assert reply["choices"][0]["message"]["content"] == "1", reply


def test_organs_augmentation_moves_image_and_labels_together():
    import torch

    from radspatial.training.organs_train import augment

    hu = torch.full((8, 64, 64), -1000.0)
    lab = torch.zeros((8, 64, 64), dtype=torch.uint8)
    hu[:, 8:20, 40:56], lab[:, 8:20, 40:56] = 300.0, 3  # an off-centre, asymmetric block
    hu[:, 44:60, 6:12], lab[:, 44:60, 6:12] = 300.0, 5
    x, y = augment(hu, lab, torch.Generator().manual_seed(0), label_hu_jitter=0.0)
    assert x.shape == (8, 1, 64, 64) and y.shape == (8, 1, 64, 64)
    for k in range(8):
        bright, labelled = x[k, 0] > 0, y[k, 0] > 0
        overlap = (bright & labelled).sum() / max(int(labelled.sum()), 1)
        assert overlap > 0.8, k
        assert set(torch.unique(y[k]).tolist()) <= {0, 3, 5}
    centres = {tuple((y[k, 0] == 3).nonzero().float().mean(0).round().tolist()) for k in range(8)}
    assert len(centres) > 3  # the samples really differ in view


def test_organs_train_tiny_run_writes_a_loadable_recorded_model(tmp_path):
    from radspatial.training.organs_train import OrgansConfig, train_organs

    config = OrgansConfig(
        n_phantoms=1, phantom_shape=(64, 64, 16), size=64, steps=4, batch_size=2, threads=1
    )
    record = train_organs(tmp_path / "m", config, progress=False)
    assert record["weights"]["sha256"] == sha256_file(tmp_path / "m" / "model.safetensors")
    assert record["seed"] == 0 and record["data"]["phantoms"]["n"] == 1
    volumes = record["data"]["real"]["volumes"]
    assert [v["name"] for v in volumes] == ["patient_a", "patient_c"]
    assert volumes[0]["ct_sha256"].startswith("dbd3ae6d") and volumes[0]["slices"] == 112
    assert volumes[1]["slices"] == 3 and record["training"]["train_cpu_seconds"] > 0
    written = json.loads((tmp_path / "m" / "config.json").read_text())
    assert written["data"]["real"]["plausibility"]["5"]["n_slices"] > 10  # liver
    loc = OrgansLocalizer(tmp_path / "m")
    image = np.zeros((128, 128, 3), np.uint8)
    image[32:96, 32:96] = 120
    found = loc.locate(image, [Ref(name="liver"), Ref(name="unicorn_gland")], CTX)
    assert len(found) == 2 and found[1] is None


def test_patient_b_trains_only_when_named_and_config_says_what_was_held_out(tmp_path):
    from radspatial.training import organs_data
    from radspatial.training.organs_train import OrgansConfig, train_organs

    assert organs_data.held_out(organs_data.DEFAULT_VOLUMES) == [
        "totalseg_example/ct_dicom",
        "gstt_thorax",
        "mirp_sample",
    ]
    with pytest.raises(ValueError, match="unknown training volume"):
        organs_data.training_volumes(None, ("a", "z"))
    config = OrgansConfig(
        n_phantoms=0, size=64, steps=2, batch_size=2, threads=1, volumes=("b", "c"), enhance=0.5
    )
    record = train_organs(tmp_path / "m", config, progress=False)
    assert "--enhance 0.5" in record["training"]["command"]  # the drawn contrast phases
    volumes = record["data"]["real"]["volumes"]
    assert [v["name"] for v in volumes] == ["patient_b", "patient_c"]
    assert volumes[0]["seg_sha256"].startswith("98af7f65") and volumes[0]["slices"] == 20
    assert len([k for k in volumes[0] if k.startswith("ct_") and k.endswith("_sha256")]) == 20
    assert record["data"]["held_out_never_used"] == ["gstt_thorax", "mirp_sample"]
    # the DICOM (LPS on disk) is read RAS+ like its NIfTI labels: the liver lies at larger x
    # (the patient's right) than the spleen, and their labels sit on soft tissue, not air
    b = organs_data.patient_b(organs_data.shared_data())
    liver, spleen = (np.argwhere(b.seg == i)[:, 0].mean() for i in (5, 1))
    assert liver > spleen + 100
    assert np.median(b.ct[b.seg == 5]) > 0
