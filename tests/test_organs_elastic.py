"""Elastic deformation of the ``organs`` training augmentation (synthetic, fast)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from radspatial.training.organs_augment import augment, elastic_field, one_cycle_lr  # noqa: E402

S = 64


def _blocks() -> tuple:
    hu = torch.full((8, S, S), -1000.0)
    lab = torch.zeros((8, S, S), dtype=torch.uint8)
    hu[:, 10:22, 38:56], lab[:, 10:22, 38:56] = 300.0, 3  # image right, top
    hu[:, 40:58, 6:14], lab[:, 40:58, 6:14] = 300.0, 5  # image left, bottom
    return hu, lab


def _centre(y: torch.Tensor, value: int) -> torch.Tensor:
    return (y == value).nonzero().float().mean(0)


def test_elastic_field_is_smooth_and_bounded():
    gen = torch.Generator().manual_seed(1)
    field = elastic_field(4, S, 6.0, gen, "cpu")
    assert field.shape == (4, S, S, 2)
    px = field * S / 2  # grid units -> pixels
    assert float(px.abs().max()) <= 6.0 + 1e-4 and float(px.abs().max()) > 1.0
    assert float((px[:, 1:] - px[:, :-1]).abs().max()) < 1.0  # neighbours move alike


def test_elastic_moves_image_and_labels_together_and_keeps_sides():
    hu, lab = _blocks()
    kw = {"label_hu_jitter": 0.0, "wide": 0.0}
    # same seed: the affine view is drawn before the field, so both runs share it
    x0, y0 = augment(hu, lab, torch.Generator().manual_seed(3), **kw)
    x1, y1 = augment(hu, lab, torch.Generator().manual_seed(3), elastic=1.0, elastic_px=4, **kw)
    assert y1.dtype == torch.long and set(torch.unique(y1).tolist()) <= {0, 3, 5}
    assert not torch.equal(y0, y1)  # the field did something
    for k in range(8):
        bright, labelled = x1[k, 0] > 0, y1[k, 0] > 0
        assert (bright & labelled).sum() / labelled.sum() > 0.8, k  # image follows labels
        for value in (3, 5):  # each block stays where the affine view put it, +- the field
            shift = (_centre(y1[k, 0], value) - _centre(y0[k, 0], value)).abs().max()
            assert float(shift) <= 4.5, (k, value)
        # the asymmetric layout keeps its sides: block 3 vs block 5 in the same direction
        d0 = _centre(y0[k, 0], 3) - _centre(y0[k, 0], 5)
        d1 = _centre(y1[k, 0], 3) - _centre(y1[k, 0], 5)
        assert bool(((d0 > 0) == (d1 > 0)).all()), k


def test_one_cycle_lr_warms_up_then_anneals():
    assert one_cycle_lr(1e-3, 0.0, 0.1) == pytest.approx(4e-5)
    assert one_cycle_lr(1e-3, 0.1, 0.1) == pytest.approx(1e-3)
    assert one_cycle_lr(1e-3, 1.0, 0.1) < 1e-7
    assert one_cycle_lr(1e-3, 0.5, 0.1) > one_cycle_lr(1e-3, 0.9, 0.1)
