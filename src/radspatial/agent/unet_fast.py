"""A faster CPU forward of a MONAI UNet with the same numbers: the layers run in channels-last.

On a CPU, oneDNN's convolutions are 1.3-5x faster on channels-last (NHWC) tensors than on
NCHW ones (the 45-class output level of the shipped ``organs`` net: its transposed
convolution 42 -> 8 ms, its last convolution 35 -> 27 ms, batch of 4 at 128 px, 1 thread), but
torch's instance norm is 3x slower on them, which is why converting the whole module to
channels-last is not faster. This forward walks the UNet's modules in their order and runs
every convolution, PReLU, concatenation and sum on channels-last tensors, and instance norm as
one batch norm per sample over the (H*W, C) view (the same statistics, computed along the
contiguous channel axis). The logits come back NCHW-shaped in channels-last memory, so a
class-last view of them is contiguous.

It is the same arithmetic in another memory order (fp32; only the summation order inside a
convolution or a mean differs: logits agree to ~1e-5). Where its assumptions do not hold (not a
MONAI UNet, not on the CPU, in training mode, a norm with running statistics) :func:`logits`
runs the module itself; a layer it does not know runs as the module itself; and the first call
per network compares its logits with the plain forward's and keeps the plain one for good if
they differ by more than :data:`TOLERANCE`.

torch is imported inside functions.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

TOLERANCE = 1e-3  # max |fast - plain| logit (x max(1, |plain|)) accepted at the first call
_CHECKED: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()


def applies(net: Any, x: torch.Tensor) -> bool:
    """Whether the fast forward is meant for ``net`` on ``x``: a MONAI UNet in eval mode, on a
    CPU, with 2D (NCHW) input."""
    from monai.networks.nets import UNet

    return (
        isinstance(net, UNet)
        and not net.training
        and x.device.type == "cpu"
        and x.ndim == 4
        and all(p.device.type == "cpu" for p in net.parameters())
    )


def logits(net: Any, x: torch.Tensor) -> torch.Tensor:
    """``net(x)``, through :func:`forward` where it applies and its first call agreed with the
    plain forward (call under ``torch.inference_mode()``)."""
    if not applies(net, x) or _CHECKED.get(net) is False:
        return net(x)
    fast = forward(net, x)
    if net not in _CHECKED:
        plain = net(x)
        _CHECKED[net] = agrees(fast, plain)
        return fast if _CHECKED[net] else plain
    return fast


def agrees(fast: torch.Tensor, plain: torch.Tensor) -> bool:
    """Same shape, and every logit within :data:`TOLERANCE` (relative above 1)."""
    if fast.shape != plain.shape:
        return False
    scale = max(1.0, float(plain.abs().max()))
    return bool(float((fast - plain).abs().max()) <= TOLERANCE * scale)


def forward(net: Any, x: torch.Tensor) -> torch.Tensor:
    """The UNet's forward on channels-last tensors (logits NCHW-shaped, channels-last)."""
    import torch

    return _run(net, x.contiguous(memory_format=torch.channels_last))


def _run(module: Any, x: torch.Tensor) -> torch.Tensor:
    """One module on a channels-last tensor; containers walk their children in order."""
    import torch
    from monai.networks.blocks import ResidualUnit
    from monai.networks.layers import SkipConnection
    from monai.networks.nets import UNet

    if isinstance(module, UNet):
        return _run(module.model, x)
    if type(module) is torch.nn.Sequential or _is_monai_sequential(module):
        for child in module:
            x = _run(child, x)
        return x
    if isinstance(module, SkipConnection) and module.mode == "cat":
        return torch.cat([x, _run(module.submodule, x)], dim=module.dim)
    if isinstance(module, ResidualUnit):
        res = _run(module.residual, x)
        return _run(module.conv, x) + res
    return _leaf(module, x)


def _is_monai_sequential(module: Any) -> bool:
    """MONAI's Convolution and ADN: plain ``nn.Sequential`` subclasses (forward = in order)."""
    from monai.networks.blocks import ADN, Convolution

    return type(module) in (Convolution, ADN)


def _leaf(module: Any, x: torch.Tensor) -> torch.Tensor:
    import torch
    import torch.nn.functional as F

    nn = torch.nn
    if type(module) in (nn.Identity, nn.Dropout, nn.Dropout2d):
        return x  # eval mode: dropout is the identity
    if type(module) is nn.InstanceNorm2d and not module.track_running_stats:
        return _instance_norm(x, module)
    if type(module) is nn.PReLU:
        return F.prelu(x, module.weight)
    y = module(x)  # convolutions (layout-agnostic) and any other layer: as they are
    # a 1-channel input is both layouts at once, and torch then returns NCHW
    return y if y.ndim != 4 else y.contiguous(memory_format=torch.channels_last)


def _instance_norm(x: torch.Tensor, module: Any) -> torch.Tensor:
    """Instance norm of a channels-last (N, C, H, W) tensor: per sample, a batch norm (batch
    statistics, biased variance, as torch's instance norm) over its (H*W, C) view."""
    import torch
    import torch.nn.functional as F

    n, c, h, w = x.shape
    rows = x.permute(0, 2, 3, 1).reshape(n, h * w, c)  # a view when x is channels-last
    out = torch.empty_like(rows)
    for i in range(n):
        out[i] = F.batch_norm(
            rows[i], None, None, module.weight, module.bias, training=True, eps=module.eps
        )
    return out.view(n, h, w, c).permute(0, 3, 1, 2)
