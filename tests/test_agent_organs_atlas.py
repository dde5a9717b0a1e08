"""Multi-atlas label propagation (``organs+atlas``): the shipped atlas and its provenance, the
builder, orientation and geometry on an asymmetric real slice under rotations / flips, the
combination rules, the localizer through the registry and the CLI."""

from __future__ import annotations

import functools
import json

import numpy as np
import pytest

from radspatial.agent.localizers.organs import organs_atlas, organs_checks
from radspatial.agent.localizers.organs.organs import shipped_model_dir
from radspatial.agent.pipeline.types import Context, Found, Ref, create_localizer, list_localizers
from radspatial.core.io import sha256_file
from radspatial.imaging.slices import window_to_uint8
from radspatial.training import organs_atlas as build_atlas
from radspatial.training import organs_data

SHARED = organs_data.shared_data()
A_CT_SHA = "dbd3ae6d614d1d7ef3a46925c30c70038ed52da6b37fdd6afdc7b9b71387e3e1"


def test_the_shipped_atlas_is_small_and_records_its_data():
    folder = shipped_model_dir()
    meta = json.loads((folder / "atlas.json").read_text())
    assert (folder / "atlas.npz").stat().st_size < 2_000_000
    assert meta["npz_sha256"] == sha256_file(folder / "atlas.npz")
    assert meta["volumes"][0]["ct_sha256"] == A_CT_SHA and meta["slices"] == 115
    atlas = organs_atlas.load_atlas(str(folder))
    assert atlas.grey.shape == atlas.labels.shape == (115, organs_atlas.SIZE, organs_atlas.SIZE)
    # patient C (dcmqi) labels only liver, stomach and vertebrae: the rest is not "absent"
    assert set(np.nonzero(atlas.known[-1])[0].tolist()) == {0, 5, 6, 26}
    assert atlas.known[0, 52] and not atlas.known[-1, 52]  # aorta: labelled on A only


def test_the_builder_writes_a_loadable_atlas_of_patient_c(tmp_path):
    arrays, meta = build_atlas.build(("c",), SHARED)
    build_atlas.write(tmp_path, arrays, meta, "test")
    atlas = organs_atlas.load_atlas(str(tmp_path))
    assert atlas.meta["slices"] == 3 and atlas.meta["npz_sha256"] == sha256_file(
        tmp_path / "atlas.npz"
    )
    assert set(np.unique(atlas.labels).tolist()) <= {0, 5, 6, 26, organs_atlas.UNKNOWN}


@functools.cache
def _patient_a_slice(z: int = 95):
    """Patient A's slice ``z`` at 128 px (grey at W400/L40, label ids) in the display frame."""
    vol = organs_data.patient_a(SHARED)
    hu = organs_data.render_hu(vol.ct, z, vol.spacing, 128)
    lab = organs_data.render_lab(vol.seg, z, vol.spacing, 128)
    return window_to_uint8(hu, 400, 40), lab


def _centre(mask: np.ndarray) -> tuple[float, float]:
    ys, xs = np.nonzero(mask)
    return float(xs.mean()), float(ys.mean())


@pytest.mark.parametrize("k", [0, 4, 1, 6])  # identity, left-right flip, quarter turn, flip+half
def test_the_liver_lands_on_its_side_under_each_orientation(k):
    """The liver lies on one side of the body only: a wrong orientation, flip or box mapping
    would put the fused centre on the other side."""
    import torch

    grey, lab = _patient_a_slice()
    grey = organs_checks.dihedral(torch.from_numpy(grey.copy()), k).numpy()
    lab = organs_checks.dihedral(torch.from_numpy(lab.astype(np.int32)), k).numpy()
    body = organs_checks.body_of(grey)
    folder = str(shipped_model_dir())
    m = organs_atlas.match(folder, grey, body, np.zeros_like(lab), organs_atlas.AtlasConfig())
    assert m is not None and m.orientation == k
    for label_id in (5, 1):  # liver, spleen
        found = organs_atlas.fuse(m, folder, label_id)
        truth = _centre(lab == label_id)
        assert found is not None and found.support >= 0.6
        assert np.hypot(found.xy[0] - truth[0], found.xy[1] - truth[1]) < 6, (label_id, found)


def test_the_combination_rules():
    rules = organs_atlas.AtlasRules()
    extra = {"label_id": 5, "class": 5, "via": "name"}
    net = Found((50.0, 50.0), 0.9, "organs", {"checks": {}})
    near = organs_atlas.AtlasFound((52.0, 50.0), 1.0, 0.05, 5)
    far = organs_atlas.AtlasFound((80.0, 50.0), 1.0, 0.05, 5)
    absent = organs_atlas.AtlasFound((float("nan"),) * 2, 0.0, float("inf"), 5)
    assert "abstain_reason" not in organs_atlas.combine(net, near, 50.0, rules, extra).details
    reason = organs_atlas.combine(net, far, 50.0, rules, extra).details["abstain_reason"]
    assert reason.startswith("atlas disagrees: centres 0.60 body radii")
    assert (
        "no fused atlas slice"
        in organs_atlas.combine(net, absent, 50, rules, extra).details["abstain_reason"]
    )
    assert organs_atlas.combine(net, None, 50.0, rules, extra) is net  # atlas does not label it
    taken = organs_atlas.combine(None, near, 50.0, rules, extra)
    assert taken.method == "atlas" and taken.xy == near.xy and taken.score == 1.0
    weak = organs_atlas.AtlasFound((52.0, 50.0), 0.4, 0.05, 5)
    assert organs_atlas.combine(None, weak, 50.0, rules, extra) is None
    scattered = organs_atlas.AtlasFound((52.0, 50.0), 1.0, 0.4, 5)
    assert organs_atlas.combine(None, scattered, 50.0, rules, extra) is None


def test_the_localizer_gives_the_atlas_opinion_in_image_pixels():
    from PIL import Image

    assert "organs+atlas" in list_localizers()
    path = SHARED / "mirp_sample" / "RQ1" / "images" / "amos_img3_slice68.png"
    image = np.asarray(Image.open(path).convert("RGB"))
    loc = create_localizer("organs+atlas")
    spleen, aorta = loc.locate(image, [Ref(name="spleen"), Ref(name="aorta")], Context())
    assert spleen is not None and spleen.details["atlas"]["support"] > 0
    assert spleen.xy[0] > image.shape[1] / 2  # the spleen on the image's right (patient left)
    if aorta is not None and aorta.method == "atlas":
        assert len(aorta.details["bbox"]) == 4 and aorta.details["atlas"]["slices"] >= 1


def test_a_model_folder_without_an_atlas_is_one_clear_error(tmp_path):
    from radspatial.agent.localizers.organs.organs import OrgansLocalizer

    with pytest.raises(ValueError, match="no atlas.npz"):
        OrgansLocalizer(shipped_model_dir(), atlas=tmp_path)


def test_agent_cli_with_the_atlas_localizer(tmp_path):
    from PIL import Image

    from radspatial.cli import main

    grey, _ = _patient_a_slice()
    path = tmp_path / "slice.png"
    Image.fromarray(np.repeat(grey[:, :, None], 3, axis=2)).resize((512, 512)).save(path)
    args = ["agent", "--image", str(path), "--question", "Is the liver to the left of the spleen?"]
    assert main([*args, "--localizer", "organs+atlas", "--trace", str(tmp_path / "t.json")]) == 0
    trace = json.loads((tmp_path / "t.json").read_text())
    assert trace["localizer"] == "organs+atlas"
    assert all("atlas" in f["details"] for f in trace["found"] if f)


def test_the_atlas_build_command_line(tmp_path, capsys):
    assert build_atlas.main(["--out", str(tmp_path / "atlas"), "--volumes", "c"]) == 0
    assert "3 atlas slices from c" in capsys.readouterr().out
    meta = json.loads((tmp_path / "atlas" / "atlas.json").read_text())
    assert meta["command"].startswith("python -m radspatial.training.organs_atlas")
    assert meta["volumes"][0]["labelled_ids"] == [0, 5, 6, 26]


def _register_by_autograd(query, moving, cfg):
    """The registration as it was written before it skipped autograd (the reference)."""
    import torch
    import torch.nn.functional as F

    k, size = len(moving), (len(moving), 1, organs_atlas.SIZE, organs_atlas.SIZE)
    fixed = torch.from_numpy(query / 255.0)[None, None].expand(size)
    mov = torch.from_numpy(np.ascontiguousarray(moving) / 255.0)[:, None].float()
    theta = torch.eye(2, 3).repeat(k, 1, 1).requires_grad_(True)
    opt = torch.optim.Adam([theta], lr=cfg.lr)
    for _ in range(cfg.steps):
        grid = F.affine_grid(theta, list(size), align_corners=False)
        loss = ((F.grid_sample(mov, grid, align_corners=False) - fixed) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return F.affine_grid(theta.detach(), list(size), align_corners=False)


def test_the_registration_s_gradient_is_autograd_s_to_the_bit():
    """An L-shaped query and 3 moving copies shifted and scaled off it: the fit moves (the
    grids are not the identity's) and every grid equals autograd's bit for bit."""
    import torch

    n = organs_atlas.SIZE
    query = np.zeros((n, n), np.float32)
    query[10:50, 12:22] = 200.0  # an L: no flip or half turn maps it onto itself
    query[40:50, 12:45] = 120.0
    moving = np.stack([np.roll(query, (2 * i + 1, -i), (0, 1)) for i in range(3)])
    moving[2] = np.pad(query[::2, ::2], ((8, 24), (10, 22)))  # half the size, elsewhere
    cfg = organs_atlas.AtlasConfig(steps=10)
    ours = organs_atlas.register(query, moving, cfg)
    assert torch.equal(ours, _register_by_autograd(query, moving, cfg))
    identity = organs_atlas.register(query, moving, organs_atlas.AtlasConfig(steps=0))
    assert float((ours - identity).abs().amax(dim=(1, 2, 3)).min()) > 1e-3  # every one moved
