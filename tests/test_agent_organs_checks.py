"""The ``organs`` localizer's trust checks (test-time re-orientation, body region,
plausibility), its real training volumes (patient A's full scan, dcmqi_ct3's NRRD masks), the
masked loss and the warm start."""

from __future__ import annotations

import numpy as np
import pytest

from radspatial.agent.localizers.organs import organs, organs_checks
from radspatial.agent.pipeline.agent import Agent
from radspatial.agent.pipeline.types import Found
from radspatial.training import organs_data

SHARED = organs_data.shared_data()


def test_dihedral_round_trip_and_distinct_on_asymmetric_input():
    import torch

    x = torch.zeros(1, 1, 6, 6)
    x[0, 0, 0, 1], x[0, 0, 4, 5] = 1.0, 2.0  # no symmetry maps this onto itself
    seen = set()
    for k in range(8):
        y = organs_checks.dihedral(x, k)
        seen.add(tuple(y.flatten().tolist()))
        assert torch.equal(organs_checks.undo_dihedral(y, k), x), k
    assert len(seen) == 8
    # k = 4 is a left-right mirror: column j -> 5 - j
    assert organs_checks.dihedral(x, 4)[0, 0, 0, 4] == 1.0


def test_body_mask_keeps_the_trunk_not_a_separate_arm():
    img = np.zeros((64, 64), np.float32)
    img[10:54, 12:44] = 100.0  # trunk
    img[20:30, 20:30] = 0.0  # air inside (bowel gas, lung): a hole, filled
    img[20:40, 50:60] = 100.0  # an arm beside the body
    body = organs_checks.body_of(img)
    assert body[25, 25] and body[15, 15] and not body[30, 55]


def test_agreement_and_verdict_reasons():
    body = np.ones((40, 40), bool)
    votes = np.zeros((8, 40, 40), np.int64)
    votes[:, 10:16, 10:16] = 3  # all eight variants agree
    eight = organs_checks.Checks(variants=8, min_votes=6)
    n, spread, _ = organs_checks.agreement(votes, 3, body)
    assert n == 8 and spread < 1e-6
    assert organs_checks.verdict(n, spread, eight) is None
    votes[5:, 10:16, 10:16] = 0
    votes[5:, 30:36, 30:36] = 3  # three variants put it elsewhere
    n, spread, _ = organs_checks.agreement(votes, 3, body)
    reason = organs_checks.verdict(n, spread, eight)
    assert n == 8 and reason is not None and "disagree" in reason
    votes[3:] = 0
    n, _, _ = organs_checks.agreement(votes, 3, body)
    assert "found in 3/8" in organs_checks.verdict(n, 0.0, eight)
    four = organs_checks.Checks()  # the default: 4 copies, 3 must agree
    assert four.variants == 4 and "found in 2/4" in organs_checks.verdict(2, 0.0, four)
    assert organs_checks.verdict(3, 0.1, four) is None


def test_first_two_test_time_copies_are_identity_and_left_right_mirror():
    import torch

    x = torch.arange(12.0).reshape(1, 1, 3, 4)  # asymmetric: every entry distinct
    first, second = organs_checks.VARIANT_ORDER[:2]
    assert torch.equal(organs_checks.dihedral(x, first), x)
    assert torch.equal(organs_checks.dihedral(x, second), torch.flip(x, dims=(-1,)))
    assert sorted(organs_checks.VARIANT_ORDER) == list(range(8))


def test_fast_inference_matches_the_plain_network_on_every_copy():
    """The batched copies, class-last softmax and mapping back give what the network gives
    copy by copy (an asymmetric input: a wrong mapping back would differ)."""
    import torch

    from radspatial.agent.localizers.organs import organs

    model = organs.OrgansLocalizer().model
    rng = np.random.default_rng(0)
    image = np.zeros((200, 160), np.float32)
    image[20:180, 30:150] = 120 + 30 * rng.standard_normal((160, 120))
    image[40:90, 40:70] = 220.0  # a bright block off-centre, upper left
    pred, votes, grey = organs.predict_small(model, image, 4)
    x = torch.from_numpy(grey / 255.0)[None, None] * 2 - 1
    expect = []
    with torch.inference_mode():
        for k in organs_checks.VARIANT_ORDER[:4]:
            p = torch.softmax(model.net(organs_checks.dihedral(x, k)), dim=1)
            expect.append(organs_checks.undo_dihedral(p, k)[0])
    expect = torch.stack(expect)
    assert np.allclose(pred.probs, expect.mean(dim=0).numpy(), atol=1e-4)
    assert (votes == expect.argmax(dim=1).numpy()).mean() > 0.999


def test_plausibility_from_training_labels():
    hu = np.full((1, 64, 64), -1000.0, np.float32)
    lab = np.zeros((1, 64, 64), np.uint16)
    hu[0, 8:56, 8:56] = 40.0
    lab[0, 10:20, 10:20] = 5  # an off-centre 100 px structure
    ranges = organs_data.plausibility(hu, lab)
    assert set(ranges) == {5}
    body = organs_checks.body_of(np.where(hu[0] > -500, 100.0, 0.0))
    same = lab[0] == 5
    assert organs_checks.plausible(same, body, ranges[5]) is None
    huge = np.zeros_like(same)
    huge[10:50, 10:50] = True
    assert "area" in organs_checks.plausible(huge, body, ranges[5])


def test_agent_abstains_with_the_localizer_reason():
    class Fixed:
        name = "fixed"

        def locate(self, image, refs, context):
            ok = Found((100.0, 100.0), 0.9, "organs", {"abstain_below": 0.5})
            bad = Found((10.0, 10.0), 0.9, "organs", {"abstain_reason": "unstable: x"})
            return [ok, bad]

    result = Agent(Fixed()).answer(
        np.zeros((64, 64, 3), np.uint8), "Is the liver above the spleen?"
    )
    assert result.answer is None and "(spleen) unstable: x" in result.text
    assert result.trace["decision"]["reason"].endswith("unstable: x")


@pytest.mark.skipif(not (SHARED / "dcmqi_ct3").is_dir(), reason="needs ../shared/data")
def test_dcmqi_volume_orientation_and_unknown_pixels():
    vol = organs_data.patient_c(SHARED)
    assert vol.ct.shape == vol.seg.shape == (512, 512, 3)
    z = 1
    centre = {
        lid: np.argwhere(vol.seg[:, :, z] == lid).mean(axis=0) for lid in (5, 6, 26)
    }  # (x, y) voxel indices, canonical RAS+: +x to the patient's right, +y anterior
    assert centre[5][0] > centre[6][0]  # liver on the patient's right of the stomach (RAS: +x)
    assert centre[26][1] < centre[5][1]  # spine posterior of the liver
    unknown = vol.seg == organs_data.IGNORE
    assert unknown.any() and not unknown[0, 0, z]  # air outside the body stays background
    assert set(np.unique(vol.seg).tolist()) == {0, 5, 6, 26, organs_data.IGNORE}
    assert vol.source["liver_spine_seg.nrrd_sha256"]


def test_masked_loss_ignores_unknown_pixels():
    import torch

    from radspatial.training.organs_loss import UNKNOWN, masked_dice_ce

    y = torch.zeros(1, 1, 8, 8, dtype=torch.long)
    y[0, 0, :4] = 2
    y[0, 0, 6:] = UNKNOWN
    logits = torch.randn(1, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    other = logits.clone()
    other[:, :, 6:] = 50 * torch.randn(1, 3, 2, 8)
    assert torch.isclose(masked_dice_ce(logits, y), masked_dice_ce(other, y))
    changed = logits.clone()
    changed[:, 1, 0] += 5.0  # one class only (softmax ignores a common shift)
    assert not torch.isclose(masked_dice_ce(logits, y), masked_dice_ce(changed, y))


def test_warm_start_carries_classes_by_label_id(tmp_path):
    import torch
    from safetensors.torch import load_file

    from radspatial.agent.localizers.organs.organs import shipped_model_dir
    from radspatial.nets import unet
    from radspatial.training.organs_init import warm_start

    folder = shipped_model_dir()
    old_ids = [c["label_id"] for c in unet.read_config(folder)["classes"]]
    arch = unet.read_config(folder)["architecture"]
    new = [(0, "background"), (5, "liver"), (60000, "new"), (1, "spleen")]
    net = unet.build_model({**arch, "out_channels": len(new)})
    record = warm_start(net, folder, new)
    assert record["classes_carried"] == 2 and record["classes_new"] == 1
    old, state = load_file(str(folder / unet.WEIGHTS)), net.state_dict()
    li, si = old_ids.index(5), old_ids.index(1)
    key = next(
        k for k, v in old.items() if v.dim() == 4 and v.shape[0] == v.shape[1] == len(old_ids)
    )
    assert torch.allclose(state[key][1, 3], old[key][li, si].float())
    assert torch.allclose(state[key][3, 1], old[key][si, li].float())


@pytest.mark.skipif(not (SHARED / "dcmqi_ct3").is_dir(), reason="needs ../shared/data")
def test_organs_train_command_line_records_volumes_and_warm_start(tmp_path, capsys):
    import json

    from radspatial.training.organs_train import main

    out = tmp_path / "m"
    args = ["--out", str(out), "--n-phantoms", "0", "--real-weight", "1", "--steps", "4"]
    args += ["--batch-size", "2", "--size", "32", "--channels", "8,16", "--volumes", "c"]
    assert main([*args, "--threads", "1"]) == 0
    assert (
        main([*args, "--threads", "1", "--init-from", str(out), "--out", str(tmp_path / "w")]) == 0
    )
    record = json.loads((tmp_path / "w" / "config.json").read_text())
    assert [v["name"] for v in record["data"]["real"]["volumes"]] == ["patient_c"]
    assert {c["name"] for c in record["classes"]} == {"background", "liver", "stomach", "vertebrae"}
    copied, total = record["training"]["init"]["tensors_copied"].split("/")
    assert copied == total and record["training"]["init"]["classes_new"] == 0
    assert "--volumes c --channels 8,16" in record["training"]["command"]
    assert "--init-from" in record["training"]["command"]
    init = record["training"]["init"]  # the warm start's own data, seed and command
    first = json.loads((out / "config.json").read_text())
    assert init["init_data"]["volumes"] == first["data"]["real"]["volumes"]
    assert init["init_seed"] == 0 and init["init_training"]["command"].endswith(
        first["training"]["command"].split("organs_train ", 1)[1]
    )


def test_shipped_weights_name_every_file_behind_them_with_sha256():
    """The shipped config.json lists each training file's sha256, and those of the weights it
    was warm-started from (patient A's 30-slice scan), with seed, command, device and time."""
    from radspatial.agent.localizers.organs.organs import shipped_model_dir
    from radspatial.nets import unet

    config = unet.read_config(shipped_model_dir())
    hashes = [v for vol in config["data"]["real"]["volumes"] for k, v in vol.items() if "sha" in k]
    assert len(hashes) == 7 and all(len(h) == 64 for h in hashes)
    init = config["training"]["init"]
    assert init["init_data"]["ct_sha256"].startswith("e50c00b2")
    assert len(init["init_data"]["seg_sha256"]) == 64
    assert init["init_seed"] == 0 and init["init_training"]["device"] == "cuda"
    assert config["training"]["train_cpu_seconds"] > 0 and config["seed"] == 0


def test_core_score_keeps_a_thin_sure_structure_and_drops_an_unsure_blob():
    from radspatial.nets import unet

    probs = np.zeros((3, 64, 64), np.float32)
    labels = np.zeros((64, 64), np.int64)
    # class 1: a thin diagonal band, 3 px wide, sure on its centre line, unsure at its edges
    for i in range(8, 56):
        labels[i, i - 1 : i + 2] = 1
        probs[1, i, i - 1], probs[1, i, i], probs[1, i, i + 1] = 0.25, 0.9, 0.3
    # class 2: a compact blob off-centre, unsure everywhere
    labels[40:56, 4:20] = 2
    probs[2, 40:56, 4:20] = 0.4
    pred = unet.Prediction(probs, labels)
    thin = unet.found_for_class(pred, 1, 1, "name", organs_checks.core_prob)
    blob = unet.found_for_class(pred, 2, 2, "name", organs_checks.core_prob)
    old = unet.found_for_class(pred, 1, 1, "name")
    assert thin is not None and blob is not None and old is not None
    assert old.score < organs.MIN_SCORE  # the mean is pulled down by the edges
    assert thin.score == pytest.approx(0.6) and thin.score > organs.MIN_SCORE
    assert blob.score == pytest.approx(0.4) and blob.score < organs.MIN_SCORE
    assert thin.xy[0] == pytest.approx(31.5, abs=0.1) and blob.xy == pytest.approx((11.5, 47.5))
