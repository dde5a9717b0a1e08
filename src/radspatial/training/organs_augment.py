"""Augmentation and learning-rate schedule of ``organs`` training (``organs_train``).

:func:`augment`: per sample, in one resampling, one of the 8 rotation / flip variants, a small
extra rotation, zoom and shift, optionally a smooth random displacement field
(:func:`elastic_field`: elastic deformation; bilinear for the image, nearest for the labels,
so both move together); a HU offset per structure; on a share of the samples a drawn contrast
phase (:func:`phase_table`: label-guided enhancement of the real image, its texture kept);
then display window, gamma, blur, noise and 8-bit quantisation. :func:`one_cycle_lr`:
warm-up then cosine decay by training fraction.
"""

from __future__ import annotations

import math
from typing import Any

ARTERIAL = (0.0, 2.2)  # enhancement factor of arteries: unenhanced (patient A) to CTA
VENOUS = (0.0, 1.3)  # of the other enhancing structures: unenhanced to late portal venous


def augment(
    hu: Any,
    lab: Any,
    gen: Any,
    label_hu_jitter: float = 0.0,
    wide: float = 0.0,
    elastic: float = 0.0,
    elastic_px: float = 6.0,
    enhance: float = 0.0,
    phase: tuple[Any, Any] | None = None,
) -> tuple[Any, Any]:
    """(B, S, S) HU and class maps -> network input (B, 1, S, S) in [-1, 1] and (B, 1, S, S).

    ``elastic``: share of samples whose sampling grid also gets a smooth random displacement
    (:func:`elastic_field`); it joins the affine map in the same resampling, bilinear for the
    image and nearest for the labels, so both move together and labels stay class indices.
    ``enhance``: share of samples given a contrast phase from ``phase`` (:func:`phase_table`):
    arteries gain a x their typical enhancement, a ~ U(0, 2.2) (unenhanced to CT
    angiography), every other enhancing structure v x its own, v ~ U(0, 1.3) (to a late
    portal venous phase), each structure x U(0.6, 1.2)."""
    import torch
    import torch.nn.functional as F

    b, dev = hu.shape[0], hu.device

    def u(lo: float, hi: float) -> torch.Tensor:
        return lo + (hi - lo) * torch.rand(b, device=dev, generator=gen)

    if label_hu_jitter > 0:  # one HU offset per structure and sample, background kept
        offsets = label_hu_jitter * torch.randn(b, 256, device=dev, generator=gen)
        offsets[:, 0] = 0
        offsets[:, 255] = 0  # unknown pixels (partially labelled volumes)
        hu = hu.float() + torch.gather(offsets, 1, lab.long().flatten(1)).view(hu.shape)
    if enhance > 0 and phase is not None:
        hu = contrast_phase(hu, lab, gen, enhance, phase)
    turns = torch.randint(0, 4, (b,), device=dev, generator=gen).float()
    flip = torch.where(torch.rand(b, device=dev, generator=gen) < 0.5, -1.0, 1.0)
    angle = turns * (math.pi / 2) + u(-0.2, 0.2)
    zoom = torch.exp(u(math.log(0.75), math.log(1.35)))
    cos, sin = torch.cos(angle) / zoom, torch.sin(angle) / zoom
    theta = torch.stack(
        [
            torch.stack([cos * flip, -sin, u(-0.12, 0.12)], 1),
            torch.stack([sin * flip, cos, u(-0.12, 0.12)], 1),
        ],
        1,
    )
    grid = F.affine_grid(theta, (b, 1, *hu.shape[-2:]), align_corners=False)
    if elastic > 0:
        on = (torch.rand(b, device=dev, generator=gen) < elastic).float()[:, None, None, None]
        grid = grid + on * elastic_field(b, hu.shape[-1], elastic_px, gen, dev)
    x = F.grid_sample(hu[:, None].float() + 1024, grid, align_corners=False) - 1024
    y = F.grid_sample(lab[:, None].float(), grid, mode="nearest", align_corners=False).long()
    return _display(x, gen, wide, u), y


def contrast_phase(hu: Any, lab: Any, gen: Any, share: float, phase: tuple[Any, Any]) -> Any:
    """(B, S, S) HU with a contrast phase drawn on a ``share`` of the samples (``augment``'s
    ``enhance``): per sample a ~ U(ARTERIAL), v ~ U(VENOUS); per structure x U(0.6, 1.2)."""
    import torch

    b, dev = hu.shape[0], hu.device
    base, artery = phase  # (256,) HU per class index, (256,) bool
    on = (torch.rand(b, device=dev, generator=gen) < share).float()
    draw = torch.rand(2, b, device=dev, generator=gen)
    arterial = (ARTERIAL[0] + (ARTERIAL[1] - ARTERIAL[0]) * draw[0]) * on
    venous = (VENOUS[0] + (VENOUS[1] - VENOUS[0]) * draw[1]) * on
    factor = torch.where(artery[None], arterial[:, None], venous[:, None])
    gain = base[None] * factor * (0.6 + 0.6 * torch.rand(b, 256, device=dev, generator=gen))
    return hu.float() + torch.gather(gain, 1, lab.long().flatten(1)).view(hu.shape)


def phase_table(names: list[str], dev: Any = None) -> tuple[Any, Any]:
    """Per class index (``names[i]``, index 255 the unknown): the typical portal-venous
    enhancement of its intensity class (``organs_synth.ENHANCEMENT``; 0 for background,
    bone, air, fat, muscle ...) and whether it is an artery."""
    import torch

    from radspatial.training.organs_synth import ENHANCEMENT, intensity_class

    base, artery = torch.zeros(256, device=dev), torch.zeros(256, dtype=torch.bool, device=dev)
    for i, name in enumerate(names[1:255], start=1):
        cls = intensity_class(name)
        base[i], artery[i] = ENHANCEMENT.get(cls, 0.0), cls == "artery"
    return base, artery


def _display(x: Any, gen: Any, wide: float, u: Any) -> Any:
    """HU (B, 1, S, S) -> [-1, 1]: window (wide on a share ``wide``), gamma, blur, noise,
    8-bit quantisation; ``u(lo, hi)`` draws one uniform value per sample."""
    import torch
    import torch.nn.functional as F

    b, dev = x.shape[0], x.device
    is_wide = torch.rand(b, device=dev, generator=gen) < wide
    width = torch.where(is_wide, torch.exp(u(math.log(350), math.log(2000))), u(300, 600))
    level = torch.where(is_wide, u(-100, 200), u(0, 90))
    width, level = width[:, None, None, None], level[:, None, None, None]
    g = ((x - (level - width / 2)) / width).clamp(0, 1)
    g = g ** torch.exp(u(-0.3, 0.3))[:, None, None, None]
    sigma = float(torch.rand(1, generator=gen, device=dev)) * 1.5
    if sigma > 0.3:
        k = torch.arange(-3, 4, device=dev, dtype=torch.float32)
        w = torch.exp(-(k**2) / (2 * sigma**2))
        w = w / w.sum()
        g = F.conv2d(F.pad(g, (3, 3, 0, 0), mode="replicate"), w.view(1, 1, 1, 7))
        g = F.conv2d(F.pad(g, (0, 0, 3, 3), mode="replicate"), w.view(1, 1, 7, 1))
    noise = u(0, 0.04)[:, None, None, None]
    g = g + noise * torch.randn(g.shape, device=dev, generator=gen)
    g = torch.round(g.clamp(0, 1) * 255) / 255
    return g * 2 - 1


def elastic_field(b: int, size: int, peak_px: float, gen: Any, dev: Any, knots: int = 6) -> Any:
    """(B, S, S, 2) smooth displacement in ``grid_sample``'s normalised units: Gaussian noise
    on a ``knots`` x ``knots`` lattice, bicubically upsampled, scaled so that its largest
    displacement is ``peak_px`` pixels (times U(0.3, 1) per sample)."""
    import torch
    import torch.nn.functional as F

    coarse = torch.randn(b, 2, knots, knots, device=dev, generator=gen)
    field = F.interpolate(coarse, size=(size, size), mode="bicubic", align_corners=True)
    peak = field.flatten(1).abs().amax(1).clamp_min(1e-6)[:, None, None, None]
    amp = 0.3 + 0.7 * torch.rand(b, 1, 1, 1, device=dev, generator=gen)
    return (field / peak * amp * (2 * peak_px / size)).permute(0, 2, 3, 1)


def one_cycle_lr(max_lr: float, frac: float, warm: float) -> float:
    """Learning rate at ``frac`` (0..1) of training: max_lr / 25 rising linearly to max_lr over
    ``warm``, then cosine down to max_lr / 2.5e5 (the shape of torch's OneCycleLR)."""
    frac = min(max(frac, 0.0), 1.0)
    start, end = max_lr / 25, max_lr / 25e4
    if frac < warm:
        return start + (max_lr - start) * frac / warm
    t = (frac - warm) / max(1e-9, 1 - warm)
    return end + (max_lr - end) * 0.5 * (1 + math.cos(math.pi * t))
