"""Issue #34 round 6: contrast phases drawn on the real training CT through its labels
(``organs_train --enhance``): arteries up to CT-angiography brightness, the other enhancing
structures to a portal venous phase, everything else untouched; off, the recipe's random
stream is the shipped one."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from radspatial.training.organs_augment import (  # noqa: E402
    ARTERIAL,
    VENOUS,
    augment,
    contrast_phase,
    phase_table,
)

NAMES = ["background", "aorta", "liver", "vertebrae", "kidney_left", "autochthon_left"]


def _scene(b: int = 64) -> tuple:
    lab = torch.zeros(b, 32, 32, dtype=torch.uint8)
    lab[:, 4:10, 4:10] = 1  # aorta
    lab[:, 12:24, 4:20] = 2  # liver
    lab[:, 26:30, 10:20] = 3  # vertebrae
    lab[:, 4:10, 22:28] = 4  # kidney
    lab[:, 14:20, 24:30] = 5  # muscle
    lab[:, 0, :] = 255  # unknown (a partially labelled patient)
    hu = torch.full(lab.shape, 40.0)
    return hu, lab


def test_the_phase_table_follows_the_synthesis_recipes_intensity_classes():
    base, artery = phase_table(NAMES)
    assert base[1] == 130.0 and artery[1]  # aorta: an artery
    assert base[2] == 55.0 and not artery[2]  # liver
    assert base[4] == 120.0 and not artery[4]  # kidney
    assert base[0] == base[3] == base[5] == base[255] == 0.0  # background, bone, muscle, unknown


def test_a_drawn_phase_brightens_only_enhancing_structures_within_their_ranges():
    hu, lab = _scene()
    gen = torch.Generator().manual_seed(0)
    out = contrast_phase(hu, lab, gen, 1.0, phase_table(NAMES))
    gain = out - hu
    aorta, liver, kidney = gain[:, 6, 6], gain[:, 15, 10], gain[:, 6, 24]
    assert aorta.min() >= 0 and aorta.max() <= ARTERIAL[1] * 130 * 1.2 + 1e-3
    assert aorta.max() > 200  # some samples reach CT angiography (aorta >= 240 HU)
    assert liver.max() <= VENOUS[1] * 55 * 1.2 + 1e-3 and kidney.max() > 60
    for y, x in ((28, 12), (16, 26), (31, 0), (0, 5)):  # bone, muscle, background, unknown
        assert torch.all(gain[:, y, x] == 0)
    # one phase per sample over a structure (texture kept: a constant offset inside it)
    assert torch.allclose(gain[:, 4:10, 4:10].amin((1, 2)), gain[:, 4:10, 4:10].amax((1, 2)))


def test_the_share_decides_how_many_samples_get_a_phase():
    hu, lab = _scene(200)
    gen = torch.Generator().manual_seed(1)
    out = contrast_phase(hu, lab, gen, 0.5, phase_table(NAMES))
    enhanced = (out[:, 6, 6] > hu[:, 6, 6]).float().mean()
    assert 0.35 < float(enhanced) < 0.65


def test_no_phase_keeps_the_shipped_recipes_random_stream():
    hu, lab = _scene(4)
    plain = augment(hu, lab, torch.Generator().manual_seed(3), 40.0, 0.5)
    off = augment(
        hu, lab, torch.Generator().manual_seed(3), 40.0, 0.5, enhance=0.0, phase=phase_table(NAMES)
    )
    assert torch.equal(plain[0], off[0]) and torch.equal(plain[1], off[1])
    on = augment(
        hu, lab, torch.Generator().manual_seed(3), 40.0, 0.5, enhance=1.0, phase=phase_table(NAMES)
    )
    assert not torch.equal(plain[0], on[0])
